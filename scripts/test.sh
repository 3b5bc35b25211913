#!/usr/bin/env bash
# Builds klspec (with everything it needs) and runs the whole test suite, then the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer and every fuzzer for 20 s (scripts/test-sanitized.sh;
# KLSPEC_SKIP_SANITIZED=1 skips that second half, about 20 minutes on 2 cores from a cold build).
# The entries of the temporary directory are listed before and after the tests: each new one is printed, and
# with KLSPEC_STRICT_TMP=1 (CI, where nothing else runs) any new one fails the run (docs/reliability.md).
# At the end it prints each phase's wall time and the 15 slowest tests of each half (scripts/lib/phases.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="${KLSPEC_BUILD_DIR:-$root/build}"
tmp="${TMPDIR:-/tmp}"
source "$root/scripts/lib/phases.sh"
own=$(mktemp -d)  # outside $tmp's listing: this script's own entry
trap 'rm -rf "$own"' EXIT
export KLSPEC_PHASE_TIMES="$own/phases"
bash "$root/scripts/build.sh"
ls -A "$tmp" | sort >"$own/entries"
status=0
phase "plain tests" bash -c 'cd "$1" && env -u KLSPEC_PHASE_TIMES ctest --output-on-failure -j "$(nproc)" | tee "$2"; exit "${PIPESTATUS[0]}"' \
  _ "$build_dir" "$own/plain.log" || status=$?
sanitized_log="${KLSPEC_SANITIZE_BUILD_DIR:-$root/build-sanitize}/ctest.log"
if [[ "${KLSPEC_SKIP_SANITIZED:-0}" != 1 ]]; then
  rm -f "$sanitized_log"
  bash "$root/scripts/test-sanitized.sh" || status=$?
fi
# A report that fails to print must not fail the run.
phase_report "$KLSPEC_PHASE_TIMES" || true
slowest_tests "$own/plain.log" 15 "slowest plain tests:" || true
if [[ -s "$sanitized_log" ]]; then slowest_tests "$sanitized_log" 15 "slowest sanitized tests:" || true; fi
left=$(ls -A "$tmp" | sort | comm -13 "$own/entries" - | grep -vx "$(basename "$own")" || true)
if [[ -n "$left" ]]; then
  echo "test.sh: the tests left $(wc -l <<<"$left") new entries in $tmp:" >&2
  sed 's/^/  /' <<<"$left" >&2
  [[ "${KLSPEC_STRICT_TMP:-0}" == 1 && $status == 0 ]] && status=1
fi
exit "$status"
