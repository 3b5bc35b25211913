#!/usr/bin/env bash
# klspec's cost per drafted token outside llama_decode at a real vocabulary size (V = 128256), against
# llama.cpp's own sampler chain per sampled token on the same model, in one run. Greedy, and T = 0.7 with
# top-p 0.9. The synthetic model (random weights, generated vocabulary) is made once by
# bench/costs/make_synthetic_gguf.py into ~/.cache/klspec/synthetic (needs Debian's python3-numpy).
#   bash bench/costs/vocab_overhead.sh [TOKENS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tokens=${1:-400}
llama_dir=$(bash "$root/scripts/build-llama.sh" | tail -n 1)
model=~/.cache/klspec/synthetic/syn-v128256-f16.gguf
if [[ ! -f $model ]]; then
  mkdir -p "$(dirname "$model")"
  PYTHONPATH="$llama_dir/src/gguf-py" /usr/bin/python3 "$root/bench/costs/make_synthetic_gguf.py" "$model" \
    --dim 256 --layers 2 --heads 4 --vocab 128256 --dtype f16
fi
echo "llama.cpp sampler chain (per sampled token):"
"$root/build/bench/sampler_chain_benchmark" --model "$model" --benchmark_min_time=0.2 \
  --benchmark_filter='BM_Sample' 2>/dev/null | grep '^BM_'
for sampling in "" "--temp 0.7 --top-p 0.9"; do
  echo "klspec generate, draft = target = the synthetic model, gamma 8, ${sampling:-greedy}:"
  "$root/build/klspec" generate -m "$model" -md "$model" -p "hello world" -n "$tokens" --draft-max 8 -t 1 \
    $sampling 2>&1 | tail -n 1
done
