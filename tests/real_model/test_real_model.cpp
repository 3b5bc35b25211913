// The engine on a real pretrained model (label real-model, docs/real-model.md): Gemma 3 270M from PyPI
// (scripts/fetch-real-model.sh) as the target and its own first layers, exited early, as the draft
// (tools/real_model/early_exit.py), linked into build_paths::real_model_dir by the fixture real_model.make.
// Greedy speculative output equals target-only output up to the near-tie rule; every rule of the table runs
// at V = 262,144 on the real distributions, greedy and sampled, AutoJudge with a head mined and trained on
// six hand-written multiple-choice problems; chat with llama.cpp's gemma template renders as llama-server
// renders it, into Gemma's markers; streamed text equals the final text; --judge-span confines relaxation.
// The models load repacked, as klspec loads them by default; its patched ggml keeps the greedy comparison exact.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "../model_families/family_support.h"
#include "build_paths.h"
#include "core/judge_factory.h"
#include "engine/chat_template.h"
#include "engine/speculative_decoder.h"
#include "llama.h"
#include "llama_server_prompt.h"
#include "test_support.h"

namespace klspec {
namespace {

const std::string kDir = build_paths::real_model_dir;
const std::string kTarget = kDir + "/target.gguf";
const std::string kDraft = kDir + "/draft.gguf";
const std::string kHead = kDir + "/head.json";

// Ordinary English, and arithmetic in words: what a user's prompts look like.
const std::vector<std::string> kPrompts = {
    "The history of the printing press begins in",
    "Question: Tom has 3 apples and buys 5 more. How many apples does he have now?\nAnswer:"};
constexpr int32_t kTokens = 32;

// The models as the tests load them: as klspec does by default, repacked for the CPU's interleaved kernels, which
// klspec's patched ggml makes give a batch one token's logits (the stock ones left them 2.1 apart on this model).
ModelOptions real_model_options() { return test::offload(); }

ContextOptions real_context(bool hidden_states = false) {
    ContextOptions options;
    options.n_ctx = 512;
    options.n_threads = 2;
    options.hidden_states = hidden_states;
    return options;
}

class RealModel : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        target_ = new Model(kTarget, real_model_options());
        draft_ = new Model(kDraft, real_model_options());
    }
    static void TearDownTestSuite() {
        delete target_;
        delete draft_;
    }
    static Model* target_;
    static Model* draft_;
};
Model* RealModel::target_ = nullptr;
Model* RealModel::draft_ = nullptr;

TEST_F(RealModel, IsGemma3WithItsFullVocabulary) {
    EXPECT_EQ(target_->n_vocab(), 262144);
    EXPECT_EQ(draft_->n_vocab(), 262144);
    EXPECT_EQ(target_->n_embd(), 640);
    char arch[64] = {};
    llama_model_meta_val_str(target_->get(), "general.architecture", arch, sizeof arch);
    EXPECT_STREQ(arch, "gemma3");
    EXPECT_LT(llama_model_n_layer(draft_->get()), llama_model_n_layer(target_->get()));
}

// The premise of the near-tie rule on this model: batched (verification) and one-token (target-only) logits
// differ by less than half its gap.
TEST_F(RealModel, BatchedAndOneTokenLogitsDifferByLessThanHalfTheGap) {
    const ModelOptions options = real_model_options();
    const double difference = test::max_batch_single_difference(kTarget, kPrompts, 24, real_context(), options);
    std::cout << "[ real     ] largest batched - single logit difference " << difference << " ("
              << (options.repack ? "repacked" : "--no-repack") << ")\n";
    EXPECT_LT(difference, test::near_tie_gap() / 2);
}

