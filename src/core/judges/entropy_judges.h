// The entropy rules: relax where the target is uncertain ("target-entropy": H(p_i) >= τ) or where the
// draft is confident ("draft-entropy": H(q_i) <= τ). Entropies in nats.
#pragma once

#include "core/judge.h"

namespace klspec {

class TargetEntropyJudge final : public Judge {
public:
    explicit TargetEntropyJudge(double threshold) : threshold_(threshold) {}

    std::string name() const override { return "target-entropy"; }
    bool relaxed(const DraftPosition& position) override;

    // H(p_i) at the last judged position.
    double last_statistic() const { return last_entropy_; }

private:
    double threshold_;
    double last_entropy_ = 0;
};

class DraftEntropyJudge final : public Judge {
public:
    explicit DraftEntropyJudge(double threshold) : threshold_(threshold) {}

    std::string name() const override { return "draft-entropy"; }
    bool relaxed(const DraftPosition& position) override;

    // H(q_i) at the last judged position.
    double last_statistic() const { return last_entropy_; }

private:
    double threshold_;
    double last_entropy_ = 0;
};

}  // namespace klspec
