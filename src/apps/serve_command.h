#pragma once

#include <CLI/CLI.hpp>

namespace klspec {

// `klspec serve`: an OpenAI-compatible HTTP server with per-request judge decoding (src/server).
void register_serve_command(CLI::App& app);

}  // namespace klspec
