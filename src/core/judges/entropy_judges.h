// The entropy rules: relax where the target is uncertain ("target-entropy": H(p_i) >= τ) or where the
// draft is confident ("draft-entropy": H(q_i) <= τ). Entropies in nats.
#pragma once

#include "core/judge.h"

namespace klspec {

class TargetEntropyJudge final : public Judge {
public:
    static constexpr std::string_view kName = "target-entropy";
    explicit TargetEntropyJudge(double threshold) : threshold_(threshold) {}

    std::string_view name() const override { return kName; }
    // statistic: H(p_i).
    JudgeDecision decide(const DraftPosition& position) const override;

private:
    double threshold_;
};

class DraftEntropyJudge final : public Judge {
public:
    static constexpr std::string_view kName = "draft-entropy";
    explicit DraftEntropyJudge(double threshold) : threshold_(threshold) {}

    std::string_view name() const override { return kName; }
    bool needs_draft_distribution() const override { return true; }
    // statistic: H(q_i).
    JudgeDecision decide(const DraftPosition& position) const override;

private:
    double threshold_;
};

}  // namespace klspec
