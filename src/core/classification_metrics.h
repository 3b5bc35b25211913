// Metrics of a binary classifier's scores (AutoJudge's head: label 1 = "important", higher score = more
// likely important). Pure functions over parallel arrays of scores and labels.
#pragma once

#include <span>
#include <vector>

namespace klspec {

// ROC-AUC: the probability that a random positive scores above a random negative (ties count 1/2).
// Throws klspec::Error unless both classes occur.
double roc_auc(std::span<const double> scores, std::span<const int> labels);

struct PrecisionRecall {
    double precision = 0;    // of "score >= threshold" predicted positive; 0 when nothing is predicted positive
    double recall = 0;       // share of positives with score >= threshold
    double below_share = 0;  // share of all rows with score < threshold (what the judge would relax)
};
PrecisionRecall precision_recall_at(std::span<const double> scores, std::span<const int> labels, double threshold);

// The q-quantile (0 <= q <= 1) of `values`, linear between order statistics (numpy's default).
double quantile(std::vector<double> values, double q);

}  // namespace klspec
