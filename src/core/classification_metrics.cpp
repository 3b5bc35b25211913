#include "core/classification_metrics.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace klspec {

double roc_auc(std::span<const double> scores, std::span<const int> labels) {
    if (scores.size() != labels.size()) throw Error("roc_auc: scores and labels differ in length");
    // Mann-Whitney U from ranks, tied scores sharing their average rank.
    std::vector<size_t> order(scores.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
    double positive_rank_sum = 0;
    size_t positives = 0;
    for (size_t i = 0; i < order.size();) {
        size_t j = i;
        while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
        const double average_rank = 0.5 * double(i + 1 + j);  // ranks i+1..j
        for (size_t k = i; k < j; ++k)
            if (labels[order[k]] == 1) {
                positive_rank_sum += average_rank;
                ++positives;
            }
        i = j;
    }
    const size_t negatives = scores.size() - positives;
    if (positives == 0 || negatives == 0) throw Error("roc_auc needs both labels among the rows");
    const double u = positive_rank_sum - double(positives) * double(positives + 1) / 2.0;
    return u / (double(positives) * double(negatives));
}

PrecisionRecall precision_recall_at(std::span<const double> scores, std::span<const int> labels, double threshold) {
    size_t predicted = 0, true_positive = 0, positives = 0, below = 0;
    for (size_t i = 0; i < scores.size(); ++i) {
        const bool flagged = scores[i] >= threshold;
        predicted += flagged;
        below += !flagged;
        positives += labels[i] == 1;
        true_positive += flagged && labels[i] == 1;
    }
    PrecisionRecall out;
    out.precision = predicted ? double(true_positive) / double(predicted) : 0.0;
    out.recall = positives ? double(true_positive) / double(positives) : 0.0;
    out.below_share = scores.empty() ? 0.0 : double(below) / double(scores.size());
    return out;
}

double quantile(std::vector<double> values, double q) {
    if (values.empty()) throw Error("quantile of no values");
    std::sort(values.begin(), values.end());
    const double at = q * double(values.size() - 1);
    const auto lo = static_cast<size_t>(at);
    const size_t hi = std::min(lo + 1, values.size() - 1);
    return values[lo] + (at - double(lo)) * (values[hi] - values[lo]);
}

}  // namespace klspec
