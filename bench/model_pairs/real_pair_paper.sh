#!/bin/bash
# The paper's table on the real pair (docs/real-pair.md): Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) verified with
# Qwen2.5-Coder-0.5B-Instruct, both from PyPI (scripts/fetch-real-model.sh). Every stage is a klspec command
# whose results stay under OUT, by default results/real-pair in this repository (small text rows, committed as
# they grow: the mining's hidden states, features.f32, stay out of git and are computed again from the kept
# responses on a machine without them); a finished stage is skipped on a rerun and
# a sweep resumes where it stopped, on any machine, so the whole runs in slices. Ordered by what each adds, so that a run cut short answers the first questions:
#   1. target-humaneval  target-only greedy pass@1 on all 164 HumanEval problems, EvalPlus's chat prompt
#                    (klspec bench, no draft, one problem at a time), against the published 70.7
#   2. humaneval-g16 vanilla and KL at four τ, γ 16 fixed, all 164 HumanEval problems, four problems at a time;
#                    its vanilla answers are compared with target-only's after each run (greedy exactness by
#                    default, across problems decoded together too: docs/real-pair.md)
#   3. target-mbpp, draft-*   the same as 1 on all 399 MBPP+ problems (published 59.4), and the 0.5B draft
#                    alone (published 61.6 and 43.7)
#   4. mbpp-g16      the same as 2 on the first 200 MBPP+ problems
#   5. calibrate-mbpp  klspec calibrate's τ for KL on 100 MBPP+ problems outside those 200 (half choose, half
#                    check), accuracy loss within 1 %; calibrated-g16 adds that τ to both sweeps
#   6. mine-mbpp, head   AutoJudge: mined on the 199 MBPP+ problems outside the sweep's 200 (an answer is its
#                    test outcome; ~11 s a mismatch on 2 cores beside a sweep, some 2,000 mismatches), trained
#   7. gsm8k-g16, autojudge-g16   across domains: vanilla and KL on 200 GSM8K problems (the seeded subset), γ 16;
#                    then the AutoJudge head added to all three sweeps
#   8. rules-humaneval, rules-mbpp   the other rules of the table (KLSPEC_OTHER_RULES) added to both sweeps
# Usage: bench/model_pairs/real_pair_paper.sh [OUT]   (default results/real-pair)
#   nohup nice -n 19 bench/model_pairs/real_pair_paper.sh > ~/.cache/klspec/real-pair-paper.log 2>&1 &
#   KLSPEC=DIR/klspec KLSPEC_COMMIT=SHA …   a frozen build of one commit decodes, and provenance.jsonl says which
#   KLSPEC_STAGES="target-mbpp draft-mbpp" KLSPEC_ALONE_PARALLEL=4 …   runs those stages only, four problems at a time
#   KLSPEC_RULES=kl:0.5,1 …   the sweeps' rules (default kl:0.5,1,2,4); a sweep rerun with more adds their points
# Tables at any point, while a sweep still writes: the same klspec sweep command with --summary-only.
#   KLSPEC_REPORT=1 …   decodes nothing: each sweep's table and plots (accuracy and agreement against MAT) of all
#                    its points (KLSPEC_RULES: these only) over the problems every one of them has, its answers
#                    scored again with the current scorers (--rescore), its vanilla answers compared with
#                    target-only's, then the two code sweeps pooled (bench/model_pairs/pooled_sweeps.py)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-results/real-pair}
KLSPEC=${KLSPEC:-build/klspec}
if [ -z "${KLSPEC_REPORT:-}" ]; then  # the report decodes nothing: each sweep's settings are in its sweep.json
  TARGET=$(bash scripts/fetch-real-model.sh qwen2.5-coder-1.5b | tail -1)
  DRAFT=$(bash scripts/fetch-real-model.sh qwen2.5-coder-0.5b | tail -1)
