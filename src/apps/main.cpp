// klspec: judge decoding (speculative decoding with relaxed verification) on llama.cpp.
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "apps/autojudge_commands.h"
#include "apps/bench_command.h"
#include "apps/calibrate_command.h"
#include "apps/generate_command.h"
#include "apps/run_options.h"
#include "apps/score_command.h"
#include "apps/serve_command.h"
#include "apps/sweep_command.h"
#include "apps/thread_wait.h"
#include "core/error.h"

int main(int argc, char** argv) {
    klspec::apply_poll_level(argv);  // first: it may re-execute the process
    CLI::App app{"klspec: speculative decoding with judge rules (KL, Top-K, entropy, AutoJudge) on llama.cpp"};
    app.require_subcommand(1);
    app.failure_message([](const CLI::App*, const CLI::Error& e) {
        return "klspec: error: " + std::string(e.what()) + " (see --help)\n";
    });
    app.set_version_flag("--version", "klspec 0.1.0");
    klspec::register_generate_command(app);
    klspec::register_bench_command(app);
    klspec::register_mine_command(app);
    klspec::register_train_judge_command(app);
    klspec::register_analyze_command(app);
    klspec::register_score_command(app);
    klspec::register_sweep_command(app);
    klspec::register_calibrate_command(app);
    klspec::register_serve_command(app);

    klspec::normalize_llama_style_flags(argc, argv);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help and --version exit 0; every flag error is bad usage, exit 1 as any bad input (not CLI11's
        // 105-109): 1 for what the user can fix, 2 for klspec's own failures.
        return app.exit(e) == 0 ? 0 : 1;
    } catch (const klspec::Error& e) {
        std::fprintf(stderr, "klspec: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "klspec: internal error: %s\n", e.what());
        return 2;
    }
    return 0;
}
