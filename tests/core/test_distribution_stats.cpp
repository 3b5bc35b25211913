// The judge statistics kernels against a long-double reference computed from the same float logits.
#include "core/distribution_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace klspec {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Requirement: relative error <= 1e-5 on KL and entropy. The kernels evaluate exp in float (relative
// error ~1e-7) and sum in float within blocks of 512 tokens and in double across blocks, so entropies,
// normalizers and max probabilities meet it at any size. The KL is Σ p (log p − log q) minus the
// difference of the two log normalizers, which cancels when q is close to p: the ~1e-7 relative error
// of each normalizer stays as an absolute error of up to ~1e-7 in the KL (measured: <= 1e-7 on these
// cases). The KL bound is therefore 1e-5 relative plus kKlAbsoluteFloor = 3e-7: relative accuracy holds
// for KL >= 0.03, and below that the error is far smaller than any threshold a judge uses (the paper's
// τ are 0.1..0.9). It still fails on a real mistake (a missing term or a wrong normalizer).
constexpr double kKlAbsoluteFloor = 3e-7;
constexpr double kRelativeTolerance = 1e-5;

struct Reference {
    double log_normalizer_p = 0;
    double log_normalizer_q = 0;
    double entropy_p = 0;
    double max_probability_p = 0;
    double kl = 0;
    double js = 0;
};

// log Σ exp(logit), with the tokens at the max counted apart so that a peaked row keeps the digits of
// the rest (1 + 1e-26 is 1 even in long double; the entropy of such a row is made of that rest).
long double log_normalizer(const std::vector<float>& logits) {
    const long double max_logit = *std::max_element(logits.begin(), logits.end());
    long double at_max = 0, rest = 0;
    for (float l : logits) {
        if (l == max_logit)
            at_max += 1;
        else
            rest += std::exp(static_cast<long double>(l) - max_logit);
    }
    return max_logit + std::log(at_max) + std::log1p(rest / at_max);
}

Reference reference(const std::vector<float>& a, const std::vector<float>& b) {
    const long double za = log_normalizer(a);
    const long double zb = log_normalizer(b);
    long double entropy = 0, kl = 0, max_p = 0, js = 0;
    bool infinite_kl = false;
    for (size_t v = 0; v < a.size(); ++v) {
        // JS = ½ Σ p log(2p / (p + q)) + q log(2q / (p + q)), a zero probability contributing 0.
        const long double p_v = a[v] == kMinusInf ? 0 : std::exp(a[v] - za);
        const long double q_v = b[v] == kMinusInf ? 0 : std::exp(b[v] - zb);
        if (p_v > 0) js += p_v * std::log(2 * p_v / (p_v + q_v)) / 2;
        if (q_v > 0) js += q_v * std::log(2 * q_v / (p_v + q_v)) / 2;
        if (a[v] == kMinusInf) continue;  // p(v) = 0 contributes 0
        const long double log_p = a[v] - za;
        const long double p = std::exp(log_p);
        max_p = std::max(max_p, p);
        entropy -= p * log_p;
        if (b[v] == kMinusInf) {
            infinite_kl = true;
            continue;
        }
        kl += p * (log_p - (b[v] - zb));
    }
    return {static_cast<double>(za),
            static_cast<double>(zb),
            static_cast<double>(entropy),
            static_cast<double>(max_p),
            infinite_kl ? kInf : static_cast<double>(kl),
            static_cast<double>(js)};
}

void expect_relative(double actual, double expected, double tolerance, const std::string& what) {
    EXPECT_LE(std::fabs(actual - expected), tolerance * std::fabs(expected) + 1e-300)
        << what << ": actual " << actual << ", expected " << expected;
}

