#include "core/judges/autojudge.h"

#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_integer.h"

namespace klspec {

AutoJudgeHead AutoJudgeHead::load(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(fmt::format("cannot open AutoJudge head file {}", path));
    AutoJudgeHead head;
    try {
        const nlohmann::json json = nlohmann::json::parse(in);
        head.draft_hidden_size = integer_at<uint32_t>(json, "draft_hidden_size");
        head.target_hidden_size = integer_at<uint32_t>(json, "target_hidden_size");
        head.mean = json.at("mean").get<std::vector<double>>();
        head.scale = json.at("scale").get<std::vector<double>>();
        head.weights = json.at("weights").get<std::vector<double>>();
        head.bias = json.at("bias").get<double>();
        head.threshold = json.at("threshold").get<double>();
    } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("bad AutoJudge head file {}: {}", path, e.what()));
    } catch (const Error& e) {
        throw Error(fmt::format("bad AutoJudge head file {}: {}", path, e.what()));
    }
    try {
        head.validate();
    } catch (const Error& e) {
        throw Error(fmt::format("bad AutoJudge head file {}: {}", path, e.what()));
    }
    return head;
}

void AutoJudgeHead::validate() const {
    if (draft_hidden_size == 0 || target_hidden_size == 0)
        throw Error("draft_hidden_size and target_hidden_size must be positive");
    const size_t features = draft_hidden_size + target_hidden_size;
    for (const auto& [field, values] : {std::pair{"mean", &mean}, {"scale", &scale}, {"weights", &weights}}) {
        if (values->size() != features)
            throw Error(fmt::format("\"{}\" has {} entries, expected draft_hidden_size + target_hidden_size = {}",
                                    field, values->size(), features));
        for (double x : *values)
            if (!std::isfinite(x)) throw Error(fmt::format("\"{}\" has a non-finite entry", field));
    }
    for (double s : scale)
        if (s <= 0) throw Error("\"scale\" entries must be positive");
    if (!std::isfinite(bias)) throw Error("\"bias\" must be finite");
    if (!(threshold >= 0 && threshold <= 1)) throw Error("\"threshold\" must be in [0, 1]");
}

AutoJudge::AutoJudge(AutoJudgeHead head, double threshold) : head_(std::move(head)), threshold_(threshold) {
    head_.validate();
}

JudgeDecision AutoJudge::decide(const DraftPosition& position) const {
    if (position.draft_hidden.size() != head_.draft_hidden_size ||
        position.target_hidden.size() != head_.target_hidden_size)
        throw Error(
            fmt::format("the AutoJudge head expects hidden sizes {} (draft) and {} (target), the models "
                        "give {} and {}",
                        head_.draft_hidden_size, head_.target_hidden_size, position.draft_hidden.size(),
                        position.target_hidden.size()));
    double z = head_.bias;
    const auto add_features = [&](std::span<const float> hidden, size_t offset) {
        for (size_t j = 0; j < hidden.size(); ++j)
            z += head_.weights[offset + j] * ((hidden[j] - head_.mean[offset + j]) / head_.scale[offset + j]);
    };
    add_features(position.draft_hidden, 0);
    add_features(position.target_hidden, head_.draft_hidden_size);
    const double score = 1.0 / (1.0 + std::exp(-z));
    return {score < threshold_, score};
}

}  // namespace klspec