TEST_F(RealModel, GreedySpeculativeOutputIsTargetOnlyOutputUpToNearTies) {
    SpeculativeDecoder speculative(*target_, draft_, real_context());
    std::vector<JudgedPosition> judged;
    speculative.set_observer([&](const JudgedPosition& p) { judged.push_back(p); });
    int64_t divergences = 0, accepted = 0, drafted = 0;
    for (const std::string& prompt : kPrompts) {
        const test::GreedyReference reference = test::greedy_reference(*target_, prompt, kTokens, real_context());
        GenerationOptions options;
        options.max_tokens = kTokens;
        options.draft_max = 4;
        judged.clear();
        const GenerationResult result = speculative.generate(prompt, options);
        for (const JudgedPosition& p : judged)
            ASSERT_EQ(p.verdict.verdict == Verdict::Accepted, p.draft_token == p.target_token) << prompt;
        if (test::check_equal_up_to_near_tie(reference, result.tokens, prompt, divergences) < 0) {
            EXPECT_EQ(result.text, target_->text(reference.tokens)) << prompt;
        }
        EXPECT_EQ(result.stats.relaxed_accepted, 0);
        accepted += result.stats.accepted;
        drafted += result.stats.drafted;
        // The CLI with its defaults, as a user runs it: the same tokens.
        const test::CommandResult cli =
            test::run_command(test::kCli + " generate -m " + kTarget + " -md " + kDraft + " -p '" + prompt + "' -n " +
                              std::to_string(kTokens) + " -t 2 -c 512 --draft-max 4 --draft-policy fixed --json");
        ASSERT_EQ(cli.exit_code, 0) << cli.errors;
        const std::vector<int32_t> tokens = nlohmann::json::parse(cli.output).at("tokens").get<std::vector<int32_t>>();
        test::check_equal_up_to_near_tie(reference, tokens, "CLI, prompt: " + prompt, divergences);
    }
    std::cout << "[ real     ] acceptance " << accepted << "/" << drafted << ", " << divergences
              << " near-tie divergences\n";
    EXPECT_GT(accepted, 0);
    EXPECT_LT(accepted, drafted);
}

// Every rule of the table at the real vocabulary, greedy and sampled; each is shown full rows and is
// consulted, and the output stays consistent with its counters. AutoJudge reads the fixture's mined head.
TEST_F(RealModel, EveryRuleRunsOnTheRealDistributions) {
    ASSERT_TRUE(std::filesystem::exists(kHead)) << kHead << " is missing: the fixture real_model.make mines it";
    SpeculativeDecoder decoder(*target_, draft_, real_context(/*hidden_states=*/true));
    std::vector<JudgeOptions> rules = test::every_rule(target_->n_embd());
    for (JudgeOptions& rule : rules) {
        if (rule.rule != "autojudge") continue;
        rule.head_path = kHead;
        rule.threshold = 0.5;
    }
    test::check_every_rule_runs(decoder, rules, {kPrompts[1]}, static_cast<size_t>(target_->n_vocab()), 16, 7,
                                "real    ");
}

