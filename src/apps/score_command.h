#pragma once

#include <CLI/CLI.hpp>

namespace klspec {

// `klspec score`: accuracy of outputs made elsewhere, with the benchmark's own ids and scorer.
void register_score_command(CLI::App& app);

}  // namespace klspec
