#!/usr/bin/env bash
# Fills .gpu/ (ignored by git) with what bench/gpu/offline_check.sh needs on a lent GPU machine that reaches no
# network: the pinned llama.cpp source from scripts/build-llama.sh's cache, without its docs, models and tests
# (8 MB as tar.xz); the Debian packages of klspec's build dependencies (apt-get download); and the default target
# quantized to Q4_0 (22 MB; the F16 file, 79 MB, does not fit a 64 MiB transfer beside the tree).
#   bash bench/gpu/pack_offline.sh
# The tracked tree itself is 153 MB, most of it models/testbed-target.gguf (79 MB) and the testbed's training
# checkpoints (tools/testbed/checkpoints, 68 MB), which the check does not read: move those out of the working
# tree for the transfer (about 36 MB with .gpu/) and back afterwards.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
llama_dir=$(bash "$root/scripts/build-llama.sh" | tail -n 1)
out=$root/.gpu
mkdir -p "$out/debs"
grep -qx "/.gpu/" "$root/.git/info/exclude" 2>/dev/null || echo "/.gpu/" >> "$root/.git/info/exclude"
(cd "$out/debs" && apt-get download libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev libgtest-dev zlib1g-dev \
  liblinear-dev liblinear4 libblas3 libgfortran5 libquadmath0)
tar -C "$llama_dir/src" -cJf "$out/llama-src.tar.xz" --exclude=.git --exclude=./docs --exclude=./models \
  --exclude=./media --exclude=./benches --exclude=./tests --exclude=./tools/server/public --exclude=./gguf-py \
  --exclude=./conversion .
LD_LIBRARY_PATH="$llama_dir/install/lib" "$llama_dir/install/bin/llama-quantize" "$root/models/testbed-target.gguf" \
  "$out/testbed-target-q4_0.gguf" Q4_0 > "$out/quantize.log" 2>&1
du -sh "$out"/*
