// What `sweep` and `calibrate` share: their flags, the settings a resumed run must match, and opening
// the models with what every point's judge needs.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/run_options.h"
#include "eval/sweep.h"

namespace klspec {

struct SweepRunOptions {
    RunOptions run;
    DatasetChoice dataset;
    PromptOptions prompt;
    std::string out_dir;
    int32_t parallel = 1;
};

// Models, generation (-n defaults to 512: room for a chain of thought), the judge settings points share,
// the dataset flags, --out (described by out_help) and --parallel.
void add_sweep_run_options(CLI::App& app, SweepRunOptions& options, const std::string& out_help);

// The models, with hidden states when a point needs them (autojudge) and -np sequences; the problems'
// prompts formatted for the target and the benchmark's stop strings added to session.generation.
DecodingSession open_sweep_session(const SweepRunOptions& options, const std::vector<SweepPoint>& points,
                                   std::vector<Problem>& problems, PromptFormat& format);

// What makes two runs' examples comparable (models, dataset, prompts, decoding, shared judge settings, threads).
nlohmann::json sweep_settings(const SweepRunOptions& options, const DecodingSession& session,
                              const PromptFormat& format);

// The problems, each with a gold answer or code tests (klspec::Error naming one without).
std::vector<Problem> load_scored_problems(const DatasetChoice& dataset);

}  // namespace klspec
