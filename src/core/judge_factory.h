// The table of verification rules (docs/design.md, "The verification rules"): each rule's name, its knobs
// and its constructor in one row, with the checks a user's command line or request needs. Every failure
// is a klspec::Error with a one-line message.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/judge.h"
#include "core/judge_span.h"

namespace klspec {

struct JudgeOptions {
    std::string rule = "vanilla";
    // τ: required by kl, target-entropy and draft-entropy (>= 0) and by prob-threshold, topn-delta (δ) and
    // typical (ε) (in [0, 1]); optional for autojudge (in [0, 1], default: the head file's); refused by vanilla
    // and topk.
    std::optional<double> threshold;
    // K >= 1: required by topk and topn-delta (N), refused by the other rules.
    std::optional<int32_t> topk;
    // ε in (0, 1]: kl only, instead of τ: τ = 2ε², so that TV(p, q) < ε at every relaxed position (Pinsker).
    std::optional<double> max_tv;
    // W >= 1: fly only (default FlyJudge::kDefaultWindow), the drafts after i that must match natively.
    std::optional<int32_t> window;
    // fsd only (default FsdJudge::kDefaultDivergence): "kl", "reverse-kl" or "js".
    std::optional<std::string> divergence;
    // m in (0, 1], used by kl; 1 disables the mask.
    double confidence_mask = 0.9;
    // The AutoJudge head file: required by autojudge, refused by the other rules.
    std::string head_path;
    // Where the rule may relax (every rule; outside, the exact test). Not part of the Judge object: the
    // decoder follows it per sequence (GenerationOptions::judge_span).
    JudgeSpan span;
    // --judge-span was given: a command's own default span (sweep and mine: until the benchmark's answer) yields.
    bool span_given = false;
};

// Whether a rule takes a knob.
enum class Knob { Refused, Optional, Required };

struct JudgeRule {
    std::string_view name;
    std::string_view summary;  // one line for --help
    Knob threshold = Knob::Refused;
    Knob topk = Knob::Refused;
    Knob head = Knob::Refused;
    Knob window = Knob::Refused;
    Knob divergence = Knob::Refused;
    // The rule reads the draft model's q_i or hidden states (Judge::needs_draft_model), so an n-gram draft,
    // which has neither, cannot be judged by it.
    bool needs_draft_model = false;
    // Builds the judge from options whose knobs were checked against the three fields above.
    std::unique_ptr<Judge> (*make)(const JudgeOptions& options) = nullptr;
};

// Every rule make_judge accepts, vanilla first.
std::span<const JudgeRule> judge_rules();

// The JudgeOptions member a make_judge failure is about, so that each front end names the field in its own
// spelling (the server's request fields, the CLI's flags) without reading the message.
enum class JudgeField { Rule, Threshold, TopK, MaxTv, Window, Divergence, ConfidenceMask, Head };
class JudgeOptionError : public Error {
public:
    JudgeOptionError(JudgeField about, const std::string& message) : Error(message), field(about) {}
    JudgeField field;
};

// kl's τ for --max-tv ε: τ = 2ε², so that TV(p, q) < ε at every relaxed position (Pinsker).
inline double max_tv_threshold(double max_tv) { return 2 * max_tv * max_tv; }

// Every failure is a JudgeOptionError naming its field.
std::unique_ptr<Judge> make_judge(const JudgeOptions& options);

}  // namespace klspec
