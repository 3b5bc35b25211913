// The project's default pair (models/testbed-{target,draft}.gguf, tools/testbed): vanilla greedy speculative
// decoding gives the target's outputs, up to proven near ties (test_support.h), hence its accuracy, on the
// first test problems of each task family.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/answer_scoring.h"
#include "engine/speculative_decoder.h"
#include "test_support.h"

namespace klspec {
namespace {

// Enough problems to meet the positions where the draft and the target disagree, few enough for CI
// (the F16 target decodes a few hundred tokens/s on one thread).
constexpr size_t kProblemsPerFamily = 12;

class DefaultPair : public ::testing::TestWithParam<const char*> {};

TEST_P(DefaultPair, SpeculativeOutputEqualsTargetOnly) {
    const Model target(test::kDefaultTarget, test::offload());
    const Model draft(test::kDefaultDraft, test::offload());
    EXPECT_GE(target.n_params(), 50 * draft.n_params()) << "the draft must be cheap next to the target";
    ContextOptions context;
    context.n_ctx = 512;
    context.n_threads = 1;
    SpeculativeDecoder target_only(target, nullptr, context);
    SpeculativeDecoder speculative(target, &draft, context);
    GenerationOptions options;
    options.max_tokens = 320;
    options.draft_max = 8;

    const std::string path = test::testbed_test_set(GetParam());
    std::ifstream dataset(path);
    ASSERT_TRUE(dataset) << path;
    std::string line;
    size_t problems = 0, target_correct = 0, speculative_correct = 0;
    int64_t drafted = 0, accepted = 0, divergences = 0;
    while (problems < kProblemsPerFamily && std::getline(dataset, line)) {
        const nlohmann::json row = nlohmann::json::parse(line);
        const std::string question = row.at("question");
        const Scorer scorer = parse_scorer(row.at("scorer").get<std::string>());
        const std::string gold = row.at("final").is_string() ? row.at("final").get<std::string>()
                                                             : std::to_string(row.at("final").get<int64_t>());
        const GenerationResult reference = target_only.generate(question, options);
        const GenerationResult result = speculative.generate(question, options);
        if (result.tokens != reference.tokens) {
            const test::GreedyReference by_hand = test::greedy_reference(target, question, options.max_tokens, context);
            ASSERT_EQ(by_hand.tokens, reference.tokens) << "the hand-made reference is not target-only decoding";
            test::check_equal_up_to_near_tie(by_hand, result.tokens, question, divergences);
        }
        EXPECT_EQ(result.stop_reason, StopReason::EndOfGeneration) << question;
        target_correct += is_correct(scorer, reference.text, gold);
        speculative_correct += is_correct(scorer, result.text, gold);
        drafted += result.stats.drafted;
        accepted += result.stats.accepted;
        ++problems;
    }
    ASSERT_EQ(problems, kProblemsPerFamily);
    // A near-tie divergence may change an answer: the accuracies differ by at most their number.
    EXPECT_LE(std::max(speculative_correct, target_correct) - std::min(speculative_correct, target_correct),
              static_cast<size_t>(divergences));
    RecordProperty("near_tie_divergences", std::to_string(divergences));
    // The pair is meant to be useful: the target solves most problems, and the draft is right often
    // enough to pay but far from always.
    EXPECT_GE(target_correct, kProblemsPerFamily * 2 / 3);
    EXPECT_GT(accepted, drafted / 3);
    EXPECT_LT(accepted, drafted * 95 / 100);
}

INSTANTIATE_TEST_SUITE_P(Families, DefaultPair, ::testing::Values("word", "choice", "trace"));

}  // namespace
}  // namespace klspec
