// The statistics judges decide on (docs/design.md, "The verification rules"), computed straight from
// shaped logits: π = softmax(logits), natural log, entries of -inf have probability 0.
// Each kernel computes only what one family of rules needs, in two vectorized passes over the rows
// (maxima, then sums of exp). Every row needs at least one finite logit (a row of -inf only gives NaN
// statistics).
#pragma once

#include <cstdint>
#include <span>

namespace klspec {

// One distribution: what the entropy rules need.
struct DistributionStats {
    double log_normalizer = 0;   // log Σ_v exp(logit_v)
    double entropy = 0;          // H(π) = −Σ π log π
    double max_probability = 0;  // max_v π(v)
};

// A target/draft pair: what the KL rule needs.
struct KlStats {
    double target_log_normalizer = 0;
    double draft_log_normalizer = 0;
    double target_max_probability = 0;
    // D_KL(p ‖ q) = Σ p (log p − log q); +inf when some token has p > 0 and q = 0.
    double kl = 0;
};

DistributionStats distribution_stats(std::span<const float> logits);

// `target_logits` (p) and `draft_logits` (q) have the same length.
KlStats kl_stats(std::span<const float> target_logits, std::span<const float> draft_logits);

// Jensen–Shannon divergence JS(p, q) = ½ KL(p ‖ m) + ½ KL(q ‖ m), m = (p + q) / 2, of the softmax of two
// rows of the same length: symmetric, finite (at most log 2) even where one of them is 0.
double js_divergence(std::span<const float> target_logits, std::span<const float> draft_logits);

// max_i |a[i] - b[i]| of two rows of the same length (0 for empty rows).
float max_abs_difference(std::span<const float> a, std::span<const float> b);

// Index of the largest logit (the first one on ties).
int32_t argmax(std::span<const float> logits);

// probs = softmax(logits), max-subtracted; -inf logits get probability 0. `probs` has logits.size() entries.
void softmax_into(std::span<const float> logits, std::span<float> probs);

// How many tokens rank ahead of `token` when sorting by logit, descending, ties broken by lower index
// (the order of argmax and of top-k truncation in sampling.h). `token` is in the top-K iff rank < K.
int64_t logit_rank(std::span<const float> logits, int32_t token);

}  // namespace klspec
