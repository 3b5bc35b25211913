// Turning logits into the distributions that drafting, verification and judging use.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "core/distribution_stats.h"

namespace klspec {

// How tokens are chosen. temperature == 0 means greedy (argmax); top_k == 0 and top_p == 1 disable
// truncation. Draft and target always use the same parameters (docs/design.md, "One speculative step").
struct SamplingParams {
    float temperature = 0.0f;
    int32_t top_k = 0;
    float top_p = 1.0f;
    uint64_t seed = 0;

    bool greedy() const { return temperature <= 0.0f; }
};

// The random source for every stochastic decision of one generation.
using Rng = std::mt19937_64;

// The logits of the distribution a token is drawn from: divided by the temperature and with entries
// outside top-k / top-p set to -inf. Greedy (T = 0) keeps the raw logits, untruncated: the convention for
// judge statistics (docs/design.md).
// `out` has logits.size() entries. Exact, and linear in V: top-k by selection, top-p by bucketing the
// logits and sorting only the bucket where the mass crosses P (a full sort of a 128k vocabulary costs
// milliseconds per token).
struct ShapingScratch {  // reused across calls, so that shaping allocates nothing once grown
    std::vector<int32_t> candidates;
    std::vector<int32_t> boundary;
    std::vector<float> probs;
};
void shape_logits(std::span<const float> logits, const SamplingParams& params, std::span<float> out,
                  ShapingScratch& scratch);

// softmax_into (distribution_stats.h) into a vector, resized to fit (its capacity is kept between calls).
void softmax(std::span<const float> logits, std::vector<float>& probs);

// Draws an index from unnormalized non-negative weights (sum > 0).
int32_t sample_from_weights(std::span<const float> weights, Rng& rng);

}  // namespace klspec
