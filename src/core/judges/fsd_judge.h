// "fsd", Fuzzy Speculative Decoding (Holsman et al., 2025; the rule llama.cpp issue 18688 asks for):
// relaxed(i) iff D(p_i, q_i) < τ, with no confidence mask. Which divergence D is a knob: forward KL
// D_KL(p ‖ q) (the kl rule's statistic, without its mask), reverse KL D_KL(q ‖ p) (what the authors'
// published numbers used, by their TensorRT-LLM PR 12853), or Jensen–Shannon.
#pragma once

#include <string>
#include <string_view>

#include "core/judge.h"

namespace klspec {

enum class Divergence { ForwardKl, ReverseKl, JensenShannon };

// "kl", "reverse-kl", "js"; parse_divergence throws klspec::Error on any other name.
std::string_view divergence_name(Divergence divergence);
Divergence parse_divergence(const std::string& name);

class FsdJudge final : public Judge {
public:
    static constexpr std::string_view kName = "fsd";
    static constexpr Divergence kDefaultDivergence = Divergence::ReverseKl;
    FsdJudge(double threshold, Divergence divergence) : threshold_(threshold), divergence_(divergence) {}

    std::string_view name() const override { return kName; }
    bool needs_draft_distribution() const override { return true; }
    // statistic: D(p_i, q_i).
    JudgeDecision decide(const DraftPosition& position) const override;
    // Pinsker in either direction: TV <= sqrt(KL / 2); for JS, TV(p, q) = 2 TV(p, m) and Pinsker on each
    // half give TV <= sqrt(2 JS).
    std::optional<double> total_variation_bound() const override;

private:
    double threshold_;
    Divergence divergence_;
};

}  // namespace klspec
