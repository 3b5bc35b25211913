#!/usr/bin/env bash
# Fetches the pinned llama.cpp (from the npm package node-llama-cpp, which ships its exact source as a
# git bundle), builds libllama + ggml and the reference tools (llama-quantize, llama-simple,
# llama-speculative-simple) into a cache outside the clone, keyed by commit + build flags.
# Prints the cache directory on its last line; a second run with the same key is a no-op.
#
# Environment:
#   KLSPEC_CACHE        cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/klspec)
#   KLSPEC_CUDA=ON      build the ggml CUDA backend as well (default OFF)
#   KLSPEC_NATIVE=OFF   do not tune for this CPU (default ON)
#   KLSPEC_LLAMAFILE=ON use llamafile's sgemm for batched matmuls (default OFF: it is faster for batches but
#                       computes a batch's logits in another summation order than a single token's, so greedy
#                       speculative decoding is no longer token-for-token identical to target-only decoding)
set -euo pipefail

NPM_PACKAGE="node-llama-cpp@3.22.1"
LLAMA_COMMIT="de3ff815ea7d559ee917f063901b8986f038abc6"
TOOLS=(llama-quantize llama-simple llama-speculative-simple)

cache_root="${KLSPEC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/klspec}"
cuda="${KLSPEC_CUDA:-OFF}"
native="${KLSPEC_NATIVE:-ON}"
llamafile="${KLSPEC_LLAMAFILE:-OFF}"
cmake_flags=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE="$native" -DGGML_CUDA="$cuda"
             -DGGML_LLAMAFILE="$llamafile"
             -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF)
flags_key=$(printf '%s ' "${cmake_flags[@]}" "$(uname -m)" | sha256sum | cut -c1-10)
dest="$cache_root/llama.cpp-${LLAMA_COMMIT:0:12}-$flags_key"

if [[ -f "$dest/.complete" ]]; then
  echo "llama.cpp: cached build at $dest" >&2
  echo "$dest"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$dest.lock"
flock 9
if [[ -f "$dest/.complete" ]]; then echo "$dest"; exit 0; fi

rm -rf "$dest"
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "llama.cpp: fetching $NPM_PACKAGE" >&2
(cd "$work" && npm pack --silent "$NPM_PACKAGE" >/dev/null)
tar -xzf "$work"/node-llama-cpp-*.tgz -C "$work" package/llama/gitRelease.bundle
git clone --quiet "$work/package/llama/gitRelease.bundle" "$dest/src"
git -C "$dest/src" -c advice.detachedHead=false checkout --quiet "$LLAMA_COMMIT"
actual=$(git -C "$dest/src" rev-parse HEAD)
if [[ "$actual" != "$LLAMA_COMMIT" ]]; then
  echo "llama.cpp: bundle is at $actual, expected $LLAMA_COMMIT" >&2
  exit 1
fi

jobs=$(nproc)
echo "llama.cpp: building libllama + ggml (${cmake_flags[*]})" >&2
# Phase 1: the libraries alone, installed with their CMake package files.
cmake -S "$dest/src" -B "$dest/build" "${cmake_flags[@]}" -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_COMMON=OFF -DCMAKE_INSTALL_PREFIX="$dest/install" -DCMAKE_INSTALL_RPATH="$dest/install/lib" >/dev/null
cmake --build "$dest/build" -j "$jobs" >&2
cmake --install "$dest/build" >/dev/null
# Phase 2: the reference tools from the same tree (reuses the compiled libraries).
cmake -S "$dest/src" -B "$dest/build" -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_COMMON=ON >/dev/null
cmake --build "$dest/build" -j "$jobs" --target "${TOOLS[@]}" >&2
mkdir -p "$dest/install/bin"
for tool in "${TOOLS[@]}"; do cp "$dest/build/bin/$tool" "$dest/install/bin/"; done

touch "$dest/.complete"
echo "$dest"
