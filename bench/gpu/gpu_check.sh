#!/usr/bin/env bash
# The GPU check, in one command on a machine with a GPU: the tests labelled gpu (scripts/test-gpu.sh: the
# CUDA backend where nvcc is on PATH, else Vulkan), then the speed report (bench/speed/speed_report.py) with every
# layer of both models offloaded, klspec's runs and llama.cpp's alike, into docs/speed-gpu.md.
#   bash bench/gpu/gpu_check.sh [speed_report.py arguments, e.g. --targets default --limit-default 50]
# Without a GPU the tests run on Mesa's lavapipe and the report measures a software device: not a speed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [[ -z "${KLSPEC_CUDA:-}" ]] && command -v nvcc >/dev/null; then export KLSPEC_CUDA=ON; fi
if [[ "${KLSPEC_CUDA:-OFF}" == ON ]]; then export KLSPEC_VULKAN=OFF; else export KLSPEC_VULKAN=ON; fi
bash "$root/scripts/test-gpu.sh"
KLSPEC_LLAMA_INSTALL="$(bash "$root/scripts/build-llama.sh" | tail -n 1)/install"
export KLSPEC_LLAMA_INSTALL
/usr/bin/python3 "$root/bench/speed/speed_report.py" --klspec "${KLSPEC_GPU_BUILD_DIR:-$root/build-gpu}/klspec" --ngl 99 \
  --out "$root/docs/speed-gpu.md" --work "${XDG_CACHE_HOME:-$HOME/.cache}/klspec/speed-report-gpu" "$@"