fi
mkdir -p "$OUT"
DATA=(--data-dir "${KLSPEC_DATA_DIR:-../shared/datasets}")
# EvalPlus's answers end at the code block's fence; 512 tokens hold every HumanEval canonical solution.
DECODE=(-t 2 -n 512 "${DATA[@]}")
# Target-only runs one problem at a time, the reference; the pair four at a time, so the exactness check covers
# problems decoded together too. Before the BF16 V cache they changed greedy tokens on this target (ggml split one
# row's attention across threads, not a batch's: docs/real-pair.md).
ALONE_PARALLEL=(-np "${KLSPEC_ALONE_PARALLEL:-1}")
PAIR_PARALLEL=(-np "${KLSPEC_PAIR_PARALLEL:-4}")
PAIR=(${TARGET:+-m "$TARGET" -md "$DRAFT"} "${DECODE[@]}" "${PAIR_PARALLEL[@]}" --draft-max 16)
SWEEP=("${PAIR[@]}" --rules "${KLSPEC_RULES:-kl:0.5,1,2,4}")
# The test split's problems are MBPP+'s first 200; calibration and mining use the rest.
MBPP_TEST=(--dataset mbpp-plus --limit 200)
MBPP_OUTSIDE=(--dataset mbpp-plus --skip 200)
GSM8K=(--dataset gsm8k --limit 200)
CALIBRATION=$OUT/calibrate-mbpp
HEAD=$OUT/autojudge-head-mbpp.json
OTHER_RULES=${KLSPEC_OTHER_RULES:-topk:2,4 target-entropy:1.5 draft-entropy:1 fsd:1 fly:0.5}

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
# Texts only: the stored "correct" of either file is its scorer's at the time it ran (the tables rescore).
print(f"vanilla γ 16 against target-only: {len(both) - len(differ)} of {len(both)} answers equal; differ: {differ}")
PY
}
humaneval_sweep() {
  "$KLSPEC" sweep "${SWEEP[@]}" --no-plots --dataset humaneval --out "$OUT/humaneval-g16"
  compare_with_target "$OUT/humaneval-g16" target-humaneval
}
mbpp_sweep() {
  "$KLSPEC" sweep "${SWEEP[@]}" --no-plots "${MBPP_TEST[@]}" --out "$OUT/mbpp-g16"
  compare_with_target "$OUT/mbpp-g16" target-mbpp
}
humaneval_points() {  # humaneval_points RULES [FLAGS]: these points added to the HumanEval sweep (it keeps its own)
  "$KLSPEC" sweep "${PAIR[@]}" "${@:2}" --rules $1 --no-plots --dataset humaneval --out "$OUT/humaneval-g16"
}
mbpp_points() {
  "$KLSPEC" sweep "${PAIR[@]}" "${@:2}" --rules $1 --no-plots "${MBPP_TEST[@]}" --out "$OUT/mbpp-g16"
}
add_rules() { humaneval_points "$@" && mbpp_points "$@"; }
calibrated_rule() {  # the point calibrate chose, e.g. kl:0.25; empty before calibrate-mbpp or when no τ kept the budget
  [ -s "$CALIBRATION/setting.json" ] || return 0
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("chosen") or "")' "$CALIBRATION/setting.json"
}
calibrated_sweeps() {
  local rule; rule=$(calibrated_rule)
  if [ -z "$rule" ]; then
    echo "real_pair_paper.sh: calibrate kept no τ within its budget ($CALIBRATION/setting.json); nothing to add"
    return 0
  fi
  add_rules "$rule"
}
gsm8k_sweep() {  # vanilla and KL, and the calibrated τ when there is one
  "$KLSPEC" sweep "${PAIR[@]}" "${GSM8K[@]}" --rules kl:0.5,1 $(calibrated_rule) --no-plots --out "$OUT/gsm8k-g16"
}
autojudge_sweeps() {  # at the head's own threshold; a sweep run without a head takes one (SweepStore)
  add_rules autojudge --judge-head "$HEAD"
  "$KLSPEC" sweep "${PAIR[@]}" "${GSM8K[@]}" --judge-head "$HEAD" --rules autojudge --no-plots --out "$OUT/gsm8k-g16"
}
if [ -n "${KLSPEC_REPORT:-}" ]; then
  points_of() {  # every point a sweep holds but vanilla (the summary keeps the problems all of them have)
    python3 -c 'import json, sys; print(" ".join(sorted({json.loads(l)["point"] for l in open(sys.argv[1])} - {"vanilla"})))' "$1"
  }
  report() {  # report DIR TARGET_STAGE DATASET FLAGS...
    local dir=$1 alone=$2; shift 2
    [ -s "$OUT/$dir/examples.jsonl" ] || return 0
    echo "== $dir"
    local head=(); [ -s "$HEAD" ] && head=(--judge-head "$HEAD")
    "$KLSPEC" sweep "${PAIR[@]}" "${head[@]}" --rules ${KLSPEC_RULES:-$(points_of "$OUT/$dir/examples.jsonl")} "$@" \
      --out "$OUT/$dir" --summary-only --rescore
    [ "$alone" = - ] || compare_with_target "$OUT/$dir" "$alone" || true
  }
  report humaneval-g16 target-humaneval --dataset humaneval
  report mbpp-g16 target-mbpp "${MBPP_TEST[@]}"
  report gsm8k-g16 - "${GSM8K[@]}"
  if [ -s "$OUT/humaneval-g16/summary.json" ] && [ -s "$OUT/mbpp-g16/summary.json" ]; then
    echo "== HumanEval and MBPP+ together (the issue's KL bar: MAT >= 1.15x vanilla's, within 1 point, lower end >= -3)"
    python3 bench/model_pairs/pooled_sweeps.py "$OUT/humaneval-g16/summary.json" "$OUT/mbpp-g16/summary.json"
  fi
  exit 0
fi
stage target-humaneval bench_alone target-humaneval "$TARGET" humaneval "${ALONE_PARALLEL[@]}"
stage humaneval-g16 humaneval_sweep
stage target-mbpp bench_alone target-mbpp "$TARGET" mbpp-plus "${ALONE_PARALLEL[@]}"
stage draft-humaneval bench_alone draft-humaneval "$DRAFT" humaneval "${ALONE_PARALLEL[@]}"
stage draft-mbpp bench_alone draft-mbpp "$DRAFT" mbpp-plus "${ALONE_PARALLEL[@]}"
stage mbpp-g16 mbpp_sweep
stage calibrate-mbpp "$KLSPEC" calibrate "${PAIR[@]}" "${MBPP_OUTSIDE[@]}" --limit 100 --rule kl --values 0.1,0.25,0.5,1 \
  --max-loss 1% --json --out "$CALIBRATION"
stage calibrated-g16 calibrated_sweeps
MINE=("$KLSPEC" mine -m "$TARGET" -md "$DRAFT" "${DECODE[@]}" "${MBPP_OUTSIDE[@]}" --out "$OUT/mine-mbpp")
train_head() {  # features.f32 stays on the machine that mined: the mine command computes it again where it is missing
  "${MINE[@]}" && "$KLSPEC" train-judge "$OUT/mine-mbpp" --out "$HEAD"
}
stage mine-mbpp "${MINE[@]}"
stage head train_head
stage gsm8k-g16 gsm8k_sweep
stage autojudge-g16 autojudge_sweeps
stage rules-humaneval humaneval_points "$OTHER_RULES"
stage rules-mbpp mbpp_points "$OTHER_RULES"
