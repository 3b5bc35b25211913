// `klspec train-judge`: fit AutoJudge's head on a mining run (src/autojudge/head_training.h).
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "apps/autojudge_commands.h"
#include "autojudge/head_training.h"
#include "core/error.h"

namespace klspec {
namespace {

struct TrainJudgeOptions {
    std::string mining_dir;
    std::string out_path;
    HeadTrainingOptions training;
    bool json = false;
};

void run_train_judge(const TrainJudgeOptions& options) {
    const MinedData data = read_mined(options.mining_dir);
    const TrainedHead trained = train_head(data, options.training);
    const nlohmann::json head = head_to_json(trained);
    std::ofstream out(options.out_path);
    if (!out || !(out << head.dump(1) << "\n"))
        throw Error(fmt::format("cannot write head file: {}", options.out_path));
    if (options.json) {
        nlohmann::json summary = head;
        for (const char* bulky : {"mean", "scale", "weights"}) summary.erase(bulky);
        summary["out"] = options.out_path;
        std::cout << summary.dump() << "\n";
        return;
    }
    std::cout << fmt::format(
        "train: {} mismatches from {} problems ({} important); validation: {} from {} ({} important)\n",
        trained.train_rows, trained.train_problems, trained.train_important, trained.validation_rows,
        trained.validation_problems, trained.validation_important);
    for (const auto& [c, auc] : trained.auc_by_c)
        std::cout << fmt::format("  C = {:<10.4g} validation ROC-AUC {:.4f}\n", c, auc);
    std::cout << fmt::format("best C = {:.4g}: validation ROC-AUC {:.4f}\n\n", trained.c, trained.validation_auc);
    std::cout << "candidate thresholds (validation; 'important' = score >= threshold; relaxed = score < threshold)\n"
                 "quantile  threshold  precision  recall  relaxed\n";
    for (const ThresholdCandidate& t : trained.thresholds)
        std::cout << fmt::format("{:8.2f}  {:9.4f}  {:9.3f}  {:6.3f}  {:6.1f} %{}\n", t.quantile, t.threshold,
                                 t.precision, t.recall, 100 * t.relaxed_share,
                                 t.threshold == trained.head.threshold ? "   <- default" : "");
    std::cout << fmt::format("head written to {} (default threshold {:.4f}: the largest candidate with recall >= {})\n",
                             options.out_path, trained.head.threshold, options.training.min_recall);
}

}  // namespace

void register_train_judge_command(CLI::App& app) {
    auto options = std::make_shared<TrainJudgeOptions>();
    CLI::App* cmd =
        app.add_subcommand("train-judge",
                           "Train AutoJudge's head on a mining run: standardised features, L2 logistic regression "
                           "(liblinear), C by validation ROC-AUC on a split by problem");
    cmd->add_option("DIR", options->mining_dir, "A directory written by klspec mine --out")->required();
    cmd->add_option("--out", options->out_path, "Head file to write (JSON; klspec --judge autojudge --judge-head)")
        ->required();
    cmd->add_option("--validation-fraction", options->training.validation_fraction,
                    "Share of problems held out to choose C and the thresholds")
        ->capture_default_str()
        ->check(CLI::Range(0.01, 0.99));
    cmd->add_option("--min-recall", options->training.min_recall,
                    "Default threshold: the largest candidate whose validation recall of important mismatches is "
                    "at least this")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_flag("--json", options->json, "Print one JSON summary (the head file without its vectors)");
    cmd->callback([options] { run_train_judge(*options); });
}

}  // namespace klspec
