#include "eval/calibration.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/stable_hash.h"

namespace klspec {

std::pair<std::vector<Problem>, std::vector<Problem>> calibration_split(std::vector<Problem> problems, double share) {
    if (!(share > 0 && share < 1)) throw Error(fmt::format("calibration share must be in (0, 1), got {}", share));
    std::pair<std::vector<Problem>, std::vector<Problem>> split;
    for (Problem& p : problems) {
        const bool calibration = double(fnv1a64("klspec-calibrate/1:" + p.id) % 1000) < share * 1000;
        (calibration ? split.first : split.second).push_back(std::move(p));
    }
    if (split.first.empty() || split.second.empty())
        throw Error(fmt::format("{} problems are too few to split into calibration and validation", problems.size()));
    return split;
}

CalibrationMeasure parse_calibration_measure(const std::string& name) {
    if (name == "accuracy") return CalibrationMeasure::Accuracy;
    if (name == "agreement") return CalibrationMeasure::Agreement;
    throw Error(fmt::format("--measure: '{}' is not accuracy or agreement", name));
}

std::map<std::string, AccuracyLoss> losses_against_vanilla(const std::vector<SweepExample>& examples,
                                                           std::span<const SweepPoint> points,
                                                           std::span<const Problem> problems,
                                                           CalibrationMeasure measure) {
    std::map<std::pair<std::string, std::string>, const SweepExample*> result;  // (point, id) -> its example
    for (const SweepExample& e : examples) result[{e.point, e.id}] = &e;
    const auto results = [&](const std::string& point) {
        std::vector<const SweepExample*> v;
        for (const Problem& p : problems) {
            const auto it = result.find({point, p.id});
            if (it == result.end())
                throw Error(fmt::format("calibration: {} has no result for problem {}", point, p.id));
            v.push_back(it->second);
        }
        return v;
    };
    const auto correct = [](const std::vector<const SweepExample*>& v) {
        std::vector<bool> verdicts;
        for (const SweepExample* e : v) verdicts.push_back(e->correct);
        return verdicts;
    };
    const std::vector<const SweepExample*> reference = results("vanilla");
    std::map<std::string, AccuracyLoss> losses;
    for (const SweepPoint& point : points) {
        if (point.rule == "vanilla") continue;
        const std::vector<const SweepExample*> candidate = results(point.label());
        if (measure == CalibrationMeasure::Accuracy) {
            losses[point.label()] = paired_accuracy_loss(correct(reference), correct(candidate));
            continue;
        }
        size_t same = 0;
        for (size_t i = 0; i < candidate.size(); ++i)
            same += same_answer(*candidate[i], *reference[i], answer_kind(problems[i]));
        const Proportion agreement = wilson_proportion(same, candidate.size());
        losses[point.label()] = {1 - agreement.value, 1 - agreement.high, 1 - agreement.low, candidate.size()};
    }
    return losses;
}

std::optional<size_t> pick_within_budget(const std::vector<PointSummary>& summaries,
                                         const std::map<std::string, AccuracyLoss>& losses, double max_loss,
                                         bool strict) {
    std::optional<size_t> best;
    for (size_t i = 0; i < summaries.size(); ++i) {
        const auto it = losses.find(summaries[i].point);
        if (it == losses.end()) continue;
        if ((strict ? it->second.high : it->second.loss) > max_loss + 1e-12) continue;
        if (!best || summaries[i].totals.mat() > summaries[*best].totals.mat()) best = i;
    }
    return best;
}

std::optional<size_t> closest_to_budget(const std::vector<PointSummary>& summaries,
                                        const std::map<std::string, AccuracyLoss>& losses, bool strict) {
    std::optional<size_t> closest;
    double closest_loss = 0.0;
    for (size_t i = 0; i < summaries.size(); ++i) {
        const auto it = losses.find(summaries[i].point);
        if (it == losses.end()) continue;
        const double loss = strict ? it->second.high : it->second.loss;
        if (!closest || loss < closest_loss ||
            (loss == closest_loss && summaries[i].totals.mat() > summaries[*closest].totals.mat())) {
            closest = i;
            closest_loss = loss;
        }
    }
    return closest;
}

double parse_accuracy_budget(const std::string& text) {
    const bool percent = !text.empty() && text.back() == '%';
    const std::string number = percent ? text.substr(0, text.size() - 1) : text;
    size_t used = 0;
    double value = -1;
    try {
        value = std::stod(number, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != number.size() || number.empty())
        throw Error(fmt::format("--max-loss: '{}' is not a number or a percentage", text));
    if (percent) value /= 100;
    if (!(value >= 0 && value <= 1)) throw Error(fmt::format("--max-loss must be within [0, 100 %], got {}", text));
    return value;
}

}  // namespace klspec
