// "kl", the paper's rule: relaxed(i) iff max_v p_i(v) <= m and D_KL(p_i ‖ q_i) < τ. The confidence
// mask m keeps the exact rule where the target is sure of itself; m = 1 disables it.
#pragma once

#include "core/judge.h"

namespace klspec {

class KlJudge final : public Judge {
public:
    static constexpr std::string_view kName = "kl";
    KlJudge(double threshold, double confidence_mask) : threshold_(threshold), confidence_mask_(confidence_mask) {}

    std::string_view name() const override { return kName; }
    bool needs_draft_distribution() const override { return true; }
    // statistic: D_KL(p_i ‖ q_i).
    JudgeDecision decide(const DraftPosition& position) const override;
    std::optional<double> total_variation_bound() const override;

private:
    double threshold_;
    double confidence_mask_;
};

}  // namespace klspec