void check_against_reference(const std::vector<float>& a, const std::vector<float>& b, const std::string& label) {
    SCOPED_TRACE(label + ", V = " + std::to_string(a.size()));
    const Reference ref = reference(a, b);
    const KlStats pair = kl_stats(a, b);
    const DistributionStats target = distribution_stats(a);

    // Normalizers: relative to their size, with 1e-6 absolute for normalizers near 0.
    EXPECT_NEAR(pair.target_log_normalizer, ref.log_normalizer_p, 1e-6 + 1e-7 * std::fabs(ref.log_normalizer_p));
    EXPECT_NEAR(pair.draft_log_normalizer, ref.log_normalizer_q, 1e-6 + 1e-7 * std::fabs(ref.log_normalizer_q));
    EXPECT_NEAR(target.log_normalizer, ref.log_normalizer_p, 1e-6 + 1e-7 * std::fabs(ref.log_normalizer_p));
    expect_relative(target.entropy, ref.entropy_p, kRelativeTolerance, "entropy");
    expect_relative(target.max_probability, ref.max_probability_p, kRelativeTolerance, "max probability");
    expect_relative(pair.target_max_probability, ref.max_probability_p, kRelativeTolerance, "max probability");
    if (std::isinf(ref.kl)) {
        EXPECT_EQ(pair.kl, kInf);
    } else {
        EXPECT_LE(std::fabs(pair.kl - ref.kl), kRelativeTolerance * ref.kl + kKlAbsoluteFloor)
            << "KL: actual " << pair.kl << ", expected " << ref.kl;
    }
    const double js = js_divergence(a, b);
    EXPECT_LE(std::fabs(js - ref.js), kRelativeTolerance * ref.js + kKlAbsoluteFloor)
        << "JS: actual " << js << ", expected " << ref.js;
}

class DistributionStatsTest : public ::testing::TestWithParam<size_t> {
protected:
    std::vector<float> normal(double scale, double mean = 0) {
        std::normal_distribution<double> dist(mean, scale);
        std::vector<float> row(GetParam());
        for (float& x : row) x = static_cast<float>(dist(rng_));
        return row;
    }
    std::vector<float> perturbed(const std::vector<float>& row, double scale) {
        std::normal_distribution<double> dist(0.0, scale);
        std::vector<float> out(row);
        for (float& x : out) x = static_cast<float>(x + dist(rng_));
        return out;
    }
    std::mt19937_64 rng_{GetParam()};
};

TEST_P(DistributionStatsTest, RandomLogits) {
    const auto a = normal(3.0);
    check_against_reference(a, normal(3.0), "independent");
    check_against_reference(a, perturbed(a, 0.5), "close");
    check_against_reference(a, perturbed(a, 1e-3), "very close");
    check_against_reference(normal(10.0), normal(1.0), "peaked target, flat draft");
}

TEST_P(DistributionStatsTest, HugeLogits) {
    const auto a = normal(3.0, 1e4);
    check_against_reference(a, perturbed(a, 0.5), "around 1e4");
    check_against_reference(normal(1e30), normal(1e30), "spread 1e30");
    check_against_reference(normal(3.0, -3e4), normal(3.0, 3e4), "offset normalizers");
}

TEST_P(DistributionStatsTest, AllEqualLogits) {
    const std::vector<float> a(GetParam(), 7.25f);
    const std::vector<float> b(GetParam(), -3.0f);
    check_against_reference(a, b, "uniform");
    const DistributionStats stats = distribution_stats(a);
    EXPECT_NEAR(stats.entropy, std::log(static_cast<double>(GetParam())), 1e-12);
    EXPECT_EQ(kl_stats(a, b).kl, 0.0);
}

TEST_P(DistributionStatsTest, MinusInfinityEntries) {
    auto a = normal(3.0);
    auto b = perturbed(a, 0.5);
    for (size_t v = 1; v < a.size(); v += 3) a[v] = b[v] = kMinusInf;  // truncated in both
    check_against_reference(a, b, "shared truncation");
    for (size_t v = 2; v < a.size(); v += 5) a[v] = kMinusInf;  // p = 0 where q > 0: finite
    check_against_reference(a, b, "target truncates more");
    if (a.size() > 2) {  // at V = 2 the draft would have no token left
        b[0] = kMinusInf;
        a[0] = 1.0f;  // p > 0 where q = 0
        check_against_reference(a, b, "draft excludes a target token");
        EXPECT_EQ(kl_stats(a, b).kl, kInf);
        a[0] = -100.0f;  // p(v) > 0 below float's range still counts
        EXPECT_EQ(kl_stats(a, b).kl, kInf);
    }
}

