// Greedy speculative decoding with the vanilla rule reproduces target-only greedy decoding, whatever the
// draft and gamma: every emitted draft token is the argmax of the target's verification logits, and the
// output equals target-only output token for token, or leaves it only at a proven near tie (test_support.h:
// with llamafile's sgemm a batch's logits differ from a single token's in the last bits). 300 cases:
// 50 prompts x gamma 1, 4, 16 x two drafts.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

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
        const Model target(test::kTargetModel, test::offload());
        const Model draft(GetParam(), test::offload());
        SpeculativeDecoder target_only(target, nullptr, test_context());
        SpeculativeDecoder speculative(target, &draft, test_context());
        // Every judged position's verdict against the verification argmax, and the token it put there.
        std::vector<JudgedPosition> judged;
        speculative.set_observer([&](const JudgedPosition& p) { judged.push_back(p); });
        int64_t accepted = 0, drafted = 0, divergences = 0;
        for (const std::string& prompt : prompts) {
            GenerationOptions options;
            options.max_tokens = kTokens;
            const GenerationResult reference = target_only.generate(prompt, options);
            EXPECT_DOUBLE_EQ(reference.stats.mat(), 1.0);
            const test::GreedyReference by_hand = test::greedy_reference(target, prompt, kTokens, test_context());
            ASSERT_EQ(by_hand.tokens, reference.tokens) << "the hand-made reference is not target-only decoding";
            const int64_t prompt_tokens = static_cast<int64_t>(target.tokenize(prompt, true, true).size());
            for (const int32_t gamma : {1, 4, 16}) {
                options.draft_max = gamma;
                judged.clear();
                const GenerationResult result = speculative.generate(prompt, options);
                const std::string label = "gamma " + std::to_string(gamma) + ", prompt: " + prompt;
                for (const JudgedPosition& p : judged) {
                    ASSERT_EQ(p.verdict.verdict == Verdict::Accepted, p.draft_token == p.target_token) << label;
                    ASSERT_NE(p.verdict.verdict, Verdict::Relaxed) << label;
                    const int64_t i = p.position - prompt_tokens;  // output index of this position's token
                    if (i < static_cast<int64_t>(result.tokens.size())) {
                        ASSERT_EQ(result.tokens[static_cast<size_t>(i)], p.target_token) << label << ", token " << i;
                    }
                }
                if (test::check_equal_up_to_near_tie(by_hand, result.tokens, label, divergences) < 0) {
                    EXPECT_EQ(result.text, reference.text);
                    EXPECT_EQ(result.stop_reason, reference.stop_reason);
                }
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
        RecordProperty("near_tie_divergences", std::to_string(divergences));
        std::cout << "[ cases    ] " << 3 * prompts.size() << " cases, " << divergences
                  << " left target-only output at a near tie\n";
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

TEST(NearTieBound, BatchedAndSingleTokenLogitsDifferByLessThanHalfTheBound) {
    const double stories =
        test::max_batch_single_difference(test::kTargetModel, test::story_prompts(10), kTokens, test_context());
    std::vector<std::string> problems;
    std::ifstream dataset(test::kWordTestSet);
    for (std::string line; problems.size() < 3 && std::getline(dataset, line);)
        problems.push_back(nlohmann::json::parse(line).at("question").get<std::string>());
    ASSERT_EQ(problems.size(), 3u);
    const double default_pair = test::max_batch_single_difference(test::kDefaultTarget, problems, 128, test_context());
    std::cout << "[ logits   ] largest batched - single difference: stories260K " << stories << ", default target "
              << default_pair << " (bound " << test::near_tie_gap() << ")\n";
    RecordProperty("stories_max_difference", std::to_string(stories));
    RecordProperty("default_target_max_difference", std::to_string(default_pair));
    EXPECT_LT(stories, test::near_tie_gap() / 2);
    EXPECT_LT(default_pair, test::near_tie_gap() / 2);
}

INSTANTIATE_TEST_SUITE_P(Drafts, LosslessTest, ::testing::Values(test::kDraftQ8, test::kDraftQ4),
                         [](const auto& param_info) {
                             return param_info.index == 0 ? std::string("Q8_0") : std::string("Q4_0");
                         });

}  // namespace
}  // namespace klspec
