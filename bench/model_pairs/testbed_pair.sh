#!/bin/bash
# The testbed pair's issue-7 measurements in one run: grow the small target to tb-target and export both
# GGUFs (F16), PyTorch pair statistics (tools/testbed/pair_stats.py), word-problem speed at 2 threads with
# llamafile's sgemm off and on (bench/speed/engine_throughput.py: target-only, vanilla and KL tau 0.5 at gamma 8
# and 16), and judge sweeps (sgemm on) per family.
# Usage: bench/model_pairs/testbed_pair.sh OUT K LIMIT   (K problems per family for pair_stats, LIMIT for the word sweeps;
# SPEED_LIMIT, default 100, for the speed runs; 60 for the choice and trace sweeps)
# Environment: SMALL, DRAFT (train.py checkpoints; default the committed tb-small-v7w / tb-draft-v7); TARGET, a
# fine-tuned tb-target checkpoint, replaces SMALL and the growth step (pair_stats then runs on it),
# KLSPEC (default build/klspec; copy it elsewhere if you rebuild meanwhile), KLSPEC_SGEMM_LIB (a ggml build
# with -DGGML_LLAMAFILE=ON, default ~/.cache/klspec/ggml-llamafile-de3ff815ea7d/build/bin; see docs/performance.md).
# Needs both cores idle: the 2-thread runs stall when another job holds a core.
set -euo pipefail
OUT=$(realpath -m "$1"); K=$2; LIMIT=$3
cd "$(dirname "$0")/../.."
SMALL=${SMALL:-tools/testbed/checkpoints/tb-small-v7w.pt}; DRAFT=${DRAFT:-tools/testbed/checkpoints/tb-draft-v7.pt}
TARGET=${TARGET:-}
mkdir -p $OUT
I=$(bash scripts/build-llama.sh | tail -1)/install
ON=${KLSPEC_SGEMM_LIB:-$HOME/.cache/klspec/ggml-llamafile-de3ff815ea7d/build/bin}:$I/lib
GP=$I/../src/gguf-py
KL=${KLSPEC:-build/klspec}
export OPENBLAS_NUM_THREADS=1
echo "$(date +%T) export"
if [ -n "$TARGET" ]; then
  TARGET_PT=$TARGET; STATS_PT=$TARGET
else
  /usr/bin/python3 tools/testbed/grow.py $SMALL $OUT/tb-grown.pt --to tb-target | tail -1
  # the grown model computes the small one's function, so pair_stats runs on the (10x cheaper) small one
  TARGET_PT=$OUT/tb-grown.pt; STATS_PT=$SMALL
fi
PYTHONPATH=$GP /usr/bin/python3 tools/training/export_gguf.py $TARGET_PT $OUT/tb-target.gguf --f16 | tail -1
PYTHONPATH=$GP /usr/bin/python3 tools/training/export_gguf.py $DRAFT $OUT/tb-draft.gguf --f16 | tail -1
echo "$(date +%T) pair_stats -k $K"
/usr/bin/python3 tools/testbed/pair_stats.py $STATS_PT $DRAFT -k $K | tee $OUT/pair_stats.txt
SPEED_LIMIT=${SPEED_LIMIT:-100}
echo "$(date +%T) speed (word, $SPEED_LIMIT problems, 2 threads, sgemm off/on)"
python3 bench/speed/engine_throughput.py --dataset data/testbed_word_test.jsonl --limit $SPEED_LIMIT --repeats 1 \
  --common "-t 2 -n 384 -m $OUT/tb-target.gguf" --lib-path sgemm-off=$I/lib --lib-path sgemm-on=$ON \
  --config "target-only:" --config "vanilla γ 8:-md $OUT/tb-draft.gguf --draft-max 8" \
  --config "vanilla γ 16:-md $OUT/tb-draft.gguf --draft-max 16" \
  --config "kl τ 0.5 γ 8:-md $OUT/tb-draft.gguf --draft-max 8 --judge kl --judge-threshold 0.5" \
  --config "kl τ 0.5 γ 16:-md $OUT/tb-draft.gguf --draft-max 16 --judge kl --judge-threshold 0.5" | tee $OUT/speed.md
for run in word:8:$LIMIT word:16:$LIMIT choice:8:60 trace:8:60; do
  IFS=: read fam g n <<< "$run"
  echo "$(date +%T) sweep $fam γ $g"
  LD_LIBRARY_PATH=$ON $KL sweep -m $OUT/tb-target.gguf -md $OUT/tb-draft.gguf --dataset data/testbed_${fam}_test.jsonl \
    --limit $n -n 384 --draft-max $g -t 2 --no-plots \
    --rules kl:0.1,0.3,0.5,0.7 topk:2,4 target-entropy:1,1.5 draft-entropy:0.5,1 --out $OUT/sweep-$fam-g$g > $OUT/sweep-$fam-g$g.txt 2>&1
  tail -20 $OUT/sweep-$fam-g$g/table.md
done
echo "$(date +%T) done"
