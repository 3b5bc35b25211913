// llama.cpp's pair rule (common_speculative_are_compatible; engine/model.h: vocabulary_difference): on pairs
// that differ in one field each, klspec accepts exactly the pairs llama-speculative-simple accepts; and
// pairs whose sizes differ (up to 128) decode with every rule over the ids both vocabularies have
// (docs/judges.md, "Pairs whose vocabularies differ").
#include <gtest/gtest.h>

#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "build_paths.h"
#include "engine/speculative_decoder.h"
#include "family_support.h"

namespace klspec {
namespace {

using test::pair_model;

constexpr int32_t kPadAfter = 1000;  // make_family_models.py: the first pad token follows this one clearly

struct PairCase {
    std::string target, draft;
    std::optional<bool> compatible;  // what llama.cpp's rule says, read off its source; unset: only compare
    std::string why;
};

const std::vector<PairCase> kCases = {
    {pair_model("target"), pair_model("draft"), true, "equal vocabularies"},
    {pair_model("target"), pair_model("draft-pad128"), true, "draft 128 tokens longer"},
    {pair_model("target-pad128"), pair_model("draft"), true, "target 128 tokens longer"},
    {pair_model("target"), pair_model("draft-pad129"), false, "draft 129 tokens longer"},
    {pair_model("target"), pair_model("draft-eos"), true, "EOS differs, not added"},
    {pair_model("target"), pair_model("draft-add-eos"), false, "only the draft adds EOS"},
    {pair_model("target-add-eos"), pair_model("draft-add-eos"), true, "both add the same EOS"},
    {pair_model("target-add-eos"), pair_model("draft-add-eos-eos"), false, "EOS differs, added"},
    {pair_model("target"), pair_model("draft-bos"), false, "BOS differs, added"},
    {pair_model("target"), pair_model("draft-text1000"), false, "text of token 1000 differs"},
    {pair_model("target"), pair_model("draft-text3"), true, "text of token 3 differs (ids below 5 unchecked)"},
    {test::family_target("llama-spm"), test::family_draft("phi-3"), std::nullopt, "Llama 2 target, Phi-3 draft"},
    {test::family_target("qwen2"), test::family_draft("qwen35"), std::nullopt, "Qwen2 target, Qwen3.5 draft"},
    {test::family_target("qwen2"), test::family_draft("llama-bpe"), std::nullopt, "Qwen2 target, Llama 3 draft"},
    {test::family_target("phi-3"), test::family_draft("qwen2"), std::nullopt, "Phi-3 target (SPM), Qwen2 draft (BPE)"},
};

TEST(PairRule, KlspecAcceptsExactlyThePairsLlamaCppAccepts) {
    const std::string llama_spec = std::string(build_paths::llama_tools_dir) + "/llama-speculative-simple";
    std::ostringstream table;
    table << "| case | llama.cpp's rule | llama-speculative-simple | its exit status | klspec generate | klspec's "
             "message |\n"
          << "|---|---|---|---|---|---|\n";
    for (const PairCase& c : kCases) {
        // llama.cpp's verdict as it logs it (-v): "vocab_cmpt = 1" or "= 0". What happens after it is another
        // matter: with a padded draft it aborts once the draft proposes a pad token (it feeds it to the target).
        const test::CommandResult llama =
            test::run_command(llama_spec + " -m " + c.target + " -md " + c.draft +
                              " --spec-type draft-simple -p \"Hello world, how are you\" -n 4 -t 1 -c 256 -v");
        const bool llama_accepts = llama.errors.find("vocab_cmpt = 1") != std::string::npos;
        const bool llama_refuses = llama.errors.find("vocab_cmpt = 0") != std::string::npos;
        ASSERT_NE(llama_accepts, llama_refuses) << c.why << ": no verdict from llama-speculative-simple:\n"
                                                << llama.errors;
        const test::CommandResult klspec =
            test::run_command(test::kCli + " generate -m " + c.target + " -md " + c.draft +
                              " -p \"Hello world, how are you\" -n 4 -t 1 -c 256");
        const bool klspec_refuses = klspec.exit_code != 0;
        if (klspec_refuses) {
            EXPECT_EQ(klspec.exit_code, 1) << c.why;
            EXPECT_NE(klspec.errors.find("vocabularies differ"), std::string::npos) << c.why << ": " << klspec.errors;
        }
        const Model target(c.target, ModelOptions{{}, std::nullopt, /*vocab_only=*/true});
        const Model draft(c.draft, ModelOptions{{}, std::nullopt, /*vocab_only=*/true});
        const std::optional<std::string> difference = vocabulary_difference(target, draft);
        EXPECT_EQ(klspec_refuses, llama_refuses) << c.why << ": " << klspec.errors;
        EXPECT_EQ(difference.has_value(), klspec_refuses) << c.why;
        if (c.compatible) {
            EXPECT_EQ(!llama_refuses, *c.compatible) << c.why;
        }
        table << "| " << c.why << " | " << (c.compatible ? (*c.compatible ? "accept" : "refuse") : "—") << " | "
              << (llama_refuses ? "refuses" : "accepts") << " | " << llama.exit_code << " | "
              << (klspec_refuses ? "refuses" : "accepts") << " | " << difference.value_or("") << " |\n";
    }
    std::cout << table.str();
}

TEST(PairRule, TheMessageNamesTheFirstDifference) {
    const auto difference = [](const std::string& target, const std::string& draft) {
        const ModelOptions vocab_only{{}, std::nullopt, true};
        return vocabulary_difference(Model(pair_model(target), vocab_only), Model(pair_model(draft), vocab_only))
            .value_or("none");
    };
    EXPECT_EQ(difference("target", "draft-pad129"), "size 32193 vs 32064, more than 128 apart");
    EXPECT_EQ(difference("target", "draft-add-eos"), "add EOS true vs false");
    EXPECT_EQ(difference("target-add-eos", "draft-add-eos-eos"), "EOS token 32007 vs 32000");
    EXPECT_EQ(difference("target", "draft-bos"), "BOS token 32007 vs 1");
    EXPECT_EQ(difference("target", "draft-text1000"), "text of token 1000: 'klspec' vs 'ied'");
    EXPECT_EQ(difference("target", "draft-text3"), "none");
}

// Both directions of a padded pair, with a prompt after which the longer model's first pad token is its
// clear choice: a padded draft proposes an id the target lacks (rejected); a padded target emits an id the
// draft lacks (the sequence goes on target-only).
TEST(PairRule, PaddedPairsDecodeWithEveryRuleOverTheCommonIds) {
    for (const auto& [target_name, draft_name] :
         {std::pair("target", "draft-pad128"), std::pair("target-pad128", "draft")}) {
        SCOPED_TRACE(std::string(target_name) + " + " + draft_name);
        const Model target(pair_model(target_name));
        const Model draft(pair_model(draft_name));
        const int32_t n_target = target.n_vocab(), n_draft = draft.n_vocab();
        const size_t common = static_cast<size_t>(std::min(n_target, n_draft));
        SpeculativeDecoder decoder(target, &draft, test::family_context(/*hidden_states=*/true));
        int64_t foreign_drafts = 0;
        decoder.set_observer([&](const JudgedPosition& p) {
            if (p.draft_token >= n_target) {
                ++foreign_drafts;
                EXPECT_EQ(p.verdict.verdict, Verdict::Rejected);
            }
        });
        std::vector<int32_t> prompt = target.tokenize("Hello world", /*add_bos=*/true);
        prompt.push_back(kPadAfter);
        // Vanilla, greedy: target-only output (up to near ties), whatever the draft proposes.
        const test::GreedyReference reference = test::greedy_reference(target, prompt, 24, test::family_context());
        GenerationOptions options = test::family_options(24);
        int64_t divergences = 0;
        const GenerationResult vanilla = test::generate_tokens(decoder, prompt, options);
        test::check_equal_up_to_near_tie(reference, vanilla.tokens, "vanilla", divergences);
        if (n_draft > n_target) {
            EXPECT_GT(foreign_drafts, 0) << "the padded draft never proposed a pad token";
        }
        if (n_target > n_draft) {
            EXPECT_GE(vanilla.tokens.front(), n_draft) << "the padded target did not emit its pad token";
            // A prompt that holds a token the draft lacks decodes target-only from the start.
            std::vector<int32_t> foreign_prompt = prompt;
            foreign_prompt.push_back(n_draft + 5);
            const GenerationResult result = test::generate_tokens(decoder, foreign_prompt, options);
            test::check_equal_up_to_near_tie(test::greedy_reference(target, foreign_prompt, 24, test::family_context()),
                                             result.tokens, "prompt with a pad token", divergences);
            EXPECT_EQ(result.stats.drafted, 0);
            // Beside a sequence that drafts, under the automatic draft length: its first step times draft
            // batches on a token the draft can read.
            ContextOptions two = test::family_context();
            two.n_sequences = 2;
            SpeculativeDecoder pair_decoder(target, &draft, two);
            GenerationOptions automatic = options;
            automatic.draft_policy = DraftPolicy::Auto;
            Sequence blind = pair_decoder.start(0, foreign_prompt, automatic);
            Sequence drafting = pair_decoder.start(1, target.tokenize("Hello world", true), automatic);
            Sequence* const both[] = {&blind, &drafting};
            while (!blind.finished() || !drafting.finished()) pair_decoder.step(both);
            EXPECT_EQ(blind.result().stats.drafted, 0);
            EXPECT_GT(pair_decoder.draft_costs().seconds(1), 0.0) << "the draft's batches were never timed";
        }
        for (const JudgeOptions& rule : test::every_rule(target.n_embd())) {
            auto judge = std::make_shared<test::CheckedJudge>(make_judge(rule), common);
            for (const float temperature : {0.0f, 1.0f}) {
                options.judge = judge;
                options.sampling.temperature = temperature;
                for (const char* text : {"Hello world", "The quick brown fox"}) {
                    std::vector<int32_t> tokens = target.tokenize(text, true);
                    tokens.push_back(kPadAfter);
                    const GenerationResult result = test::generate_tokens(decoder, tokens, options);
                    EXPECT_EQ(result.stats.emitted, static_cast<int64_t>(result.tokens.size())) << rule.rule;
                    for (const int32_t token : result.tokens) EXPECT_LT(token, n_target) << rule.rule;
                }
            }
            EXPECT_GT(judge->calls.load(), 0) << rule.rule << " was never consulted";
        }
        std::cout << "[ padded   ] " << target_name << " (" << n_target << ") + " << draft_name << " (" << n_draft
                  << "): " << foreign_drafts << " draft tokens outside the target's vocabulary, rejected\n";
    }
}

}  // namespace
}  // namespace klspec
