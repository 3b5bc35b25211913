// Decoding a list of problems with continuous batching (llama.cpp server's slots): each of `parallel`
// slots takes the next problem as soon as its own finishes, and every step verifies all slots' drafts in
// one target batch. Shared by bench and sweep.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "engine/speculative_decoder.h"
#include "eval/dataset.h"

namespace klspec {

struct DecodedProblem {
    size_t index = 0;  // into the problems given to decode_problems
    GenerationResult result;
    // Wall time attributed to this problem: its prompt, plus each step it took part in divided by the
    // number of problems in that step. Summed over problems it is the run's wall time, so tokens/s stay
    // right with -np > 1 and across resumed runs.
    double wall_seconds = 0;
    int32_t sequence_id = 0;  // the decoder's sequence (slot) it ran on: whose judged positions were its
};

// Decodes every problem with `generation`; calls on_done as each finishes (in finishing order). Returns
// early, the unfinished problems dropped, when stop_requested (checked between steps) says so.
void decode_problems(SpeculativeDecoder& decoder, std::span<const Problem> problems, const GenerationOptions& generation,
                     int32_t parallel, const std::function<void(DecodedProblem&&)>& on_done,
                     const std::function<bool()>& stop_requested = {});

}  // namespace klspec
