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

// The logits of the distribution a token is drawn from: divided by the temperature and with entries
// outside top-k / top-p set to -inf. Greedy (T = 0) keeps the raw logits, untruncated: the convention for
// judge statistics (DESIGN.md).
// `out` has logits.size() entries; `order` is scratch space, reused across calls so that shaping allocates
// nothing once it has grown to the vocabulary size.
void shape_logits(std::span<const float> logits, const SamplingParams& params, std::span<float> out,
                  std::vector<int32_t>& order);

// probs = softmax(logits), max-subtracted; -inf logits get probability 0. `probs` has logits.size() entries.
void softmax_into(std::span<const float> logits, std::span<float> probs);
// The same into a vector, resized to fit (its capacity is kept between calls).
void softmax(std::span<const float> logits, std::vector<float>& probs);

// Draws an index from unnormalized non-negative weights (sum > 0).
int32_t sample_from_weights(std::span<const float> weights, Rng& rng);

}  // namespace klspec
