#!/usr/bin/env bash
# Sets up everything klspec needs and builds it into ./build (or $KLSPEC_BUILD_DIR):
# Debian packages, the pinned llama.cpp (cached outside the clone), then klspec itself (its objects cached by
# ccache outside the clone too: scripts/lib/ccache.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib/configure.sh"
build_dir="${KLSPEC_BUILD_DIR:-$root/build}"
source "$root/scripts/lib/phases.sh"
source "$root/scripts/lib/ccache.sh"

phase packages bash "$root/scripts/setup-deps.sh"
llama_dir=$(phase llama.cpp bash "$root/scripts/build-llama.sh" | tail -n 1)
configure_klspec "$build_dir" "$llama_dir" "${ccache_launcher[@]}"
phase "klspec build" cmake --build "$build_dir" -j "$(nproc)"
