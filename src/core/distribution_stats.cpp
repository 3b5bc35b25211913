#include "core/distribution_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__GNUC__) && !defined(__clang__)
// The vector helpers below pass 64-byte vectors by value; GCC warns that their ABI differs without
// AVX-512. They are internal to this file, so no caller across an ABI boundary can exist.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace klspec {
namespace {

// The kernels work on one machine register of floats at a time with GCC/Clang vector extensions: 16
// with AVX-512, 8 with AVX2, 4 otherwise. (Wider-than-register vectors are not split evenly by GCC: on an
// AVX2 machine 16-float vectors ran the KL kernel 20x slower, measured.)
#if defined(__AVX512F__)
constexpr size_t kWidth = 16;
#elif defined(__AVX__)
constexpr size_t kWidth = 8;
#else
constexpr size_t kWidth = 4;
#endif
using FloatVec = float __attribute__((vector_size(kWidth * sizeof(float))));
using IntVec = int32_t __attribute__((vector_size(kWidth * sizeof(int32_t))));
using DoubleVec = double __attribute__((vector_size(kWidth / 2 * sizeof(double))));

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

FloatVec broadcast(float value) { return FloatVec{} + value; }

// Elements i..i+kWidth of `row`; past the end the vector is padded with -inf, which every kernel below
// treats as probability 0.
FloatVec load(std::span<const float> row, size_t i) {
    FloatVec v;
    if (i + kWidth <= row.size()) {
        std::memcpy(&v, row.data() + i, sizeof v);
        return v;
    }
    float padded[kWidth];
    std::fill(std::begin(padded), std::end(padded), kMinusInf);
    std::copy(row.begin() + static_cast<std::ptrdiff_t>(i), row.end(), padded);
    std::memcpy(&v, padded, sizeof v);
    return v;
}

FloatVec max(const FloatVec& x, const FloatVec& y) { return x > y ? x : y; }
FloatVec min(const FloatVec& x, const FloatVec& y) { return x < y ? x : y; }

float horizontal_max(const FloatVec& v) {
    float m = v[0];
    for (size_t k = 1; k < kWidth; ++k) m = std::max(m, v[k]);
    return m;
}

float row_max(std::span<const float> row) {
    FloatVec lanes = broadcast(kMinusInf);
    for (size_t i = 0; i < row.size(); i += kWidth) lanes = max(lanes, load(row, i));
    return horizontal_max(lanes);
}

float horizontal_min(const FloatVec& v) {
    float m = v[0];
    for (size_t k = 1; k < kWidth; ++k) m = std::min(m, v[k]);
    return m;
}

// Sums over a row run in float lanes within a block of kBlock elements (cheap: at most 32 terms per
// lane) and in double across blocks, so that a 150k-token row keeps ~1e-7 relative accuracy.
constexpr size_t kBlock = 32 * kWidth;

void add_block(DoubleVec& total, const FloatVec& block) {
#if defined(__AVX512F__)
    total += __builtin_convertvector(__builtin_shufflevector(block, block, 0, 1, 2, 3, 4, 5, 6, 7), DoubleVec);
    total += __builtin_convertvector(__builtin_shufflevector(block, block, 8, 9, 10, 11, 12, 13, 14, 15), DoubleVec);
#elif defined(__AVX__)
    total += __builtin_convertvector(__builtin_shufflevector(block, block, 0, 1, 2, 3), DoubleVec);
    total += __builtin_convertvector(__builtin_shufflevector(block, block, 4, 5, 6, 7), DoubleVec);
#else
    total += __builtin_convertvector(__builtin_shufflevector(block, block, 0, 1), DoubleVec);
    total += __builtin_convertvector(__builtin_shufflevector(block, block, 2, 3), DoubleVec);
#endif
}

double horizontal_sum(const DoubleVec& v) {
    double s = 0;
    for (size_t k = 0; k < kWidth / 2; ++k) s += v[k];
    return s;
}

// exp(x) for x <= 0 (std::exp is a library call and does not vectorize). Cephes expf: x = n ln2 + r
// with |r| <= ln2/2, exp(r) = 1 + r (1 + r P(r)), 2^n by building the exponent bits. Relative error
// <= 8e-8 over [log(FLT_MIN), 0] (measured against double exp); 0 below it, -inf included (those lanes
// compute garbage that the final select discards, so no clamp is needed).
FloatVec exp_nonpositive(const FloatVec& x) {
    constexpr float kLowest = -87.3365448f;  // log(FLT_MIN): below it the result would be subnormal
    constexpr float kLog2e = 1.44269504088896341f;
    constexpr float kLn2Hi = 0.693359375f;  // ln 2 split so that n * kLn2Hi is exact
    constexpr float kLn2Lo = -2.12194440e-4f;
    constexpr float kRoundingShift = 12582912.0f;          // 1.5 * 2^23: adding it rounds to an integer
    const FloatVec shifted = x * kLog2e + kRoundingShift;  // n sits in the low mantissa bits
    const FloatVec n = shifted - kRoundingShift;
    const FloatVec r = (x - n * kLn2Hi) - n * kLn2Lo;
    FloatVec poly = broadcast(1.9875691500e-4f);
    poly = poly * r + 1.3981999507e-3f;
    poly = poly * r + 8.3334519073e-3f;
    poly = poly * r + 4.1665795894e-2f;
    poly = poly * r + 1.6666665459e-1f;
    poly = poly * r + 5.0000001201e-1f;
    const FloatVec exp_r = (poly * r + 1.0f) * r + 1.0f;
    // 2^n: n + 127 (in [1, 127]) into the exponent field; the shift drops the constant's high bits.
    IntVec n_bits;
    std::memcpy(&n_bits, &shifted, sizeof n_bits);
    const IntVec exponent_bits = (n_bits << 23) + (127 << 23);
    FloatVec two_to_n;
    std::memcpy(&two_to_n, &exponent_bits, sizeof two_to_n);
    return x >= kLowest ? exp_r * two_to_n : FloatVec{};
}

// log(1 + y) for y in [0, 1] (Cephes logf on 1 + y, with the rounding of 1 + y corrected to first order):
// 1 + y = m · 2^e with m in [sqrt(1/2), sqrt(2)), log m by its minimax polynomial in x = m - 1.
FloatVec log1p_unit(const FloatVec& y) {
    constexpr float kSqrt2 = 1.41421356237f;
    const FloatVec z = 1.0f + y;
    const FloatVec correction = (y - (z - 1.0f)) / z;
    const auto above = z > kSqrt2;
    const FloatVec e = above ? broadcast(1.0f) : FloatVec{};
    const FloatVec x = (above ? z * 0.5f : z) - 1.0f;
    const FloatVec x2 = x * x;
    FloatVec poly = broadcast(7.0376836292e-2f);
    poly = poly * x - 1.1514610310e-1f;
    poly = poly * x + 1.1676998740e-1f;
    poly = poly * x - 1.2420140846e-1f;
    poly = poly * x + 1.4249322787e-1f;
    poly = poly * x - 1.6668057665e-1f;
    poly = poly * x + 2.0000714765e-1f;
    poly = poly * x - 2.4999993993e-1f;
    poly = poly * x + 3.3333331174e-1f;
    const FloatVec tail = poly * x * x2 + e * -2.12194440e-4f - 0.5f * x2;
    return x + tail + e * 0.693359375f + correction;
}

// softplus(x) = log(1 + e^x) = max(x, 0) + log1p(e^-|x|), for any x (±inf included).
FloatVec softplus(const FloatVec& x) {
    const FloatVec magnitude = x < 0.0f ? -x : x;
    return max(x, FloatVec{}) + log1p_unit(exp_nonpositive(-magnitude));
}

}  // namespace