// The file has no template of its own (it is the pretrained model), so a chat takes llama.cpp's gemma
// format: klspec renders it as llama-server does from the pinned tree's Gemma template, parses its markers
// into Gemma's own special tokens, and counts <end_of_turn> among the end-of-generation tokens. The pretrained
// model itself never closes a turn (it continues the dialogue: measured, printed below), so that the engine
// stops at an EOG token is checked where a model emits one (model-families: every EOG token of Gemma 4's
// vocabulary); here the speculative answer equals the target-only one and holds no marker text.
TEST_F(RealModel, ChatWithTheGemmaTemplateIsLlamaServersRendering) {
    EXPECT_FALSE(target_->chat_template().has_value())
        << "the packaged file now carries a template: test it as its own";
    const std::string jinja = std::string(build_paths::llama_models_dir) + "/templates/google-gemma-2-2b-it.jinja";
    std::ifstream in(jinja);
    ASSERT_TRUE(in) << jinja;
    const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const ChatMessages chat = {
        {"user", "Hi!"}, {"assistant", "Hello. How can I help?"}, {"user", "Name three colours, then stop."}};
    const std::string rendered = ChatTemplate(*target_, "gemma").apply(chat);
    EXPECT_EQ(rendered, test::llama_server_prompt(*target_, source, chat));
    EXPECT_EQ(ChatTemplate(*target_, jinja).apply(chat), rendered);
    const std::vector<int32_t> tokens = target_->tokenize(rendered, /*add_bos=*/true, /*parse_special=*/true);
    const int32_t start_of_turn = target_->tokenize("<start_of_turn>", false, true).at(0);
    const int32_t end_of_turn = target_->tokenize("<end_of_turn>", false, true).at(0);
    EXPECT_EQ(std::count(tokens.begin(), tokens.end(), start_of_turn), 4);  // three turns and the opened one
    EXPECT_EQ(std::count(tokens.begin(), tokens.end(), end_of_turn), 3);
    EXPECT_TRUE(llama_vocab_is_eog(target_->vocab(), end_of_turn));

    SpeculativeDecoder speculative(*target_, draft_, real_context());
    SpeculativeDecoder target_only(*target_, nullptr, real_context());
    const GenerationOptions options = test::family_options(32);
    const GenerationResult spoken = test::generate_tokens(speculative, tokens, options);
    const GenerationResult reference = test::generate_tokens(target_only, tokens, options);
    std::cout << "[ real     ] chat answer (" << to_string(spoken.stop_reason)
              << "): " << nlohmann::json(spoken.text).dump() << "\n";
    EXPECT_EQ(spoken.tokens, reference.tokens);
    EXPECT_EQ(spoken.stop_reason, reference.stop_reason);
    EXPECT_EQ(spoken.text.find("<end_of_turn>"), std::string::npos);
}

TEST_F(RealModel, StreamedTextIsTheFinalText) {
    SpeculativeDecoder decoder(*target_, draft_, real_context());
    for (const std::string& prompt : {kPrompts[0]}) {
        for (const float temperature : {0.0f, 1.0f}) {
            GenerationOptions options = test::family_options(24, temperature, 5);
            std::string streamed;
            int64_t chunks = 0;
            const GenerationResult result = decoder.generate(prompt, options, [&](const StepResult& step) {
                streamed.append(step.text);
                ++chunks;
                return false;
            });
            EXPECT_EQ(streamed, result.text) << prompt;
            EXPECT_GT(chunks, 1);
        }
    }
}

// With a judge span, every token emitted outside it is the target's own greedy choice (KL relaxing nearly
// everything, confined until the output's first letter "e"); without the span the same rule leaves the
// target's choice there (the check has teeth).
TEST_F(RealModel, JudgeSpanConfinesRelaxation) {
    SpeculativeDecoder decoder(*target_, draft_, real_context());
    JudgeOptions kl;
    kl.rule = "kl";
    kl.threshold = 1e6;
    kl.confidence_mask = 1.0;
    const auto after_e = [](const std::string& text) { return text.find('e') != std::string::npos; };
    int outside = 0, unconfined_not_target = 0;
    int64_t blocked = 0;
    for (const std::string& prompt : kPrompts) {
        GenerationOptions options = test::family_options(kTokens);
        options.judge = make_judge(kl);
        options.judge_span = JudgeSpan::parse("until:e");
        const GenerationResult confined = decoder.generate(prompt, options);
        const test::SpanCheck check =
            test::check_outside_span(*target_, prompt, confined.tokens, after_e, real_context());
        EXPECT_EQ(check.not_target_choice, 0) << prompt;
        EXPECT_EQ(confined.stats.outside_span, check.outside) << prompt;
        outside += check.outside;
        blocked += confined.stats.span_blocked;
        options.judge_span = {};
        const GenerationResult everywhere = decoder.generate(prompt, options);
        unconfined_not_target +=
            test::check_outside_span(*target_, prompt, everywhere.tokens, after_e, real_context()).not_target_choice;
    }
    std::cout << "[ real     ] span until:e: " << outside << " tokens outside, " << blocked
              << " relaxations refused there; without the span " << unconfined_not_target << " not the target's\n";
    EXPECT_GT(outside, 0);
    EXPECT_GT(blocked, 0);
    EXPECT_GT(unconfined_not_target, 0);
}

}  // namespace
}  // namespace klspec
