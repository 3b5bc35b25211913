#!/usr/bin/env bash
# Fetches the pinned llama.cpp (from the npm package node-llama-cpp, which ships its exact source as a
# git bundle), builds libllama + ggml (with the RPC backend), llama.cpp's `common` library (chat templates,
# Jinja included, as llama-server applies them; installed as lib/libllama-common.so + include/llama-common/)
# and the reference tools (llama-quantize,
# llama-simple, llama-speculative-simple, llama-bench, llama-server, ggml-rpc-server) into a cache outside
# the clone, keyed by commit + build flags.
# Prints the cache directory on its last line; a second run with the same key is a no-op.
#
# Environment:
#   KLSPEC_CACHE        cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/klspec)
#   KLSPEC_CUDA=ON      build the ggml CUDA backend as well (default OFF)
#   KLSPEC_VULKAN=ON    build the ggml Vulkan backend as well (default OFF; needs glslc and libvulkan-dev).
#                       scripts/patches/llama-vulkan-older-toolchains.patch is applied first (its hash is part
#                       of the cache key) so that the pinned tree builds with Debian 12's glslc 2023.2 and Vulkan
#                       headers 1.3.239: the Intel Xe flash-attention decode shaders, which need
#                       GL_KHR_cooperative_matrix, are built and used only where glslc has it (as the other
#                       coopmat shaders are), and VK_EXT_layer_settings is skipped where the headers lack it
#   KLSPEC_NATIVE=OFF   do not tune for this CPU (default ON)
#   KLSPEC_LLAMAFILE=OFF no llamafile sgemm for batched matmuls (default ON, as upstream: verification batches
#                       cost far less; a batch's logits then sum in another order than a single token's, so
#                       greedy speculative output may leave target-only output at a near tie of the top-2
#                       logits, which the tests bound; OFF gives bit-exact token-for-token equality)
# Always applied: scripts/patches/ggml-repack-q4k-batch-invariant.patch. The pinned ggml's x86 repacked Q4_K
# `gemm` (four rows at a time) applied the scales once per 64 values where the one-row `gemv` applies them once
# per 256, so a batch's rows differed from one-token decoding in rounding (0.6 apart in logits on
# Qwen2.5-Coder-1.5B Q4_K_M). Patched, each row sums its superblock in integers and scales it once, as the
# `gemv` does: any batch size gives one-token decoding's logits bit for bit, at the same speed
# (docs/repacked-kernels.md). Its hash is part of the cache key.
# Always applied: scripts/patches/ggml-flash-attn-batch-invariant.patch. klspec's exact mode keeps V in BF16 so
# that ggml's CPU flash attention computes each row alike in any batch; the pinned ggml sent such rows through its
# one-row kernel, 0.58x the tiled kernel's prompt speed at 1,536 cells of context. Patched, a BF16 V takes the
# tiled kernel at every row count (it computes each row alike whatever the tile's other rows), so exact prompts
# run at F16's speed (docs/repacked-kernels.md).
#   KLSPEC_AMX=ON       keep ggml's Intel AMX kernels in a native build (default OFF: in the pinned ggml they
#                       crash with SIGILL on `tilezero` on some AMX CPUs, e.g. this project's CI machine, on
#                       Q8_0/Q4_0 weights; upstream fix pending in ggml-org/llama.cpp#26954)
set -euo pipefail

NPM_PACKAGE="node-llama-cpp@3.22.1"
LLAMA_COMMIT="de3ff815ea7d559ee917f063901b8986f038abc6"
TOOLS=(llama-quantize llama-simple llama-speculative-simple llama-bench llama-server ggml-rpc-server)

cache_root="${KLSPEC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/klspec}"
cuda="${KLSPEC_CUDA:-OFF}"
vulkan="${KLSPEC_VULKAN:-OFF}"
native="${KLSPEC_NATIVE:-ON}"
llamafile="${KLSPEC_LLAMAFILE:-ON}"
amx="${KLSPEC_AMX:-OFF}"
cmake_flags=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE="$native" -DGGML_CUDA="$cuda"
             -DGGML_LLAMAFILE="$llamafile" -DGGML_RPC=ON
             -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF)
patches=("$(cd "$(dirname "$0")" && pwd)/patches/ggml-repack-q4k-batch-invariant.patch"
         "$(cd "$(dirname "$0")" && pwd)/patches/ggml-flash-attn-batch-invariant.patch")
if [[ "$vulkan" == ON ]]; then
  cmake_flags+=(-DGGML_VULKAN=ON)
  patches+=("$(cd "$(dirname "$0")" && pwd)/patches/llama-vulkan-older-toolchains.patch")
