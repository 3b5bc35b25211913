// The flags shared by every subcommand that decodes: models, context, sampling, drafting, judge.
// Flag names follow llama.cpp where it has one (and accept its current spellings as aliases).
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/judge_factory.h"
#include "engine/speculative_decoder.h"
#include "eval/dataset.h"
#include "eval/prompting.h"

namespace klspec {

struct RunOptions {
    std::string target_path;
    std::string draft_path;                      // empty: target-only
    ModelOptions model;                          // the target's; the draft's too, but for its RPC servers
    std::vector<std::string> draft_rpc_servers;  // --rpc-draft; empty: the draft runs locally
    bool repack_prompt = false;                  // --repack-prompt: prefill prompts with a repacked copy of the target
    ContextOptions context;
    // --spec-type, llama.cpp's names: draft-simple (the draft model) and ngram-*, chained n-gram first.
    // Empty: the draft model when there is one.
    std::vector<std::string> spec_types;
    NgramOptions ngram;  // its types filled from spec_types by open_session
    GenerationOptions generation;
    JudgeOptions judge;
    std::string trace_path;       // --trace: one JSON line per judged position
    std::string cost_trace_path;  // --cost-trace: one JSON line per step, the cost model's prediction and the measure
    bool verbose = false;
    int priority = 0;       // --prio, llama.cpp's scale (engine/process_settings.h)
    std::string cpu_mask;   // --cpu-mask (hex); empty: all CPUs
    std::string cpu_range;  // --cpu-range (lo-hi); empty: all CPUs
};

// Models, context and threads: what every subcommand that loads models takes.
void add_model_options(CLI::App& app, RunOptions& options);
// --dataset, --data-dir, --split and (with_limit) --limit and --full-split.
void add_dataset_options(CLI::App& app, DatasetChoice& dataset, bool with_limit);
// --chat and --few-shot: how a benchmark's problems are put to the model (eval/prompting.h).
void add_prompt_options(CLI::App& app, PromptOptions& prompt);

// Length, drafting, sampling and stop strings.
void add_generation_options(CLI::App& app, GenerationOptions& generation);
// --draft-policy alone (mine's continuations).
void add_draft_policy_option(CLI::App& app, DraftPolicy& policy);
// The judge flags: the rule and its knobs (with_rule), and the settings any rule may read (confidence
// mask, head file, FLy window).
void add_judge_options(CLI::App& app, JudgeOptions& judge, bool with_rule);
// --judge-span alone (add_judge_options has it too), for commands that take a span but no rule.
void add_judge_span_option(CLI::App& app, JudgeOptions& judge);

// add_model_options, add_generation_options, add_judge_options, --trace and --cost-trace: a decoding command's
// flags.
void add_run_options(CLI::App& app, RunOptions& options);
// --cost-trace alone (serve, which has no per-position --trace).
void add_cost_trace_option(CLI::App& app, RunOptions& options);

// Everything a run's flags describe, ready to decode: the models and a decoder whose contexts provide
// what the judge reads (hidden states for autojudge). options.generation.judge is the run's judge.
struct DecodingSession {
    std::unique_ptr<Model> target;
    std::unique_ptr<Model> draft;          // null: no draft model (target-only, or n-gram drafts alone)
    std::unique_ptr<Model> prompt_target;  // --repack-prompt: the target repacked, for prompts only
    std::unique_ptr<SpeculativeDecoder> decoder;
    GenerationOptions generation;               // the run's options with its judge
    std::unique_ptr<std::ofstream> trace;       // open when --trace was given
    std::unique_ptr<std::ofstream> cost_trace;  // open when --cost-trace was given
};

// Without -m: the project's default pair from the models folder, target and draft: KLSPEC_MODELS_DIR if
// set, else an installed binary's <prefix>/share/klspec/models, else the source tree's models/.
DecodingSession open_session(const RunOptions& options);

// Formats the problems' prompts for the session's target (chat template, exemplars) and adds the
// benchmark's stop strings to session.generation.
PromptFormat prepare_prompts(std::vector<Problem>& problems, const DatasetChoice& dataset, const PromptOptions& prompt,
                             DecodingSession& session);
// sweep, mine and calibrate (issue 62): unless --judge-span was given, rules relax only before the benchmark's
// answer marker (PromptFormat::answer_marker): the answer's own tokens stay the target's, and so does its stop,
// where a relaxed token would let the output run on past the answer with MAT counting it (AutoJudge's labels
// never mark a token after the answer important).
void relax_until_answer(DecodingSession& session, const PromptFormat& format, const JudgeOptions& judge);

// llama.cpp spells some long flags with one dash (-md, -ngl, -np); CLI11 wants two. Rewrites them in place.
void normalize_llama_style_flags(int argc, char** argv);

}  // namespace klspec
