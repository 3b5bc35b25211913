#include "apps/generate_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/run_options.h"
#include "apps/stats_report.h"
#include "core/error.h"

namespace klspec {
namespace {

struct GenerateOptions {
    RunOptions run;
    std::string prompt;
    std::string prompt_file;
    bool json = false;
};

std::string read_prompt(const GenerateOptions& options) {
    if (options.prompt_file.empty()) return options.prompt;
    std::ifstream in(options.prompt_file, std::ios::binary);
    if (!in) throw Error(fmt::format("cannot read prompt file: {}", options.prompt_file));
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

void run_generate(const GenerateOptions& options) {
    DecodingSession session = open_session(options.run);
    const std::string prompt = read_prompt(options);
    StepCallback print_text;
    if (!options.json) {
        std::fputs(prompt.c_str(), stdout);
        print_text = [](const StepResult& step) {
            std::fwrite(step.text.data(), 1, step.text.size(), stdout);
            std::fflush(stdout);
            return false;
        };
    }
    const GenerationResult result = session.decoder->generate(prompt, session.generation, print_text);

    if (options.json) {
        nlohmann::json out = {{"text", result.text},
                              {"tokens", result.tokens},
                              {"stop_reason", to_string(result.stop_reason)},
                              {"judge", session.generation.judge->name()},
                              {"stats", stats_to_json(result.stats)}};
        add_quality_bound(out, *session.generation.judge);
        std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
        std::fputs("\n\n", stdout);
        std::fflush(stdout);
        std::cerr << "stop: " << to_string(result.stop_reason) << "\n" << format_stats(result.stats)
                  << format_quality_bound(*session.generation.judge, result.stats);
    }
}

}  // namespace

void register_generate_command(CLI::App& app) {
    auto options = std::make_shared<GenerateOptions>();
    CLI::App* cmd = app.add_subcommand("generate", "Generate text for one prompt (speculative with -md)");
    add_run_options(*cmd, options->run);
    auto* prompt = cmd->add_option("-p,--prompt", options->prompt, "Prompt text");
    auto* prompt_file = cmd->add_option("-f,--file", options->prompt_file, "Read the prompt from a file");
    prompt->excludes(prompt_file);
    cmd->add_flag("--json", options->json, "Print one JSON object (text, tokens, stop_reason, stats) instead of text");
    cmd->callback([options] { run_generate(*options); });
}

}  // namespace klspec
