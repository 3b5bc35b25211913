#pragma once

#include <CLI/CLI.hpp>

namespace klspec {

// `klspec sweep`: the paper's accuracy-against-MAT experiment in one command.
void register_sweep_command(CLI::App& app);

}  // namespace klspec
