#!/usr/bin/env bash
# Builds klspec (with everything it needs) and runs the whole test suite, then the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer and every fuzzer for 20 s (scripts/test-sanitized.sh;
# KLSPEC_SKIP_SANITIZED=1 skips that second half, about 20 minutes on 2 cores from a cold build).
# The entries of the temporary directory are listed before and after the tests: each new one is printed, and
# with KLSPEC_STRICT_TMP=1 (CI, where nothing else runs) any new one fails the run (docs/reliability.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="${KLSPEC_BUILD_DIR:-$root/build}"
tmp="${TMPDIR:-/tmp}"
bash "$root/scripts/build.sh"
before=$(mktemp -d)  # outside $tmp's listing: this script's own entry
trap 'rm -rf "$before"' EXIT
ls -A "$tmp" | sort >"$before/entries"
status=0
(cd "$build_dir" && ctest --output-on-failure -j "$(nproc)") || status=$?
if [[ "${KLSPEC_SKIP_SANITIZED:-0}" != 1 ]]; then
  bash "$root/scripts/test-sanitized.sh" || status=$?
fi
left=$(ls -A "$tmp" | sort | comm -13 "$before/entries" - | grep -vx "$(basename "$before")" || true)
if [[ -n "$left" ]]; then
  echo "test.sh: the tests left $(wc -l <<<"$left") new entries in $tmp:" >&2
  sed 's/^/  /' <<<"$left" >&2
  [[ "${KLSPEC_STRICT_TMP:-0}" == 1 && $status == 0 ]] && status=1
fi
exit "$status"
