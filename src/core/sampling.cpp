#include "core/sampling.h"

#include "core/distribution_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace klspec {

int32_t argmax(std::span<const float> logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

void softmax(std::span<const float> logits, std::vector<float>& probs) {
    probs.resize(logits.size());
    softmax_into(logits, probs);
}

void softmax_into(std::span<const float> logits, std::span<float> probs) {
    const float max_logit = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (size_t v = 0; v < logits.size(); ++v) {
        probs[v] = std::exp(logits[v] - max_logit);
        sum += probs[v];
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (float& p : probs) p *= inv_sum;
}

void shape_logits(std::span<const float> logits, const SamplingParams& params, std::span<float> out,
                  std::vector<int32_t>& order) {
    constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
    std::copy(logits.begin(), logits.end(), out.begin());
    // Greedy decoding keeps raw logits: the judge statistics are computed at T = 1, untruncated.
    if (params.greedy()) return;
    if (params.temperature != 1.0f) {
        const float inv_t = 1.0f / params.temperature;
        for (float& l : out) l *= inv_t;
    }
    const size_t n = out.size();
    const bool use_top_k = params.top_k > 0 && static_cast<size_t>(params.top_k) < n;
    const bool use_top_p = params.top_p < 1.0f;
    if (!use_top_k && !use_top_p) return;

    // Indices by logit, descending, ties by lower index (the order of argmax). Only a prefix is ever
    // needed, so it is sorted in growing prefixes: a full sort of a 128k vocabulary costs milliseconds.
    order.resize(n);
    std::iota(order.begin(), order.end(), 0);
    auto by_logit = [&](int32_t a, int32_t b) { return out[a] > out[b] || (out[a] == out[b] && a < b); };
    const size_t keep_k = use_top_k ? static_cast<size_t>(params.top_k) : n;
    size_t keep = keep_k;
    if (!use_top_p) {
        std::partial_sort(order.begin(), order.begin() + keep_k, order.end(), by_logit);
    } else {
        // Smallest prefix (of the top-k survivors) whose probability mass reaches top_p.
        const float max_logit = *std::max_element(out.begin(), out.end());
        double total = 0.0;
        if (use_top_k) {
            std::partial_sort(order.begin(), order.begin() + keep_k, order.end(), by_logit);
            for (size_t r = 0; r < keep_k; ++r) total += std::exp(out[order[r]] - max_logit);
        } else {
            total = std::exp(distribution_stats(out).log_normalizer - max_logit);  // vectorized
        }
        const double needed = params.top_p * total;
        double mass = 0.0;
        size_t sorted = use_top_k ? keep_k : 0;
        size_t r = 0;
        for (keep = 0; keep == 0;) {
            if (r == sorted) {  // extend the sorted prefix eightfold (already sorted when top-k applies)
                const size_t next = std::min(keep_k, std::max<size_t>(256, 8 * sorted));
                std::partial_sort(order.begin() + static_cast<std::ptrdiff_t>(sorted),
                                  order.begin() + static_cast<std::ptrdiff_t>(next), order.end(), by_logit);
                sorted = next;
            }
            mass += std::exp(out[order[r]] - max_logit);
            ++r;
            if (mass >= needed || r == keep_k) keep = r;
        }
    }
    for (size_t r = keep; r < n; ++r) out[order[r]] = kMinusInf;
}

int32_t sample_from_weights(std::span<const float> weights, Rng& rng) {
    double total = 0.0;
    for (float w : weights) total += w;
    std::uniform_real_distribution<double> uniform(0.0, total);
    const double target = uniform(rng);
    double cumulative = 0.0;
    int32_t last_positive = 0;
    for (size_t v = 0; v < weights.size(); ++v) {
        if (weights[v] <= 0.0f) continue;
        cumulative += weights[v];
        last_positive = static_cast<int32_t>(v);
        if (target < cumulative) return last_positive;
    }
    return last_positive;  // rounding at the top end
}

}  // namespace klspec
