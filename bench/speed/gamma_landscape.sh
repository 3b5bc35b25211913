#!/bin/bash
# The speed of every fixed draft length beside the automatic choice on one pair: `klspec bench` at fixed γ
# 2, 3, 4, 6, 8, 10, 12, 16 and under --draft-policy auto, in two interleaved passes (the second in reverse
# order), pooled per setting; shows how flat the optimum the cost model searches is (docs/cost-model.md).
# Usage: bench/speed/gamma_landscape.sh OUT_DIR [KLSPEC] [TARGET] [LIMIT] [NP]
#   defaults: build/klspec, the default pair's target, 40 word problems, -np 1; -t 2, -n 384.
# One JSON per run in OUT_DIR (a run whose JSON is there is not repeated), then the table.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: bench/speed/gamma_landscape.sh OUT_DIR [KLSPEC] [TARGET] [LIMIT] [NP]}
KLSPEC=${2:-build/klspec}
TARGET=${3:-models/testbed-target.gguf}
LIMIT=${4:-40}
NP=${5:-1}
mkdir -p "$OUT"
lscpu > "$OUT/lscpu.txt"
for pass in 0 1; do
  order="2 3 4 6 8 10 12 16 auto"; [ $pass = 1 ] && order="auto 16 12 10 8 6 4 3 2"
  for g in $order; do
    f=$OUT/g$g-p$pass.json
    [ -s "$f" ] && continue
    if [ "$g" = auto ]; then flags=(); else flags=(--draft-policy fixed --draft-max "$g"); fi
    "$KLSPEC" bench --dataset data/testbed_word_test.jsonl --limit "$LIMIT" -t 2 -n 384 -m "$TARGET" \
      -md models/testbed-draft.gguf -np "$NP" --json "${flags[@]}" > "$f.tmp" && mv "$f.tmp" "$f"
  done
done
python3 - "$OUT" <<'PY'
import collections, json, pathlib, sys
out = pathlib.Path(sys.argv[1])
runs = collections.defaultdict(list)
for f in sorted(out.glob("g*-p*.json")):
    setting, _ = f.stem.rsplit("-p", 1)
    runs[setting[1:]].append(json.loads(f.read_text()))
cpu = next((l.split(":", 1)[1].strip() for l in (out / "lscpu.txt").read_text().splitlines() if l.startswith("Model name")), "?")
print(f"CPU: {cpu}\n\n| γ | decode tok/s (pooled) | per pass | MAT | target ms per step |\n|---|---:|---|---:|---:|")
best = 0.0
rows = []
for g in sorted(runs, key=lambda g: (g == "auto", int(g) if g.isdigit() else 0)):
    rs = runs[g]
    rate = sum(r["stats"]["emitted"] for r in rs) / sum(r["stats"]["seconds"]["decode"] for r in rs)
    if g != "auto": best = max(best, rate)
    per_pass = " / ".join(f'{r["stats"]["tokens_per_second"]:.1f}' for r in rs)
    mat = sum(r["stats"]["emitted"] for r in rs) / sum(r["stats"]["target_calls"] for r in rs)
    step = 1e3 * sum(r["stats"]["seconds"]["verify"] for r in rs) / sum(r["stats"]["target_calls"] for r in rs)
    rows.append((g, rate))
    print(f"| {g} | {rate:.1f} | {per_pass} | {mat:.2f} | {step:.1f} |")
auto = dict(rows).get("auto")
if auto and best: print(f"\nauto: {100 * auto / best:.0f} % of the best fixed γ")
PY
