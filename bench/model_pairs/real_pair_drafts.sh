#!/bin/bash
# Drafts for the real pair's speed report (bench/speed/real_pair_speed.py, docs/speed-real-pair.md), made from the
# shipped Qwen2.5-Coder-0.5B-Instruct draft and written into the cache, never into the repository (they are its weights):
#   draft-q4_0.gguf      every tensor requantized to Q4_0, the head too (llama-quantize --allow-requantize --pure): the type whose CPU
#                        kernels repack and run fastest; the shipped file is mostly Q5_0 with a Q8_0 head
#   draft-shuffled.gguf  every tensor's rows shuffled (tools/real_model/check_weights.py): a draft the target never
#                        accepts, at the shipped draft's cost per token, for the never-accepted goal
#   draft-q4_0-exitK.gguf  the Q4_0 draft's first K layers and its own head (tools/real_model/early_exit.py), for each
#                        K in KLSPEC_DRAFT_EXITS (comma-separated, of 24; default none)
# A file already there is kept. Prints the folder on its last line.
# Usage: bench/model_pairs/real_pair_drafts.sh [OUT]   (default ~/.cache/klspec/real-pair-drafts)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-$HOME/.cache/klspec/real-pair-drafts}
DRAFT=$(bash scripts/fetch-real-model.sh qwen2.5-coder-0.5b | tail -1)
LLAMA=$(bash scripts/build-llama.sh | tail -1)
GGUF_PY=$LLAMA/src/gguf-py
mkdir -p "$OUT"
if [ ! -f "$OUT/draft-q4_0.gguf" ]; then
  "$LLAMA/install/bin/llama-quantize" --allow-requantize --pure "$DRAFT" "$OUT/draft-q4_0.partial" Q4_0 2 > "$OUT/draft-q4_0.log" 2>&1 ||
    { tail -3 "$OUT/draft-q4_0.log" >&2; exit 1; }
  mv "$OUT/draft-q4_0.partial" "$OUT/draft-q4_0.gguf"
fi
if [ ! -f "$OUT/draft-shuffled.gguf" ]; then
  PYTHONPATH="$GGUF_PY:tools/real_model" /usr/bin/python3 -c '
import sys
from pathlib import Path
from check_weights import write_shuffled
write_shuffled(Path(sys.argv[1]), Path(sys.argv[2]))' "$DRAFT" "$OUT/draft-shuffled.partial"
  mv "$OUT/draft-shuffled.partial" "$OUT/draft-shuffled.gguf"
fi
if [ -n "${KLSPEC_DRAFT_EXITS:-}" ]; then
  PYTHONPATH="$GGUF_PY:tools/real_model" /usr/bin/python3 tools/real_model/early_exit.py "$OUT/draft-q4_0.gguf" \
    --layers "$KLSPEC_DRAFT_EXITS" --out-dir "$OUT" > /dev/null
fi
echo "$OUT"
