#include "eval/batch_decoding.h"

#include <chrono>
#include <optional>
#include <vector>

#include "core/error.h"

namespace klspec {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void decode_problems(SpeculativeDecoder& decoder, std::span<const Problem> problems, const GenerationOptions& generation,
                     int32_t parallel, const std::function<void(DecodedProblem&&)>& on_done,
                     const std::function<bool()>& stop_requested) {
    if (parallel < 1 || parallel > decoder.n_sequences())
        throw Error("decode_problems: parallel must be in [1, the decoder's sequences]");
    struct Slot {
        std::optional<Sequence> sequence;
        size_t index = 0;
        double wall_seconds = 0;
    };
    std::vector<Slot> slots(static_cast<size_t>(parallel));
    std::vector<Sequence*> active;
    size_t next = 0, done = 0;
    while (done < problems.size()) {
        if (stop_requested && stop_requested()) return;
        active.clear();
        for (size_t s = 0; s < slots.size(); ++s) {
            Slot& slot = slots[s];
            if (!slot.sequence && next < problems.size()) {
                const auto start = std::chrono::steady_clock::now();
                slot.index = next;
                slot.sequence = decoder.start(static_cast<int32_t>(s), problems[next++].prompt, generation);
                slot.wall_seconds = seconds_since(start);
            }
            if (slot.sequence) active.push_back(&*slot.sequence);
        }
        const auto start = std::chrono::steady_clock::now();
        decoder.step(active);
        const double share = seconds_since(start) / double(active.size());
        for (Slot& slot : slots) {
            if (!slot.sequence) continue;
            slot.wall_seconds += share;
            if (!slot.sequence->finished()) continue;
            DecodedProblem decoded{slot.index, slot.sequence->take_result(), slot.wall_seconds, slot.sequence->id()};
            slot.sequence.reset();
            ++done;
            on_done(std::move(decoded));
        }
    }
}

}  // namespace klspec
