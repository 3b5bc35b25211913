// Training AutoJudge's head from a mining run (docs/design.md, "AutoJudge training"; after the published
// train_head_gsm8k.py): standardise the features, fit L2-regularised logistic regression with liblinear
// for each C of a grid, keep the C with the best validation ROC-AUC (validation = a split by problem),
// and offer validation-score quantiles as thresholds.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "autojudge/mining_store.h"
#include "core/judges/autojudge.h"

namespace klspec {

struct HeadTrainingOptions {
    double validation_fraction = 0.2;  // share of problems (not rows) held out to choose C and thresholds
    double min_recall = 0.9;           // the default threshold: the largest candidate that still flags this
                                       // share of the validation set's important mismatches
};

// C grid: (√10)^-k for k = 1..14, then 1, 3, 10, 50, 100 (the published AutoJudge grid).
std::vector<double> autojudge_c_grid();

struct ThresholdCandidate {
    double quantile = 0;  // of the validation scores
    double threshold = 0;
    double precision = 0;  // of "important" (score >= threshold), on validation
    double recall = 0;
    double relaxed_share = 0;  // validation mismatches the judge would accept (score < threshold)
};

struct TrainedHead {
    AutoJudgeHead head;  // μ, σ, w, b and the default threshold
    double c = 0;
    double validation_auc = 0;
    std::vector<std::pair<double, double>> auc_by_c;
    std::vector<ThresholdCandidate> thresholds;
    size_t train_rows = 0, validation_rows = 0, train_problems = 0, validation_problems = 0;
    size_t train_important = 0, validation_important = 0;
};

// Throws klspec::Error when a split lacks a label (too few problems or mismatches mined).
TrainedHead train_head(const MinedData& data, const HeadTrainingOptions& options = {});

// The head file (the fields AutoJudgeHead::load reads, plus C, AUC, the grid and the candidate thresholds).
nlohmann::json head_to_json(const TrainedHead& trained);

// Whether a problem is held out for validation: a stable hash of its id (the same split on every machine).
bool in_validation_split(const std::string& problem_id, double validation_fraction);

}  // namespace klspec
