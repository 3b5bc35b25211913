#!/usr/bin/env bash
# Installs the Debian packages klspec builds and tests with, and any named as arguments (scripts/coverage.sh:
# gcovr). Idempotent: installs only what is missing.
set -euo pipefail
packages=(build-essential cmake git
          libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
          liblinear-dev gnuplot-nox libcpp-httplib-dev
          haproxy  # deploy/: the load balancer in front of `klspec serve` replicas (docs/deployment.md)
          bubblewrap python3 python3-pip python3-venv zlib1g-dev  # the sandbox code benchmarks run in, and HumanEval's .gz
          python3-torch  # the testbed's growth and GGUF export tests (tools/testbed)
          pybind11-dev python3-dev python3-numpy python3-pytest  # the klspec Python module and its tests (python/)
          python3-matplotlib  # examples/judge_comparison.py's plot
          libopenblas0-pthread  # torch's float32 matmuls; without it the reference BLAS is ~30x slower
          chromium  # headless, renders `klspec serve`'s page in its test
          clang libclang-rt-dev  # scripts/test-sanitized.sh: ASan/UBSan and libFuzzer
          clang-format-14  # the suite's style check (.clang-format)
          ccache curl  # tests/in_tree: llama.cpp compiled from source once per machine; its server check
          vim tmux  # tests/server/test_llama_vim.py: llama.cpp's Vim plug-in against `klspec serve`'s /infill
          "$@")
# KLSPEC_VULKAN=ON (scripts/test-gpu.sh): ggml's Vulkan backend, its shader compiler and Mesa's software device.
if [[ "${KLSPEC_VULKAN:-OFF}" == ON ]]; then
  packages+=(glslc libvulkan-dev spirv-headers mesa-vulkan-drivers vulkan-tools)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# npm fetches the pinned llama.cpp; a Node.js that already ships npm (e.g. NodeSource's) is kept.
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  echo "setup-deps: installing ${missing[*]}" >&2
  sudo_cmd=(); [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
