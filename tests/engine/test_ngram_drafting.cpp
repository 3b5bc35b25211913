// Drafting with llama.cpp's n-gram drafters (engine/ngram_drafter.h): alone or chained before the draft
// model, greedy decoding stays target-only decoding up to proven near ties, with every drafter type and
// with the automatic draft length; rules that read the draft model are refused up front.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/judge_factory.h"
#include "engine/ngram_drafter.h"
#include "engine/speculative_decoder.h"
#include "test_support.h"

namespace klspec {
namespace {

constexpr int32_t kTokens = 64;

ContextOptions test_context() {
    ContextOptions options;
    options.n_ctx = 512;
    options.n_threads = 1;
    return options;
}

// Sizes small enough for stories260K's short, repetitive stories to hit.
NgramOptions ngram_options(std::vector<std::string> types) {
    NgramOptions options;
    options.types = std::move(types);
    options.size_n = 2;
    options.size_m = 8;
    options.mod_n_match = 3;
    options.mod_n_min = 1;
    options.mod_n_max = 16;
    return options;
}

// Story openings followed by the target's own continuation: stories260K's stories repeat their phrases, so
// every type finds drafts that hit (ngram-cache learns from the prompt alone).
std::vector<std::string> repetitive_prompts(const Model& target) {
    SpeculativeDecoder target_only(target, nullptr, test_context());
    GenerationOptions options;
    options.max_tokens = 48;
    std::vector<std::string> prompts;
    for (const std::string& opening : test::story_prompts(8))
        prompts.push_back(opening + target_only.generate(opening, options).text);
    return prompts;
}

// Decodes every prompt at γ 4 (fixed) and under the Auto policy (γ ≤ 16) and checks the greedy guarantee:
// each judged position is accepted exactly when its draft is the verification argmax, and the output is
// target-only output up to a near tie. Returns the stats summed over all runs.
GenerationStats expect_lossless(const Model& target, SpeculativeDecoder& decoder, const std::string& label) {
    std::vector<JudgedPosition> judged;
    decoder.set_observer([&](const JudgedPosition& p) { judged.push_back(p); });
    GenerationStats total;
    int64_t divergences = 0;
    for (const std::string& prompt : repetitive_prompts(target)) {
        const test::GreedyReference reference = test::greedy_reference(target, prompt, kTokens, test_context());
        for (const DraftPolicy policy : {DraftPolicy::Fixed, DraftPolicy::Auto}) {
            GenerationOptions options;
            options.max_tokens = kTokens;
            options.draft_policy = policy;
            options.draft_max = policy == DraftPolicy::Fixed ? 4 : 16;
            judged.clear();
            const GenerationResult result = decoder.generate(prompt, options);
            const std::string where = label + ", " + std::string(draft_policy_name(policy)) + ", prompt: " + prompt;
            for (const JudgedPosition& p : judged) {
                EXPECT_EQ(p.verdict.verdict == Verdict::Accepted, p.draft_token == p.target_token) << where;
                EXPECT_NE(p.verdict.verdict, Verdict::Relaxed) << where;
            }
            test::check_equal_up_to_near_tie(reference, result.tokens, where, divergences);
            EXPECT_LE(result.stats.ngram_accepted, result.stats.accepted) << where;
            EXPECT_LE(result.stats.ngram_drafted, result.stats.drafted) << where;
            total += result.stats;
        }
    }
    return total;
}

TEST(NgramDrafting, EveryTypeAloneIsLossless) {
    const Model target(test::kTargetModel, test::offload());
    for (const std::string_view type : ngram_type_names()) {
        SCOPED_TRACE(std::string(type));
        SpeculativeDecoder decoder(target, nullptr, test_context(), ngram_options({std::string(type)}));
        ASSERT_TRUE(decoder.has_ngram_drafter());
        const GenerationStats stats = expect_lossless(target, decoder, std::string(type));
        // Without a draft model every draft is the n-gram's, and some were found and kept.
        EXPECT_EQ(stats.ngram_drafted, stats.drafted);
        EXPECT_EQ(stats.draft_calls, 0);
        EXPECT_GT(stats.ngram_drafted, 0);
        EXPECT_GT(stats.ngram_accepted, 0);
    }
}

TEST(NgramDrafting, ChainedBeforeTheDraftModelIsLosslessAndBothDraft) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ8, test::offload());
    SpeculativeDecoder decoder(target, &draft, test_context(), ngram_options({"ngram-simple", "ngram-mod"}));
    const GenerationStats stats = expect_lossless(target, decoder, "ngram-simple,ngram-mod,draft-simple");
    EXPECT_GT(stats.ngram_drafted, 0);
    EXPECT_GT(stats.drafted, stats.ngram_drafted) << "the draft model never drafted where the n-grams found nothing";
    EXPECT_GT(stats.draft_calls, 0);
}

