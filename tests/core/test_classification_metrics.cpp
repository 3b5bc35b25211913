#include <gtest/gtest.h>

#include "core/classification_metrics.h"
#include "core/error.h"

namespace klspec {
namespace {

TEST(RocAuc, HandComputed) {
    // Pairs (positive, negative): (0.35 vs 0.1) win, (0.35 vs 0.4) loss, (0.8 vs both) wins: 3 of 4.
    const std::vector<double> scores = {0.1, 0.4, 0.35, 0.8};
    const std::vector<int> labels = {0, 0, 1, 1};
    EXPECT_DOUBLE_EQ(roc_auc(scores, labels), 0.75);
    // A tie between a positive and a negative counts one half: (0.5 vs 0.5) 1/2, (0.9 vs 0.5) 1.
    EXPECT_DOUBLE_EQ(roc_auc(std::vector<double>{0.5, 0.5, 0.9}, std::vector<int>{0, 1, 1}), 0.75);
    EXPECT_DOUBLE_EQ(roc_auc(std::vector<double>{0.9, 0.1}, std::vector<int>{0, 1}), 0.0);
}

TEST(RocAuc, NeedsBothLabels) { EXPECT_THROW(roc_auc(std::vector<double>{0.1, 0.2}, std::vector<int>{1, 1}), Error); }

TEST(PrecisionRecall, HandComputed) {
    const std::vector<double> scores = {0.1, 0.4, 0.35, 0.8, 0.6};
    const std::vector<int> labels = {0, 0, 1, 1, 0};
    const PrecisionRecall pr = precision_recall_at(scores, labels, 0.35);  // flagged: 0.4, 0.35, 0.8, 0.6
    EXPECT_DOUBLE_EQ(pr.precision, 0.5);
    EXPECT_DOUBLE_EQ(pr.recall, 1.0);
    EXPECT_DOUBLE_EQ(pr.below_share, 0.2);
    EXPECT_DOUBLE_EQ(precision_recall_at(scores, labels, 2.0).precision, 0.0);
}

TEST(Quantile, InterpolatesLikeNumpy) {
    EXPECT_DOUBLE_EQ(quantile({3, 1, 2, 4}, 0.5), 2.5);
    EXPECT_DOUBLE_EQ(quantile({3, 1, 2, 4}, 0.0), 1.0);
    EXPECT_DOUBLE_EQ(quantile({3, 1, 2, 4}, 1.0), 4.0);
    EXPECT_DOUBLE_EQ(quantile({10, 20}, 0.25), 12.5);
}

}  // namespace
}  // namespace klspec
