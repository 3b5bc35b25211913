#!/usr/bin/env bash
# The engine and server tests built with ThreadSanitizer (clang; klspec's own code instrumented, the cached
# llama.cpp as installed: ggml's OpenMP workers are not instrumented, so TSan checks klspec's threads, the
# server's handlers, scheduler and channels, against each other). Fails on any failing test and any report
# (of the tests or of the CLI processes they start). About 15 minutes on 2 cores from a cold build; not part
# of scripts/test.sh (CI's time), run before resolving work on threads.
#   bash scripts/test-tsan.sh          # build-tsan/ (or $KLSPEC_TSAN_BUILD_DIR)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib/configure.sh"
build_dir="${KLSPEC_TSAN_BUILD_DIR:-$root/build-tsan}"

bash "$root/scripts/setup-deps.sh"
llama_dir=$(bash "$root/scripts/build-llama.sh" | tail -n 1)
configure_klspec "$build_dir" "$llama_dir" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DKLSPEC_SANITIZE=thread -DKLSPEC_BUILD_BENCHMARKS=OFF
cmake --build "$build_dir" -j "$(nproc)" --target klspec klspec_engine_tests klspec_server_tests derived_models

reports="$build_dir/sanitizer-reports"
rm -rf "$reports" && mkdir -p "$reports"
export TSAN_OPTIONS="log_path=$reports/tsan:exitcode=86:halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp"
status=0
for tests in klspec_engine_tests klspec_server_tests; do
  (cd "$build_dir/tests" && "./$tests" --gtest_brief=1) || status=1
done
if compgen -G "$reports/*" >/dev/null; then
  echo "sanitizer reports:"; head -n 60 "$reports"/*; status=1
fi
exit $status
