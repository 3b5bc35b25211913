// The project's own reasoning pair (models/reasoning-{target,draft}.gguf): vanilla greedy speculative
// decoding gives the target's exact outputs, hence exactly its accuracy, on 100 test problems.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/answer_scoring.h"
#include "core/judge.h"
#include "engine/speculative_decoder.h"
#include "test_support.h"

namespace klspec {
namespace {

constexpr size_t kProblems = 100;

TEST(ReasoningPair, SpeculativeAccuracyEqualsTargetOnly) {
    const Model target(test::kReasoningTarget);
    const Model draft(test::kReasoningDraft);
    EXPECT_GE(target.n_params(), 8 * draft.n_params()) << "the draft must be at least 8x smaller";
    ContextOptions context;
    context.n_ctx = 256;
    context.n_threads = 1;
    SpeculativeDecoder target_only(target, nullptr, context);
    SpeculativeDecoder speculative(target, &draft, context);
    GenerationOptions options;
    options.max_tokens = 120;
    options.draft_max = 8;

    std::ifstream dataset(test::kReasoningTestSet);
    ASSERT_TRUE(dataset) << test::kReasoningTestSet;
    std::string line;
    size_t problems = 0, target_correct = 0, speculative_correct = 0;
    int64_t drafted = 0, accepted = 0;
    while (problems < kProblems && std::getline(dataset, line)) {
        const nlohmann::json row = nlohmann::json::parse(line);
        const std::string question = row.at("question");
        const std::string final_answer = std::to_string(row.at("final").get<int64_t>());
        const GenerationResult reference = target_only.generate(question, options);
        const GenerationResult result = speculative.generate(question, options);
        ASSERT_EQ(result.tokens, reference.tokens) << question;
        target_correct += is_correct(Scorer::Gsm8k, reference.text, final_answer);
        speculative_correct += is_correct(Scorer::Gsm8k, result.text, final_answer);
        drafted += result.stats.drafted;
        accepted += result.stats.accepted;
        ++problems;
    }
    ASSERT_EQ(problems, kProblems);
    EXPECT_EQ(speculative_correct, target_correct);
    // The pair is meant to be useful: the target solves most problems, the draft is often right.
    EXPECT_GE(target_correct, kProblems * 8 / 10);
    EXPECT_GT(accepted, drafted / 4);
}

}  // namespace
}  // namespace klspec
