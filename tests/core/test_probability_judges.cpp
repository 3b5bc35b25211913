// The production engines' relaxed-acceptance rules on hand-computed distributions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/judge_factory.h"
#include "core/judges/probability_judges.h"
#include "draft_position.h"

namespace klspec {
namespace {

using test::position;

// p = (1/2, 1/4, 1/4): H(p) = 1.5 ln 2, exp(-H) = 2^-1.5 = 0.35355. Thresholds sit 1e-4 either side of
// the exact values: p(d) = 1/4 is computed as exp(-log 4) in floating point.
const float kLog2 = std::log(2.0f);
const std::vector<float> kTarget{kLog2, 0.0f, 0.0f};
const std::vector<float> kDraft{0.0f, 0.0f, 0.0f};

TEST(ProbabilityThresholdJudge, HandComputed) {
    const JudgeDecision at = ProbabilityThresholdJudge(0.2499).decide(position(kTarget, kDraft, 1));
    EXPECT_TRUE(at.relaxed);
    EXPECT_NEAR(at.statistic, 0.25, 1e-7);
    EXPECT_FALSE(ProbabilityThresholdJudge(0.2501).decide(position(kTarget, kDraft, 1)).relaxed);
    // A token truncated away (p = 0) is never relaxed, even at threshold 0.
    const std::vector<float> truncated{kLog2, 0.0f, -std::numeric_limits<float>::infinity()};
    EXPECT_FALSE(ProbabilityThresholdJudge(0.0).decide(position(truncated, kDraft, 2)).relaxed);
}

TEST(TopNDeltaJudge, HandComputed) {
    // d = 1: rank 1 (ties go to the lower id), gap 1/2 - 1/4 = 1/4.
    const JudgeDecision d1 = TopNDeltaJudge(2, 0.2501).decide(position(kTarget, kDraft, 1));
    EXPECT_TRUE(d1.relaxed);
    EXPECT_NEAR(d1.statistic, 0.25, 1e-7);
    EXPECT_FALSE(TopNDeltaJudge(2, 0.2499).decide(position(kTarget, kDraft, 1)).relaxed);  // gap too large
    EXPECT_FALSE(TopNDeltaJudge(1, 0.5).decide(position(kTarget, kDraft, 1)).relaxed);   // not in the top-1
    // d = 2 has the same gap but rank 2: outside the top-2.
    EXPECT_FALSE(TopNDeltaJudge(2, 0.5).decide(position(kTarget, kDraft, 2)).relaxed);
    EXPECT_TRUE(TopNDeltaJudge(3, 0.2501).decide(position(kTarget, kDraft, 2)).relaxed);
}

TEST(TypicalJudge, HandComputed) {
    // ε = 0.09, α = 0.3: min(0.09, 0.3 · 0.35355 = 0.106) = 0.09 < 1/4.
    const JudgeDecision small = TypicalJudge(0.09).decide(position(kTarget, kDraft, 1));
    EXPECT_TRUE(small.relaxed);
    EXPECT_NEAR(small.statistic, 0.25, 1e-7);
    // ε = 0.3, α = 0.5477: min(0.3, 0.1936) < 1/4.
    EXPECT_TRUE(TypicalJudge(0.3).decide(position(kTarget, kDraft, 1)).relaxed);
    // ε = 0.64, α = 0.8: min(0.64, 0.2828) > 1/4.
    EXPECT_FALSE(TypicalJudge(0.64).decide(position(kTarget, kDraft, 1)).relaxed);
}

TEST(ProbabilityJudges, FactoryKnobsAndRanges) {
    JudgeOptions o;
    o.rule = "topn-delta";
    o.threshold = 0.1;
    EXPECT_THROW(make_judge(o), Error);  // needs N
    o.topk = 3;
    EXPECT_EQ(make_judge(o)->name(), "topn-delta");
    o.rule = "typical";
    EXPECT_THROW(make_judge(o), Error);  // does not take K
    o.topk.reset();
    EXPECT_EQ(make_judge(o)->name(), "typical");
    o.rule = "prob-threshold";
    o.threshold = 1.5;
    EXPECT_THROW(make_judge(o), Error);  // a probability
    o.threshold.reset();
    EXPECT_THROW(make_judge(o), Error);  // needs it
}

}  // namespace
}  // namespace klspec
