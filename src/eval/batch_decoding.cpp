#include "eval/batch_decoding.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "core/error.h"

namespace klspec {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A problem's answer: one sequence from its prompt.
class AnswerJob final : public DecodingJob {
public:
    AnswerJob(SpeculativeDecoder& decoder, int32_t id, const Problem& problem, const GenerationOptions& generation)
        : sequence_(decoder.start(id, problem.prompt, generation)) {}

    Sequence* sequence() override { return done_ ? nullptr : &sequence_; }
    void advance() override { done_ = true; }
    GenerationResult take_result() { return sequence_.take_result(); }

private:
    Sequence sequence_;
    bool done_ = false;
};

}  // namespace

void run_jobs(SpeculativeDecoder& decoder, size_t n_jobs, int32_t parallel, const StartJob& start_job,
              const JobDone& on_done, const std::function<bool()>& stop_requested) {
    if (parallel < 1 || parallel > decoder.n_sequences())
        throw Error("run_jobs: parallel must be in [1, the decoder's sequences]");
    struct Slot {
        DecodingJob* job = nullptr;
        size_t index = 0;
        double seconds = 0;
    };
    std::vector<Slot> slots(static_cast<size_t>(parallel));
    std::vector<Sequence*> active;
    size_t next = 0, done = 0;
    // A job is done when it has no sequence left: at its start (nothing to decode) or after an advance.
    const auto finish_if_done = [&](Slot& slot, int32_t s) {
        if (slot.job->sequence()) return;
        slot.job = nullptr;
        ++done;
        on_done(slot.index, s, slot.seconds);
    };
    while (done < n_jobs) {
        if (stop_requested && stop_requested()) return;
        active.clear();
        for (int32_t s = 0; s < parallel; ++s) {
            Slot& slot = slots[static_cast<size_t>(s)];
            while (!slot.job && next < n_jobs) {
                const auto start = std::chrono::steady_clock::now();
                slot = Slot{&start_job(next, s), next, 0};
                ++next;
                slot.seconds = seconds_since(start);
                finish_if_done(slot, s);
            }
            if (slot.job) active.push_back(slot.job->sequence());
        }
        if (active.empty()) continue;  // every job started was done at once
        const auto start = std::chrono::steady_clock::now();
        decoder.step(active);
        const double share = seconds_since(start) / double(active.size());
        for (int32_t s = 0; s < parallel; ++s) {
            Slot& slot = slots[static_cast<size_t>(s)];
            if (!slot.job) continue;
            slot.seconds += share;
            if (!slot.job->sequence()->finished()) continue;
            const auto advanced = std::chrono::steady_clock::now();
            slot.job->advance();
            slot.seconds += seconds_since(advanced);
            finish_if_done(slot, s);
        }
    }
}

void decode_problems(SpeculativeDecoder& decoder, std::span<const Problem> problems,
                     const GenerationOptions& generation, int32_t parallel,
                     const std::function<void(DecodedProblem&&)>& on_done,
                     const std::function<bool()>& stop_requested) {
    std::vector<std::optional<AnswerJob>> answers(static_cast<size_t>(std::max(parallel, 0)));
    run_jobs(
        decoder, problems.size(), parallel,
        [&](size_t index, int32_t slot) -> DecodingJob& {
            return answers[static_cast<size_t>(slot)].emplace(decoder, slot, problems[index], generation);
        },
        [&](size_t index, int32_t slot, double seconds) {
            std::optional<AnswerJob>& answer = answers[static_cast<size_t>(slot)];
            DecodedProblem decoded{index, answer->take_result(), seconds, slot};
            answer.reset();
            on_done(std::move(decoded));
        },
        stop_requested);
}

}  // namespace klspec