DistributionStats distribution_stats(std::span<const float> logits) {
    const float max_logit = row_max(logits);

    // With t = logit - max and e = exp(t): H = log Σe - Σ e·t / Σe, both terms non-negative, so a tiny
    // entropy has no cancellation. The tokens at the max contribute exactly 1 each and are counted
    // apart: log Σe = log(count) + log1p(rest / count) keeps the digits of a tiny rest (a peaked
    // distribution) that 1 + rest would round away.
    const size_t n = logits.size();
    DoubleVec total_below_max{};
    DoubleVec total_e_t{};
    IntVec at_max{};
    for (size_t block = 0; block < n; block += kBlock) {
        FloatVec below_max{};
        FloatVec sum_e_t{};
        for (size_t i = block; i < std::min(n, block + kBlock); i += kWidth) {
            const FloatVec t = load(logits, i) - max_logit;
            const FloatVec e = exp_nonpositive(t);
            const auto is_max = t == 0.0f;
            below_max += is_max ? FloatVec{} : e;
            at_max -= is_max;  // a true comparison lane is -1
            // max() keeps 0 · (-inf) from forming for -inf logits; e is 0 there anyway.
            sum_e_t += e * max(t, broadcast(std::numeric_limits<float>::lowest()));
        }
        add_block(total_below_max, below_max);
        add_block(total_e_t, sum_e_t);
    }
    double count_at_max = 0;
    for (size_t k = 0; k < kWidth; ++k) count_at_max += at_max[k];
    const double rest = horizontal_sum(total_below_max);
    const double total_e = count_at_max + rest;
    const double log_total_e = std::log(count_at_max) + std::log1p(rest / count_at_max);
    return {
        .log_normalizer = max_logit + log_total_e,
        .entropy = log_total_e - horizontal_sum(total_e_t) / total_e,
        .max_probability = 1.0 / total_e,
    };
}

