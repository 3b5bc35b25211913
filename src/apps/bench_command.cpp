#include "apps/bench_command.h"

#include <chrono>
#include <fstream>
#include <iostream>
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
    int32_t parallel = 1;
    bool json = false;
};

// One finished problem as a JSONL row, scored when the problem has a final answer or tests (code
// benchmarks: run in the sandbox; "answer" is "pass" or why it failed).
nlohmann::json outcome_row(size_t index, const Problem& problem, const GenerationResult& result) {
    nlohmann::json row = {{"index", index}, {"id", problem.id}, {"text", result.text}, {"stop_reason", to_string(result.stop_reason)},
                          {"stats", stats_to_json(result.stats)}};
    if (problem.gold || problem.code) {
        const ScoredOutput verdict = score_output(problem, result.text);
        row["answer"] = verdict.prediction ? nlohmann::json(*verdict.prediction) : nlohmann::json();
        row["correct"] = verdict.correct;
    }
    return row;
}

void run_bench(const BenchOptions& options) {
    std::vector<Problem> problems = options.dataset.load();
    RunOptions run = options.run;
    run.context.n_sequences = options.parallel;
    DecodingSession session = open_session(run);
    prepare_prompts(problems, options.dataset, options.prompt, session);
    SpeculativeDecoder& decoder = *session.decoder;

    std::ofstream outputs;
    if (!options.outputs_path.empty()) {
        outputs.open(options.outputs_path);
        if (!outputs) throw Error(fmt::format("cannot write outputs file: {}", options.outputs_path));
    }
    std::vector<nlohmann::json> rows(problems.size());
    GenerationStats totals;
    size_t scored = 0, correct = 0, done = 0;
    ProgressLine progress("bench", problems.size(), "problems");
    const auto start = std::chrono::steady_clock::now();
    decode_problems(decoder, problems, session.generation, options.parallel, [&](DecodedProblem&& decoded) {
        totals += decoded.result.stats;
        nlohmann::json& row = rows[decoded.index];
        row = outcome_row(decoded.index, problems[decoded.index], decoded.result);
        if (row.contains("correct")) {
            ++scored;
            correct += row["correct"].get<bool>();
        }
        progress.update(++done);
    });
    const double wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress.finish();
    if (outputs.is_open())
        for (const nlohmann::json& row : rows)
            outputs << row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";

    // With -np > 1 the sequences share each step's time, so the sum of per-problem times overcounts:
    // throughput is total tokens over the wall time of the whole run (prompts included).
    const double throughput = wall_seconds > 0 ? double(totals.emitted) / wall_seconds : 0.0;
    const double accuracy = scored ? double(correct) / double(scored) : 0.0;
    // Code benchmarks run each problem's tests on its one greedy (or seeded) answer: pass@1.
    const std::string_view metric = !problems.empty() && problems.front().code ? "pass@1" : "accuracy";
    const std::string_view judge_name = session.generation.judge->name();
    if (options.json) {
        nlohmann::json out = {{"problems", problems.size()},
                              {"parallel", options.parallel},
                              {"judge", judge_name},
                              {"wall_seconds", wall_seconds},
                              {"throughput_tokens_per_second", throughput},
                              {"stats", stats_to_json(totals)}};
        add_quality_bound(out, *session.generation.judge);
        add_draft_policy(out, session.generation.draft_policy, session.decoder->verify_costs(),
                         session.decoder->draft_costs());
        if (scored) out["accuracy"] = {{"metric", metric}, {"correct", correct}, {"scored", scored}, {"rate", accuracy}};
        std::cout << out.dump() << "\n";
    } else {
        std::cout << fmt::format("{} problems, judge {}, {} in parallel\n", problems.size(), judge_name,
                                 options.parallel);
        if (scored) std::cout << fmt::format("{}: {}/{} = {:.1f} %\n", metric, correct, scored, 100.0 * accuracy);
        std::cout << format_stats(totals) << format_quality_bound(*session.generation.judge, totals);
        std::cout << fmt::format("throughput: {:.1f} tokens/s over {:.2f} s wall time (prompts included){}\n",
                                 throughput, wall_seconds,
                                 options.parallel > 1 ? "; the times above add up every sequence's share of "
                                                        "shared steps" : "");
    }
}

}  // namespace

void register_bench_command(CLI::App& app) {
    auto options = std::make_shared<BenchOptions>();
    CLI::App* cmd = app.add_subcommand(
        "bench", "Decode every prompt of a JSONL dataset; report summed statistics (MAT, acceptance, speed) and accuracy");
    options->run.generation.draft_policy = DraftPolicy::Auto;  // the cost model chooses gamma
    add_run_options(*cmd, options->run);
    add_dataset_options(*cmd, options->dataset, /*with_limit=*/true);
    add_prompt_options(*cmd, options->prompt);
    cmd->add_option("--parallel", options->parallel,
                    "Decode this many problems together (also -np): their drafts are verified in one target batch")
        ->capture_default_str()->check(CLI::Range(1, 64));
    cmd->add_option("--outputs", options->outputs_path, "Write each problem's text, answer and stats here (JSONL)");
    cmd->add_flag("--json", options->json, "Print one JSON object instead of the summary");
    cmd->callback([options] { run_bench(*options); });
}

}  // namespace klspec
