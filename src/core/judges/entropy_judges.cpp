#include "core/judges/entropy_judges.h"

#include "core/distribution_stats.h"

namespace klspec {

bool TargetEntropyJudge::relaxed(const DraftPosition& position) {
    last_entropy_ = distribution_stats(position.target_logits).entropy;
    return last_entropy_ >= threshold_;
}

bool DraftEntropyJudge::relaxed(const DraftPosition& position) {
    last_entropy_ = distribution_stats(position.draft_logits).entropy;
    return last_entropy_ <= threshold_;
}

}  // namespace klspec
