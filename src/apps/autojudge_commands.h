#pragma once

#include <CLI/CLI.hpp>

namespace klspec {

// `klspec mine`, `klspec train-judge`, `klspec analyze`: AutoJudge end to end (src/autojudge).
void register_mine_command(CLI::App& app);
void register_train_judge_command(CLI::App& app);
void register_analyze_command(CLI::App& app);

}  // namespace klspec
