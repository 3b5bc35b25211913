#!/bin/bash
# klspec serve (automatic γ, and fixed γ 4) against llama-server γ 4 on the grown F16 target (bench/grown_target/grow_target.py),
# -np 8 -t 2, 16 word problems, max_tokens 192, greedy, no prompt caching, 1 and 8 clients, two interleaved passes.
# Usage: bench/serving/serve_grown_compare.sh [OUT_DIR]; one JSON per run in OUT_DIR (about 10 minutes on 2 cores).
set -u
cd "$(dirname "$0")/../.."
OUT=${1:-$HOME/.cache/klspec/serve-grown2}; mkdir -p $OUT
T=build/models/testbed-target-w4-f3-l12-F16.gguf
D=models/testbed-draft.gguf
LS=$(ls -d ~/.cache/klspec/llama.cpp-de3ff815ea7d-7167bf1943)/install/bin/llama-server
lscpu > $OUT/lscpu.txt
LOAD="python3 bench/serving/serve_load.py --url http://127.0.0.1:18500 --prompts data/testbed_word_test.jsonl --limit 16 --requests 16 --max-tokens 192 --no-cache-prompt --json"
for pass in 1 2; do
  for S in auto fixed4; do
    args=""; [ $S = fixed4 ] && args="--draft-policy fixed --draft-max 4"
    build/klspec serve -m $T -md $D -np 8 -t 2 --port 18500 $args > $OUT/serve-$S-p$pass.log 2>&1 &
    KPID=$!
    for i in $(seq 120); do curl -sf http://127.0.0.1:18500/health >/dev/null && break; sleep 1; done
    for C in 1 8; do
      f=$OUT/$S-c$C-p$pass.json
      if [ $S = auto ]; then
        $LOAD --concurrency $C --llama-server $LS --llama-server-args "-m $T -md $D --spec-type draft-simple --spec-draft-n-max 4 -np 8 -c 4096 -t 2 -td 2 --no-webui" > $f 2> $f.err
      else
        $LOAD --concurrency $C > $f 2> $f.err
      fi
      echo "$S c$C p$pass rc $? $(date)" >> $OUT/progress
    done
    kill $KPID; wait $KPID
  done
done
echo finished $(date) >> $OUT/progress
