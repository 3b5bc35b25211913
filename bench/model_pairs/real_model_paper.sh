#!/bin/bash
# The paper's comparisons on the real model's text (issue 45 item 4, docs/real-model.md): every stage a
# klspec command that keeps its results under OUT and resumes where it stopped, so the whole runs in slices
# (about 10 hours of 2 cores in all). Stages, in order, each skipped once its `done` stamp exists:
#   1. gsm8k-sweep     GSM8K test (the seeded subset, first 240), 2-shot plain prompts, -n 96, greedy, γ 4 fixed,
#                      the exit-9 adapter draft, --no-repack (greedy verification is then target-only decoding),
#                      vanilla and every rule of the issue
#   2. mmlu-sweep      the same on MMLU-Pro test (--full-split: its seeded subset is only 100; first 240)
#   3. calibrate       klspec calibrate's τ for KL on 160 GSM8K train problems the adapter was not trained on
#                      (--skip 240), by agreement with vanilla's answers (the model solves too few problems for
#                      an accuracy budget to bind), budget 5 %
#   4. mine            AutoJudge mining on 40 more GSM8K train problems (--skip 400: neither the adapter's nor
#                      the calibration's)
#   5. head            train-judge on that mining run
#   6. autojudge-gsm8k, autojudge-mmlu   the head's points (and vanilla) on the test problems of 1 and 2:
#                      in domain and under the paper's domain shift
# Usage: bench/model_pairs/real_model_paper.sh [OUT]   (default ~/.cache/klspec/real-sweeps)
#   nohup nice -n 19 bench/model_pairs/real_model_paper.sh > ~/.cache/klspec/real-sweeps/paper.log 2>&1 &
# Tables at any point: the same klspec sweep command with --summary-only (docs/real-model.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-$HOME/.cache/klspec/real-sweeps}
KLSPEC=${KLSPEC:-build/klspec}
MODEL=$(scripts/fetch-real-model.sh | tail -1)
DIR=$(dirname "$MODEL")
DRAFT=$DIR/gemma-3-270m-q4_k_m-exit9-adapter.gguf
if [ ! -f "$DRAFT" ]; then
  echo "real_model_paper: $DRAFT is missing: make it with tools/real_model/train_adapter.py (docs/real-model.md)" >&2
  exit 1
fi
mkdir -p "$OUT"
PAIR=(-m "$MODEL" -md "$DRAFT" --no-repack -t 2 --data-dir "${KLSPEC_DATA_DIR:-../shared/datasets}")
DECODE=(-n 96 --draft-max 4 --draft-policy fixed)
RULES=(kl:0.1,0.2,0.3,0.5,1 topk:2,4 target-entropy:2 draft-entropy:0.5 fly:0.5 fsd:1 fsd:kl/1 fsd:js/0.1)

stage() {  # stage NAME COMMAND...: runs COMMAND unless NAME is done
  local name=$1; shift
  if [ -f "$OUT/$name.done" ]; then return; fi
  echo "[$(date -u +%H:%M:%S)] $name: $*"
  "$@"
  touch "$OUT/$name.done"
}

# 1 and 2. The first GSM8K sweep started without --cache-prompt (its settings are kept: the same command resumes it).
stage gsm8k-sweep "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" --dataset gsm8k --few-shot 2 -np 4 --limit 240 \
  --rules "${RULES[@]}" --no-plots --out "$OUT/gsm8k-a9-g4-nr"
stage mmlu-sweep "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" --dataset mmlu-pro --full-split --few-shot 2 -np 4 \
  --limit 240 --cache-prompt --rules "${RULES[@]}" --no-plots --out "$OUT/mmlu-a9-g4-nr"
# 3.
stage calibrate "$KLSPEC" calibrate "${PAIR[@]}" "${DECODE[@]}" --dataset gsm8k --split train --skip 240 --limit 160 \
  --few-shot 2 -np 4 --cache-prompt --rule kl --values 0.05,0.1,0.2,0.3,0.5 --measure agreement --max-loss 5% \
  --json --out "$OUT/calibrate-gsm8k-train"
# 4 and 5.
stage mine "$KLSPEC" mine "${PAIR[@]}" -n 96 --dataset gsm8k --split train --skip 400 --limit 40 --few-shot 2 \
  --out "$OUT/mine-gsm8k-train"
stage head "$KLSPEC" train-judge "$OUT/mine-gsm8k-train" --out "$OUT/autojudge-head.json"
# 6.
for data in gsm8k mmlu; do
  if [ $data = gsm8k ]; then set_args=(--dataset gsm8k); else set_args=(--dataset mmlu-pro --full-split); fi
  stage autojudge-$data "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${set_args[@]}" --few-shot 2 -np 4 --limit 240 \
    --cache-prompt --judge-head "$OUT/autojudge-head.json" --rules autojudge:0.5,0.9 --no-plots \
    --out "$OUT/autojudge-$data-a9-g4-nr"
done
echo "[$(date -u +%H:%M:%S)] all stages done"
