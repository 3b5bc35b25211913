#include "core/acceptance.h"

#include <algorithm>
#include <chrono>

namespace klspec {

std::string_view to_string(Verdict verdict) {
    switch (verdict) {
        case Verdict::Accepted: return "accepted";
        case Verdict::Relaxed: return "relaxed";
        case Verdict::Rejected: return "rejected";
    }
    return "unknown";
}

int32_t AcceptanceStep::draw(std::span<const float> shaped_logits, Rng& rng) {
    if (params_.greedy()) return argmax(shaped_logits);
    softmax(shaped_logits, p_);
    return sample_from_weights(p_, rng);
}

bool AcceptanceStep::vanilla_accepts(const DraftPosition& position, Rng& rng, int32_t& replacement) {
    const int32_t d = position.draft_token;
    if (params_.greedy()) {
        replacement = argmax(position.target_logits);
        return replacement == d;
    }
    softmax(position.target_logits, p_);
    // The drafting step already normalised q when it sampled d from it.
    std::span<const float> q = position.draft_probabilities;
    if (q.empty()) {
        softmax(position.draft_logits, q_);
        q = q_;
    }
    // A token outside the target's vocabulary has p(d) = 0: always rejected.
    const float p_d = static_cast<size_t>(d) < p_.size() ? p_[d] : 0.0f;
    const float q_d = q[d];
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    // u < p/q written without the division; q_d > 0 because d was drawn from q.
    if (p_d >= q_d || uniform(rng) * q_d < p_d) return true;

    // The residual max(0, p - q) is what makes the output distribution exactly p.
    double residual_mass = 0.0;
    // Over the target's ids; where the draft's vocabulary is smaller, q is 0 beyond it.
    for (size_t v = 0; v < p_.size(); ++v) {
        p_[v] = std::max(0.0f, p_[v] - (v < q.size() ? q[v] : 0.0f));
        residual_mass += p_[v];
    }
    // A zero residual means p == q up to rounding, where rejection has probability ~0; draw from p.
    replacement = residual_mass > 0.0 ? sample_from_weights(p_, rng) : draw(position.target_logits, rng);
    return false;
}

bool AcceptanceStep::next_drafts_match(int32_t i, int32_t n_drafted, PositionSource& positions) const {
    const int32_t window = judge_->lookahead();
    if (i + window >= n_drafted) return false;  // fewer than W drafts follow
    for (int32_t j = i + 1; j <= i + window; ++j) {
        const DraftPosition next = positions.position(j);
        if (argmax(next.target_logits) != next.draft_token) return false;
    }
    return true;
}

StepOutcome AcceptanceStep::run(int32_t n_drafted, PositionSource& positions,
                                std::span<const float> bonus_target_logits, Rng& rng) {
    using Clock = std::chrono::steady_clock;
    StepOutcome outcome;
    verdicts_.clear();
    for (int32_t i = 0; i < n_drafted; ++i) {
        const DraftPosition current = positions.position(i);
        int32_t replacement = -1;
        if (vanilla_accepts(current, rng, replacement)) {
            ++outcome.accepted;
            verdicts_.push_back({Verdict::Accepted, false, {}, current.in_span});
            continue;
        }
        if (static_cast<size_t>(current.draft_token) >= current.target_logits.size()) {
            // Outside the target's vocabulary: the target cannot emit it, so no rule may keep it.
            verdicts_.push_back({Verdict::Rejected, false, {}, current.in_span});
            outcome.next_token = replacement;
            return outcome;
        }
        const auto start = Clock::now();
        JudgeDecision decision = judge_->decide(over_common_ids(current));
        if (decision.relaxed && judge_->lookahead() > 0) decision.relaxed = next_drafts_match(i, n_drafted, positions);
        outcome.judge_seconds += std::chrono::duration<double>(Clock::now() - start).count();
        if (decision.relaxed && current.in_span) {
            ++outcome.accepted;
            ++outcome.relaxed_accepted;
            verdicts_.push_back({Verdict::Relaxed, true, decision});
            continue;
        }
        outcome.span_blocked += decision.relaxed;
        verdicts_.push_back({Verdict::Rejected, true, decision, current.in_span});
        outcome.next_token = replacement;
        return outcome;
    }
    outcome.next_token = draw(bonus_target_logits, rng);
    return outcome;
}

}  // namespace klspec
