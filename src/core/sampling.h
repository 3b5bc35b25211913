// Turning logits into the distributions that drafting, verification and judging use.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace klspec {

// How tokens are chosen. temperature == 0 means greedy (argmax); top_k == 0 and top_p == 1 disable
// truncation. Draft and target always use the same parameters (DESIGN.md, "One speculative step").
struct SamplingParams {
    float temperature = 0.0f;
    int32_t top_k = 0;
    float top_p = 1.0f;
    uint64_t seed = 0;

    bool greedy() const { return temperature <= 0.0f; }
};

// The random source for every stochastic decision of one generation.
using Rng = std::mt19937_64;

// Index of the largest logit (the first one on ties).
int32_t argmax(std::span<const float> logits);

// The logits of the distribution a token is drawn from: divided by the temperature (T = 0 counts as
// T = 1, the convention for judge statistics) and with entries outside top-k / top-p set to -inf.
// `out` has logits.size() entries.
void shape_logits(std::span<const float> logits, const SamplingParams& params, std::span<float> out);

// probs = softmax(logits), max-subtracted; -inf logits get probability 0.
void softmax(std::span<const float> logits, std::vector<float>& probs);

// Draws an index from unnormalized non-negative weights (sum > 0).
int32_t sample_from_weights(std::span<const float> weights, Rng& rng);

}  // namespace klspec
