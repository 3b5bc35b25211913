#include "core/judge_factory.h"

#include <array>

#include <fmt/format.h>

#include "core/error.h"
#include "core/judges/autojudge.h"
#include "core/judges/entropy_judges.h"
#include "core/judges/fly_judge.h"
#include "core/judges/fsd_judge.h"
#include "core/judges/kl_judge.h"
#include "core/judges/probability_judges.h"
#include "core/judges/topk_judge.h"

namespace klspec {
namespace {

// τ of the rules whose threshold is any non-negative number (checked by make_judge).
double threshold_of(const JudgeOptions& options) { return *options.threshold; }

// τ of the rules whose threshold is a probability.
double probability_threshold_of(const JudgeOptions& options) {
    if (*options.threshold > 1)
        throw JudgeOptionError(JudgeField::Threshold, fmt::format("judge {}: threshold must be in [0, 1], got {}",
                                                                  options.rule, *options.threshold));
    return *options.threshold;
}

// What `read` returns, its klspec::Error (a file or name it could not read) refused as the given field's.
template <class Read>
auto read_field(JudgeField field, Read read) {
    try {
        return read();
    } catch (const Error& e) {
        throw JudgeOptionError(field, e.what());
    }
}

const std::array kRules{
    JudgeRule{.name = VanillaJudge::kName,
              .summary = "lossless speculative decoding (no relaxation)",
              .make = [](const JudgeOptions&) -> std::unique_ptr<Judge> { return std::make_unique<VanillaJudge>(); }},
    JudgeRule{.name = KlJudge::kName,
              .summary = "accept when max p <= mask and KL(p || q) < threshold (the paper)",
              .threshold = Knob::Required,
              .needs_draft_model = true,
              .make = [](const JudgeOptions& o) -> std::unique_ptr<Judge> {
                  return std::make_unique<KlJudge>(threshold_of(o), o.confidence_mask);
              }},
    JudgeRule{
        .name = TopKJudge::kName,
        .summary = "accept when the draft token is in the target's top-K",
        .topk = Knob::Required,
        .make = [](const JudgeOptions& o) -> std::unique_ptr<Judge> { return std::make_unique<TopKJudge>(*o.topk); }},
    JudgeRule{.name = TargetEntropyJudge::kName,
              .summary = "accept when the target's entropy H(p) >= threshold",
              .threshold = Knob::Required,
              .make = [](const JudgeOptions& o) -> std::unique_ptr<Judge> {
                  return std::make_unique<TargetEntropyJudge>(threshold_of(o));
              }},
    JudgeRule{.name = DraftEntropyJudge::kName,
              .summary = "accept when the draft's entropy H(q) <= threshold",
              .threshold = Knob::Required,
              .needs_draft_model = true,
              .make = [](const JudgeOptions& o) -> std::unique_ptr<Judge> {
                  return std::make_unique<DraftEntropyJudge>(threshold_of(o));
              }},
    JudgeRule{.name = ProbabilityThresholdJudge::kName,
              .summary = "accept when p(d) >= threshold (SGLang's acceptance threshold)",
              .threshold = Knob::Required,
              .make = [](const JudgeOptions& o) -> std::unique_ptr<Judge> {
                  return std::make_unique<ProbabilityThresholdJudge>(probability_threshold_of(o));
              }},
    JudgeRule{.name = TopNDeltaJudge::kName,
              .summary = "accept when d is in the target's top-N (--judge-topk) and p_top1 - p(d) <= threshold "
                         "(TensorRT-LLM's relaxed acceptance)",
              .threshold = Knob::Required,
              .topk = Knob::Required,
              .make = [](const JudgeOptions& o) -> std::unique_ptr<Judge> {
                  return std::make_unique<TopNDeltaJudge>(*o.topk, probability_threshold_of(o));
              }},
    JudgeRule{.name = TypicalJudge::kName,
              .summary = "accept when p(d) > min(threshold, sqrt(threshold) exp(-H(p))) (Medusa's typical acceptance)",
              .threshold = Knob::Required,
              .make = [](const JudgeOptions& o) -> std::unique_ptr<Judge> {
                  return std::make_unique<TypicalJudge>(probability_threshold_of(o));
              }},
    JudgeRule{.name = FlyJudge::kName,
              .summary = "accept when the entropy of the target's top-3 probabilities >= threshold and the next W "
                         "drafts match the target (--judge-window W, default 6; vLLM's FLy)",
              .threshold = Knob::Required,
              .window = Knob::Optional,
              .make = [](const JudgeOptions& o) -> std::unique_ptr<Judge> {
                  return std::make_unique<FlyJudge>(threshold_of(o), o.window.value_or(FlyJudge::kDefaultWindow));
              }},
    JudgeRule{.name = FsdJudge::kName,
              .summary = "accept when a divergence D(p, q) < threshold, no mask (--judge-divergence kl, reverse-kl "
                         "(default) or js; Fuzzy Speculative Decoding)",
              .threshold = Knob::Required,
              .divergence = Knob::Optional,
              .needs_draft_model = true,
              .make = [](const JudgeOptions& o) -> std::unique_ptr<Judge> {
                  const Divergence divergence =
                      o.divergence ? read_field(JudgeField::Divergence, [&] { return parse_divergence(*o.divergence); })
                                   : FsdJudge::kDefaultDivergence;
                  return std::make_unique<FsdJudge>(threshold_of(o), divergence);
              }},
    JudgeRule{.name = AutoJudge::kName,
              .summary = "accept when a trained head on hidden states scores < threshold",
              .threshold = Knob::Optional,
              .head = Knob::Required,
              .needs_draft_model = true,
              .make = [](const JudgeOptions& o) -> std::unique_ptr<Judge> {
                  AutoJudgeHead head = read_field(JudgeField::Head, [&] { return AutoJudgeHead::load(o.head_path); });
                  const double tau = o.threshold.value_or(head.threshold);
                  if (!(tau >= 0 && tau <= 1))
                      throw JudgeOptionError(
                          JudgeField::Threshold,
                          fmt::format("judge {}: threshold must be in [0, 1], got {}", AutoJudge::kName, tau));
                  return std::make_unique<AutoJudge>(std::move(head), tau);
              }},
};

// Refuses a knob the rule does not take and requires one it needs.
void check_knob(const JudgeOptions& options, JudgeField field, Knob knob, bool given, std::string_view what) {
    if (given && knob == Knob::Refused)
        throw JudgeOptionError(field, fmt::format("judge {} does not take {}", options.rule, what));
    if (!given && knob == Knob::Required)
        throw JudgeOptionError(field, fmt::format("judge {} needs {}", options.rule, what));
}

const JudgeRule& find_rule(const std::string& name) {
    for (const JudgeRule& rule : kRules)
        if (rule.name == name) return rule;
    std::string names;
    for (const JudgeRule& rule : kRules) names += fmt::format("{}{}", names.empty() ? "" : ", ", rule.name);
    throw JudgeOptionError(JudgeField::Rule, fmt::format("unknown judge '{}' (one of: {})", name, names));
}

}  // namespace

std::span<const JudgeRule> judge_rules() { return kRules; }

std::unique_ptr<Judge> make_judge(const JudgeOptions& options) {
    const JudgeRule& rule = find_rule(options.rule);
    if (!(options.confidence_mask > 0 && options.confidence_mask <= 1))
        throw JudgeOptionError(JudgeField::ConfidenceMask,
                               fmt::format("the confidence mask must be in (0, 1], got {}", options.confidence_mask));
    if (options.max_tv) {
        if (options.rule != KlJudge::kName)
            throw JudgeOptionError(JudgeField::MaxTv,
                                   fmt::format("judge {} does not take --max-tv (kl only)", options.rule));
        if (options.threshold)
            throw JudgeOptionError(JudgeField::MaxTv, "give --judge-threshold or --max-tv, not both");
        if (!(*options.max_tv > 0 && *options.max_tv <= 1))
            throw JudgeOptionError(JudgeField::MaxTv,
                                   fmt::format("--max-tv must be in (0, 1], got {}", *options.max_tv));
        JudgeOptions with_threshold = options;
        with_threshold.threshold = max_tv_threshold(*options.max_tv);
        with_threshold.max_tv.reset();
        return make_judge(with_threshold);
    }
    check_knob(options, JudgeField::Threshold, rule.threshold, options.threshold.has_value(),
               "a threshold (--judge-threshold)");
    check_knob(options, JudgeField::TopK, rule.topk, options.topk.has_value(), "K (--judge-topk)");
    check_knob(options, JudgeField::Head, rule.head, !options.head_path.empty(), "a head file (--judge-head)");
    check_knob(options, JudgeField::Window, rule.window, options.window.has_value(), "a window (--judge-window)");
    check_knob(options, JudgeField::Divergence, rule.divergence, options.divergence.has_value(),
               "a divergence (--judge-divergence)");
    if (options.window && *options.window < 1)
        throw JudgeOptionError(JudgeField::Window,
                               fmt::format("judge {}: the window must be >= 1, got {}", options.rule, *options.window));
    // Rules whose threshold is required take any τ >= 0; autojudge checks its own range.
    if (rule.threshold == Knob::Required && !(*options.threshold >= 0))  // NaN fails too
        throw JudgeOptionError(JudgeField::Threshold, fmt::format("judge {}: threshold must be >= 0, got {}",
                                                                  options.rule, *options.threshold));
    if (options.topk && *options.topk < 1)
        throw JudgeOptionError(JudgeField::TopK,
                               fmt::format("judge {}: K must be >= 1, got {}", options.rule, *options.topk));
    return rule.make(options);
}

}  // namespace klspec
