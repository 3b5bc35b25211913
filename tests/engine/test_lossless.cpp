// Greedy speculative decoding with the vanilla rule must reproduce target-only greedy decoding
// token for token, whatever the draft and gamma.
#include <gtest/gtest.h>

#include "core/judge.h"
#include "engine/speculative_decoder.h"
#include "test_support.h"

namespace klspec {
namespace {

constexpr int32_t kTokens = 48;
constexpr size_t kPromptsPerSource = 25;  // 25 story openings, 25 GSM8K questions

ContextOptions test_context() {
    ContextOptions options;
    options.n_ctx = 512;  // stories260K's training context
    options.n_threads = 1;
    return options;
}

class LosslessTest : public ::testing::TestWithParam<std::string> {
protected:
    void expect_lossless(const std::vector<std::string>& prompts) {
        const Model target(test::kTargetModel);
        const Model draft(GetParam());
        SpeculativeDecoder target_only(target, nullptr, test_context());
        SpeculativeDecoder speculative(target, &draft, test_context());
        int64_t accepted = 0, drafted = 0;
        for (const std::string& prompt : prompts) {
            GenerationOptions options;
            options.max_tokens = kTokens;
            const GenerationResult reference = target_only.generate(prompt, options);
            EXPECT_DOUBLE_EQ(reference.stats.mat(), 1.0);
            for (const int32_t gamma : {1, 4, 16}) {
                options.draft_max = gamma;
                const GenerationResult result = speculative.generate(prompt, options);
                ASSERT_EQ(result.tokens, reference.tokens) << "gamma " << gamma << ", prompt: " << prompt;
                EXPECT_EQ(result.text, reference.text);
                EXPECT_EQ(result.stop_reason, reference.stop_reason);
                EXPECT_EQ(result.stats.relaxed_accepted, 0);
                EXPECT_LE(result.stats.accepted, result.stats.drafted);
                EXPECT_EQ(result.stats.emitted, static_cast<int64_t>(result.tokens.size()));
                // Each call emits its accepted drafts and one target token; an EOS ends the output early.
                EXPECT_LE(result.stats.emitted, result.stats.accepted + result.stats.target_calls);
                EXPECT_GE(result.stats.emitted, result.stats.accepted + result.stats.target_calls - 1);
                accepted += result.stats.accepted;
                drafted += result.stats.drafted;
            }
        }
        RecordProperty("acceptance_rate", std::to_string(double(accepted) / double(drafted)));
        EXPECT_GT(accepted, 0) << "the draft never agreed with the target: the pair is broken";
    }
};

TEST_P(LosslessTest, StoryOpenings) {
    const std::vector<std::string> prompts = test::story_prompts(kPromptsPerSource);
    ASSERT_EQ(prompts.size(), kPromptsPerSource);
    expect_lossless(prompts);
}

TEST_P(LosslessTest, Gsm8kQuestions) {
    const std::vector<std::string> prompts = test::gsm8k_prompts(kPromptsPerSource);
    if (prompts.empty()) GTEST_SKIP() << test::kNoSharedDatasets;
    ASSERT_EQ(prompts.size(), kPromptsPerSource);
    expect_lossless(prompts);
}

INSTANTIATE_TEST_SUITE_P(Drafts, LosslessTest, ::testing::Values(test::kDraftQ8, test::kDraftQ4),
                         [](const auto& param_info) { return param_info.index == 0 ? std::string("Q8_0") : std::string("Q4_0"); });

}  // namespace
}  // namespace klspec
