#!/usr/bin/env bash
# Line and branch coverage of klspec's own code (src/ by folder, and python/'s module) by the test suite, measured
# with gcc's --coverage and gcovr (Debian): first by the tests the sanitized half runs (scripts/test-sanitized.sh's
# selection: no real-model, real-pair or lm-eval labels, nor the tests a sanitized build does not register, chosen
# by their labels), then by the whole plain run. Prints both per folder and the share of the plain run's covered
# src/ lines that the sanitized selection covers too (docs/reliability.md, "Coverage"). Not part of CI: a build of
# its own and the whole suite, 32 minutes on 2 cores (an AVX2 EPYC).
#   bash scripts/coverage.sh [--json FILE]      # builds into build-coverage/ (or $KLSPEC_COVERAGE_BUILD_DIR)
# Not counted: the fuzzers (libFuzzer needs clang; the sanitized half runs them for 20 s each), llama.cpp (not
# instrumented), python/klspec/__init__.py (two lines of re-exports). Optimised code (-O2, as the suite runs) credits
# a few lines less than -O0 would; the numbers are for comparing runs of this script, not other tools.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib/configure.sh"
build_dir="${KLSPEC_COVERAGE_BUILD_DIR:-$root/build-coverage}"
json_out=""
if [[ "${1:-}" == --json ]]; then json_out=${2:?--json needs a file}; fi
source "$root/scripts/lib/ccache.sh"

bash "$root/scripts/setup-deps.sh" gcovr
llama_dir=$(bash "$root/scripts/build-llama.sh" | tail -n 1)
# Atomic counters: the server's threads update them at once.
flags="--coverage -fprofile-update=atomic"
configure_klspec "$build_dir" "$llama_dir" -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS=--coverage -DCMAKE_SHARED_LINKER_FLAGS=--coverage -DCMAKE_MODULE_LINKER_FLAGS=--coverage \
  "${ccache_launcher[@]}"
cmake --build "$build_dir" -j "$(nproc)"
find "$build_dir" -name '*.gcda' -delete

# gcovr's JSON of src/ and python/: per file, each line's count and branches.
report() {
  gcovr --root "$root" --object-directory "$build_dir" --filter "$root/src/" --filter "$root/python/" \
        --exclude-directories '.*/CMakeFiles/[0-9.]+/.*' \
        --exclude-throw-branches --exclude-unreachable-branches --json "$1" -j "$(nproc)" >/dev/null
}
source "$root/scripts/lib/sanitized_selection.sh"
# And what a sanitized build does not register: the Python module's tests, the install and in-tree checks, bench.*.
labels="$sanitized_excluded_labels|python|install|in-tree"
tests="$sanitized_excluded_tests|^bench[.]"
# A failing test still leaves its counts: the report is made, and the run says so at its end.
failed=0
echo "coverage: the sanitized half's selection" >&2
(cd "$build_dir" && ctest -j "$(nproc)" -LE "$labels" -E "$tests" --output-on-failure) || failed=1
report "$build_dir/coverage-sanitized.json"
echo "coverage: the rest of the plain run" >&2
(cd "$build_dir" && ctest -j "$(nproc)" -L "$labels" --output-on-failure) || failed=1
(cd "$build_dir" && ctest -j "$(nproc)" -LE "$labels" -R "$tests" --output-on-failure) || failed=1
report "$build_dir/coverage-plain.json"
python3 "$root/scripts/lib/coverage_table.py" "$build_dir/coverage-sanitized.json" "$build_dir/coverage-plain.json" \
  ${json_out:+--json "$json_out"}
if ((failed)); then echo "coverage: some tests failed (above); the numbers count what ran" >&2; exit 1; fi