TEST_P(DistributionStatsTest, OneHot) {
    const size_t n = GetParam();
    std::vector<float> a(n, kMinusInf);
    a[n / 2] = 4.0f;
    const DistributionStats stats = distribution_stats(a);
    EXPECT_EQ(stats.entropy, 0.0);
    EXPECT_EQ(stats.max_probability, 1.0);
    EXPECT_DOUBLE_EQ(stats.log_normalizer, 4.0);
    EXPECT_EQ(kl_stats(a, a).kl, 0.0);
    const auto b = normal(2.0);
    check_against_reference(a, b, "one-hot target");
    // KL(p ‖ one-hot q) is infinite unless p is that same one-hot.
    if (n > 1) {
        EXPECT_EQ(kl_stats(b, a).kl, kInf);
    }
}

TEST_P(DistributionStatsTest, NearlyOneHot) {
    // One token far above the rest: the entropy is tiny and must keep its relative accuracy.
    auto a = normal(1.0, -30.0);
    a[0] = 0.0f;
    check_against_reference(a, normal(1.0), "gap of 30 nats");
    auto far = normal(1.0, -60.0);
    far[0] = 0.0f;
    check_against_reference(far, normal(1.0), "gap of 60 nats");
}

INSTANTIATE_TEST_SUITE_P(VocabularySizes, DistributionStatsTest,
                         ::testing::Values(size_t{2}, size_t{17}, size_t{31}, size_t{512}, size_t{1001}, size_t{32000},
                                           size_t{128256}, size_t{151936}, size_t{151943}));

TEST(DistributionStats, HandComputedValues) {
    // p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4).
    const std::vector<float> a{std::log(2.0f), 0.0f, 0.0f};
    const std::vector<float> b{0.0f, std::log(2.0f), 0.0f};
    const DistributionStats p = distribution_stats(a);
    EXPECT_NEAR(p.entropy, 1.5 * std::log(2.0), 1e-7);
    EXPECT_NEAR(p.max_probability, 0.5, 1e-7);
    EXPECT_NEAR(p.log_normalizer, std::log(4.0), 1e-7);
    // KL = 1/2 log 2 + 1/4 log(1/2) + 0 = 1/4 log 2
    EXPECT_NEAR(kl_stats(a, b).kl, 0.25 * std::log(2.0), 1e-7);
    EXPECT_NEAR(kl_stats(b, a).kl, 0.25 * std::log(2.0), 1e-7);
}

TEST(LogitRank, OrdersByLogitThenIndex) {
    const std::vector<float> logits{1.0f, 3.0f, 2.0f, 3.0f, kMinusInf};
    EXPECT_EQ(logit_rank(logits, 1), 0);  // first of the tied maxima
    EXPECT_EQ(logit_rank(logits, 3), 1);
    EXPECT_EQ(logit_rank(logits, 2), 2);
    EXPECT_EQ(logit_rank(logits, 0), 3);
    EXPECT_EQ(logit_rank(logits, 4), 4);
}

TEST(LogitRank, MatchesSortingOnLargeRows) {
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int> coarse(-20, 20);  // many ties
    std::vector<float> logits(32000);
    for (float& x : logits) x = static_cast<float>(coarse(rng));
    std::vector<int32_t> order(logits.size());
    for (size_t v = 0; v < order.size(); ++v) order[v] = static_cast<int32_t>(v);
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return logits[x] > logits[y]; });
    for (size_t r = 0; r < order.size(); r += 997) EXPECT_EQ(logit_rank(logits, order[r]), static_cast<int64_t>(r));
}

TEST(DistributionStats, MaxAbsDifferenceIsTheLargestGapEitherWay) {
    const std::vector<float> a = {1.0F, -2.0F, 3.5F};
    const std::vector<float> b = {1.5F, 2.0F, 3.0F};
    EXPECT_FLOAT_EQ(max_abs_difference(a, b), 4.0F);
    EXPECT_FLOAT_EQ(max_abs_difference(b, a), 4.0F);
    EXPECT_FLOAT_EQ(max_abs_difference(a, a), 0.0F);
}

}  // namespace
}  // namespace klspec