fi
# A native build enables AMX wherever the CPU has it (GGML_AMX_* only apply to non-native builds); explicit
# -mno-amx-* flags win over -march=native whatever their order.
# No AVX512-FP16 either: where the CPU has it (Intel Sapphire Rapids and later), the pinned ggml's F16 vector
# macros (ggml-cpu/simd-mappings.h) switch to half-precision arithmetic, so ggml_vec_dot_f16, which flash attention
# scores with, sums in FP16. On an AMX Xeon a batch of 8 or more rows on a repacked Q4_K_M target then gave rows of
# zeros and logits 18-23 away from one-token decoding's, llama-server's included (docs/repacked-kernels.md). Without
# it, those macros sum in FP32 as on every other x86 CPU, at the same llama-bench speed there.
x86_off=()
if [[ "$native" == ON && "$(uname -m)" == x86_64 ]]; then
  [[ "$amx" == ON ]] || x86_off+=(-mno-amx-tile -mno-amx-int8 -mno-amx-bf16)
  if echo 'int main(){}' | "${CC:-cc}" -x c -mno-avx512fp16 -o /dev/null - 2>/dev/null; then
    x86_off+=(-mno-avx512fp16)
  fi
fi
if ((${#x86_off[@]})); then
  cmake_flags+=(-DCMAKE_C_FLAGS="${x86_off[*]}" -DCMAKE_CXX_FLAGS="${x86_off[*]}")
fi
key_parts=("${cmake_flags[@]}" "$(uname -m)")
((${#patches[@]} == 0)) || key_parts+=("$(cat "${patches[@]}" | sha256sum | cut -c1-16)")
flags_key=$(printf '%s ' "${key_parts[@]}" | sha256sum | cut -c1-10)
dest="$cache_root/llama.cpp-${LLAMA_COMMIT:0:12}-$flags_key"

# Complete: the libraries are installed and every tool this script lists is there. A tool added to
# TOOLS later is built incrementally from the same build tree, not from scratch.
complete() {
  [[ -f "$dest/.libraries-complete" ]] || return 1
  for tool in "${TOOLS[@]}"; do [[ -x "$dest/install/bin/$tool" ]] || return 1; done
  [[ -f "$dest/.common-installed" ]]
}
if complete; then
  echo "llama.cpp: cached build at $dest" >&2
  echo "$dest"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$dest.lock"
flock 9
if complete; then echo "$dest"; exit 0; fi

jobs=$(nproc)
if [[ ! -f "$dest/.libraries-complete" ]]; then
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
  for patch in "${patches[@]}"; do
    echo "llama.cpp: applying $(basename "$patch")" >&2
    git -C "$dest/src" apply "$patch"
  done

  echo "llama.cpp: building libllama + ggml (${cmake_flags[*]})" >&2
  # Phase 1: the libraries alone, installed with their CMake package files.
  cmake -S "$dest/src" -B "$dest/build" "${cmake_flags[@]}" -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_COMMON=OFF -DCMAKE_INSTALL_PREFIX="$dest/install" -DCMAKE_INSTALL_RPATH="$dest/install/lib" >/dev/null
  cmake --build "$dest/build" -j "$jobs" >&2
  cmake --install "$dest/build" >/dev/null
  touch "$dest/.libraries-complete"
fi

# Phase 2: the reference tools from the same tree (reuses the compiled libraries).
echo "llama.cpp: building ${TOOLS[*]}" >&2
# libllama-common links llama.cpp's own cpp-httplib (0.57) statically; --exclude-libs keeps those symbols
# out of its exports, where they would clash with the Debian cpp-httplib (0.11) klspec's server links.
cmake -S "$dest/src" -B "$dest/build" -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_COMMON=ON \
      -DCMAKE_SHARED_LINKER_FLAGS="-Wl,--exclude-libs,libcpp-httplib.a" >/dev/null
cmake --build "$dest/build" -j "$jobs" --target "${TOOLS[@]}" >&2
mkdir -p "$dest/install/bin"
# --remove-destination: a tool still running from an earlier install (a benchmark) does not block the copy.
for tool in "${TOOLS[@]}"; do cp --remove-destination "$dest/build/bin/$tool" "$dest/install/bin/"; done
# The common library (built for llama-server above) with its headers, for klspec's chat templates.
cp -P --remove-destination "$dest"/build/bin/libllama-common.so* "$dest/install/lib/"
mkdir -p "$dest/install/include/llama-common/jinja"
cp "$dest"/src/common/*.h "$dest/install/include/llama-common/"
cp "$dest"/src/common/jinja/*.h "$dest/install/include/llama-common/jinja/"
if nm -DC --defined-only "$dest/install/lib/libllama-common.so" | grep ' T httplib::' >/dev/null; then
  echo "llama.cpp: libllama-common.so exports cpp-httplib's symbols (--exclude-libs did not apply)" >&2
  exit 1
fi
touch "$dest/.common-installed"
echo "$dest"
