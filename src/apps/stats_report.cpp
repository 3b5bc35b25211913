#include "apps/stats_report.h"

#include <fmt/format.h>

namespace klspec {

nlohmann::json stats_to_json(const GenerationStats& s) {
    return {{"prompt_tokens", s.prompt_tokens},
            {"emitted", s.emitted},
            {"target_calls", s.target_calls},
            {"draft_calls", s.draft_calls},
            {"draft_prefilled_tokens", s.draft_prefilled_tokens},
            {"drafted", s.drafted},
            {"accepted", s.accepted},
            {"relaxed_accepted", s.relaxed_accepted},
            {"draft_length_sum", s.draft_length_sum},
            {"mean_draft_length", s.mean_draft_length()},
            {"target_only_steps", s.target_only_steps},
            {"ngram_drafted", s.ngram_drafted},
            {"ngram_accepted", s.ngram_accepted},
            {"outside_span", s.outside_span},
            {"span_blocked", s.span_blocked},
            {"mat", s.mat()},
            {"acceptance_rate", s.acceptance_rate()},
            {"tokens_per_second", s.tokens_per_second()},
            {"prompt_tokens_per_second", s.prompt_tokens_per_second()},
            {"seconds",
             {{"prompt", s.prompt_seconds},
              {"draft", s.draft_seconds},
              {"verify", s.verify_seconds},
              {"judge", s.judge_seconds},
              {"other", s.other_seconds},
              {"llama_decode", s.llama_decode_seconds},
              {"decode", s.decode_seconds()}}}};
}

std::string format_stats(const GenerationStats& s) {
    const std::string span =
        s.outside_span + s.span_blocked > 0
            ? fmt::format("judge span: {} tokens emitted outside it (exact), {} relaxations refused there\n",
                          s.outside_span, s.span_blocked)
            : "";
    const std::string ngram =
        s.ngram_drafted > 0 ? fmt::format("n-gram drafts: {} drafted, {} accepted ({:.1f} %)\n", s.ngram_drafted,
                                          s.ngram_accepted, 100.0 * double(s.ngram_accepted) / double(s.ngram_drafted))
                            : "";
    return span + ngram +
           fmt::format(
               "emitted {} tokens in {} target calls: MAT {:.2f}\n"
               "draft: {} drafted, {} accepted ({:.1f} %), {} relaxed, {} draft calls; mean gamma {:.2f}, {} "
               "target-only steps\n"
               "speed: {:.1f} tokens/s decode, {:.1f} tokens/s prompt ({} tokens)\n"
               "time (ms): draft {:.1f}, verify {:.1f}, judge {:.1f}, other {:.1f}; of which llama_decode {:.1f}, "
               "klspec {:.1f} ({:.1f} us per drafted token)\n",
               s.emitted, s.target_calls, s.mat(), s.drafted, s.accepted, 100.0 * s.acceptance_rate(),
               s.relaxed_accepted, s.draft_calls, s.mean_draft_length(), s.target_only_steps, s.tokens_per_second(),
               s.prompt_tokens_per_second(), s.prompt_tokens, 1e3 * s.draft_seconds, 1e3 * s.verify_seconds,
               1e3 * s.judge_seconds, 1e3 * s.other_seconds, 1e3 * s.llama_decode_seconds, 1e3 * s.engine_seconds(),
               s.drafted ? 1e6 * s.engine_seconds() / double(s.drafted) : 0.0);
}

void add_draft_policy(nlohmann::json& out, DraftPolicy policy, const BatchCostCurve& verify,
                      const BatchCostCurve& draft) {
    out["draft_policy"] = draft_policy_name(policy);
    if (policy != DraftPolicy::Auto) return;
    const auto milliseconds = [](const BatchCostCurve& curve) {
        nlohmann::json by_size = nlohmann::json::object();
        for (const auto& [size, seconds] : curve.points()) by_size[std::to_string(size)] = 1e3 * seconds;
        return by_size;
    };
    out["step_costs"] = {{"verify_ms_by_batch", milliseconds(verify)},
                         {"verify_rebuild_ms", 1e3 * verify.rebuild_seconds()},
                         {"draft_ms_by_batch", milliseconds(draft)},
                         {"draft_rebuild_ms", 1e3 * draft.rebuild_seconds()}};
}

nlohmann::json judged_position_to_json(const JudgedPosition& p) {
    nlohmann::json row = {{"seq", p.sequence_id},
                          {"pos", p.position},
                          {"draft_token", p.draft_token},
                          {"target_token", p.target_token},
                          {"kl", p.kl},
                          {"target_entropy", p.target_entropy},
                          {"draft_entropy", p.draft_entropy},
                          {"target_max_p", p.target_max_probability},
                          {"draft_rank", p.draft_rank},
                          {"verdict", to_string(p.verdict.verdict)},
                          {"draft_length", p.draft_length},
                          {"acceptance_estimate", p.acceptance_estimate}};
    if (!p.has_draft_distribution) row["kl"] = row["draft_entropy"] = nullptr;  // an n-gram draft has no q
    if (p.verdict.judged) row["judge_statistic"] = p.verdict.decision.statistic;
    if (!p.verdict.in_span) row["in_span"] = false;
    return row;
}

nlohmann::json step_cost_to_json(const StepCostRecord& step) {
    const auto predicted = [&step](double value) {
        return step.predicted ? nlohmann::json(value) : nlohmann::json(nullptr);
    };
    return {{"lengths", step.lengths},
            {"emitted", step.emitted},
            {"verify_ms", 1e3 * step.verify_seconds},
            {"draft_ms", 1e3 * step.draft_seconds},
            {"predicted_ms", predicted(1e3 * step.predicted_seconds)},
            {"predicted_tokens", predicted(step.predicted_tokens)},
            {"target_only_ms", predicted(1e3 * step.target_only_seconds)}};
}

std::string format_quality_bound(const Judge& judge, const GenerationStats& stats) {
    const std::optional<double> bound = judge.total_variation_bound();
    if (!bound) return "";
    return fmt::format(
        "bound: TV(p, q) < {:.4g} at each of the {} relaxed positions (Pinsker: KL < {:.4g}); when "
        "sampling, each relaxed token's distribution is within that of the target's\n",
        *bound, stats.relaxed_accepted, 2 * *bound * *bound);
}

void add_quality_bound(nlohmann::json& out, const Judge& judge) {
    if (const std::optional<double> bound = judge.total_variation_bound()) out["tv_bound"] = *bound;
}

}  // namespace klspec
