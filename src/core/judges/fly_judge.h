// "fly" (FLy, vLLM's lossy verification, AMD-AGI/FLy): a native rejection at i is overridden when the
// entropy of the target's top-3 probabilities at i (renormalised over those 3) is >= θ AND the next W
// drafts d_{i+1}..d_{i+W} are all accepted natively. decide() tests the entropy; the acceptance step tests
// the W drafts after i (Judge::lookahead). "Natively" there means d_j = argmax p_j, in sampling mode too, so
// that looking ahead draws no random numbers. With γ <= W the rule never fires (FLy requires W < γ).
#pragma once

#include <cstdint>

#include "core/judge.h"

namespace klspec {

class FlyJudge final : public Judge {
public:
    static constexpr std::string_view kName = "fly";
    static constexpr int32_t kDefaultWindow = 6;  // FLy's default W
    FlyJudge(double entropy_threshold, int32_t window) : entropy_threshold_(entropy_threshold), window_(window) {}

    std::string_view name() const override { return kName; }
    // statistic: the entropy of p_i's top-3 probabilities, renormalised (at most ln 3).
    JudgeDecision decide(const DraftPosition& position) const override;
    int32_t lookahead() const override { return window_; }

private:
    double entropy_threshold_;
    int32_t window_;
};

}  // namespace klspec
