#!/usr/bin/env bash
# The whole test suite RUNS times in a row (default 10) with two CPU-bound processes beside it, as on a
# shared, busy host: timing-dependent tests (progress lines, thread pools, timeouts, servers) fail here first.
# Stops at the first failing run and prints its failures; each run's log is kept in a temporary folder.
# Builds first (scripts/build.sh). About 8 minutes a run on 2 cores.
#   bash scripts/test-under-load.sh [RUNS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="${KLSPEC_BUILD_DIR:-$root/build}"
runs="${1:-10}"
if [[ ! "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "test-under-load: RUNS must be a positive whole number, got '$runs'" >&2
  exit 1
fi
bash "$root/scripts/build.sh"
logs=$(mktemp -d "${TMPDIR:-/tmp}/klspec-under-load.XXXXXX")
busy=()
for _ in 1 2; do
  python3 -c 'while True: pass' &
  busy+=("$!")
done
trap 'kill "${busy[@]}" 2>/dev/null || true' EXIT
echo "test-under-load: $runs runs, two busy processes (pids ${busy[*]}), logs in $logs"
for run in $(seq "$runs"); do
  start=$(date +%s)
  if (cd "$build_dir" && ctest --output-on-failure -j "$(nproc)") > "$logs/run-$run.log" 2>&1; then
    summary=$(grep -m1 "tests passed" "$logs/run-$run.log")
    echo "run $run of $runs passed in $(( $(date +%s) - start )) s, load average $(cut -d' ' -f1-3 /proc/loadavg): $summary"
  else
    echo "run $run of $runs FAILED after $(( $(date +%s) - start )) s; log: $logs/run-$run.log" >&2
    sed -n '/tests passed\|The following tests FAILED/,$p' "$logs/run-$run.log" >&2
    exit 1
  fi
done
echo "test-under-load: all $runs runs passed"
