// The relaxed-acceptance rules production engines ship, as baselines for the KL rule (issue 10). Each
// reads only the target's probability of d_i, p = p_i(d_i), and p_i's shape:
//   prob-threshold (SGLang's speculative_accept_threshold_single):  relaxed iff p >= t
//   topn-delta     (TensorRT-LLM's MTP relaxed acceptance):         relaxed iff d_i is in p_i's top-N and
//                                                                    p_top1 - p <= delta
//   typical        (Medusa's typical acceptance):                   relaxed iff p > min(eps, alpha exp(-H(p_i))),
//                                                                    alpha = sqrt(eps) as Medusa recommends
// A token truncated away from p_i (p = 0) is never relaxed.
#pragma once

#include <cstdint>

#include "core/judge.h"

namespace klspec {

class ProbabilityThresholdJudge final : public Judge {
public:
    static constexpr std::string_view kName = "prob-threshold";
    explicit ProbabilityThresholdJudge(double threshold) : threshold_(threshold) {}
    std::string_view name() const override { return kName; }
    // statistic: p_i(d_i).
    JudgeDecision decide(const DraftPosition& position) const override;

private:
    double threshold_;
};

class TopNDeltaJudge final : public Judge {
public:
    static constexpr std::string_view kName = "topn-delta";
    TopNDeltaJudge(int32_t n, double delta) : n_(n), delta_(delta) {}
    std::string_view name() const override { return kName; }
    // statistic: p_top1 - p_i(d_i).
    JudgeDecision decide(const DraftPosition& position) const override;

private:
    int32_t n_;
    double delta_;
};

class TypicalJudge final : public Judge {
public:
    static constexpr std::string_view kName = "typical";
    explicit TypicalJudge(double epsilon);
    std::string_view name() const override { return kName; }
    // statistic: p_i(d_i).
    JudgeDecision decide(const DraftPosition& position) const override;

private:
    double epsilon_;
    double alpha_;
};

}  // namespace klspec
