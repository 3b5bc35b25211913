#!/usr/bin/env bash
# Installs the official OpenAI client library (npm `openai`, pinned) into a cache outside the clone, once,
# and prints its node_modules folder (for NODE_PATH). The server's client test runs it; without npm or a
# network it fails with one line and the test skips.
set -euo pipefail
version=5.12.0  # 5.x: no Node.js 22 requirement, so Debian's node runs it
cache="${XDG_CACHE_HOME:-$HOME/.cache}/klspec/npm-openai-$version"
if [[ ! -f "$cache/node_modules/openai/package.json" ]]; then
  command -v npm >/dev/null || { echo "npm-openai: npm is not installed" >&2; exit 1; }
  mkdir -p "$(dirname "$cache")"
  staging=$(mktemp -d "$cache.XXXXXX")  # beside the cache: a concurrent install never sees half of one
  trap 'rm -rf "$staging"' EXIT
  if ! timeout 300 npm install --prefix "$staging" --no-audit --no-fund --no-save --loglevel=error \
       --fetch-retries=1 "openai@$version" >/dev/null 2>"$staging.log"; then
    echo "npm-openai: npm install openai@$version failed: $(head -n 1 "$staging.log")" >&2
    rm -f "$staging.log"
    exit 1
  fi
  rm -f "$staging.log"
  mv -T "$staging" "$cache" 2>/dev/null || true  # another install won the race: theirs is as good
fi
echo "$cache/node_modules"
