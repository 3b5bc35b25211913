// Shared by the model-families tests (docs/model-families.md): the generated models, a judge wrapper that
// checks the rows every rule is shown, and running every rule of the table.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "build_paths.h"
#include "core/judge_factory.h"
#include "engine/speculative_decoder.h"
#include "test_support.h"

namespace klspec::test {

inline const std::string kFamilyModels = build_paths::family_model_dir;
inline std::string family_target(const std::string& family) { return kFamilyModels + "/" + family + "-target.gguf"; }
inline std::string family_draft(const std::string& family) { return kFamilyModels + "/" + family + "-draft.gguf"; }
inline std::string pair_model(const std::string& name) { return kFamilyModels + "/pairs/" + name + ".gguf"; }

inline ContextOptions family_context(bool hidden_states = false) {
    ContextOptions options;
    options.n_ctx = 256;
    options.n_threads = 1;
    options.hidden_states = hidden_states;
    return options;
}

// γ 4 (fixed), at most `max_tokens`, greedy unless a temperature is given.
inline GenerationOptions family_options(int32_t max_tokens, float temperature = 0.0f, uint64_t seed = 0) {
    GenerationOptions options;
    options.max_tokens = max_tokens;
    options.draft_max = 4;
    options.sampling.temperature = temperature;
    options.sampling.seed = seed;
    return options;
}

// Passes every call on to a rule of the table, checking that each position it is shown has both rows of
// `ids` entries (the vocabulary size, or the ids two vocabularies share) and a token among them.
class CheckedJudge final : public Judge {
public:
    CheckedJudge(std::unique_ptr<Judge> inner, size_t ids) : inner_(std::move(inner)), ids_(ids) {}
    std::string_view name() const override { return inner_->name(); }
    JudgeDecision decide(const DraftPosition& position) const override {
        ++calls;
        EXPECT_EQ(position.target_logits.size(), ids_) << name();
        if (inner_->needs_distributions()) {
            EXPECT_EQ(position.draft_logits.size(), ids_) << name();
        }
        EXPECT_LT(static_cast<size_t>(position.draft_token), ids_) << name();
        return inner_->decide(position);
    }
    bool needs_hidden_states() const override { return inner_->needs_hidden_states(); }
    bool needs_distributions() const override { return inner_->needs_distributions(); }
    std::optional<double> total_variation_bound() const override { return inner_->total_variation_bound(); }
    int32_t lookahead() const override { return inner_->lookahead(); }
    mutable std::atomic<int64_t> calls{0};

private:
    std::unique_ptr<Judge> inner_;
    size_t ids_;
};

// Options for every rule of the table that relax often enough to matter on random-weight models; autojudge
// gets a head over n_embd-wide hidden states that relaxes where one of the target's
// coordinates is positive (one that normal text moves: make_family_model.py's layout).
inline std::vector<JudgeOptions> every_rule(int32_t n_embd) {
    std::vector<JudgeOptions> all;
    for (const JudgeRule& rule : judge_rules()) {
        JudgeOptions options;
        options.rule = std::string(rule.name);
        if (rule.threshold == Knob::Required)
            options.threshold = options.rule == "kl" || options.rule.find("entropy") != std::string::npos ? 1.0 : 0.05;
        if (rule.topk == Knob::Required) options.topk = 5;
        if (rule.window != Knob::Refused) options.window = 1;
        if (rule.head == Knob::Required) {
            std::vector<double> zeros(2 * size_t(n_embd), 0.0), ones(2 * size_t(n_embd), 1.0),
                weights(2 * size_t(n_embd), 0.0);
            weights[size_t(n_embd) + size_t(n_embd) / 2] = -4.0;  // a target coordinate of the normal tokens' half
            const nlohmann::json head = {{"draft_hidden_size", n_embd},
                                         {"target_hidden_size", n_embd},
                                         {"mean", zeros},
                                         {"scale", ones},
                                         {"weights", weights},
                                         {"bias", 0.0},
                                         {"threshold", 0.5}};
            options.head_path = temp_path("family-head-" + std::to_string(n_embd) + ".json");
            std::ofstream(options.head_path) << head.dump();
        }
        all.push_back(options);
    }
    return all;
}

// Every rule in `rules` on `prompts`, greedy and at T 0.8 (`tokens` each, sampling seed `seed`): each sees full
// rows (CheckedJudge) and is consulted, the output stays consistent with its counters, and vanilla relaxes
// nothing. One line per rule under `tag`.
inline void check_every_rule_runs(SpeculativeDecoder& decoder, const std::vector<JudgeOptions>& rules,
                                  const std::vector<std::string>& prompts, size_t n_vocab, int32_t tokens,
                                  uint64_t seed, const std::string& tag) {
    for (const JudgeOptions& rule : rules) {
        auto judge = std::make_shared<CheckedJudge>(make_judge(rule), n_vocab);
        int64_t relaxed = 0, drafted = 0;
        for (const float temperature : {0.0f, 0.8f}) {
            GenerationOptions options = family_options(tokens, temperature, seed);
            options.judge = judge;
            options.cache_prompt = true;  // each prompt prefilled once for all the rules, not once a run
            for (const std::string& prompt : prompts) {
                const GenerationResult result = decoder.generate(prompt, options);
                EXPECT_EQ(result.stats.emitted, static_cast<int64_t>(result.tokens.size())) << tag << " " << rule.rule;
                EXPECT_LE(result.stats.accepted, result.stats.drafted) << tag << " " << rule.rule;
                EXPECT_LE(result.stats.relaxed_accepted, result.stats.accepted) << tag << " " << rule.rule;
                for (const int32_t token : result.tokens) EXPECT_LT(static_cast<size_t>(token), n_vocab);
                relaxed += result.stats.relaxed_accepted;
                drafted += result.stats.drafted;
            }
        }
        EXPECT_GT(judge->calls.load(), 0) << tag << ": the " << rule.rule << " rule was never consulted";
        if (rule.rule == "vanilla") {
            EXPECT_EQ(relaxed, 0) << tag;
        }
        std::cout << "[ " << tag << " ] " << rule.rule << ": consulted " << judge->calls.load() << " times, relaxed "
                  << relaxed << " of " << drafted << " drafted\n";
    }
}

// Starts `prompt` on sequence 0 and steps it to the end.
inline GenerationResult generate_tokens(SpeculativeDecoder& decoder, const std::vector<int32_t>& prompt,
                                        const GenerationOptions& options) {
    Sequence seq = decoder.start(0, prompt, options);
    Sequence* const batch[] = {&seq};
    while (!seq.finished()) decoder.step(batch);
    return seq.take_result();
}

}  // namespace klspec::test
