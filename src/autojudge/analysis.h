// The paper's analyses of mined mismatches: Fig. 5 (mismatches binned by the head's score, with the mean
// KL and entropies per bin) and Fig. 4 (do labels agree when the continuations are sampled with other seeds).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autojudge/mining_store.h"
#include "core/judges/autojudge.h"

namespace klspec {

struct ScoreBin {
    double low = 0, high = 0;  // head scores in [low, high) (the last bin includes 1)
    size_t count = 0, important = 0;
    double mean_kl = 0;  // over the bin's finite KL values (an infinite KL is counted in infinite_kl)
    size_t infinite_kl = 0;
    double mean_target_entropy = 0, mean_draft_entropy = 0;
};

// `bins` equal-width bins of the head's score over [0, 1].
std::vector<ScoreBin> bin_by_head_score(const MinedData& data, const AutoJudgeHead& head, int bins = 10);

struct LabelConsistency {
    size_t runs = 0;
    size_t matched = 0;   // mismatches (problem, position, draft and target token) found in every run
    size_t agreeing = 0;  // of those, with the same label in every run
    double share() const { return matched ? double(agreeing) / double(matched) : 0.0; }
};

// Mining runs of the same problems whose continuations were sampled with different seeds.
LabelConsistency label_consistency(const std::vector<std::string>& mining_dirs);

nlohmann::json to_json(const std::vector<ScoreBin>& bins);

}  // namespace klspec
