// A mining run on disk (klspec mine --out DIR), appended one problem at a time so an interrupted run
// resumes where it stopped:
//   meta.json       the run's settings and the feature sizes
//   labels.jsonl    one mismatch a line: problem id, position, draft/target token, label, answers, statistics
//   features.f32    one row of float32 per labels line: [h_draft ; h_target] (little-endian, no header)
//   problems.jsonl  one finished problem a line: id, mismatches, seconds, and its final response's token ids (from
//                   which a machine without features.f32 recomputes them: the rows' prefixes are the response's)
//                   (written after its rows)
// Rows beyond what problems.jsonl accounts for (a run killed mid-problem) are dropped on reopening.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autojudge/mining.h"

namespace klspec {

struct MiningLabel {
    std::string problem_id;
    int32_t position = 0;
    int32_t draft_token = -1, target_token = -1;
    bool important = false;
    double kl = 0, target_entropy = 0, draft_entropy = 0, target_max_probability = 0;
};

// Everything train-judge and analyze read back.
struct MinedData {
    size_t draft_hidden_size = 0;
    size_t target_hidden_size = 0;
    std::vector<MiningLabel> labels;
    std::vector<float> features;  // labels.size() rows of draft_hidden_size + target_hidden_size
    size_t n_features() const { return draft_hidden_size + target_hidden_size; }
    std::span<const float> feature_row(size_t i) const { return {features.data() + i * n_features(), n_features()}; }
};

// The feature rows of one finished problem's mismatches, from its final response (recompute_features).
using FeatureRecompute = std::function<std::vector<float>(
    const std::string& problem_id, std::span<const int32_t> final_response, std::span<const MinedPosition> mismatches)>;

class MiningWriter {
public:
    // Creates DIR, or reopens it: `meta` must then agree with the stored meta.json on the settings that
    // shape the labels (models, sizes, max_tokens, temperature, seed). A reopened DIR whose features.f32 holds
    // fewer rows than its labels (mined on another machine: the features stay out of git) has them written
    // again by `recompute`, problem by problem; without it, that is an error.
    MiningWriter(const std::string& dir, const nlohmann::json& meta, const FeatureRecompute& recompute = {});
    const std::set<std::string>& finished_problems() const { return finished_; }
    size_t rows() const { return rows_; }
    void append(const Problem& problem, const ProblemMining& mining, double seconds);

private:
    std::string dir_;
    size_t row_floats_ = 0;
    std::set<std::string> finished_;
    size_t rows_ = 0;
    std::ofstream labels_, features_, problems_;

    void write_recomputed_features(const std::vector<nlohmann::json>& labels, const FeatureRecompute& recompute) const;
};

// Reads a mining directory; throws klspec::Error naming the file and the problem.
MinedData read_mined(const std::string& dir);

}  // namespace klspec
