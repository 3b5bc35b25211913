#include "core/judged_position.h"

#include "core/distribution_stats.h"
#include "core/sampling.h"

namespace klspec {

JudgedPosition describe_position(const DraftPosition& position) {
    const KlStats kl = kl_stats(position.target_logits, position.draft_logits);
    JudgedPosition described;
    described.draft_token = position.draft_token;
    described.target_token = argmax(position.target_logits);
    described.kl = kl.kl;
    described.target_entropy = distribution_stats(position.target_logits).entropy;
    described.draft_entropy = distribution_stats(position.draft_logits).entropy;
    described.target_max_probability = kl.target_max_probability;
    described.draft_rank = logit_rank(position.target_logits, position.draft_token);
    return described;
}

}  // namespace klspec
