// Calibrating a rule to an accuracy budget (klspec calibrate): sweep its settings on a calibration split,
// pick the most productive one whose accuracy loss against vanilla is within the budget, validate it on
// held-out problems.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/accuracy_loss.h"
#include "eval/dataset.h"
#include "eval/sweep.h"

namespace klspec {

// Problems split by a seeded hash of their id: fnv1a64("klspec-calibrate/1:" + id) % 1000 < share·1000
// goes to calibration (first), the rest to validation (second). Same problems, same split, on every machine.
std::pair<std::vector<Problem>, std::vector<Problem>> calibration_split(std::vector<Problem> problems, double share);

// Each non-vanilla point's paired accuracy loss against vanilla over `problems`, all of which must be
// stored for every point (klspec::Error otherwise).
std::map<std::string, AccuracyLoss> accuracy_losses(const std::vector<SweepExample>& examples,
                                                    std::span<const SweepPoint> points, std::span<const Problem> problems);

// Of `summaries` (vanilla first), the index of the point with the highest MAT whose loss is at most
// max_loss (strict: the upper end of its confidence interval); nullopt when none is.
std::optional<size_t> pick_within_budget(const std::vector<PointSummary>& summaries,
                                         const std::map<std::string, AccuracyLoss>& losses, double max_loss, bool strict);

// "1%" -> 0.01, "0.01" -> 0.01; klspec::Error unless in [0, 1].
double parse_accuracy_budget(const std::string& text);

}  // namespace klspec
