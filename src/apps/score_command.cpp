// `klspec score`: score outputs made elsewhere with a benchmark's own scorer.
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/run_options.h"
#include "apps/score_command.h"
#include "core/error.h"
#include "eval/dataset.h"
#include "eval/problem_scoring.h"

namespace klspec {
namespace {

struct ScoreOptions {
    DatasetChoice dataset;
    std::string predictions_path;
    bool json = false;
};

void run_score(const ScoreOptions& options) {
    const std::vector<Problem> problems = options.dataset.load();
    std::map<std::string, const Problem*> by_id;
    for (const Problem& p : problems) by_id[p.id] = &p;

    std::ifstream in(options.predictions_path);
    if (!in) throw Error(fmt::format("cannot read predictions: {}", options.predictions_path));
    size_t scored = 0, correct = 0, no_answer = 0;
    std::string line;
    for (size_t n = 1; std::getline(in, line); ++n) {
        if (line.empty()) continue;
        const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (!row.is_object() || !row.contains("id") || !row.contains("output") || !row["output"].is_string())
            throw Error(
                fmt::format("{}:{}: expected {{\"id\": ..., \"output\": \"...\"}}", options.predictions_path, n));
        const std::string id = row["id"].is_string() ? row["id"].get<std::string>() : row["id"].dump();
        const auto it = by_id.find(id);
        if (it == by_id.end())
            throw Error(fmt::format("{}:{}: id {} is not in {} ({})", options.predictions_path, n, id,
                                    options.dataset.name_or_path, options.dataset.split));
        const Problem& problem = *it->second;
        const ScoredOutput verdict = score_output(problem, row["output"].get<std::string>());
        ++scored;
        correct += verdict.correct;
        no_answer += !verdict.prediction.has_value();
    }
    if (scored == 0) throw Error(fmt::format("no predictions in {}", options.predictions_path));
    const double accuracy = double(correct) / double(scored);
    if (options.json) {
        std::cout << nlohmann::json{{"dataset", options.dataset.name_or_path},
                                    {"split", options.dataset.split},
                                    {"scored", scored},
                                    {"correct", correct},
                                    {"accuracy", accuracy},
                                    {"no_answer", no_answer},
                                    {"dataset_size", problems.size()}}
                         .dump()
                  << "\n";
    } else {
        std::cout << fmt::format(
            "{} ({}): {}/{} correct = {:.1f} % ({} outputs give no answer; the split has {} "
            "problems)\n",
            options.dataset.name_or_path, options.dataset.split, correct, scored, 100 * accuracy, no_answer,
            problems.size());
    }
}

}  // namespace

void register_score_command(CLI::App& app) {
    auto options = std::make_shared<ScoreOptions>();
    CLI::App* cmd = app.add_subcommand("score", "Score outputs made elsewhere with a benchmark's own scorer");
    add_dataset_options(*cmd, options->dataset, /*with_limit=*/false);
    cmd->add_option("--predictions", options->predictions_path,
                    "JSONL, one {\"id\": ..., \"output\": \"...\"} a line; id is the dataset's own (GSM8K: the "
                    "0-based line number; MMLU-Pro: question_id; a JSONL file: its \"id\" or line number)")
        ->required();
    cmd->add_flag("--json", options->json, "Print one JSON object");
    cmd->callback([options] { run_score(*options); });
}

}  // namespace klspec
