#pragma once

#include <CLI/CLI.hpp>

namespace klspec {

// `klspec generate`: decode one prompt, print the text and the run's statistics.
void register_generate_command(CLI::App& app);

}  // namespace klspec
