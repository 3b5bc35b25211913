// "kl", the paper's rule: relaxed(i) iff max_v p_i(v) <= m and D_KL(p_i ‖ q_i) < τ. The confidence
// mask m keeps the exact rule where the target is sure of itself; m = 1 disables it.
#pragma once

#include "core/distribution_stats.h"
#include "core/judge.h"

namespace klspec {

class KlJudge final : public Judge {
public:
    KlJudge(double threshold, double confidence_mask) : threshold_(threshold), confidence_mask_(confidence_mask) {}

    std::string name() const override { return "kl"; }
    bool relaxed(const DraftPosition& position) override;

    // The KL and max p of the last judged position.
    double last_statistic() const { return last_.kl; }
    double last_max_probability() const { return last_.target_max_probability; }

private:
    double threshold_;
    double confidence_mask_;
    KlStats last_;
};

}  // namespace klspec
