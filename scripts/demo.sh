#!/usr/bin/env bash
# Builds klspec (with everything it needs) and runs speculative generation on the default models:
# stories260K as the target and its Q4_0 quantization (made at build time) as the draft.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="${KLSPEC_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh" >/dev/null
exec "$build_dir/klspec" generate \
  -m "$root/../shared/models/stories260K/stories260K.gguf" \
  -md "$build_dir/models/stories260K-q4_0.gguf" \
  -p "Once upon a time" -n 128 --draft-max 16 "$@"
