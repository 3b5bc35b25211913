#include "apps/generate_command.h"

#include <unistd.h>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/run_options.h"
#include "apps/stats_report.h"
#include "core/error.h"
#include "server/provenance.h"

namespace klspec {
namespace {

struct GenerateOptions {
    RunOptions run;
    std::string prompt;
    std::string prompt_file;
    bool json = false;
    std::string color = "auto";  // auto: when stdout is a terminal
};

// The page's colours (GET / of `klspec serve`) on a terminal: green an accepted draft, black on orange
// a relaxed one, blue the target's own token.
std::string_view ansi_colour(server::Provenance provenance) {
    switch (provenance) {
        case server::Provenance::Draft:
            return "\x1b[32m";
        case server::Provenance::Relaxed:
            return "\x1b[30;48;5;214m";
        case server::Provenance::Target:
            return "\x1b[34m";
    }
    return "";
}
constexpr std::string_view kAnsiReset = "\x1b[0m";

bool use_colour(const GenerateOptions& options) {
    if (options.json) return false;
    return options.color == "always" || (options.color == "auto" && isatty(STDOUT_FILENO));
}

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
    const bool colour = use_colour(options);
    if (colour) {
        std::cerr << "colours: ";
        for (const auto provenance :
             {server::Provenance::Draft, server::Provenance::Relaxed, server::Provenance::Target})
            std::cerr << ansi_colour(provenance) << server::to_string(provenance) << kAnsiReset << " ";
        std::cerr << "(accepted draft, kept only by the judge, the target's token)\n";
    }
    server::ProvenanceSpans spans;
    StepCallback print_text;
    // The prompt is echoed with the first text, once decoding has accepted it: a refused prompt (longer than
    // the context, say) leaves stdout empty and its one error line on stderr.
    bool prompt_shown = false;
    const auto show_prompt = [&] {
        if (!std::exchange(prompt_shown, true)) std::fputs(prompt.c_str(), stdout);
    };
    if (!options.json) {
        print_text = [&](const StepResult& step) {
            show_prompt();
            if (!colour) {
                std::fwrite(step.text.data(), 1, step.text.size(), stdout);
            } else {
                const std::vector<server::TokenOrigin> origins =
                    server::step_origins(step.tokens.size(), step.verdicts);
                for (size_t i = 0; i < step.tokens.size(); ++i)
                    spans.add_token(session.decoder->target().piece(step.tokens[i]), origins[i]);
                for (const server::TextSpan& span : spans.take(step.text))
                    fmt::print(stdout, "{}{}{}", ansi_colour(span.origin.provenance), span.text, kAnsiReset);
            }
            std::fflush(stdout);
            return false;
        };
    }
    const GenerationResult result = session.decoder->generate(prompt, session.generation, print_text);

    if (options.json) {
        nlohmann::json out = {
            {"text", result.text},
            {"tokens", result.tokens},
            {"stop_reason", to_string(result.stop_reason)},
            {"judge", session.generation.judge->name()},
            {"models",
             {{"target", session.target->path()},
              {"draft", session.draft ? nlohmann::json(session.draft->path()) : nlohmann::json(nullptr)}}},
            {"stats", stats_to_json(result.stats)}};
        add_quality_bound(out, *session.generation.judge);
        add_draft_policy(out, session.generation.draft_policy, session.decoder->verify_costs(),
                         session.decoder->draft_costs());
        std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
        show_prompt();
        std::fputs("\n\n", stdout);
        std::fflush(stdout);
        std::cerr << "stop: " << to_string(result.stop_reason) << "\n"
                  << format_stats(result.stats) << format_quality_bound(*session.generation.judge, result.stats);
    }
}

}  // namespace

void register_generate_command(CLI::App& app) {
    auto options = std::make_shared<GenerateOptions>();
    CLI::App* cmd = app.add_subcommand("generate", "Generate text for one prompt (speculative with -md)");
    options->run.generation.draft_policy = DraftPolicy::Auto;  // the cost model chooses gamma
    add_run_options(*cmd, options->run);
    auto* prompt = cmd->add_option("-p,--prompt", options->prompt, "Prompt text");
    auto* prompt_file = cmd->add_option("-f,--file", options->prompt_file, "Read the prompt from a file");
    prompt->excludes(prompt_file);
    cmd->add_flag("--json", options->json, "Print one JSON object (text, tokens, stop_reason, stats) instead of text");
    cmd->add_option("--color", options->color,
                    "Colour each token by where it came from (accepted draft, relaxed by the judge, target): auto "
                    "(when stdout is a terminal), always or never")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "always", "never"}));
    cmd->callback([options] { run_generate(*options); });
}

}  // namespace klspec
