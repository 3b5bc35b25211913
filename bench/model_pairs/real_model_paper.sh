#!/bin/bash
# The paper's comparisons on the real model's text (issue 45 item 4, docs/real-model.md): every stage a
# klspec command that keeps its results under OUT and resumes where it stopped, so the whole runs in slices.
# Ordered by what each adds, so that a run cut short still answers the first questions (times: Intel Xeon,
# 2 cores; a sweep decodes problem-major, all points of a chunk of problems together, so its table over the
# problems every point has decoded is usable at any time: --summary-only):
#   1. gsm8k-sweep   GSM8K test (the seeded subset, first 200), 2-shot plain prompts, -n 96, greedy, γ 4 fixed, the
#                    exit-9 adapter draft, --no-repack (greedy verification is then target-only decoding): vanilla,
#                    KL at four τ, Top-2, target entropy at two thresholds, FSD (reverse KL)            (~75 min)
#   2. mine, head    AutoJudge mining on GSM8K train problems the adapter was not trained on (--skip 400), and
#                    train-judge on it
#   3. autojudge-gsm8k   the head's point (and vanilla again: the head is a sweep-wide setting) on 1's problems
#   4. mmlu-sweep    MMLU-Pro test (--full-split: its seeded subset is only 100; first 200): vanilla, KL at four τ and
#                    AutoJudge under the paper's domain shift
#   5. gsm8k-more    the rest of the issue's rules on 1's problems, added to 1's sweep (same settings, so no
#                    vanilla rerun): KL τ 0.2 (between calibrate's candidates run in 1), Top-4, draft entropy, FSD
#                    with KL(p‖q) and JS; then gsm8k-fly: FLy, whose window (3 < γ) is a sweep-wide setting
#   6. gsm8k-span    KL τ 1 and AutoJudge relaxing only until "The answer is" (--judge-span): on 1's sweep both run
#                    past the stop string in most problems (the head learned that no token after the answer
#                    matters, and relaxes "\n\nQuestion:" away), so their MAT counts text after the answer
#   7. mmlu-kl10     KL at τ 10 added to 4's sweep: near AutoJudge's MAT there, for the domain shift at equal MAT
#   8. calibrate     klspec calibrate's τ for KL on GSM8K train problems (--skip 240), by agreement with
#                    vanilla's answers (the model solves too few for an accuracy budget to bind), budget 5 %
#   9. mmlu-more     the other rules on 4's problems (Top-2 and 4, target and draft entropy, FSD with each
#                    divergence; the same settings, so added to 4's sweep), then mmlu-fly: FLy with W 3 (~2.5 h);
#                    gsm8k-draft-entropy: draft entropy at 1.5 on 1's problems (0.5 relaxed 5 tokens in 200 answers)
#  10. mmlu-kl5      KL at τ 5 added to 4's sweep: AutoJudge's MAT there (2.38) lies between KL τ 3's and τ 10's,
#                    so the domain-shift comparison at equal MAT needs a measured point between them
#  11. mmlu-fly0     FLy with no entropy gate (θ 0) on 9's FLy sweep: θ 0.5 relaxed nothing on MMLU-Pro, and only
#                    this point says whether the gate or the window (3 drafts accepted natively after it) binds
# Usage: bench/model_pairs/real_model_paper.sh [OUT]   (default ~/.cache/klspec/real-sweeps)
#   nohup nice -n 5 bench/model_pairs/real_model_paper.sh > ~/.cache/klspec/real-sweeps/paper.log 2>&1 &
# Tables at any point, while a sweep still writes: the same klspec sweep command with --summary-only (it only
# reads the folder's examples).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-$HOME/.cache/klspec/real-sweeps}
KLSPEC=${KLSPEC:-build/klspec}
MODEL=$(bash scripts/fetch-real-model.sh | tail -1)
DIR=$(dirname "$MODEL")
DRAFT=$DIR/gemma-3-270m-q4_k_m-exit9-adapter.gguf
if [ ! -f "$DRAFT" ]; then
  echo "real_model_paper: $DRAFT is missing: make it with tools/real_model/train_adapter.py (docs/real-model.md)" >&2
  exit 1
