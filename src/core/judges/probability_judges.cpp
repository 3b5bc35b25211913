#include "core/judges/probability_judges.h"

#include <algorithm>
#include <cmath>

#include "core/distribution_stats.h"

namespace klspec {
namespace {

// p_i(d_i) from the shaped logits and their statistics (0 for a token truncated away: logit -inf).
double probability_of_draft_token(const DraftPosition& position, const DistributionStats& stats) {
    return std::exp(double(position.target_logits[static_cast<size_t>(position.draft_token)]) - stats.log_normalizer);
}

}  // namespace

JudgeDecision ProbabilityThresholdJudge::decide(const DraftPosition& position) const {
    const double p = probability_of_draft_token(position, distribution_stats(position.target_logits));
    return {p > 0 && p >= threshold_, p};
}

JudgeDecision TopNDeltaJudge::decide(const DraftPosition& position) const {
    const DistributionStats stats = distribution_stats(position.target_logits);
    const double p = probability_of_draft_token(position, stats);
    const double gap = stats.max_probability - p;
    const bool in_top_n = logit_rank(position.target_logits, position.draft_token) < n_;
    return {p > 0 && in_top_n && gap <= delta_, gap};
}

TypicalJudge::TypicalJudge(double epsilon) : epsilon_(epsilon), alpha_(std::sqrt(epsilon)) {}

JudgeDecision TypicalJudge::decide(const DraftPosition& position) const {
    const DistributionStats stats = distribution_stats(position.target_logits);
    const double p = probability_of_draft_token(position, stats);
    return {p > 0 && p > std::min(epsilon_, alpha_ * std::exp(-stats.entropy)), p};
}

}  // namespace klspec
