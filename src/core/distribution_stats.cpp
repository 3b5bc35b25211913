#include "core/distribution_stats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

namespace klspec {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The loops below keep kLanes independent accumulators and combine them at the end: that lets the
// compiler vectorize the reductions without -ffast-math (which would let it reorder float sums).
// 16 floats fill one AVX-512 register or two AVX2 ones.
constexpr size_t kLanes = 16;

template <typename T>
using Lanes = std::array<T, kLanes>;

// Calls body(i, lane) for every index; lane-blocked so that the body's per-lane updates vectorize.
template <typename Body>
inline void for_each_in_lanes(size_t n, Body&& body) {
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (size_t lane = 0; lane < kLanes; ++lane) body(i + lane, lane);
    for (; i < n; ++i) body(i, size_t{0});
}

template <typename T>
T lane_sum(const Lanes<T>& lanes) {
    return std::accumulate(lanes.begin(), lanes.end(), T{0});
}

float lane_max(const Lanes<float>& lanes) { return *std::max_element(lanes.begin(), lanes.end()); }

// exp(x) for x <= 0, branch-free so that loops calling it vectorize (std::exp is a library call and
// does not). Cephes expf: x = n ln2 + r with |r| <= ln2/2, exp(r) by a degree-7 polynomial, 2^n by
// building the exponent bits. Relative error about 1e-7 (float rounding); 0 below the normal range.
inline float exp_nonpositive(float x) {
    constexpr float kLowest = -87.3365448f;  // log(FLT_MIN): below it the result would be subnormal
    constexpr float kLog2e = 1.44269504088896341f;
    constexpr float kLn2Hi = 0.693359375f;  // ln 2 split so that n * kLn2Hi is exact
    constexpr float kLn2Lo = -2.12194440e-4f;
    constexpr float kRoundingShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const float clamped = std::max(x, kLowest);
    const float n = (clamped * kLog2e + kRoundingShift) - kRoundingShift;
    const float r = (clamped - n * kLn2Hi) - n * kLn2Lo;
    float poly = 1.9875691500e-4f;
    poly = poly * r + 1.3981999507e-3f;
    poly = poly * r + 8.3334519073e-3f;
    poly = poly * r + 4.1665795894e-2f;
    poly = poly * r + 1.6666665459e-1f;
    poly = poly * r + 5.0000001201e-1f;
    const float exp_r = poly * (r * r) + r + 1.0f;
    const float two_to_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
    return x < kLowest ? 0.0f : exp_r * two_to_n;
}

}  // namespace

DistributionStats distribution_stats(std::span<const float> logits) {
    const size_t n = logits.size();
    const float* x = logits.data();

    Lanes<float> max_lanes;
    max_lanes.fill(kMinusInf);
    for_each_in_lanes(n, [&](size_t i, size_t lane) { max_lanes[lane] = std::max(max_lanes[lane], x[i]); });
    const float max_logit = lane_max(max_lanes);

    // With t = logit − max and e = exp(t): Σ e = Z / exp(max), and H = log Σe − Σ e·t / Σ e. Both terms
    // are non-negative, so the entropy has no cancellation even when it is tiny.
    Lanes<double> sum_e{};
    Lanes<double> sum_e_t{};
    for_each_in_lanes(n, [&](size_t i, size_t lane) {
        const float t = x[i] - max_logit;
        const float e = exp_nonpositive(t);
        sum_e[lane] += e;
        // max() keeps 0 · (−inf) from forming for −inf logits; e is 0 there anyway.
        sum_e_t[lane] += e * std::max(t, std::numeric_limits<float>::lowest());
    });
    const double total_e = lane_sum(sum_e);
    const double log_total_e = std::log(total_e);
    return {
        .log_normalizer = max_logit + log_total_e,
        .entropy = log_total_e - lane_sum(sum_e_t) / total_e,
        .max_probability = 1.0 / total_e,  // the max logit has e = 1
    };
}

KlStats kl_stats(std::span<const float> target_logits, std::span<const float> draft_logits) {
    const size_t n = target_logits.size();
    const float* a = target_logits.data();
    const float* b = draft_logits.data();

    Lanes<float> max_a;
    Lanes<float> max_b;
    max_a.fill(kMinusInf);
    max_b.fill(kMinusInf);
    for_each_in_lanes(n, [&](size_t i, size_t lane) {
        max_a[lane] = std::max(max_a[lane], a[i]);
        max_b[lane] = std::max(max_b[lane], b[i]);
    });
    const float max_target = lane_max(max_a);
    const float max_draft = lane_max(max_b);

    // With t = logit − max, e = exp(t) (ta, ea for p; tb, eb for q):
    //   KL = Σ p (log p − log q) = Σ ea (ta − tb) / Σ ea − log Σ ea + log Σ eb.
    Lanes<double> sum_ea{};
    Lanes<double> sum_eb{};
    Lanes<double> sum_ea_dt{};
    for_each_in_lanes(n, [&](size_t i, size_t lane) {
        const float ta = a[i] - max_target;
        const float tb = b[i] - max_draft;
        const float ea = exp_nonpositive(ta);
        const float eb = exp_nonpositive(tb);
        sum_ea[lane] += ea;
        sum_eb[lane] += eb;
        // p = 0 contributes 0; q = 0 (a −inf draft logit) under p > 0 makes KL infinite. The product is
        // only formed where ea > 0, so 0 · inf never appears.
        const float p_log_ratio = ea > 0.0f ? ea * (ta - tb) : 0.0f;
        const bool draft_excludes = b[i] == kMinusInf && a[i] != kMinusInf;
        sum_ea_dt[lane] += draft_excludes ? kInf : p_log_ratio;
    });
    const double total_ea = lane_sum(sum_ea);
    const double total_eb = lane_sum(sum_eb);
    const double log_total_ea = std::log(total_ea);
    const double log_total_eb = std::log(total_eb);
    // Rounding can leave a tiny negative value where p == q; KL itself is never negative.
    const double kl = std::max(0.0, lane_sum(sum_ea_dt) / total_ea - log_total_ea + log_total_eb);
    return {
        .target_log_normalizer = max_target + log_total_ea,
        .draft_log_normalizer = max_draft + log_total_eb,
        .target_max_probability = 1.0 / total_ea,
        .kl = kl,
    };
}

int64_t logit_rank(std::span<const float> logits, int32_t token) {
    const size_t split = static_cast<size_t>(token);
    const float own = logits[split];
    int64_t ahead = 0;
    // Lower indices win ties; higher ones must be strictly larger.
    for (size_t v = 0; v < split; ++v) ahead += logits[v] >= own;
    for (size_t v = split + 1; v < logits.size(); ++v) ahead += logits[v] > own;
    return ahead;
}

}  // namespace klspec
