// argmax, softmax, shape_logits (temperature, top-k, top-p) and sample_from_weights.
#include "core/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace klspec {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

std::vector<float> shaped(const std::vector<float>& logits, const SamplingParams& params) {
    std::vector<float> out(logits.size());
    ShapingScratch order;
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
    EXPECT_EQ(shaped(logits, params(1.0f, 1)), (std::vector<float>{kMinusInf, 3.0f, kMinusInf, kMinusInf, kMinusInf}));
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

// The shaping of a sorted-prefix reference: rank by logit (ties to the lower index), keep the first K,
// then the shortest prefix of those whose renormalised mass reaches P.
std::vector<float> reference_shaped(const std::vector<float>& logits, float temperature, int32_t top_k, float top_p) {
    std::vector<float> out(logits);
    for (float& l : out) l /= temperature;
    std::vector<int32_t> order(out.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return out[a] > out[b]; });
    const size_t k = top_k > 0 ? std::min(out.size(), static_cast<size_t>(top_k)) : out.size();
    double total = 0;
    for (size_t r = 0; r < k; ++r) total += std::exp(double(out[order[r]]) - out[order[0]]);
    size_t keep = k;
    double mass = 0;
    for (size_t r = 0; r < k && top_p < 1.0f; ++r) {
        mass += std::exp(double(out[order[r]]) - out[order[0]]) / total;
        if (mass >= top_p) {
            keep = r + 1;
            break;
        }
    }
    for (size_t r = keep; r < out.size(); ++r) out[order[r]] = kMinusInf;
    return out;
}

// Large vocabularies take the selection / bucket paths; they must keep exactly the reference's set.
TEST(ShapeLogits, LargeVocabulariesMatchTheSortedReference) {
    std::mt19937_64 rng(99);
    for (const size_t vocab : {size_t{1025}, size_t{5003}, size_t{128256}}) {
        for (const double spread : {0.3, 2.0, 6.0}) {  // nearly flat to peaked rows
            std::normal_distribution<float> logit(0.0f, static_cast<float>(spread));
            std::vector<float> logits(vocab);
            for (float& l : logits) l = logit(rng);
            logits[vocab / 3] = logits[vocab / 2];  // a tie
            for (const auto& [top_k, top_p] : std::vector<std::pair<int32_t, float>>{
                     {0, 0.5f}, {0, 0.9f}, {0, 0.99f}, {40, 1.0f}, {40, 0.9f}, {3000, 0.95f}}) {
                const SamplingParams shaping = params(0.7f, top_k, top_p);
                const std::vector<float> got = shaped(logits, shaping);
                const std::vector<float> expected = reference_shaped(logits, 0.7f, top_k, top_p);
                size_t differences = 0;
                for (size_t v = 0; v < vocab; ++v) differences += (got[v] == kMinusInf) != (expected[v] == kMinusInf);
                // The bucketed sums round differently from a sorted running sum: allow one token at the cut.
                EXPECT_LE(differences, 1u)
                    << "V " << vocab << ", spread " << spread << ", top-k " << top_k << ", top-p " << top_p;
            }
        }
    }
}

TEST(Argmax, LargeRowsAndTiesAtAnyOffset) {
    for (const size_t vocab : {size_t{17}, size_t{1000}, size_t{128256}}) {
        std::vector<float> logits(vocab, -1.0f);
        for (const size_t at : {size_t{0}, vocab / 2, vocab - 1}) {
            std::fill(logits.begin(), logits.end(), -1.0f);
            logits[at] = 3.0f;
            logits[vocab - 1] = 3.0f;  // a tie later on: the first one wins
            EXPECT_EQ(argmax(logits), static_cast<int32_t>(at)) << vocab;
        }
    }
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
