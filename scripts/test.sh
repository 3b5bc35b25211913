#!/usr/bin/env bash
# Builds klspec (with everything it needs) and runs the whole test suite, then the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer and every fuzzer for 20 s (scripts/test-sanitized.sh;
# KLSPEC_SKIP_SANITIZED=1 skips that second half, about 20 minutes on 2 cores from a cold build).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="${KLSPEC_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh"
(cd "$build_dir" && ctest --output-on-failure -j "$(nproc)")
if [[ "${KLSPEC_SKIP_SANITIZED:-0}" != 1 ]]; then
  bash "$root/scripts/test-sanitized.sh"
fi