// t(b) = fixed + per_token·b milliseconds at batch sizes 1..256.
BatchCostCurve linear_curve(double fixed, double per_token) {
    BatchCostCurve curve;
    for (int32_t b = 1; b <= 256; ++b) curve.record(b, (fixed + per_token * b) * 1e-3);
    return curve;
}

TEST(NgramDrafting, TheCostModelDraftsWithTheDrafterThatPaysMore) {
    // Chained, llama.cpp drafts with the n-gram whenever it finds something; the automatic choice compares
    // the two drafters' expected tokens per second and, on stories260K, where its Q8_0 copy drafts far
    // better than the n-gram, mostly lets the draft model draft, for more tokens per target call.
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ8, test::offload());
    const auto run = [&](DraftPolicy policy) {
        SpeculativeDecoder decoder(target, &draft, test_context(), ngram_options({"ngram-simple"}));
        decoder.set_step_costs(linear_curve(10.0, 0.05), linear_curve(0.2, 0.0), 0.0);  // a memory-bound target
        GenerationStats stats;
        for (const std::string& prompt : repetitive_prompts(target)) {
            GenerationOptions options;
            options.max_tokens = kTokens;
            options.draft_policy = policy;
            options.draft_max = 8;
            stats += decoder.generate(prompt, options).stats;
        }
        return stats;
    };
    const GenerationStats chained = run(DraftPolicy::Fixed), chosen = run(DraftPolicy::Auto);
    EXPECT_GT(chained.ngram_drafted, 0);
    EXPECT_LT(chosen.ngram_drafted, chained.ngram_drafted / 2);
    EXPECT_GT(chosen.mat(), chained.mat());
}

// One step as the decoder's callback saw it: the tokens it emitted, and how many drafts it judged and kept.
struct ObservedStep {
    std::vector<int32_t> tokens;
    size_t judged = 0;
    size_t accepted = 0;
};

TEST(NgramDrafting, DraftersHearWhatLlamaCppsOwnLoopWouldTellThem) {
    // ngram-map-k drafts at most what was accepted after its key last time, and ngram-mod resets after a
    // streak of low acceptance: what the decoder tells common_speculative_accept changes what they draft
    // next. Replayed as llama-server's loop drives the same drafter (a draft of at most γ from the tokens so
    // far; greedy verification keeps the draft's prefix that the target's tokens repeat; accept(that count)
    // after every non-empty draft), every step must judge and keep exactly what the decoder's step did.
    const Model target(test::kTargetModel, test::offload());
    const std::vector<std::string> prompts = repetitive_prompts(target);
    for (const std::string type : {"ngram-map-k", "ngram-mod"}) {
        SCOPED_TRACE(type);
        SpeculativeDecoder decoder(target, nullptr, test_context(), ngram_options({type}));
        NgramDrafter replay(ngram_options({type}), 1);
        size_t steps_with_drafts = 0;
        for (const std::string& prompt : prompts) {
            GenerationOptions options;
            options.max_tokens = kTokens;
            options.draft_max = 6;
            std::vector<ObservedStep> steps;
            const GenerationResult result = decoder.generate(prompt, options, [&](const StepResult& step) {
                ObservedStep& observed = steps.emplace_back();
                observed.tokens.assign(step.tokens.begin(), step.tokens.end());
                observed.judged = step.verdicts.size();
                for (const PositionVerdict& v : step.verdicts) observed.accepted += v.verdict == Verdict::Accepted;
                return false;
            });
            // The target's tokens, step by step: an end-of-generation token ends the last one (not emitted).
            if (result.stop_reason == StopReason::EndOfGeneration)
                steps.back().tokens.push_back(target.eos_token().value());
            std::vector<int32_t> tokens = target.tokenize(prompt, /*add_bos=*/true, /*parse_special=*/true);
            replay.begin(0, tokens);
            int32_t generated = 0;
            for (size_t s = 0; s < steps.size(); ++s) {
                const ObservedStep& step = steps[s];
                // The decoder's cap: γ, and one token short of -n (the step's own token comes from the target).
                const int32_t cap = std::min(options.draft_max, options.max_tokens - generated - 1);
                std::vector<int32_t> draft;
                if (cap > 0) {
                    replay.request(0, tokens, cap);
                    replay.draft_requested();
                    draft.assign(replay.draft(0).begin(), replay.draft(0).end());
                }
                size_t kept = 0;
                while (kept < draft.size() && kept < step.tokens.size() && draft[kept] == step.tokens[kept]) ++kept;
                const size_t judged = kept < draft.size() ? kept + 1 : kept;
                ASSERT_EQ(step.judged, judged) << "step " << s << " of: " << prompt;
                ASSERT_EQ(step.accepted, kept) << "step " << s << " of: " << prompt;
                if (!draft.empty()) {
                    replay.accept(0, static_cast<int32_t>(kept));
                    ++steps_with_drafts;
                }
                tokens.insert(tokens.end(), step.tokens.begin(), step.tokens.end());
                generated += static_cast<int32_t>(step.tokens.size());
            }
        }
        EXPECT_GT(steps_with_drafts, 20u);
    }
}

