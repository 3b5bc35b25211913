// The judge rules wired into the real decoding loop: rules that never fire reproduce vanilla, rules
// that always fire keep every draft, and AutoJudge receives both models' hidden states.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/judge_factory.h"
#include "engine/speculative_decoder.h"
#include "test_support.h"

namespace klspec {
namespace {

constexpr int32_t kEmbd = 64;  // stories260K's hidden size (target and drafts alike)

GenerationResult run(const JudgeOptions& judge_options, const std::string& prompt) {
    const Model target(test::kTargetModel);
    const Model draft(test::kDraftQ4);
    GenerationOptions options;
    options.judge = make_judge(judge_options);
    options.max_tokens = 64;
    options.draft_max = 8;
    ContextOptions context;
    context.n_ctx = 256;
    context.n_threads = 1;
    context.hidden_states = options.judge->needs_hidden_states();
    SpeculativeDecoder decoder(target, &draft, context);
    return decoder.generate(prompt, options);
}

// A head whose score is σ(bias + weight · h_target[coordinate]) (mean 0, scale 1 elsewhere).
std::string write_head(double bias, double weight, int coordinate) {
    std::vector<double> zeros(2 * kEmbd, 0.0), ones(2 * kEmbd, 1.0), weights(2 * kEmbd, 0.0);
    weights[kEmbd + coordinate] = weight;
    const nlohmann::json head = {{"draft_hidden_size", kEmbd}, {"target_hidden_size", kEmbd},
                                 {"mean", zeros},           {"scale", ones},
                                 {"weights", weights},      {"bias", bias},
                                 {"threshold", 0.5}};
    const std::string path = test::temp_path("head-" + std::to_string(bias) + "-" + std::to_string(weight) + ".json");
    std::ofstream(path) << head.dump();
    return path;
}

JudgeOptions rule(const std::string& name) {
    JudgeOptions options;
    options.rule = name;
    return options;
}

const std::vector<std::string> kPrompts = {"Once upon a time", "Tom and his dog went to the park."};

TEST(JudgesEndToEnd, RulesThatNeverFireEqualVanilla) {
    JudgeOptions kl = rule("kl");
    kl.threshold = 0.0;
    JudgeOptions topk = rule("topk");
    topk.topk = 1;
    JudgeOptions draft_entropy = rule("draft-entropy");
    draft_entropy.threshold = 0.0;
    JudgeOptions never_autojudge = rule("autojudge");
    never_autojudge.head_path = write_head(/*bias=*/50.0, 0.0, 0);
    for (const std::string& prompt : kPrompts) {
        const GenerationResult vanilla = run(rule("vanilla"), prompt);
        for (const JudgeOptions& options : {kl, topk, draft_entropy, never_autojudge}) {
            const GenerationResult result = run(options, prompt);
            EXPECT_EQ(result.tokens, vanilla.tokens) << options.rule;
            EXPECT_EQ(result.stats.relaxed_accepted, 0) << options.rule;
        }
    }
}

TEST(JudgesEndToEnd, AlwaysRelaxedKeepsEveryDraft) {
    JudgeOptions always_autojudge = rule("autojudge");
    always_autojudge.head_path = write_head(/*bias=*/-50.0, 0.0, 0);
    JudgeOptions huge_kl = rule("kl");
    huge_kl.threshold = 1e9;
    huge_kl.confidence_mask = 1.0;
    for (const JudgeOptions& options : {always_autojudge, huge_kl}) {
        const GenerationResult result = run(options, "Once upon a time");
        EXPECT_EQ(result.stats.accepted, result.stats.drafted) << options.rule;
        EXPECT_GT(result.stats.relaxed_accepted, 0) << options.rule;
    }
}

// With the score driven by one coordinate of h_target, some positions are relaxed and some not:
// the hidden states reach the head and vary from token to token.
TEST(JudgesEndToEnd, AutoJudgeReadsTargetHiddenStates) {
    int64_t relaxed = 0, rejected_after_mismatch = 0;
    JudgeOptions options = rule("autojudge");
    for (int coordinate = 0; coordinate < 4; ++coordinate) {
        options.head_path = write_head(0.0, 10.0, coordinate);
        const GenerationResult result = run(options, "Once upon a time");
        relaxed += result.stats.relaxed_accepted;
        rejected_after_mismatch += result.stats.drafted - result.stats.accepted;
    }
    EXPECT_GT(relaxed, 0);
    EXPECT_GT(rejected_after_mismatch, 0);
}

}  // namespace
}  // namespace klspec
