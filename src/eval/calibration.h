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

// What a setting is charged for against vanilla. Accuracy: the paired accuracy loss. Agreement: the share
// of problems whose scored answer (a code problem's test outcome) differs from vanilla's, with its Wilson
// interval; a model that solves few problems loses no accuracy whatever a rule changes, while its answers
// still change.
enum class CalibrationMeasure { Accuracy, Agreement };
// "accuracy" or "agreement"; klspec::Error otherwise.
CalibrationMeasure parse_calibration_measure(const std::string& name);

// Each non-vanilla point's loss against vanilla over `problems` under `measure`, all of which must be
// stored for every point (klspec::Error otherwise).
std::map<std::string, AccuracyLoss> losses_against_vanilla(const std::vector<SweepExample>& examples,
                                                           std::span<const SweepPoint> points,
                                                           std::span<const Problem> problems,
                                                           CalibrationMeasure measure = CalibrationMeasure::Accuracy);

// Of `summaries` (vanilla first), the index of the point with the highest MAT whose loss is at most
// max_loss (strict: the upper end of its confidence interval); nullopt when none is.
std::optional<size_t> pick_within_budget(const std::vector<PointSummary>& summaries,
                                         const std::map<std::string, AccuracyLoss>& losses, double max_loss,
                                         bool strict);

// When none is within the budget: the index of the point whose loss (strict: the upper end of its interval)
// is smallest, the higher MAT on a tie; nullopt when no point has a loss.
std::optional<size_t> closest_to_budget(const std::vector<PointSummary>& summaries,
                                        const std::map<std::string, AccuracyLoss>& losses, bool strict);

// "1%" -> 0.01, "0.01" -> 0.01; klspec::Error unless in [0, 1].
double parse_accuracy_budget(const std::string& text);

}  // namespace klspec
