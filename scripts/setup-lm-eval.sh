#!/usr/bin/env bash
# Installs EleutherAI's lm-evaluation-harness (lm-eval[api], pinned with every dependency in
# tools/lm_eval/requirements.txt) into a venv outside the clone, keyed by the requirements' hash, and prints
# the venv's python on its last line; a second run is a no-op. The venv sits over Debian's python3 with
# --system-site-packages, so it takes Debian's python3-torch instead of a multi-gigabyte wheel.
#
# Environment:
#   KLSPEC_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/klspec), as scripts/build-llama.sh
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
requirements="$here/../tools/lm_eval/requirements.txt"
version=$(sed -n 's/^lm-eval\[api\]==//p' "$requirements")
key=$(sha256sum "$requirements" | cut -c1-10)
cache_root="${KLSPEC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/klspec}"
venv="$cache_root/lm-eval-$version-$key"

if [[ -f "$venv/.complete" ]]; then
  echo "$venv/bin/python"
  exit 0
fi
mkdir -p "$cache_root"
exec 9>"$venv.lock"
flock 9
if [[ ! -f "$venv/.complete" ]]; then
  if ! /usr/bin/python3 -c "import venv, ensurepip" >/dev/null 2>&1; then
    bash "$here/setup-deps.sh"   # Debian's python3-venv
  fi
  echo "setup-lm-eval: lm-eval $version into $venv (about a minute)" >&2
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  PIP_ROOT_USER_ACTION=ignore "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" >&2
  "$venv/bin/python" -c "import lm_eval.models.openai_completions" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
