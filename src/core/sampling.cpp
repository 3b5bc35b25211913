#include "core/sampling.h"

#include "core/distribution_stats.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

namespace klspec {

void softmax(std::span<const float> logits, std::vector<float>& probs) {
    probs.resize(logits.size());
    softmax_into(logits, probs);
}

namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Orders token ids by logit, descending, ties to the lower id (the order of argmax).
auto by_logit_then_id(std::span<const float> logits) {
    return [logits](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
}

// Keeps in `out` the smallest set of `candidates` (the finite entries) whose probability mass reaches
// top_p, ranked by logit then lower index; the others become -inf.
void keep_top_p(std::span<float> out, float top_p, ShapingScratch& scratch) {
    std::vector<int32_t>& candidates = scratch.candidates;
    const auto by_logit = by_logit_then_id(out);

    // Few candidates (top-k ran first, or a small vocabulary): sort them and normalise over them alone.
    if (candidates.size() <= 1024) {
        std::sort(candidates.begin(), candidates.end(), by_logit);
        const float top = out[static_cast<size_t>(candidates[0])];
        double total = 0.0;
        for (const int32_t c : candidates) total += std::exp(double(out[static_cast<size_t>(c)]) - top);
        double mass = 0.0;
        size_t keep = candidates.size();
        for (size_t r = 0; r < candidates.size(); ++r) {
            mass += std::exp(double(out[static_cast<size_t>(candidates[r])]) - top) / total;
            if (mass >= top_p) {
                keep = r + 1;
                break;
            }
        }
        for (size_t r = keep; r < candidates.size(); ++r) out[static_cast<size_t>(candidates[r])] = kMinusInf;
        return;
    }

    // Probabilities of the whole row (vectorized): the candidates are all finite entries here.
    scratch.probs.resize(out.size());
    softmax_into(out, scratch.probs);
    const std::vector<float>& probs = scratch.probs;

    // Many: bucket by logit below the maximum. Buckets are monotone in the logit, so every token of a
    // bucket above the crossing one outranks every token of the buckets below it; only the crossing
    // bucket needs sorting.
    constexpr size_t kBuckets = 1024;
    float top = kMinusInf, bottom = std::numeric_limits<float>::infinity();
    for (const int32_t c : candidates) {
        top = std::max(top, out[static_cast<size_t>(c)]);
        bottom = std::min(bottom, out[static_cast<size_t>(c)]);
    }
    const float width = (top - bottom) / static_cast<float>(kBuckets);
    const auto bucket_of = [&](float logit) {
        if (!(width > 0.0f)) return size_t{0};
        return std::min(kBuckets - 1, static_cast<size_t>((top - logit) / width));
    };
    std::array<double, kBuckets> bucket_mass{};
    for (const int32_t c : candidates)
        bucket_mass[bucket_of(out[static_cast<size_t>(c)])] += probs[static_cast<size_t>(c)];
    double mass = 0.0;
    size_t crossing = kBuckets;
    for (size_t b = 0; b < kBuckets; ++b) {
        if (mass + bucket_mass[b] >= top_p) {
            crossing = b;
            break;
        }
        mass += bucket_mass[b];
    }
    if (crossing == kBuckets) return;  // rounding left the total just below top_p: keep everything

    std::vector<int32_t>& boundary = scratch.boundary;
    boundary.clear();
    for (const int32_t c : candidates) {
        const size_t b = bucket_of(out[static_cast<size_t>(c)]);
        if (b == crossing)
            boundary.push_back(c);
        else if (b > crossing)
            out[static_cast<size_t>(c)] = kMinusInf;
    }
    std::sort(boundary.begin(), boundary.end(), by_logit);
    size_t keep = boundary.size();
    for (size_t r = 0; r < boundary.size(); ++r) {
        mass += probs[static_cast<size_t>(boundary[r])];
        if (mass >= top_p) {
            keep = r + 1;
            break;
        }
    }
    for (size_t r = keep; r < boundary.size(); ++r) out[static_cast<size_t>(boundary[r])] = kMinusInf;
}

}  // namespace

void shape_logits(std::span<const float> logits, const SamplingParams& params, std::span<float> out,
                  ShapingScratch& scratch) {
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

    std::vector<int32_t>& candidates = scratch.candidates;
    candidates.resize(n);
    std::iota(candidates.begin(), candidates.end(), 0);
    if (use_top_k) {
        // The K largest by logit, ties to the lower index (the order of argmax), found by selection.
        const auto kth = candidates.begin() + params.top_k;
        std::nth_element(candidates.begin(), kth - 1, candidates.end(), by_logit_then_id(out));
        for (auto it = kth; it != candidates.end(); ++it) out[static_cast<size_t>(*it)] = kMinusInf;
        candidates.resize(static_cast<size_t>(params.top_k));
    }
    if (use_top_p) keep_top_p(out, params.top_p, scratch);
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
