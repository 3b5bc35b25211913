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

std::map<std::string, AccuracyLoss> accuracy_losses(const std::vector<SweepExample>& examples,
                                                    std::span<const SweepPoint> points, std::span<const Problem> problems) {
    std::map<std::pair<std::string, std::string>, bool> correct;  // (point, id) -> verdict
    for (const SweepExample& e : examples) correct[{e.point, e.id}] = e.correct;
    const auto verdicts = [&](const std::string& point) {
        std::vector<bool> v;
        for (const Problem& p : problems) {
            const auto it = correct.find({point, p.id});
            if (it == correct.end()) throw Error(fmt::format("calibration: {} has no result for problem {}", point, p.id));
            v.push_back(it->second);
        }
        return v;
    };
    const std::vector<bool> reference = verdicts("vanilla");
    std::map<std::string, AccuracyLoss> losses;
    for (const SweepPoint& point : points)
        if (point.rule != "vanilla") losses[point.label()] = paired_accuracy_loss(reference, verdicts(point.label()));
    return losses;
}

std::optional<size_t> pick_within_budget(const std::vector<PointSummary>& summaries,
                                         const std::map<std::string, AccuracyLoss>& losses, double max_loss, bool strict) {
    std::optional<size_t> best;
    for (size_t i = 0; i < summaries.size(); ++i) {
        const auto it = losses.find(summaries[i].point);
        if (it == losses.end()) continue;
        if ((strict ? it->second.high : it->second.loss) > max_loss + 1e-12) continue;
        if (!best || summaries[i].totals.mat() > summaries[*best].totals.mat()) best = i;
    }
    return best;
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
