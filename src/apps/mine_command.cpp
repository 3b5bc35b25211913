// `klspec mine`: label draft/target mismatches as important or not (src/autojudge/mining.h), resumably.
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "apps/autojudge_commands.h"
#include "apps/progress_line.h"
#include "apps/run_options.h"
#include "autojudge/mining_store.h"
#include "core/error.h"

namespace klspec {
namespace {

struct MineOptions {
    RunOptions run;
    MiningOptions mining;
    DatasetChoice dataset;
    PromptOptions prompt;
    std::string out_dir;
    int32_t parallel = 1;
    bool json = false;
};

void run_mine(const MineOptions& options) {
    std::vector<Problem> problems = options.dataset.load();
    RunOptions run = options.run;
    run.context.hidden_states = true;
    // Each problem mined at a time continues on its own id; the teacher-forced passes run on the last (mine_problems).
    run.context.n_sequences = options.parallel + 1;
    DecodingSession session = open_session(run);
    relax_until_answer(session, prepare_prompts(problems, options.dataset, options.prompt, session), options.run.judge);
    if (!session.draft) throw Error("mining needs a draft model (-md)");
    // Responses end where a decoded answer ends, and only the positions a judge may relax are labelled.
    MiningOptions mining = options.mining;
    mining.stop_strings = session.generation.stop_strings;
    mining.span = session.generation.judge_span;

    const nlohmann::json meta = {{"target", session.target->path()},
                                 {"draft", session.draft->path()},
                                 {"dataset", options.dataset.name_or_path},
                                 {"draft_hidden_size", session.draft->n_embd()},
                                 {"target_hidden_size", session.target->n_embd()},
                                 {"max_tokens", mining.max_tokens},
                                 {"stop", mining.stop_strings},
                                 {"judge_span", mining.span.to_string()},
                                 {"temperature", mining.temperature},
                                 {"seed", mining.seed}};
    MiningWriter writer(
        options.out_dir, meta,
        [&](const std::string& id, std::span<const int32_t> response, std::span<const MinedPosition> mismatches) {
            const auto problem =
                std::find_if(problems.begin(), problems.end(), [&](const Problem& p) { return p.id == id; });
            if (problem == problems.end())
                throw Error(
                    fmt::format("{} holds problem {}, which this dataset lacks: use the dataset it was mined on",
                                options.out_dir, id));
            std::fprintf(stderr, "mine: computing the features of %s again (%zu mismatches)\n", id.c_str(),
                         mismatches.size());
            return recompute_features(*session.decoder, *problem, response, mismatches);
        });
    const size_t already = writer.finished_problems().size();
    if (already)
        std::fprintf(stderr, "mine: resuming %s: %zu problems already mined\n", options.out_dir.c_str(), already);

    std::vector<Problem> todo;
    for (const Problem& p : problems)
        if (!writer.finished_problems().contains(p.id)) todo.push_back(p);
    size_t done = 0, mismatches = 0, important = 0;
    ProgressLine progress("mine", todo.size(), "problems");
    mine_problems(
        *session.decoder, todo, mining, options.parallel, [&](size_t index, ProblemMining&& mined, double seconds) {
            writer.append(todo[index], mined, seconds);
            mismatches += mined.mismatches.size();
            for (const MinedMismatch& m : mined.mismatches) important += m.important;
            progress.update(++done, fmt::format("{} mismatches ({} important), {:.2f} mismatches/s", mismatches,
                                                important, double(mismatches) / progress.elapsed_seconds()));
        });
    progress.finish();
    const double seconds = progress.elapsed_seconds();
    const nlohmann::json summary = {{"out", options.out_dir},
                                    {"problems_mined_now", done},
                                    {"problems_total", writer.finished_problems().size()},
                                    {"rows_total", writer.rows()},
                                    {"mismatches_now", mismatches},
                                    {"important_now", important},
                                    {"seconds", seconds},
                                    {"mismatches_per_second", seconds > 0 ? double(mismatches) / seconds : 0.0}};
    if (options.json) {
        std::cout << summary.dump() << "\n";
    } else {
        std::cout << fmt::format(
            "mined {} problems in {:.1f} s: {} mismatches, {} important ({:.2f} mismatches/s)\n"
            "{} now holds {} problems, {} mismatches\n",
            done, seconds, mismatches, important, summary["mismatches_per_second"].get<double>(), options.out_dir,
            writer.finished_problems().size(), writer.rows());
    }
}

}  // namespace

void register_mine_command(CLI::App& app) {
    auto options = std::make_shared<MineOptions>();
    CLI::App* cmd = app.add_subcommand(
        "mine",
        "AutoJudge mining: label each draft/target mismatch of the target's greedy answers as important "
        "(swapping the draft token in changes the final answer) or not, with both models' hidden states");
    add_model_options(*cmd, options->run);
    add_dataset_options(*cmd, options->dataset, /*with_limit=*/true);
    add_prompt_options(*cmd, options->prompt);
    add_judge_span_option(*cmd, options->run.judge);
    cmd->add_option("--out", options->out_dir,
                    "Directory for labels.jsonl, features.f32, problems.jsonl, meta.json; an existing one is resumed")
        ->required();
    cmd->add_option("-n,--n-predict", options->mining.max_tokens, "Response length at most")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--draft-max", options->mining.draft_max,
                    "gamma of the lossless speculative decoding that writes the target's continuations")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    add_draft_policy_option(*cmd, options->mining.draft_policy);
    cmd->add_option("--temp", options->mining.temperature,
                    "Sample the continuations after a swap at this temperature (label consistency, Fig. 4); "
                    "0 = greedy, as docs/design.md's labels")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 100.0));
    cmd->add_option("-s,--seed", options->mining.seed, "Seed of the sampled continuations")->capture_default_str();
    cmd->add_option("--parallel", options->parallel,
                    "Mine this many problems together (also -np): their continuations are verified in one target "
                    "batch; the rows are written in problem order all the same")
        ->capture_default_str()
        ->check(CLI::Range(1, 63));
    cmd->add_flag("--json", options->json, "Print one JSON object instead of the summary");
    cmd->callback([options] { run_mine(*options); });
}

}  // namespace klspec
