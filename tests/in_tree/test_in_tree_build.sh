#!/usr/bin/env bash
# The in-tree build (-DLLAMA_SOURCE_DIR: llama.cpp compiled with klspec, the way a CUDA or other GPU build is
# made), CPU only: klspec links ONE cpp-httplib (llama.cpp's vendored copy, no Debian libcpp-httplib beside
# it) and `klspec serve` starts on the default pair and answers a completion.
# Usage: test_in_tree_build.sh KLSPEC_SOURCE LLAMA_SOURCE BUILD_DIR
# llama.cpp's objects are compiled once per machine: ccache keeps them in ~/.cache/klspec/ccache
# (KLSPEC_CCACHE_DIR), so a later run, from any clone, rebuilds only what changed.
set -euo pipefail
src=$1 llama_src=$2 build=$3
[[ -f $llama_src/vendor/cpp-httplib/httplib.h ]] || { echo "no llama.cpp source tree at $llama_src" >&2; exit 1; }

root=$src
source "$src/scripts/lib/ccache.sh"

rm -rf "$build"
echo "in-tree: configuring $build from $llama_src" >&2
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_SOURCE_DIR="$llama_src" \
      -DKLSPEC_BUILD_TESTS=OFF -DKLSPEC_BUILD_BENCHMARKS=OFF -DKLSPEC_BUILD_PYTHON=OFF "${ccache_launcher[@]}" \
      >/dev/null
echo "in-tree: building klspec (llama.cpp from source; minutes on a cold cache)" >&2
cmake --build "$build" --target klspec -j "$(nproc)" >"$build/build.log" 2>&1 || { tail -30 "$build/build.log" >&2; exit 1; }
klspec=$build/klspec

# One cpp-httplib: not Debian's shared library, and the vendored version's string only.
if ldd "$klspec" | grep -q libcpp-httplib; then
  echo "FAIL: the in-tree klspec links Debian's libcpp-httplib beside llama.cpp's vendored copy" >&2
  ldd "$klspec" | grep httplib >&2
  exit 1
fi
vendored=$(sed -n 's/^#define CPPHTTPLIB_VERSION "\(.*\)"/\1/p' "$llama_src/vendor/cpp-httplib/httplib.h")
mapfile -t versions < <(find "$build" -name '*.so*' -type f -print0 | xargs -0 -r cat "$klspec" |
                        grep -ao 'cpp-httplib/[0-9][0-9.]*' | sort -u)
others=$(printf '%s\n' "${versions[@]}" | grep -v "^cpp-httplib/$vendored\$" || true)
if [[ -n $others ]]; then
  echo "FAIL: cpp-httplib versions in the binaries: ${versions[*]} (expected cpp-httplib/$vendored only)" >&2
  exit 1
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$klspec" serve --host 127.0.0.1 --port "$port" -np 2 -t 2 >"$build/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 300); do
  kill -0 $server 2>/dev/null || { echo "FAIL: klspec serve exited at start" >&2; tail -20 "$build/serve.log" >&2; exit 1; }
  [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health") == 200 ]] && break
  sleep 1
done
reply=$(curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt": "Tom has 3 apples and buys 2 more. How many apples does he have?", "max_tokens": 16}')
python3 - "$reply" <<'EOF'
import json, sys
reply = json.loads(sys.argv[1])
text = reply["choices"][0]["text"]
assert reply["usage"]["completion_tokens"] > 0 and text.strip(), reply
print(f"in-tree: klspec serve answered {reply['usage']['completion_tokens']} tokens: {text!r}")
EOF
echo "in-tree: one cpp-httplib ($vendored), serve answered: PASS"
