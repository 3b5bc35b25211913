#!/usr/bin/env bash
# Builds klspec (with everything it needs) and runs the whole test suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="${KLSPEC_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh"
cd "$build_dir"
ctest --output-on-failure -j "$(nproc)"
