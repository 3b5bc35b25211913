#include "core/judged_position.h"

#include <algorithm>

#include "core/distribution_stats.h"
#include "core/sampling.h"

namespace klspec {

// Declared in judge.h (what a judge sees); here beside describe_position, its other user.
DraftPosition over_common_ids(const DraftPosition& position) {
    if (position.draft_logits.empty() || position.draft_logits.size() == position.target_logits.size()) return position;
    const size_t common = std::min(position.target_logits.size(), position.draft_logits.size());
    DraftPosition cut = position;
    cut.target_logits = position.target_logits.first(common);
    cut.draft_logits = position.draft_logits.first(common);
    cut.draft_probabilities = {};
    return cut;
}

JudgedPosition describe_position(const DraftPosition& position) {
    // The statistics over the common ids (as the judges see them); the target's token and the draft's rank
    // over the target's whole vocabulary (a draft token outside it ranks last).
    const DraftPosition common = over_common_ids(position);
    JudgedPosition described;
    described.draft_token = position.draft_token;
    described.target_token = argmax(position.target_logits);
    const DistributionStats target = distribution_stats(common.target_logits);
    described.target_entropy = target.entropy;
    described.target_max_probability = target.max_probability;
    described.has_draft_distribution = !common.draft_logits.empty();
    if (described.has_draft_distribution) {
        described.kl = kl_stats(common.target_logits, common.draft_logits).kl;
        described.draft_entropy = distribution_stats(common.draft_logits).entropy;
    }
    described.draft_rank = static_cast<size_t>(position.draft_token) < position.target_logits.size()
                               ? logit_rank(position.target_logits, position.draft_token)
                               : static_cast<int64_t>(position.target_logits.size());
    return described;
}

}  // namespace klspec
