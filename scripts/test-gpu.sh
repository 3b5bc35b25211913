#!/usr/bin/env bash
# Builds klspec against llama.cpp with a GPU backend into ./build-gpu (or $KLSPEC_GPU_BUILD_DIR) and runs the
# tests labelled gpu (tests/gpu, and the engine and server tests rerun with every layer offloaded).
#   bash scripts/test-gpu.sh                 ggml's Vulkan backend: a real GPU's driver where there is one,
#                                            else Mesa's lavapipe (a software Vulkan device on the CPU)
#   KLSPEC_CUDA=ON bash scripts/test-gpu.sh  the CUDA backend (needs a CUDA toolkit: nvcc)
# Each llama.cpp build is cached apart (scripts/build-llama.sh); the Vulkan one takes about 11 minutes on
# 2 cores from cold. Extra arguments go to ctest (e.g. -R gpu.serve).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib/configure.sh"
build_dir="${KLSPEC_GPU_BUILD_DIR:-$root/build-gpu}"

if [[ "${KLSPEC_CUDA:-OFF}" == ON ]]; then
  command -v nvcc >/dev/null || { echo "test-gpu: KLSPEC_CUDA=ON needs nvcc (a CUDA toolkit) on PATH" >&2; exit 1; }
  export KLSPEC_VULKAN=OFF
else
  export KLSPEC_VULKAN=ON
fi
bash "$root/scripts/setup-deps.sh"
llama_dir=$(bash "$root/scripts/build-llama.sh" | tail -n 1)
configure_klspec "$build_dir" "$llama_dir"
cmake --build "$build_dir" -j "$(nproc)" --target klspec klspec_gpu_tests klspec_engine_tests klspec_server_tests

# ggml-vulkan leaves CPU-type Vulkan devices (lavapipe) out unless GGML_VK_VISIBLE_DEVICES names them: name
# the first one when the machine has no other Vulkan device.
if [[ "$KLSPEC_VULKAN" == ON && -z "${GGML_VK_VISIBLE_DEVICES:-}" ]]; then
  types=$(vulkaninfo --summary 2>/dev/null | sed -n 's/.*deviceType *= *//p')
  if [[ -z "$types" ]]; then
    echo "test-gpu: vulkaninfo lists no Vulkan device (apt-get install mesa-vulkan-drivers for lavapipe)" >&2
    exit 1
  fi
  if ! grep -qv PHYSICAL_DEVICE_TYPE_CPU <<<"$types"; then
    export GGML_VK_VISIBLE_DEVICES=$(grep -n PHYSICAL_DEVICE_TYPE_CPU <<<"$types" | head -n 1 | cut -d: -f1 | awk '{print $1 - 1}')
    # Mesa 22.3's lavapipe crashes (SIGSEGV in its worker thread) in one of ggml-vulkan's fused kernels after
    # some sequences of batch sizes; llama.cpp alone does the same (docs/gpu.md). Unfused, it computes right.
    export GGML_VK_DISABLE_FUSION=1
    echo "test-gpu: no GPU, running on the CPU Vulkan device $GGML_VK_VISIBLE_DEVICES (lavapipe), ggml-vulkan's" \
         "op fusion off" >&2
  fi
fi
cd "$build_dir" && ctest -L gpu --output-on-failure "$@"
