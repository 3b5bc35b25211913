// Small helpers the speculative decoder's stage files share (speculative_decoder.cpp, drafting.cpp,
// draft_length_choice.cpp, verification.cpp). Internal to the engine.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/draft_length.h"
#include "engine/context.h"
#include "engine/speculative_decoder.h"

namespace klspec::detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

inline int32_t to_int(size_t n) { return static_cast<int32_t>(n); }

// The length of the longest common prefix.
inline int32_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
    const size_t n = std::min(a.size(), b.size());
    return static_cast<int32_t>(std::mismatch(a.begin(), a.begin() + std::ptrdiff_t(n), b.begin()).first - a.begin());
}

// The log-probabilities of a step's last `n_tokens` tokens (none when the sequence does not ask for them).
inline std::span<const TokenLogprobs> step_logprobs(const Sequence& seq, size_t n_tokens) {
    const std::vector<TokenLogprobs>& all = seq.result().logprobs;
    return all.empty() ? std::span<const TokenLogprobs>() : std::span(all).last(n_tokens);
}

// Adds a llama_decode call's time to the cost curve at the batch's size, when llama.cpp ran the batch in one
// micro-batch (the curves are per micro-batch; the cost model adds up a split batch's parts itself).
void record_cost(BatchCostCurve& curve, const Batch& batch, double seconds);

}  // namespace klspec::detail
