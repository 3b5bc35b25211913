// The judge rules wired into the real decoding loop: rules that never fire reproduce vanilla, rules
// that always fire keep every draft, and AutoJudge receives both models' hidden states.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

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
    options.judge_span = judge_options.span;
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
    const nlohmann::json head = {{"draft_hidden_size", kEmbd},
                                 {"target_hidden_size", kEmbd},
                                 {"mean", zeros},
                                 {"scale", ones},
                                 {"weights", weights},
                                 {"bias", bias},
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

test::SpanCheck check_outside_span(const std::string& prompt, const GenerationResult& result,
                                   const std::function<bool(const std::string&)>& outside) {
    const Model target(test::kTargetModel);
    ContextOptions context;
    context.n_ctx = 256;
    context.n_threads = 1;
    return test::check_outside_span(target, prompt, result.tokens, outside, context);
}

TEST(JudgesEndToEnd, OutsideTheJudgeSpanEveryTokenIsTheTargetsChoice) {
    // KL with a huge τ and no mask relaxes nearly every disagreement; the span confines it.
    JudgeOptions kl = rule("kl");
    kl.threshold = 1e6;
    kl.confidence_mask = 1.0;
    const auto after_first_period = [](const std::string& text) { return text.find('.') != std::string::npos; };
    for (const std::string& prompt : kPrompts) {
        // until: relax the first sentence only.
        kl.span = JudgeSpan::parse("until:.");
        const GenerationResult until = run(kl, prompt);
        const test::SpanCheck until_check = check_outside_span(prompt, until, after_first_period);
        EXPECT_GT(until_check.outside, 10) << prompt;
        EXPECT_EQ(until_check.not_target_choice, 0) << prompt;
        EXPECT_EQ(until.stats.outside_span, until_check.outside) << prompt;
        EXPECT_GT(until.stats.span_blocked, 0) << prompt;  // the judge wanted to relax out there

        // think: open after the last "upon" (the first prompt opens it), closed by "park" (the second
        // prompt's, or the first story's third sentence).
        kl.span = JudgeSpan::parse("think:upon,park");
        const GenerationResult think = run(kl, prompt);
        const auto closed = [&prompt](const std::string& text) {
            const std::string all = prompt + text;
            const size_t open = all.rfind("upon"), close = all.rfind("park");
            return open == std::string::npos || (close != std::string::npos && close > open);
        };
        const test::SpanCheck think_check = check_outside_span(prompt, think, closed);
        EXPECT_GT(think_check.outside, 10) << prompt;
        EXPECT_EQ(think_check.not_target_choice, 0) << prompt;
        if (prompt.find("upon") != std::string::npos) {
            EXPECT_GT(think.stats.relaxed_accepted, 0) << prompt;
        }

        // The check has teeth: relaxing the whole output leaves the target's choice after the period.
        kl.span = JudgeSpan{};
        const GenerationResult all = run(kl, prompt);
        EXPECT_GT(all.stats.relaxed_accepted, 0) << prompt;
        EXPECT_GT(check_outside_span(prompt, all, after_first_period).not_target_choice, 0) << prompt;
    }
}

}  // namespace
}  // namespace klspec
