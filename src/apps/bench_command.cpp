#include "apps/bench_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/run_options.h"
#include "apps/stats_report.h"
#include "core/answer_scoring.h"
#include "core/error.h"

namespace klspec {
namespace {

struct BenchOptions {
    RunOptions run;
    std::string dataset_path;
    std::string outputs_path;
    size_t limit = 0;
    bool json = false;
};

struct Problem {
    std::string prompt;
    std::optional<int64_t> final_answer;
};

// One problem per line: {"question": PROMPT, "final": NUMBER (optional, enables accuracy)}.
std::vector<Problem> read_dataset(const std::string& path, size_t limit) {
    std::ifstream in(path);
    if (!in) throw Error(fmt::format("cannot read dataset: {}", path));
    std::vector<Problem> problems;
    std::string line;
    for (size_t line_number = 1; std::getline(in, line) && (limit == 0 || problems.size() < limit); ++line_number) {
        if (line.empty()) continue;
        const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (!row.is_object() || !row.contains("question") || !row["question"].is_string()) {
            throw Error(fmt::format("{}:{}: expected a JSON object with a string \"question\"", path, line_number));
        }
        Problem problem{row["question"].get<std::string>(), std::nullopt};
        if (row.contains("final")) {
            if (!row["final"].is_number_integer()) {
                throw Error(fmt::format("{}:{}: \"final\" must be an integer", path, line_number));
            }
            problem.final_answer = row["final"].get<int64_t>();
        }
        problems.push_back(std::move(problem));
    }
    if (problems.empty()) throw Error(fmt::format("no problems in dataset: {}", path));
    return problems;
}

void run_bench(const BenchOptions& options) {
    const std::vector<Problem> problems = read_dataset(options.dataset_path, options.limit);
    DecodingSession session = open_session(options.run);
    Judge& judge = *session.judge;

    std::ofstream outputs;
    if (!options.outputs_path.empty()) {
        outputs.open(options.outputs_path);
        if (!outputs) throw Error(fmt::format("cannot write outputs file: {}", options.outputs_path));
    }
    const bool show_progress = isatty(fileno(stderr)) != 0;
    GenerationStats totals;
    size_t scored = 0, correct = 0;
    for (size_t i = 0; i < problems.size(); ++i) {
        const Problem& problem = problems[i];
        const GenerationResult result = session.decoder->generate(problem.prompt, options.run.generation, judge);
        totals += result.stats;
        nlohmann::json row = {{"index", i}, {"text", result.text}, {"stop_reason", to_string(result.stop_reason)},
                              {"stats", stats_to_json(result.stats)}};
        if (problem.final_answer) {
            const std::optional<int64_t> answer = extract_final_answer(result.text);
            const bool is_correct = answer == problem.final_answer;
            ++scored;
            correct += is_correct;
            row["answer"] = answer ? nlohmann::json(*answer) : nlohmann::json();
            row["correct"] = is_correct;
        }
        if (outputs.is_open()) outputs << row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        if (show_progress) std::fprintf(stderr, "\rbench: %zu/%zu problems", i + 1, problems.size());
    }
    if (show_progress) std::fputs("\n", stderr);

    const double accuracy = scored ? double(correct) / double(scored) : 0.0;
    if (options.json) {
        nlohmann::json out = {{"problems", problems.size()},
                              {"judge", judge.name()},
                              {"stats", stats_to_json(totals)}};
        if (scored) out["accuracy"] = {{"correct", correct}, {"scored", scored}, {"rate", accuracy}};
        std::cout << out.dump() << "\n";
    } else {
        std::cout << fmt::format("{} problems, judge {}\n", problems.size(), judge.name());
        if (scored) std::cout << fmt::format("accuracy: {}/{} = {:.1f} %\n", correct, scored, 100.0 * accuracy);
        std::cout << format_stats(totals);
    }
}

}  // namespace

void register_bench_command(CLI::App& app) {
    auto options = std::make_shared<BenchOptions>();
    CLI::App* cmd = app.add_subcommand(
        "bench", "Decode every prompt of a JSONL dataset; report summed statistics (MAT, acceptance, speed) and accuracy");
    add_run_options(*cmd, options->run);
    cmd->add_option("--dataset", options->dataset_path,
                    "JSONL, one problem per line: {\"question\": PROMPT, \"final\": INTEGER (optional; scored "
                    "against the number after \"The answer is\")}")
        ->required();
    cmd->add_option("--limit", options->limit, "Use only the first N problems (0 = all)")->capture_default_str();
    cmd->add_option("--outputs", options->outputs_path, "Write each problem's text, answer and stats here (JSONL)");
    cmd->add_flag("--json", options->json, "Print one JSON object instead of the summary");
    cmd->callback([options] { run_bench(*options); });
}

}  // namespace klspec
