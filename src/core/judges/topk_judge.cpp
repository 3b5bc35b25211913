#include "core/judges/topk_judge.h"

#include <limits>

#include "core/distribution_stats.h"

namespace klspec {

JudgeDecision TopKJudge::decide(const DraftPosition& position) const {
    const int64_t rank = logit_rank(position.target_logits, position.draft_token);
    // A token truncated away from p (logit -inf) is never relaxed, however large K is.
    const bool possible =
        position.target_logits[static_cast<size_t>(position.draft_token)] > -std::numeric_limits<float>::infinity();
    return {possible && rank < k_, static_cast<double>(rank)};
}

}  // namespace klspec
