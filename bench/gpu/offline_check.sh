#!/usr/bin/env bash
# The GPU check (docs/gpu.md) on a lent CUDA machine that reaches no network: everything it needs travels in
# .gpu/, which bench/gpu/pack_offline.sh fills here (the pinned llama.cpp source, the Debian packages of
# klspec's build dependencies, the default target as Q4_0, since the F16 file is too large to travel).
#   bash bench/gpu/offline_check.sh [LOG_DIR]     (on the GPU machine, from the repository root)
# Builds klspec in-tree with ggml's CUDA backend into build-gpu, runs `ctest -L gpu`, then the speed report on
# the default pair with every layer offloaded (LOG_DIR/speed-gpu.md). Each step's log goes
# to LOG_DIR (default /tmp/klspec-gpu-check); KLSPEC_GPU_SECONDS bounds the whole (default 540): the speed
# report gets what the build and the tests leave.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
log_dir=${1:-/tmp/klspec-gpu-check}
mkdir -p "$log_dir"
deadline=$((SECONDS + ${KLSPEC_GPU_SECONDS:-540}))
step() { echo "[$(date -u +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$log_dir/steps.log"; }

step "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1);" \
     "$(nproc) cores; $(lscpu | sed -n 's/^Model name: *//p')"
export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc >/dev/null || { step "no nvcc on PATH"; exit 1; }
step "$(nvcc --version | tail -1); $(g++ --version | head -1); $(cmake --version | head -1)"

prefix=/tmp/klspec-deps
mkdir -p "$prefix" /tmp/llama-src
for deb in .gpu/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
tar -xJf .gpu/llama-src.tar.xz -C /tmp/llama-src
cp .gpu/testbed-target-q4_0.gguf models/testbed-target.gguf

step "configure (CUDA, sm_90, in-tree)"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_SOURCE_DIR=/tmp/llama-src \
  -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKLSPEC_BUILD_BENCHMARKS=OFF -DKLSPEC_BUILD_PYTHON=OFF \
  -DCMAKE_PREFIX_PATH="$prefix/usr;$prefix/usr/lib/x86_64-linux-gnu/cmake" -DZLIB_ROOT="$prefix/usr" \
  -DZLIB_LIBRARY="$prefix/usr/lib/x86_64-linux-gnu/libz.a" \
  > "$log_dir/configure.log" 2>&1 || { step "configure failed"; tail -30 "$log_dir/configure.log"; exit 1; }
step "build"
# libfmt.so.9, liblinear.so.4 and its reference BLAS (with libgfortran): for the linker and at run time.
lib="$prefix/usr/lib/x86_64-linux-gnu"
export LIBRARY_PATH="$lib" LD_LIBRARY_PATH="$lib:$lib/blas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cmake --build build-gpu -j "$(nproc)" --target klspec klspec_gpu_tests klspec_engine_tests klspec_server_tests \
  derived_models llama-bench llama-speculative-simple > "$log_dir/build.log" 2>&1 \
  || { step "build failed"; grep -m 20 -B2 -A6 "error" "$log_dir/build.log"; exit 1; }
step "ctest -L gpu"
(cd build-gpu && timeout $((deadline - SECONDS - 20)) ctest -L gpu --output-on-failure) > "$log_dir/ctest.log" 2>&1
step "ctest rc $?: $(grep -E 'tests passed|tests failed' "$log_dir/ctest.log")"
grep -E "^ *[0-9]+/[0-9]+ Test" "$log_dir/ctest.log" | tee -a "$log_dir/steps.log"

step "speed report, default pair (Q4_0 target), -ngl 99"
mkdir -p /tmp/llama-inst && ln -sfn "$root/build-gpu/bin" /tmp/llama-inst/bin && ln -sfn "$root/build-gpu/bin" /tmp/llama-inst/lib
KLSPEC_LLAMA_INSTALL=/tmp/llama-inst PYTHONUNBUFFERED=1 timeout $((deadline - SECONDS)) \
  python3 bench/speed/speed_report.py --klspec build-gpu/klspec --ngl 99 --targets default --limit-default 20 \
  --passes 1 --tau 0.3 --commit "${KLSPEC_COMMIT:-unknown}" --threads 8 --reps 3 --out "$log_dir/speed-gpu.md" --work /tmp/speed-report-gpu \
  > "$log_dir/speed.log" 2>&1
step "speed report rc $?"
