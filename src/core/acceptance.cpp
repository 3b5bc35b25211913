#include "core/acceptance.h"

#include <algorithm>
#include <chrono>

#include "core/block_verification.h"
#include "core/error.h"

namespace klspec {

std::string_view to_string(Verification verification) {
    return verification == Verification::Block ? "block" : "token";
}

Verification parse_verification(std::string_view text) {
    if (text == "token") return Verification::Token;
    if (text == "block") return Verification::Block;
    throw Error("verification must be token or block, got '" + std::string(text) + "'");
}

std::string_view to_string(Verdict verdict) {
    switch (verdict) {
        case Verdict::Accepted:
            return "accepted";
        case Verdict::Relaxed:
            return "relaxed";
        case Verdict::Rejected:
            return "rejected";
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
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    if (position.draft_logits.empty() && position.draft_probabilities.empty()) {
        // A point-mass draft (n-gram): accept with probability p(d), else draw from p with d removed, which
        // is normalize(max(0, p - q)) for q = δ_d.
        const float p_d = static_cast<size_t>(d) < p_.size() ? p_[d] : 0.0f;
        if (uniform(rng) < p_d) return true;
        if (static_cast<size_t>(d) < p_.size()) p_[d] = 0.0f;
        replacement = sample_from_weights(p_, rng);
        return false;
    }
    // The drafting step already normalised q when it sampled d from it.
    std::span<const float> q = position.draft_probabilities;
    if (q.empty()) {
        softmax(position.draft_logits, q_);
        q = q_;
    }
    // A token outside the target's vocabulary has p(d) = 0: always rejected.
    const float p_d = static_cast<size_t>(d) < p_.size() ? p_[d] : 0.0f;
    const float q_d = q[d];
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

StepOutcome AcceptanceStep::run_block(int32_t n_drafted, PositionSource& positions,
                                      std::span<const float> bonus_target_logits, Rng& rng) {
    // p_0..p_γ and q_0..q_{γ-1} as doubles over one index range: where the vocabularies differ in size, the
    // missing ids have probability 0 (as in the token test). The rows keep their capacity between steps.
    const size_t gamma = static_cast<size_t>(n_drafted);
    if (block_target_.size() < gamma + 1) block_target_.resize(gamma + 1);
    if (block_draft_.size() < gamma) block_draft_.resize(gamma);
    block_drafts_.clear();
    size_t size = bonus_target_logits.size();
    for (size_t i = 0; i < gamma; ++i) {
        const DraftPosition position = positions.position(static_cast<int32_t>(i));
        softmax(position.target_logits, p_);
        block_target_[i].assign(p_.begin(), p_.end());
        std::span<const float> q = position.draft_probabilities;
        if (q.empty() && !position.draft_logits.empty()) {
            softmax(position.draft_logits, q_);
            q = q_;
        }
        if (q.empty()) {  // a point-mass draft (n-gram)
            block_draft_[i].assign(std::max(p_.size(), static_cast<size_t>(position.draft_token) + 1), 0.0);
            block_draft_[i][static_cast<size_t>(position.draft_token)] = 1.0;
        } else {
            block_draft_[i].assign(q.begin(), q.end());
        }
        block_drafts_.push_back(position.draft_token);
        size = std::max({size, p_.size(), block_draft_[i].size()});
    }
    // No bonus row (the caller needs no token after a fully accepted block): p_γ only enters through h_γ = w_γ.
    block_target_[gamma].clear();
    if (!bonus_target_logits.empty()) {
        softmax(bonus_target_logits, p_);
        block_target_[gamma].assign(p_.begin(), p_.end());
    }
    for (size_t i = 0; i <= gamma; ++i) block_target_[i].resize(size, 0.0);
    for (size_t i = 0; i < gamma; ++i) block_draft_[i].resize(size, 0.0);
    const std::vector<std::span<const double>> target(block_target_.begin(), block_target_.begin() + n_drafted + 1);
    const std::vector<std::span<const double>> draft(block_draft_.begin(), block_draft_.begin() + n_drafted);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    block_uniforms_.resize(gamma);
    for (double& u : block_uniforms_) u = uniform(rng);
    const BlockVerdict verdict = verify_block(block_drafts_, target, draft, block_uniforms_);

    StepOutcome outcome;
    outcome.accepted = verdict.accepted;
    for (int32_t i = 0; i < verdict.accepted; ++i) verdicts_.push_back({Verdict::Accepted, false, {}, true});
    if (verdict.accepted < n_drafted) verdicts_.push_back({Verdict::Rejected, false, {}, true});
    if (verdict.accepted == n_drafted && bonus_target_logits.empty()) return outcome;
    p_.assign(verdict.next.begin(), verdict.next.end());
    outcome.next_token = sample_from_weights(p_, rng);
    return outcome;
}

StepOutcome AcceptanceStep::run(int32_t n_drafted, PositionSource& positions,
                                std::span<const float> bonus_target_logits, Rng& rng) {
    using Clock = std::chrono::steady_clock;
    StepOutcome outcome;
    verdicts_.clear();
    if (verification_ == Verification::Block && !params_.greedy() && n_drafted > 0)
        return run_block(n_drafted, positions, bonus_target_logits, rng);
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
