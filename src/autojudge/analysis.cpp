#include "autojudge/analysis.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/error.h"

namespace klspec {

std::vector<ScoreBin> bin_by_head_score(const MinedData& data, const AutoJudgeHead& head, int bins) {
    const AutoJudge judge(head, head.threshold);
    std::vector<ScoreBin> out(static_cast<size_t>(bins));
    std::vector<size_t> finite_kl(out.size(), 0);
    for (size_t b = 0; b < out.size(); ++b) {
        out[b].low = double(b) / bins;
        out[b].high = double(b + 1) / bins;
    }
    for (size_t i = 0; i < data.labels.size(); ++i) {
        const std::span<const float> row = data.feature_row(i);
        DraftPosition position;
        position.draft_hidden = row.first(data.draft_hidden_size);
        position.target_hidden = row.subspan(data.draft_hidden_size);
        const double score = judge.decide(position).statistic;
        const size_t b = std::min(out.size() - 1, static_cast<size_t>(score * bins));
        const MiningLabel& label = data.labels[i];
        ScoreBin& bin = out[b];
        ++bin.count;
        bin.important += label.important;
        if (std::isfinite(label.kl)) {
            bin.mean_kl += label.kl;
            ++finite_kl[b];
        } else {
            ++bin.infinite_kl;
        }
        bin.mean_target_entropy += label.target_entropy;
        bin.mean_draft_entropy += label.draft_entropy;
    }
    for (size_t b = 0; b < out.size(); ++b) {
        if (finite_kl[b]) out[b].mean_kl /= double(finite_kl[b]);
        if (out[b].count) {
            out[b].mean_target_entropy /= double(out[b].count);
            out[b].mean_draft_entropy /= double(out[b].count);
        }
    }
    return out;
}

LabelConsistency label_consistency(const std::vector<std::string>& mining_dirs) {
    if (mining_dirs.size() < 2) throw Error("label consistency needs at least two mining runs");
    using Key = std::tuple<std::string, int32_t, int32_t, int32_t>;
    std::map<Key, std::vector<int>> labels_of;
    for (const std::string& dir : mining_dirs)
        for (const MiningLabel& label : read_mined(dir).labels)
            labels_of[{label.problem_id, label.position, label.draft_token, label.target_token}].push_back(
                label.important);
    LabelConsistency out;
    out.runs = mining_dirs.size();
    for (const auto& [key, labels] : labels_of) {
        if (labels.size() != mining_dirs.size()) continue;
        ++out.matched;
        out.agreeing +=
            std::all_of(labels.begin(), labels.end(), [first = labels.front()](int l) { return l == first; });
    }
    return out;
}

nlohmann::json to_json(const std::vector<ScoreBin>& bins) {
    nlohmann::json out = nlohmann::json::array();
    for (const ScoreBin& b : bins)
        out.push_back({{"low", b.low},
                       {"high", b.high},
                       {"count", b.count},
                       {"important", b.important},
                       {"mean_kl", b.mean_kl},
                       {"infinite_kl", b.infinite_kl},
                       {"mean_target_entropy", b.mean_target_entropy},
                       {"mean_draft_entropy", b.mean_draft_entropy}});
    return out;
}

}  // namespace klspec
