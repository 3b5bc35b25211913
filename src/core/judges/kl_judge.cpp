#include "core/judges/kl_judge.h"

namespace klspec {

bool KlJudge::relaxed(const DraftPosition& position) {
    last_ = kl_stats(position.target_logits, position.draft_logits);
    return last_.target_max_probability <= confidence_mask_ && last_.kl < threshold_;
}

}  // namespace klspec
