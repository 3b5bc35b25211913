#!/usr/bin/env bash
# Builds klspec (with everything it needs) and runs speculative generation with the paper's KL rule on
# the default models: the project's own testbed pair in models/ (a 39.6 M-parameter F16 target and a
# 0.6 M-parameter draft trained on generated word problems, multiple choice and program tracing; see
# tools/testbed/README.md). The prompt is the first problem of data/testbed_word_test.jsonl. Extra
# arguments go to `klspec generate`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="${KLSPEC_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh" >/dev/null
prompt=$'Q: Dan has 5 piles with 27 leaves in each and 73 more. How many leaves does Dan have now?\nA:'
exec "$build_dir/klspec" generate -p "$prompt" -n 256 --draft-max 8 --judge kl --judge-threshold 0.3 "$@"
