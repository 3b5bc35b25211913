#!/bin/bash
# klspec serve with its defaults (the automatic γ) against llama-server at γ 4, 8 and 16 (its default is 16)
# on the grown F16 target (bench/grown_target/grow_target.py): both -np 8 -t 2, 16 word problems,
# max_tokens 192, greedy, no prompt caching, 1 and 8 clients, in two interleaved passes (the second in
# reverse order). Each serve_load.py run sends the workload to klspec, then to a llama-server it starts, so
# klspec is measured once beside each γ. Ends with the table of issue 47's goal: klspec ≥ 0.95× llama-server
# at its best γ (bench/serving/serve_compare_table.py).
# Usage: bench/serving/serve_grown_compare.sh [OUT_DIR] [KLSPEC]; one JSON per run in OUT_DIR (about 25
# minutes on 2 cores; a run whose JSON is there is not repeated).
set -u
cd "$(dirname "$0")/../.."
OUT=${1:-$HOME/.cache/klspec/serve-grown3}; mkdir -p "$OUT"
KLSPEC=${2:-build/klspec}
T=build/models/testbed-target-w4-f3-l12-F16.gguf
D=models/testbed-draft.gguf
LS=$(ls -d ~/.cache/klspec/llama.cpp-de3ff815ea7d-*/install/bin/llama-server | head -1)
[ -f "$T" ] || /usr/bin/python3 bench/grown_target/grow_target.py
lscpu > "$OUT/lscpu.txt"
LOAD="python3 bench/serving/serve_load.py --url http://127.0.0.1:18500 --prompts data/testbed_word_test.jsonl --limit 16 --requests 16 --max-tokens 192 --no-cache-prompt --json"
for pass in 1 2; do
  order="4 8 16"; [ $pass = 2 ] && order="16 8 4"
  "$KLSPEC" serve -m $T -md $D -np 8 -t 2 --port 18500 > "$OUT/serve-p$pass.log" 2>&1 &
  KPID=$!
  for i in $(seq 120); do curl -sf http://127.0.0.1:18500/health >/dev/null && break; sleep 1; done
  for G in $order; do
    for C in 1 8; do
      f=$OUT/g$G-c$C-p$pass.json
      [ -s "$f" ] && continue
      $LOAD --concurrency $C --llama-server "$LS" --llama-server-args "-m $T -md $D --spec-type draft-simple --spec-draft-n-max $G -np 8 -c 4096 -t 2 -td 2 --no-webui" > "$f.tmp" 2> "$f.err" && mv "$f.tmp" "$f"
      echo "γ$G c$C p$pass rc $? $(date)" >> "$OUT/progress"
    done
  done
  kill $KPID; wait $KPID
done
python3 bench/serving/serve_compare_table.py "$OUT"
