#include "core/judges/entropy_judges.h"

#include "core/distribution_stats.h"

namespace klspec {

JudgeDecision TargetEntropyJudge::decide(const DraftPosition& position) const {
    const double entropy = distribution_stats(position.target_logits).entropy;
    return {entropy >= threshold_, entropy};
}

JudgeDecision DraftEntropyJudge::decide(const DraftPosition& position) const {
    const double entropy = distribution_stats(position.draft_logits).entropy;
    return {entropy <= threshold_, entropy};
}

}  // namespace klspec
