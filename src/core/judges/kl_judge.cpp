#include "core/judges/kl_judge.h"

#include <cmath>

#include "core/distribution_stats.h"

namespace klspec {

JudgeDecision KlJudge::decide(const DraftPosition& position) const {
    const KlStats stats = kl_stats(position.target_logits, position.draft_logits);
    // m = 1 must switch the mask off even for a one-hot target, whose max p rounds to exactly 1.
    const bool target_unsure = confidence_mask_ >= 1.0 || stats.target_max_probability <= confidence_mask_;
    return {target_unsure && stats.kl < threshold_, stats.kl};
}

std::optional<double> KlJudge::total_variation_bound() const { return std::sqrt(threshold_ / 2); }

}  // namespace klspec