namespace {

// The passes kl_stats and js_divergence share: each row's max, the draft row's min (a -inf there means a
// truncated row), and with t = logit - max, e = exp(t) (ta, ea for p; tb, eb for q): Σ ea, Σ eb and Σ ea (ta - tb).
struct PairSums {
    float max_target = 0, max_draft = 0, min_draft = 0;
    double sum_ea = 0, sum_eb = 0, sum_ea_dt = 0;
};

PairSums pair_sums(std::span<const float> target_logits, std::span<const float> draft_logits) {
    FloatVec max_a = broadcast(kMinusInf);
    FloatVec max_b = broadcast(kMinusInf);
    FloatVec min_b = broadcast(0.0f);
    for (size_t i = 0; i < target_logits.size(); i += kWidth) {
        max_a = max(max_a, load(target_logits, i));
        const FloatVec b = load(draft_logits, i);
        max_b = max(max_b, b);
        min_b = min(min_b, b);
    }
    PairSums sums{horizontal_max(max_a), horizontal_max(max_b), horizontal_min(min_b)};
    const size_t n = target_logits.size();
    DoubleVec total_ea{};
    DoubleVec total_eb{};
    DoubleVec total_ea_dt{};
    for (size_t block = 0; block < n; block += kBlock) {
        FloatVec sum_ea{};
        FloatVec sum_eb{};
        FloatVec sum_ea_dt{};
        for (size_t i = block; i < std::min(n, block + kBlock); i += kWidth) {
            const FloatVec ta = load(target_logits, i) - sums.max_target;
            const FloatVec tb = load(draft_logits, i) - sums.max_draft;
            const FloatVec ea = exp_nonpositive(ta);
            sum_ea += ea;
            sum_eb += exp_nonpositive(tb);
            // p = 0 contributes 0; the product is only formed where ea > 0, so 0 · inf never appears.
            sum_ea_dt += ea > 0.0f ? ea * (ta - tb) : FloatVec{};
        }
        add_block(total_ea, sum_ea);
        add_block(total_eb, sum_eb);
        add_block(total_ea_dt, sum_ea_dt);
    }
    sums.sum_ea = horizontal_sum(total_ea);
    sums.sum_eb = horizontal_sum(total_eb);
    sums.sum_ea_dt = horizontal_sum(total_ea_dt);
    return sums;
}

}  // namespace

KlStats kl_stats(std::span<const float> target_logits, std::span<const float> draft_logits) {
    // KL = Σ p (log p - log q) = Σ ea (ta - tb) / Σ ea - log Σ ea + log Σ eb.
    const PairSums s = pair_sums(target_logits, draft_logits);
    // Rounding can leave a tiny negative value where p == q; KL itself is never negative.
    double kl = std::max(0.0, s.sum_ea_dt / s.sum_ea - std::log(s.sum_ea) + std::log(s.sum_eb));

    // q = 0 (a -inf draft logit) under p > 0 makes the KL infinite. The sum above catches it where ea > 0
    // (tb = -inf gives an infinite term); this also catches a p(v) > 0 that underflowed to ea = 0.
    // -inf draft logits only come from truncation, so the extra pass only runs for truncated rows.
    if (s.min_draft == kMinusInf) {
        for (size_t v = 0; v < target_logits.size(); ++v) {
            if (draft_logits[v] == kMinusInf && target_logits[v] != kMinusInf)
                kl = std::numeric_limits<double>::infinity();
        }
    }
    return {
        .target_log_normalizer = s.max_target + std::log(s.sum_ea),
        .draft_log_normalizer = s.max_draft + std::log(s.sum_eb),
        .target_max_probability = 1.0 / s.sum_ea,
        .kl = kl,
    };
}

