#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/accuracy_loss.h"
#include "core/error.h"

namespace klspec {
namespace {

TEST(AccuracyLoss, HandComputedInterval) {
    // d = 1, 0, 0, -1, 1: mean 0.2; sample variance (1+0+0+1+1 - 5*0.04)/4 = 0.7; half-width 1.96*sqrt(0.7/5).
    const std::vector<bool> reference{true, true, false, false, true};
    const std::vector<bool> candidate{false, true, false, true, false};
    const AccuracyLoss l = paired_accuracy_loss(reference, candidate);
    EXPECT_EQ(l.problems, 5u);
    EXPECT_NEAR(l.loss, 0.2, 1e-12);
    EXPECT_NEAR(l.high - l.loss, 1.96 * std::sqrt(0.7 / 5), 1e-12);
    EXPECT_NEAR(l.loss - l.low, 1.96 * std::sqrt(0.7 / 5), 1e-12);
}

TEST(AccuracyLoss, IdenticalVerdictsHaveNoLossAndNoSpread) {
    const std::vector<bool> verdicts{true, false, true};
    const AccuracyLoss l = paired_accuracy_loss(verdicts, verdicts);
    EXPECT_EQ(l.loss, 0.0);
    EXPECT_EQ(l.low, 0.0);
    EXPECT_EQ(l.high, 0.0);
}

TEST(AccuracyLoss, ABetterCandidateHasNegativeLoss) {
    const std::vector<bool> reference{false, false, true, true};
    const std::vector<bool> candidate{true, true, true, true};
    EXPECT_NEAR(paired_accuracy_loss(reference, candidate).loss, -0.5, 1e-12);
}

TEST(AccuracyLoss, MismatchedOrEmptyInputIsAnError) {
    const std::vector<bool> two{true, false};
    const std::vector<bool> one{true};
    EXPECT_THROW(paired_accuracy_loss(two, one), Error);
    EXPECT_THROW(paired_accuracy_loss({}, {}), Error);
}

// Wilson score intervals by hand: centre (p + z²/2n) / (1 + z²/n), half width
// z / (1 + z²/n) · √(p(1 − p)/n + z²/4n²). 0/10 gives [0, 0.2775], the value printed in published tables.
TEST(WilsonProportion, HandComputed) {
    const Proportion most = wilson_proportion(196, 200);
    EXPECT_DOUBLE_EQ(most.value, 0.98);
    EXPECT_NEAR(most.low, 0.9497121, 1e-6);
    EXPECT_NEAR(most.high, 0.9921957, 1e-6);
    const Proportion all = wilson_proportion(200, 200);  // the normal approximation would give [1, 1]
    EXPECT_NEAR(all.low, 0.9811540, 1e-6);
    EXPECT_DOUBLE_EQ(all.high, 1.0);
    const Proportion none = wilson_proportion(0, 10);
    EXPECT_DOUBLE_EQ(none.low, 0.0);
    EXPECT_NEAR(none.high, 0.2775402, 1e-6);
    EXPECT_THROW(wilson_proportion(0, 0), Error);
    EXPECT_THROW(wilson_proportion(3, 2), Error);
}

}  // namespace
}  // namespace klspec
