// "topk": relaxed(i) iff d_i is among the K most likely tokens of p_i (ties ranked by token id, as in
// argmax and top-k truncation) and p_i(d_i) > 0. K = 1 is the greedy rule.
#pragma once

#include <cstdint>

#include "core/judge.h"

namespace klspec {

class TopKJudge final : public Judge {
public:
    static constexpr std::string_view kName = "topk";
    explicit TopKJudge(int32_t k) : k_(k) {}

    std::string_view name() const override { return kName; }
    // statistic: the 0-based rank of d_i in p_i.
    JudgeDecision decide(const DraftPosition& position) const override;

private:
    int32_t k_;
};

}  // namespace klspec
