#!/usr/bin/env bash
# Code completion in the editor in one command: fetches the real pair (Qwen2.5-Coder-1.5B-Instruct target,
# 0.5B draft; scripts/fetch-real-model.sh) and serves it with `klspec serve` where llama.vim and llama.vscode
# look by default (http://127.0.0.1:8012/infill), with the settings of llama-server's --fim-qwen-1.5b-default
# preset: batch 1024, the model's 32768-token context, --cache-reuse 256. Builds klspec first when
# build/klspec is missing. More flags go to `klspec serve` (a judge: --judge kl --judge-threshold 0.3).
#
#   bash scripts/serve-fim.sh [klspec serve flags...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
klspec="${KLSPEC_CLI:-$root/build/klspec}"
[[ -x "$klspec" ]] || bash "$root/scripts/build.sh" >&2
target=$(bash "$root/scripts/fetch-real-model.sh" qwen2.5-coder-1.5b | tail -n 1)
draft=$(bash "$root/scripts/fetch-real-model.sh" qwen2.5-coder-0.5b | tail -n 1)
exec "$klspec" serve -m "$target" -md "$draft" --port 8012 -b 1024 -c 32768 --cache-reuse 256 "$@"
