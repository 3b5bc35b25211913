// argmax, softmax, shape_logits (temperature, top-k, top-p) and sample_from_weights.
#include "core/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace klspec {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

std::vector<float> shaped(const std::vector<float>& logits, const SamplingParams& params) {
    std::vector<float> out(logits.size());
    std::vector<int32_t> order;
    shape_logits(logits, params, out, order);
    return out;
}

SamplingParams params(float temperature, int32_t top_k = 0, float top_p = 1.0f) {
    SamplingParams result;
    result.temperature = temperature;
    result.top_k = top_k;
    result.top_p = top_p;
    return result;
}

TEST(Argmax, FirstOfTheLargest) {
    EXPECT_EQ(argmax(std::vector<float>{1.0f, 5.0f, 2.0f, 5.0f}), 1);
    EXPECT_EQ(argmax(std::vector<float>{kMinusInf, -3.0f}), 1);
    EXPECT_EQ(argmax(std::vector<float>{0.0f}), 0);
}

TEST(Softmax, NormalizesStably) {
    std::vector<float> probs;
    softmax(std::vector<float>{std::log(1.0f), std::log(3.0f), kMinusInf}, probs);
    ASSERT_EQ(probs.size(), 3u);
    EXPECT_NEAR(probs[0], 0.25f, 1e-7f);
    EXPECT_NEAR(probs[1], 0.75f, 1e-7f);
    EXPECT_EQ(probs[2], 0.0f);
    // Huge logits do not overflow: only the differences matter.
    softmax(std::vector<float>{1e30f, 1e30f}, probs);
    EXPECT_FLOAT_EQ(probs[0], 0.5f);
    softmax(std::vector<float>{1000.0f, 1000.0f - std::log(4.0f)}, probs);
    EXPECT_NEAR(probs[0], 0.8f, 1e-6f);
    EXPECT_NEAR(probs[1], 0.2f, 1e-6f);
}

TEST(ShapeLogits, TemperatureDivides) {
    const std::vector<float> logits{1.0f, -2.0f, 4.0f};
    EXPECT_EQ(shaped(logits, params(0.5f)), (std::vector<float>{2.0f, -4.0f, 8.0f}));
    EXPECT_EQ(shaped(logits, params(1.0f)), logits);
    // T = 0 (greedy) keeps the raw logits: judge statistics are computed at T = 1.
    EXPECT_EQ(shaped(logits, params(0.0f)), logits);
}

TEST(ShapeLogits, TopKKeepsTheLargest) {
    const std::vector<float> logits{1.0f, 3.0f, 2.0f, 3.0f, 0.0f};
    EXPECT_EQ(shaped(logits, params(1.0f, 2)), (std::vector<float>{kMinusInf, 3.0f, kMinusInf, 3.0f, kMinusInf}));
    EXPECT_EQ(shaped(logits, params(1.0f, 3)), (std::vector<float>{kMinusInf, 3.0f, 2.0f, 3.0f, kMinusInf}));
    // Ties at the cut go to the lower index.
    EXPECT_EQ(shaped(logits, params(1.0f, 1)),
              (std::vector<float>{kMinusInf, 3.0f, kMinusInf, kMinusInf, kMinusInf}));
    EXPECT_EQ(shaped(logits, params(1.0f, 5)), logits);
    EXPECT_EQ(shaped(logits, params(1.0f, 0)), logits);
}

TEST(ShapeLogits, TopPKeepsTheSmallestSufficientPrefix) {
    // p = (0.1, 0.2, 0.3, 0.4).
    const std::vector<float> logits{std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
    EXPECT_EQ(shaped(logits, params(1.0f, 0, 0.35f)), (std::vector<float>{kMinusInf, kMinusInf, kMinusInf, logits[3]}));
    EXPECT_EQ(shaped(logits, params(1.0f, 0, 0.65f)), (std::vector<float>{kMinusInf, kMinusInf, logits[2], logits[3]}));
    EXPECT_EQ(shaped(logits, params(1.0f, 0, 0.75f)), (std::vector<float>{kMinusInf, logits[1], logits[2], logits[3]}));
    // Applied after the temperature: at T = 0.5 p ∝ (0.01, 0.04, 0.09, 0.16)/0.3, and 0.16/0.3 > 0.5.
    const auto cold = shaped(logits, params(0.5f, 0, 0.5f));
    EXPECT_EQ(cold[3], logits[3] * 2.0f);
    EXPECT_EQ(cold[2], kMinusInf);
    // With top-k the mass is measured within the k survivors: 0.4/0.7 reaches 0.5 alone (0.4 of the full
    // distribution would not).
    EXPECT_EQ(shaped(logits, params(1.0f, 2, 0.5f)), (std::vector<float>{kMinusInf, kMinusInf, kMinusInf, logits[3]}));
}

TEST(SampleFromWeights, FollowsTheWeights) {
    const std::vector<float> weights{0.0f, 1.0f, 3.0f, 0.0f, 4.0f};  // unnormalized
    const double total = 8.0;
    Rng rng(123);
    constexpr int kDraws = 200000;
    std::vector<int> counts(weights.size());
    for (int i = 0; i < kDraws; ++i) ++counts[sample_from_weights(weights, rng)];
    EXPECT_EQ(counts[0], 0);
    EXPECT_EQ(counts[3], 0);
    double chi_square = 0;
    for (size_t v : {1u, 2u, 4u}) {
        const double expected = kDraws * weights[v] / total;
        chi_square += (counts[v] - expected) * (counts[v] - expected) / expected;
    }
    // 2 degrees of freedom: P(χ² > 30) = e^-15 ≈ 3e-7.
    EXPECT_LT(chi_square, 30.0);
}

}  // namespace
}  // namespace klspec
