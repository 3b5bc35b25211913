#pragma once

#include <CLI/CLI.hpp>

namespace klspec {

// `klspec calibrate`: a rule's setting chosen for an accuracy budget and validated on held-out problems.
void register_calibrate_command(CLI::App& app);

}  // namespace klspec
