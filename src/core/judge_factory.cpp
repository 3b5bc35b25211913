#include "core/judge_factory.h"

#include <array>

#include <fmt/format.h>

#include "core/error.h"
#include "core/judges/autojudge.h"
#include "core/judges/entropy_judges.h"
#include "core/judges/kl_judge.h"
#include "core/judges/topk_judge.h"

namespace klspec {
namespace {

constexpr std::array kRules{
    JudgeRuleInfo{"vanilla", "lossless speculative decoding (no relaxation)"},
    JudgeRuleInfo{"kl", "accept when max p <= mask and KL(p || q) < threshold (the paper)"},
    JudgeRuleInfo{"topk", "accept when the draft token is in the target's top-K"},
    JudgeRuleInfo{"target-entropy", "accept when the target's entropy H(p) >= threshold"},
    JudgeRuleInfo{"draft-entropy", "accept when the draft's entropy H(q) <= threshold"},
    JudgeRuleInfo{"autojudge", "accept when a trained head on hidden states scores < threshold"},
};

// The rule's τ: present and >= 0.
double required_threshold(const JudgeOptions& options) {
    if (!options.threshold) throw Error(fmt::format("judge {} needs a threshold (--judge-threshold)", options.rule));
    const double tau = *options.threshold;
    if (!(tau >= 0))  // NaN fails too
        throw Error(fmt::format("judge {}: threshold must be >= 0, got {}", options.rule, tau));
    return tau;
}

void refuse_unused(const JudgeOptions& options, bool uses_threshold, bool uses_topk, bool uses_head) {
    const auto refuse = [&](std::string_view what) {
        throw Error(fmt::format("judge {} does not take {}", options.rule, what));
    };
    if (options.threshold && !uses_threshold) refuse("a threshold (--judge-threshold)");
    if (options.topk && !uses_topk) refuse("K (--judge-topk)");
    if (!options.head_path.empty() && !uses_head) refuse("a head file (--judge-head)");
}

}  // namespace

std::span<const JudgeRuleInfo> judge_rules() { return kRules; }

std::unique_ptr<Judge> make_judge(const JudgeOptions& options) {
    const std::string& rule = options.rule;
    if (!(options.confidence_mask > 0 && options.confidence_mask <= 1))
        throw Error(fmt::format("the confidence mask must be in (0, 1], got {}", options.confidence_mask));
    if (rule == "vanilla") {
        refuse_unused(options, false, false, false);
        return std::make_unique<VanillaJudge>();
    }
    if (rule == "kl") {
        refuse_unused(options, true, false, false);
        return std::make_unique<KlJudge>(required_threshold(options), options.confidence_mask);
    }
    if (rule == "target-entropy") {
        refuse_unused(options, true, false, false);
        return std::make_unique<TargetEntropyJudge>(required_threshold(options));
    }
    if (rule == "draft-entropy") {
        refuse_unused(options, true, false, false);
        return std::make_unique<DraftEntropyJudge>(required_threshold(options));
    }
    if (rule == "topk") {
        refuse_unused(options, false, true, false);
        if (!options.topk) throw Error("judge topk needs K (--judge-topk)");
        if (*options.topk < 1) throw Error(fmt::format("judge topk: K must be >= 1, got {}", *options.topk));
        return std::make_unique<TopKJudge>(*options.topk);
    }
    if (rule == "autojudge") {
        refuse_unused(options, true, false, true);
        if (options.head_path.empty()) throw Error("judge autojudge needs a head file (--judge-head)");
        AutoJudgeHead head = AutoJudgeHead::load(options.head_path);
        const double tau = options.threshold.value_or(head.threshold);
        if (!(tau >= 0 && tau <= 1))
            throw Error(fmt::format("judge autojudge: threshold must be in [0, 1], got {}", tau));
        return std::make_unique<AutoJudge>(std::move(head), tau);
    }
    std::string names;
    for (const JudgeRuleInfo& info : kRules) names += fmt::format("{}{}", names.empty() ? "" : ", ", info.name);
    throw Error(fmt::format("unknown judge '{}' (one of: {})", rule, names));
}

}  // namespace klspec
