#!/usr/bin/env bash
# The whole test suite built with AddressSanitizer and UndefinedBehaviorSanitizer (clang; klspec's own
# code instrumented, the cached llama.cpp as installed), then every libFuzzer target of tests/fuzz for
# KLSPEC_FUZZ_SECONDS each (default 20) from its committed corpus. Fails on any failing test, any
# sanitizer report (of the tests or of the CLI processes they start) and any fuzzer crash.
#   bash scripts/test-sanitized.sh          # build-sanitize/ (or $KLSPEC_SANITIZE_BUILD_DIR)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib/configure.sh"
build_dir="${KLSPEC_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
fuzz_seconds="${KLSPEC_FUZZ_SECONDS:-20}"
source "$root/scripts/lib/phases.sh"
source "$root/scripts/lib/ccache.sh"

phase packages bash "$root/scripts/setup-deps.sh"
llama_dir=$(phase llama.cpp bash "$root/scripts/build-llama.sh" | tail -n 1)
configure_klspec "$build_dir" "$llama_dir" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DKLSPEC_SANITIZE=address,undefined -DKLSPEC_FUZZ=ON -DKLSPEC_BUILD_BENCHMARKS=OFF "${ccache_launcher[@]}"
phase "sanitized build" cmake --build "$build_dir" -j "$(nproc)"

# Reports go to files as well as stderr: a report in a child process (the CLI a test runs) is found even
# where the test only checks an exit code. Exit code 86 is no code klspec itself uses.
reports="$build_dir/sanitizer-reports"
rm -rf "$reports" && mkdir -p "$reports"
export ASAN_OPTIONS="log_path=$reports/asan:exitcode=86:detect_stack_use_after_return=1:strict_string_checks=1"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1:exitcode=86"
export LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0"
status=0
# The tests scripts/lib/sanitized_selection.sh names (and why) are left out; the plain run covers them.
# Its output stays in the build folder: test.sh lists the slowest tests from it.
source "$root/scripts/lib/sanitized_selection.sh"
phase "sanitized tests" bash -c 'cd "$1" && env -u KLSPEC_PHASE_TIMES ctest --output-on-failure -j "$(nproc)" -LE "$2" -E "$3" | tee ctest.log;
  exit "${PIPESTATUS[0]}"' _ "$build_dir" "$sanitized_excluded_labels" "$sanitized_excluded_tests" || status=1
fuzz_one() {  # fuzz_one FUZZER: it runs for $fuzz_seconds from its committed corpus; fails if it finds a crash
  local name work scratch status=0
  name=$(basename "$1"); name=${name#fuzz_}
  work=$(mktemp -d)  # new inputs go here; the committed corpus is only read
  # The harnesses' scratch files go under their own TMPDIR: libFuzzer ends a timed run without atexit handlers,
  # which left klspec-fuzz-PID folders in /tmp.
  scratch=$(mktemp -d)
  echo "fuzzing $name for ${fuzz_seconds}s"
  TMPDIR="$scratch" "$1" -max_total_time="$fuzz_seconds" -rss_limit_mb=4096 \
    -artifact_prefix="$build_dir/crash-$name-" "$work" "$root/tests/fuzz/corpus/$name" >"$build_dir/fuzz-$name.log" 2>&1 \
    || { echo "fuzz_$name failed: see $build_dir/fuzz-$name.log"; tail -n 30 "$build_dir/fuzz-$name.log"; status=1; }
  rm -rf "$work" "$scratch"
  return "$status"
}
# Every fuzzer, as many at once as there are cores: each is one process on one core (one after another they took
# 6 x 20 s on 2 cores with one idle). xargs fails if any of them does.
fuzz_all() {
  export -f fuzz_one
  export build_dir root fuzz_seconds
  printf '%s\0' "$build_dir"/tests/fuzz/fuzz_* | xargs -0 -n 1 -P "$(nproc)" bash -c 'fuzz_one "$1"' _
}
phase fuzzers fuzz_all || status=1

if compgen -G "$reports/*" >/dev/null; then
  echo "sanitizer reports:"; head -n 40 "$reports"/*; status=1
fi
exit $status
