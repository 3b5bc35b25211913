// train-judge on synthetic features with a planted rule; the head file round-trip; bad mining files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "autojudge/analysis.h"
#include "autojudge/head_training.h"
#include "autojudge/mining_store.h"
#include "core/error.h"
#include "test_support.h"

namespace klspec {
namespace {

// 300 problems × 4 mismatches; label 1 iff 2·h_draft[1] − h_target[2] + noise > 0.5 (features on mixed scales).
MinedData planted_rule_data() {
    MinedData data;
    data.draft_hidden_size = 4;
    data.target_hidden_size = 3;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int p = 0; p < 300; ++p)
        for (int k = 0; k < 4; ++k) {
            std::vector<float> f(7);
            for (size_t j = 0; j < f.size(); ++j) f[j] = normal(rng) * float(j + 1) + float(j);
            const double z = 2.0 * (f[1] - 1.0) / 2.0 - (f[6] - 6.0) / 7.0 + 0.3 * normal(rng);
            MiningLabel label;
            label.problem_id = fmt::format("p{}", p);
            label.position = k;
            label.important = z > 0.5;
            data.labels.push_back(label);
            data.features.insert(data.features.end(), f.begin(), f.end());
        }
    return data;
}

TEST(TrainHead, RecoversAPlantedLinearRule) {
    const MinedData data = planted_rule_data();
    const TrainedHead trained = train_head(data);
    EXPECT_GT(trained.validation_auc, 0.95);
    EXPECT_EQ(trained.auc_by_c.size(), autojudge_c_grid().size());
    // The split is by problem: no problem on both sides, and about a fifth held out.
    EXPECT_EQ(trained.train_rows + trained.validation_rows, data.labels.size());
    EXPECT_EQ(trained.train_rows % 4, 0u);
    EXPECT_NEAR(double(trained.validation_problems) / 300.0, 0.2, 0.07);
    // The planted features carry the weight: |w| of h_draft[1] and h_target[2] beat every other.
    const std::vector<double>& w = trained.head.weights;
    for (size_t j : {0u, 2u, 3u, 4u, 5u}) {
        EXPECT_GT(std::abs(w[1]), 3 * std::abs(w[j])) << j;
        EXPECT_GT(std::abs(w[6]), 3 * std::abs(w[j])) << j;
    }
    EXPECT_GT(w[1], 0);
    EXPECT_LT(w[6], 0);
    // Thresholds ascend with their quantile, and the default one keeps recall >= 0.9.
    for (size_t k = 1; k < trained.thresholds.size(); ++k)
        EXPECT_GE(trained.thresholds[k].threshold, trained.thresholds[k - 1].threshold);
    bool found = false;
    for (const ThresholdCandidate& t : trained.thresholds)
        if (t.threshold == trained.head.threshold) {
            found = true;
            EXPECT_GE(t.recall, 0.9);
        }
    EXPECT_TRUE(found);
}

TEST(TrainHead, HeadFileRoundTripsAndScoresTheSame) {
    const MinedData data = planted_rule_data();
    const TrainedHead trained = train_head(data);
    const std::string path = test::temp_path("head.json");
    std::ofstream(path) << head_to_json(trained).dump(1);
    const AutoJudgeHead loaded = AutoJudgeHead::load(path);
    EXPECT_EQ(loaded.draft_hidden_size, 4u);
    EXPECT_EQ(loaded.target_hidden_size, 3u);
    EXPECT_EQ(loaded.weights, trained.head.weights);
    EXPECT_EQ(loaded.mean, trained.head.mean);
    EXPECT_EQ(loaded.scale, trained.head.scale);
    EXPECT_DOUBLE_EQ(loaded.bias, trained.head.bias);
    EXPECT_DOUBLE_EQ(loaded.threshold, trained.head.threshold);
    // Through the judge: important rows score higher on average.
    const std::vector<ScoreBin> bins = bin_by_head_score(data, loaded, 10);
    size_t total = 0;
    for (const ScoreBin& b : bins) total += b.count;
    EXPECT_EQ(total, data.labels.size());
    EXPECT_LT(bins.front().important * 10, bins.front().count + 1);  // the lowest bin is mostly unimportant
    EXPECT_GT(bins.back().important * 10, bins.back().count * 9);    // the highest mostly important
}

TEST(TrainHead, RefusesASplitWithOneLabel) {
    MinedData data = planted_rule_data();
    for (MiningLabel& l : data.labels) l.important = false;
    EXPECT_THROW(train_head(data), Error);
}

TEST(MiningFiles, BadDirectoriesGiveOneLineErrors) {
    const auto message = [](const std::string& dir) {
        try {
            read_mined(dir);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message("/nonexistent/mining").find("not a mining directory"), std::string::npos);
    const std::string dir = test::temp_path("bad-mining");
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/meta.json") << "{ not json";
    EXPECT_NE(message(dir).find("not valid JSON"), std::string::npos);
    std::ofstream(dir + "/meta.json")
        << R"({"format": "klspec-autojudge-mining/1", "draft_hidden_size": 2, "target_hidden_size": 2})";
    std::ofstream(dir + "/problems.jsonl") << R"({"id": "0", "mismatches": 1})"
                                           << "\n";
    std::ofstream(dir + "/labels.jsonl")
        << R"({"problem_id": "0", "position": 3, "draft_token": 1, "target_token": 2, "label": 1, "kl": 0.5, )"
           R"("target_entropy": 1, "draft_entropy": 1, "target_max_probability": 0.5})"
        << "\n";
    std::ofstream(dir + "/features.f32", std::ios::binary) << "abc";  // 3 bytes, not 16
    EXPECT_NE(message(dir).find("features.f32 holds fewer rows"), std::string::npos);
    const std::vector<float> row = {1, 2, 3, 4};
    std::ofstream(dir + "/features.f32", std::ios::binary).write(reinterpret_cast<const char*>(row.data()), 16);
    const MinedData data = read_mined(dir);
    ASSERT_EQ(data.labels.size(), 1u);
    EXPECT_TRUE(data.labels[0].important);
    EXPECT_EQ(data.feature_row(0)[3], 4.0f);
    for (const std::string& m : {message("/nonexistent/mining"), message(dir + "/meta.json")})
        EXPECT_EQ(m.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace klspec

namespace klspec {
namespace {

// The CLI end to end on a mining directory of planted-rule rows: train-judge, then analyze with an SVG.
TEST(AutoJudgeCli, TrainJudgeAndAnalyzeOnAMiningDirectory) {
    const MinedData data = planted_rule_data();
    const std::string dir = test::temp_path("planted-mining");
    {
        MiningWriter writer(dir, {{"target", "t"},
                                  {"draft", "d"},
                                  {"draft_hidden_size", 4},
                                  {"target_hidden_size", 3},
                                  {"max_tokens", 1},
                                  {"temperature", 0},
                                  {"seed", 0}});
        for (size_t first = 0; first < data.labels.size(); first += 4) {
            Problem problem;
            problem.id = data.labels[first].problem_id;
            ProblemMining mining;
            for (size_t i = first; i < first + 4; ++i) {
                MinedMismatch m;
                m.problem_id = problem.id;
                m.position = data.labels[i].position;
                m.important = data.labels[i].important;
                const std::span<const float> row = data.feature_row(i);
                m.draft_hidden.assign(row.begin(), row.begin() + 4);
                m.target_hidden.assign(row.begin() + 4, row.end());
                mining.mismatches.push_back(m);
            }
            writer.append(problem, mining, 0.0);
        }
    }
    const std::string head = test::temp_path("planted-head.json"), svg = test::temp_path("bins.svg");
    const test::CommandResult train =
        test::run_command(test::kCli + " train-judge " + dir + " --out " + head + " --json");
    ASSERT_EQ(train.exit_code, 0) << train.errors;
    const nlohmann::json summary = nlohmann::json::parse(train.output);
    EXPECT_GT(summary.at("validation_auc").get<double>(), 0.95);
    EXPECT_EQ(summary.at("threshold_candidates").size(), 19u);
    const test::CommandResult analyze =
        test::run_command(test::kCli + " analyze " + dir + " --head " + head + " --svg " + svg + " --json");
    ASSERT_EQ(analyze.exit_code, 0) << analyze.errors;
    const nlohmann::json bins = nlohmann::json::parse(analyze.output).at("score_bins");
    ASSERT_EQ(bins.size(), 10u);
    size_t count = 0;
    for (const nlohmann::json& b : bins) count += b.at("count").get<size_t>();
    EXPECT_EQ(count, data.labels.size());
    std::ifstream in(svg);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(text.find("<svg"), std::string::npos);
    EXPECT_NE(text.find("share important"), std::string::npos);
}

}  // namespace
}  // namespace klspec
