// "topk": relaxed(i) iff d_i is among the K most likely tokens of p_i (ties ranked by token id, as in
// argmax and top-k truncation) and p_i(d_i) > 0. K = 1 is the greedy rule.
#pragma once

#include <cstdint>

#include "core/judge.h"

namespace klspec {

class TopKJudge final : public Judge {
public:
    explicit TopKJudge(int32_t k) : k_(k) {}

    std::string name() const override { return "topk"; }
    bool relaxed(const DraftPosition& position) override;

    // The 0-based rank of d_i in p_i at the last judged position.
    int64_t last_statistic() const { return last_rank_; }

private:
    int32_t k_;
    int64_t last_rank_ = 0;
};

}  // namespace klspec
