#include "core/judges/fly_judge.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

namespace klspec {

JudgeDecision FlyJudge::decide(const DraftPosition& position) const {
    // The three largest logits in one pass, largest first.
    std::array<float, 3> top;
    top.fill(-std::numeric_limits<float>::infinity());
    for (float logit : position.target_logits) {
        if (logit <= top[2]) continue;
        top[2] = logit;
        std::sort(top.begin(), top.end(), std::greater<float>());
    }
    double sum = 0, weighted = 0;
    for (float logit : top) {
        if (logit == -std::numeric_limits<float>::infinity()) continue;
        const double w = std::exp(double(logit) - double(top[0]));
        sum += w;
        weighted += w * (double(logit) - double(top[0]));
    }
    const double entropy = std::log(sum) - weighted / sum;  // H of w / sum
    return {entropy >= entropy_threshold_, entropy};
}

}  // namespace klspec