double js_divergence(std::span<const float> target_logits, std::span<const float> draft_logits) {
    // With d = log q - log p per token, log(2p / (p + q)) = ln 2 - softplus(d) and log(2q / (p + q)) =
    // ln 2 - softplus(-d), so JS = ln 2 - ½ Σ [p softplus(d) + q softplus(-d)] (Σp = Σq = 1): no log of a
    // ratio, and disjoint supports give ln 2 exactly. p = ea / Sa with ea = exp(logit - max), as in kl_stats,
    // so that the normalizers enter d once, as one double difference; a zero probability contributes 0.
    const PairSums s = pair_sums(target_logits, draft_logits);
    const auto offset = static_cast<float>(std::log(s.sum_ea) - std::log(s.sum_eb));
    const size_t n = target_logits.size();
    DoubleVec total_a{};
    DoubleVec total_b{};
    for (size_t block = 0; block < n; block += kBlock) {
        FloatVec sum_a{};
        FloatVec sum_b{};
        for (size_t i = block; i < std::min(n, block + kBlock); i += kWidth) {
            const FloatVec ta = load(target_logits, i) - s.max_target;
            const FloatVec tb = load(draft_logits, i) - s.max_draft;
            const FloatVec ea = exp_nonpositive(ta);
            const FloatVec eb = exp_nonpositive(tb);
            const FloatVec d = (tb - ta) + offset;
            sum_a += ea > 0.0f ? ea * softplus(d) : FloatVec{};
            sum_b += eb > 0.0f ? eb * softplus(-d) : FloatVec{};
        }
        add_block(total_a, sum_a);
        add_block(total_b, sum_b);
    }
    const double sum_terms = horizontal_sum(total_a) / s.sum_ea + horizontal_sum(total_b) / s.sum_eb;
    return std::clamp(std::log(2.0) - sum_terms / 2, 0.0, std::log(2.0));
}

float max_abs_difference(std::span<const float> a, std::span<const float> b) {
    float largest = 0;
    for (size_t i = 0; i < a.size(); ++i) largest = std::max(largest, std::abs(a[i] - b[i]));
    return largest;
}

int32_t argmax(std::span<const float> logits) {
    // One pass: each lane keeps its maximum and the first index where it occurs (strict > keeps the first).
    FloatVec best = broadcast(kMinusInf);
    IntVec best_index{};
    IntVec index;
    for (size_t k = 0; k < kWidth; ++k) index[k] = static_cast<int32_t>(k);
    for (size_t i = 0; i < logits.size(); i += kWidth) {
        const FloatVec v = load(logits, i);
        const IntVec better = v > best;
        best = better ? v : best;
        best_index = better ? index : best_index;
        index += static_cast<int32_t>(kWidth);
    }
    // Across lanes: the largest value, and among equal values the lowest index.
    int32_t result = best_index[0];
    float result_value = best[0];
    for (size_t k = 1; k < kWidth; ++k) {
        if (best[k] > result_value || (best[k] == result_value && best_index[k] < result)) {
            result_value = best[k];
            result = best_index[k];
        }
    }
    return result;
}

void softmax_into(std::span<const float> logits, std::span<float> probs) {
    const float max_logit = row_max(logits);
    const size_t n = logits.size();
    const size_t full = n - n % kWidth;
    DoubleVec total{};
    for (size_t block = 0; block < n; block += kBlock) {
        FloatVec sum{};
        for (size_t i = block; i < std::min(n, block + kBlock); i += kWidth) {
            const FloatVec e = exp_nonpositive(load(logits, i) - max_logit);
            sum += e;
            if (i < full) {
                std::memcpy(probs.data() + i, &e, sizeof e);
            } else {
                for (size_t k = 0; i + k < n; ++k) probs[i + k] = e[k];
            }
        }
        add_block(total, sum);
    }
    const float inv_total = static_cast<float>(1.0 / horizontal_sum(total));
    for (float& p : probs) p *= inv_total;
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
