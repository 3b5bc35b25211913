// "autojudge": a logistic-regression head on hidden states (the AutoJudge baseline, docs/design.md).
// relaxed(i) iff s_i = σ(w · ((f_i − μ) / σ_f) + b) < τ, with f_i = [h_draft,i ; h_target,i];
// s_i is the head's probability that the mismatch at i is "important". Head file: docs/autojudge-head.md.
#pragma once

#include <string>
#include <vector>

#include "core/judge.h"

namespace klspec {

struct AutoJudgeHead {
    size_t draft_hidden_size = 0;
    size_t target_hidden_size = 0;
    // Per feature (draft_hidden_size + target_hidden_size entries, draft first).
    std::vector<double> mean;
    std::vector<double> scale;
    std::vector<double> weights;
    double bias = 0;
    double threshold = 0.5;

    // Parses and validates a head file; throws klspec::Error naming the file and the problem.
    static AutoJudgeHead load(const std::string& path);
    // Throws klspec::Error unless the sizes agree and every number is usable.
    void validate() const;
};

class AutoJudge final : public Judge {
public:
    // The threshold τ is the head's own unless the caller overrides it.
    AutoJudge(AutoJudgeHead head, double threshold);

    static constexpr std::string_view kName = "autojudge";
    std::string_view name() const override { return kName; }
    // statistic: the head's score s_i.
    JudgeDecision decide(const DraftPosition& position) const override;
    bool needs_hidden_states() const override { return true; }

    double threshold() const { return threshold_; }

private:
    AutoJudgeHead head_;
    double threshold_;
};

}  // namespace klspec
