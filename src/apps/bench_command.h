#pragma once

#include <CLI/CLI.hpp>

namespace klspec {

// `klspec bench`: decode every prompt of a JSONL dataset, report summed statistics and accuracy.
void register_bench_command(CLI::App& app);

}  // namespace klspec
