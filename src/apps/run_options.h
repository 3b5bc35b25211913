// The flags shared by every subcommand that decodes: models, context, sampling, drafting.
// Flag names follow llama.cpp where it has one.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "core/judge_factory.h"
#include "engine/speculative_decoder.h"

namespace klspec {

struct RunOptions {
    std::string target_path;
    std::string draft_path;  // empty: target-only
    ModelOptions model;
    ContextOptions context;
    GenerationOptions generation;
    JudgeOptions judge;
    bool verbose = false;
};

void add_run_options(CLI::App& app, RunOptions& options);

// Everything a run's flags describe, ready to decode: the models, the judge, and a decoder whose
// contexts provide what the judge reads (hidden states for autojudge).
struct DecodingSession {
    std::unique_ptr<Model> target;
    std::unique_ptr<Model> draft;  // null: target-only
    std::unique_ptr<Judge> judge;
    std::unique_ptr<SpeculativeDecoder> decoder;
};

// Without -m: the project's reasoning pair from the models folder (KLSPEC_MODELS_DIR overrides where
// that is), target and draft.
DecodingSession open_session(const RunOptions& options);

// llama.cpp spells some long flags with one dash (-md, -ngl); CLI11 wants two. Rewrites them in place.
void normalize_llama_style_flags(int argc, char** argv);

}  // namespace klspec
