#!/usr/bin/env bash
# cmake --install into a temporary prefix, then use what it installed: a small C++ program built against
# find_package(klspec) and against pkg-config's klspec.pc, the installed `klspec generate` without -m (it must
# load the installed default pair, not the source tree's), and the Python package when it was built.
# Usage: test_install.sh BUILD_DIR LLAMA_PREFIX CXX LIBDIR [PYTHON]
set -euo pipefail
build=$1 llama_prefix=$2 cxx=$3 libdir=$4 python=${5:-}
prefix=$(mktemp -d "${TMPDIR:-/tmp}/klspec-install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" > "$prefix.log" 2>&1 || { cat "$prefix.log"; rm -f "$prefix.log"; fail "cmake --install"; }
rm -f "$prefix.log"
models=$prefix/share/klspec/models
models_real=$(realpath "$models")  # the CLI resolves its own path (/proc/self/exe) through symlinks
for file in bin/klspec "$libdir/libklspec_engine.a" include/klspec/engine/speculative_decoder.h \
            "$libdir/cmake/klspec/klspecConfig.cmake" "$libdir/pkgconfig/klspec.pc" \
            share/klspec/models/testbed-target.gguf share/klspec/models/testbed-draft.gguf share/klspec/models/README.md; do
  [[ -f $prefix/$file ]] || fail "not installed: $file"
done

# A user's program: greedy speculative decoding with the installed default pair.
consumer=$prefix/consumer
mkdir -p "$consumer"
cat > "$consumer/main.cpp" <<'CPP'
#include <cstdio>
#include "engine/speculative_decoder.h"
int main(int argc, char** argv) {
    if (argc != 3) return 2;
    const klspec::Model target(std::string(argv[1]) + "/testbed-target.gguf");
    const klspec::Model draft(std::string(argv[1]) + "/testbed-draft.gguf");
    klspec::SpeculativeDecoder decoder(target, &draft, {.n_ctx = 256, .n_threads = 2});
    klspec::GenerationOptions options;
    options.max_tokens = 8;
    const klspec::GenerationResult result = decoder.generate(argv[2], options);
    std::printf("%zu tokens: %s\n", result.tokens.size(), result.text.c_str());
    return result.tokens.empty() ? 1 : 0;
}
CPP
cat > "$consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(klspec_consumer CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(klspec REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE klspec::engine)
CMAKE
prompt="Question: what is 12 + 30?"
cmake -S "$consumer" -B "$consumer/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_PREFIX_PATH="$prefix;$llama_prefix" > "$consumer/configure.log" 2>&1 \
  || { cat "$consumer/configure.log"; fail "find_package(klspec)"; }
cmake --build "$consumer/build" > "$consumer/build.log" 2>&1 || { cat "$consumer/build.log"; fail "building against klspec::engine"; }
out=$("$consumer/build/consumer" "$models" "$prompt" 2>&1) || { echo "$out"; fail "the find_package program"; }
echo "find_package program: $out"

# The same program through pkg-config.
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
flags=$(pkg-config --cflags --libs klspec) || fail "pkg-config --cflags --libs klspec"
# shellcheck disable=SC2086
"$cxx" -std=c++20 -O1 "$consumer/main.cpp" -o "$consumer/consumer-pc" $flags || fail "building with pkg-config's flags"
out=$("$consumer/consumer-pc" "$models" "$prompt" 2>&1) || { echo "$out"; fail "the pkg-config program"; }
echo "pkg-config program:   $out"

# The installed CLI without -m: the installed pair (the JSON names the models it loaded).
json=$(env -u KLSPEC_MODELS_DIR "$prefix/bin/klspec" generate -p "$prompt" -n 8 -t 2 --json) || fail "installed klspec generate"
echo "klspec generate:      $json"
target=$(printf '%s' "$json" | sed -n 's/.*"target":"\([^"]*\)".*/\1/p')
draft=$(printf '%s' "$json" | sed -n 's/.*"draft":"\([^"]*\)".*/\1/p')
[[ $target == "$models_real/testbed-target.gguf" ]] || fail "installed klspec loaded target '$target', not $models/testbed-target.gguf"
[[ $draft == "$models_real/testbed-draft.gguf" ]] || fail "installed klspec loaded draft '$draft', not $models/testbed-draft.gguf"

if [[ -n $python ]]; then
  site=$prefix/lib/python3/dist-packages
  [[ -f $site/klspec/__init__.py ]] || fail "Python package not installed under $site"
  (cd "$prefix" && PYTHONPATH=$site "$python" -c "import klspec, sys; assert klspec.__file__.startswith('$site'), klspec.__file__") \
    || fail "import klspec from $site"
  echo "python: import klspec from $site"
fi
echo "PASS"
