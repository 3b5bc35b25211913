// Stochastic speculative decoding with the vanilla rule samples from the target's distribution,
// and a seed fixes the output.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/judge.h"
#include "core/sampling.h"
#include "engine/speculative_decoder.h"
#include "test_support.h"

namespace klspec {
namespace {

ContextOptions test_context() {
    ContextOptions options;
    options.n_ctx = 256;
    options.n_threads = 1;
    return options;
}

GenerationOptions sampled(uint64_t seed, int32_t max_tokens) {
    GenerationOptions options;
    options.max_tokens = max_tokens;
    options.draft_max = 4;
    options.sampling.temperature = 1.0f;
    options.sampling.seed = seed;
    return options;
}

TEST(Stochastic, SameSeedSameOutput) {
    const Model target(test::kTargetModel);
    const Model draft(test::kDraftQ4);
    SpeculativeDecoder decoder(target, &draft, test_context());
    const GenerationResult a = decoder.generate("Once upon a time", sampled(7, 64));
    const GenerationResult b = decoder.generate("Once upon a time", sampled(7, 64));
    const GenerationResult c = decoder.generate("Once upon a time", sampled(8, 64));
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_NE(a.tokens, c.tokens) << "different seeds gave the same 64 tokens";
}

// The first generated token goes through one acceptance step (draft d_1 kept or replaced); its
// empirical distribution over many seeds must match the target's own next-token distribution.
TEST(Stochastic, FirstTokenFollowsTargetDistribution) {
    const std::string prompt = "Once upon a time, there was a little";
    const Model target(test::kTargetModel);
    const Model draft(test::kDraftQ4);

    // Exact target distribution p for the first generated token (temperature 1, no truncation).
    std::vector<float> p;
    {
        SpeculativeDecoder target_only(target, nullptr, test_context());
        const ForwardResult forward =
            target_only.forward(ModelRole::Target, target.tokenize(prompt, true), /*with_hidden=*/false);
        softmax(std::span<const float>(forward.logits).last(static_cast<size_t>(forward.n_vocab)), p);
    }

    SpeculativeDecoder decoder(target, &draft, test_context());
    constexpr int kSamples = 4000;
    std::map<int32_t, int> counts;
    int64_t drafted = 0, accepted = 0;
    for (int s = 0; s < kSamples; ++s) {
        const GenerationResult r = decoder.generate(prompt, sampled(1000 + s, 2));
        ASSERT_FALSE(r.tokens.empty());
        ++counts[r.tokens[0]];
        drafted += r.stats.drafted;
        accepted += r.stats.accepted;
    }
    ASSERT_GT(drafted, 0);
    // Both kept drafts and replacements must occur, or the test does not exercise the residual.
    ASSERT_GT(accepted, 0);
    ASSERT_LT(accepted, drafted);

    // Chi-square goodness of fit; tokens with expected count < 5 are pooled into one bin.
    double chi2 = 0.0, pooled_expected = 0.0, pooled_observed = 0.0;
    int bins = 0;
    for (size_t v = 0; v < p.size(); ++v) {
        const double expected = p[v] * kSamples;
        const double observed = counts.count(static_cast<int32_t>(v)) ? counts[static_cast<int32_t>(v)] : 0;
        if (expected < 5.0) {
            pooled_expected += expected;
            pooled_observed += observed;
            continue;
        }
        chi2 += (observed - expected) * (observed - expected) / expected;
        ++bins;
    }
    if (pooled_expected > 0) {
        chi2 += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
        ++bins;
    }
    const int dof = bins - 1;
    ASSERT_GE(dof, 3) << "the prompt's next-token distribution is too peaked to test";
    // Wilson-Hilferty approximation of the chi-square quantile at 1 - 1e-4 (z = 3.719).
    const double z = 3.719;
    const double h = 2.0 / (9.0 * dof);
    const double critical = dof * std::pow(1.0 - h + z * std::sqrt(h), 3.0);
    EXPECT_LT(chi2, critical) << "dof " << dof;
}

}  // namespace
}  // namespace klspec