TEST(NgramDrafting, TargetOnlyRulesRelaxNgramDrafts) {
    // topk (K 3) reads only the target: with n-gram drafts it may keep a draft the exact test rejects.
    const Model target(test::kTargetModel, test::offload());
    SpeculativeDecoder decoder(target, nullptr, test_context(), ngram_options({"ngram-simple"}));
    JudgeOptions topk;
    topk.rule = "topk";
    topk.topk = 3;
    GenerationStats stats;
    for (const std::string& prompt : repetitive_prompts(target)) {
        GenerationOptions options;
        options.max_tokens = kTokens;
        options.draft_max = 4;
        options.judge = make_judge(topk);
        stats += decoder.generate(prompt, options).stats;
    }
    EXPECT_GT(stats.relaxed_accepted, 0);
}

TEST(NgramDrafting, RulesThatReadTheDraftModelAreRefused) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ8, test::offload());
    ContextOptions context = test_context();
    context.hidden_states = true;
    SpeculativeDecoder decoder(target, &draft, context, ngram_options({"ngram-simple"}));
    for (const auto& [rule, missing] :
         {std::pair<std::string, std::string>{"kl", "distribution q"}, {"draft-entropy", "distribution q"}}) {
        JudgeOptions judge;
        judge.rule = rule;
        judge.threshold = 0.5;
        GenerationOptions options;
        options.judge = make_judge(judge);
        try {
            decoder.start(0, "Once upon a time", options);
            ADD_FAILURE() << rule << " was not refused";
        } catch (const Error& e) {
            const std::string message = e.what();
            EXPECT_NE(message.find(missing), std::string::npos) << message;
            EXPECT_NE(message.find("n-gram"), std::string::npos) << message;
            EXPECT_NE(message.find("topk"), std::string::npos) << "names the rules that work: " << message;
            EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        }
    }
}

TEST(NgramDrafting, BadOptionsAreOneLineErrors) {
    const Model target(test::kTargetModel, test::offload());
    NgramOptions unknown = ngram_options({"ngram-bogus"});
    EXPECT_THROW(SpeculativeDecoder(target, nullptr, test_context(), unknown), Error);
    NgramOptions zero = ngram_options({"ngram-simple"});
    zero.size_n = 0;
    EXPECT_THROW(SpeculativeDecoder(target, nullptr, test_context(), zero), Error);
    NgramOptions mod = ngram_options({"ngram-mod"});
    mod.mod_n_min = 20;
    mod.mod_n_max = 10;
    EXPECT_THROW(SpeculativeDecoder(target, nullptr, test_context(), mod), Error);
    NgramOptions huge = ngram_options({"ngram-simple"});
    huge.size_m = 70000;  // llama.cpp keeps 16 bits: it would wrap to 4464
    EXPECT_THROW(SpeculativeDecoder(target, nullptr, test_context(), huge), Error);
}

}  // namespace
}  // namespace klspec
