#include "apps/bench_command.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/progress_line.h"
#include "apps/run_options.h"
#include "apps/stats_report.h"
#include "core/error.h"
#include "eval/batch_decoding.h"
#include "eval/dataset.h"
#include "eval/problem_scoring.h"

namespace klspec {
namespace {

struct BenchOptions {
    RunOptions run;
    DatasetChoice dataset;
    PromptOptions prompt;
    std::string outputs_path;
    bool resume = false;
    int32_t parallel = 1;
    bool json = false;
};

// One finished problem as a JSONL row, scored when the problem has a final answer or tests (code
// benchmarks: run in the sandbox; "answer" is "pass" or why it failed).
nlohmann::json outcome_row(size_t index, const Problem& problem, const GenerationResult& result) {
    // The prompt as decoded (template, exemplars and instruction applied): another program can be given the same.
    nlohmann::json row = {{"index", index},
                          {"id", problem.id},
                          {"prompt", problem.prompt},
                          {"text", result.text},
                          {"stop_reason", to_string(result.stop_reason)},
                          {"stats", stats_to_json(result.stats)}};
    if (problem.gold || problem.code) {
        const ScoredOutput verdict = score_output(problem, result.text);
        row["answer"] = verdict.prediction ? nlohmann::json(*verdict.prediction) : nlohmann::json();
        row["correct"] = verdict.correct;
    }
    return row;
}

std::string jsonl_line(const nlohmann::json& row) {
    return row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// The rows an earlier run wrote to the outputs file, by problem id; none when it does not exist yet. A line cut by
// an interrupt is dropped (its problem is decoded again).
std::map<std::string, nlohmann::json> read_outputs(const std::string& path) {
    std::map<std::string, nlohmann::json> rows;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
        nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (!row.is_object() || !row.contains("id") || !row.contains("text")) continue;
        const std::string id = row["id"].get<std::string>();
        rows[id] = std::move(row);
    }
    return rows;
}

void run_bench(const BenchOptions& options) {
    std::vector<Problem> problems = options.dataset.load();
    RunOptions run = options.run;
    run.context.n_sequences = options.parallel;
    DecodingSession session = open_session(run);
    prepare_prompts(problems, options.dataset, options.prompt, session);
    SpeculativeDecoder& decoder = *session.decoder;

    // Rows of problems an earlier run decoded (--resume) count in the accuracy, not in this run's statistics.
    const std::map<std::string, nlohmann::json> kept =
        options.resume ? read_outputs(options.outputs_path) : std::map<std::string, nlohmann::json>{};
    std::vector<size_t> todo;  // indices into problems
    for (size_t i = 0; i < problems.size(); ++i)
        if (!kept.contains(problems[i].id)) todo.push_back(i);
    std::vector<Problem> to_decode;
    for (const size_t i : todo) to_decode.push_back(problems[i]);
    if (!kept.empty())
        std::fprintf(stderr, "bench: resuming %s: %zu of %zu problems already decoded\n", options.outputs_path.c_str(),
                     problems.size() - todo.size(), problems.size());

    // Each row is appended as its problem finishes, so that an interrupted run keeps what it decoded; the file is
    // rewritten in problem order at the end.
    std::ofstream outputs;
    if (!options.outputs_path.empty()) {
        outputs.open(options.outputs_path, options.resume ? std::ios::app : std::ios::trunc);
        if (!outputs) throw Error(fmt::format("cannot write outputs file: {}", options.outputs_path));
    }
    std::vector<nlohmann::json> rows(problems.size());
    GenerationStats totals;
    size_t done = 0;
    ProgressLine progress("bench", to_decode.size(), "problems");
    const auto start = std::chrono::steady_clock::now();
    decode_problems(decoder, to_decode, session.generation, options.parallel, [&](DecodedProblem&& decoded) {
        totals += decoded.result.stats;
        const size_t index = todo[decoded.index];
        rows[index] = outcome_row(index, problems[index], decoded.result);
        if (outputs.is_open()) outputs << jsonl_line(rows[index]) << std::flush;
        progress.update(++done);
    });
    const double wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress.finish();
    size_t scored = 0, correct = 0;
    for (size_t i = 0; i < problems.size(); ++i) {
        nlohmann::json& row = rows[i];
        if (row.is_null()) row = kept.at(problems[i].id);
        if (row.contains("correct")) {
            ++scored;
            correct += row["correct"].get<bool>();
        }
    }
    if (outputs.is_open()) {
        outputs.close();
        std::ofstream in_order(options.outputs_path, std::ios::trunc);
        for (const nlohmann::json& row : rows) in_order << jsonl_line(row);
    }

    // With -np > 1 the sequences share each step's time, so the sum of per-problem times overcounts:
    // throughput is total tokens over the wall time of the whole run (prompts included).
    const double throughput = wall_seconds > 0 ? double(totals.emitted) / wall_seconds : 0.0;
    const double accuracy = scored ? double(correct) / double(scored) : 0.0;
    // Code benchmarks run each problem's tests on its one greedy (or seeded) answer: pass@1.
    const std::string_view metric = !problems.empty() && problems.front().code ? "pass@1" : "accuracy";
    const std::string_view judge_name = session.generation.judge->name();
    if (options.json) {
        nlohmann::json out = {{"problems", problems.size()},   {"resumed", problems.size() - todo.size()},
                              {"parallel", options.parallel},  {"judge", judge_name},
                              {"wall_seconds", wall_seconds},  {"throughput_tokens_per_second", throughput},
                              {"stats", stats_to_json(totals)}};
        add_quality_bound(out, *session.generation.judge);
        add_draft_policy(out, session.generation.draft_policy, session.decoder->verify_costs(),
                         session.decoder->draft_costs());
        if (scored)
            out["accuracy"] = {{"metric", metric}, {"correct", correct}, {"scored", scored}, {"rate", accuracy}};
        std::cout << out.dump() << "\n";
    } else {
        std::cout << fmt::format("{} problems, judge {}, {} in parallel\n", problems.size(), judge_name,
                                 options.parallel);
        if (!kept.empty())
            std::cout << fmt::format(
                "{} of them decoded by an earlier run (--resume): the statistics below are this "
                "run's {}\n",
                problems.size() - todo.size(), todo.size());
        if (scored) std::cout << fmt::format("{}: {}/{} = {:.1f} %\n", metric, correct, scored, 100.0 * accuracy);
        std::cout << format_stats(totals) << format_quality_bound(*session.generation.judge, totals);
        std::cout << fmt::format("throughput: {:.1f} tokens/s over {:.2f} s wall time (prompts included){}\n",
                                 throughput, wall_seconds,
                                 options.parallel > 1 ? "; the times above add up every sequence's share of "
                                                        "shared steps"
                                                      : "");
    }
}

}  // namespace

void register_bench_command(CLI::App& app) {
    auto options = std::make_shared<BenchOptions>();
    CLI::App* cmd = app.add_subcommand(
        "bench",
        "Decode every prompt of a JSONL dataset; report summed statistics (MAT, acceptance, speed) and accuracy");
    options->run.generation.draft_policy = DraftPolicy::Auto;  // the cost model chooses gamma
    add_run_options(*cmd, options->run);
    add_dataset_options(*cmd, options->dataset, /*with_limit=*/true);
    add_prompt_options(*cmd, options->prompt);
    cmd->add_option("--parallel", options->parallel,
                    "Decode this many problems together (also -np): their drafts are verified in one target batch")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    cmd->add_option("--outputs", options->outputs_path,
                    "Write each problem's prompt (as decoded), text, answer and stats here (JSONL; a row is appended "
                    "as each problem finishes, "
                    "the file is put in problem order at the end)");
    cmd->add_flag("--resume", options->resume,
                  "With --outputs: keep the problems the file already holds (an interrupted run's) and decode only the "
                  "others; the accuracy counts them all, the statistics only this run's")
        ->needs("--outputs");
    cmd->add_flag("--json", options->json, "Print one JSON object instead of the summary");
    cmd->callback([options] { run_bench(*options); });
}

}  // namespace klspec
