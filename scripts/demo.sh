#!/usr/bin/env bash
# Builds klspec (with everything it needs) and runs speculative generation with the paper's KL rule on
# the default models: the project's own reasoning pair in models/ (a 2.5 M-parameter target and a
# 0.3 M-parameter draft trained on arithmetic word problems). Extra arguments go to `klspec generate`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="${KLSPEC_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh" >/dev/null
prompt=$'Q: Sam has 12 apples. He buys 7 more and gives 5 away. How many apples does Sam have?\nA:'
exec "$build_dir/klspec" generate -p "$prompt" -n 96 --draft-max 8 --judge kl --judge-threshold 0.5 "$@"