fi
mkdir -p "$OUT"
PAIR=(-m "$MODEL" -md "$DRAFT" --no-repack -t 2 --data-dir "${KLSPEC_DATA_DIR:-../shared/datasets}")
DECODE=(-n 96 --draft-max 4 --draft-policy fixed --few-shot 2 --cache-prompt)
GSM8K=(--dataset gsm8k -np 4 --limit 200)
MMLU=(--dataset mmlu-pro --full-split -np 8 --limit 200)
HEAD=$OUT/autojudge-head.json

source bench/lib/stages.sh

stage gsm8k-sweep "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${GSM8K[@]}" \
  --rules kl:0.1,0.3,0.5,1 topk:2 target-entropy:3,4 fsd:1 --no-plots --out "$OUT/gsm8k-a9-g4"
stage mine "$KLSPEC" mine "${PAIR[@]}" -n 96 --dataset gsm8k --split train --skip 400 --limit "${MINE_PROBLEMS:-20}" \
  --few-shot 2 --out "$OUT/mine-gsm8k-train"
stage head "$KLSPEC" train-judge "$OUT/mine-gsm8k-train" --out "$HEAD"
stage autojudge-gsm8k "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${GSM8K[@]}" --judge-head "$HEAD" \
  --rules autojudge:0.09 --no-plots --out "$OUT/gsm8k-a9-g4-autojudge"
stage mmlu-sweep "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${MMLU[@]}" --judge-head "$HEAD" \
  --rules kl:0.1,0.3,1,3 autojudge:0.09 --no-plots --out "$OUT/mmlu-a9-g4"
stage gsm8k-more "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${GSM8K[@]}" \
  --rules kl:0.2 topk:4 draft-entropy:0.5 fsd:kl/1 fsd:js/0.1 --no-plots --out "$OUT/gsm8k-a9-g4"
stage gsm8k-fly "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${GSM8K[@]}" --judge-window 3 \
  --rules fly:0.5 --no-plots --out "$OUT/gsm8k-a9-g4-fly"
stage gsm8k-span "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${GSM8K[@]}" --judge-head "$HEAD" \
  --judge-span 'until:The answer is' --rules kl:1 autojudge:0.09 --no-plots --out "$OUT/gsm8k-a9-g4-span"
stage mmlu-kl10 "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${MMLU[@]}" --judge-head "$HEAD" \
  --rules kl:10 --no-plots --out "$OUT/mmlu-a9-g4"
stage calibrate "$KLSPEC" calibrate "${PAIR[@]}" "${DECODE[@]}" --dataset gsm8k --split train --skip 240 --limit 100 \
  -np 4 --rule kl --values 0.1,0.2,0.3 --measure agreement --max-loss 5% --json --out "$OUT/calibrate-gsm8k-train"
stage mmlu-more "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${MMLU[@]}" --judge-head "$HEAD" \
  --rules topk:2,4 target-entropy:3 draft-entropy:0.5,1.5 fsd:1 fsd:kl/1 fsd:js/0.1 --no-plots --out "$OUT/mmlu-a9-g4"
stage mmlu-fly "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${MMLU[@]}" --judge-window 3 \
  --rules fly:0.5 --no-plots --out "$OUT/mmlu-a9-g4-fly"
stage gsm8k-draft-entropy "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${GSM8K[@]}" \
  --rules draft-entropy:1.5 --no-plots --out "$OUT/gsm8k-a9-g4"
stage mmlu-kl5 "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${MMLU[@]}" --judge-head "$HEAD" \
  --rules kl:5 --no-plots --out "$OUT/mmlu-a9-g4"
stage mmlu-fly0 "$KLSPEC" sweep "${PAIR[@]}" "${DECODE[@]}" "${MMLU[@]}" --judge-window 3 \
  --rules fly:0 --no-plots --out "$OUT/mmlu-a9-g4-fly"
echo "[$(date -u +%H:%M:%S)] all stages done"
