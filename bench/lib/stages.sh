# Resumable stages for the long benchmark scripts (bench/model_pairs/*_paper.sh): `stage NAME COMMAND...` runs
# COMMAND unless $OUT/NAME.done exists, and marks it done when it succeeds, so a rerun goes on where an interrupt
# stopped it. KLSPEC_STAGES="a b" runs only the stages named, so a short goal can go before a long sweep.
# Each start appends a line to $OUT/provenance.jsonl: the stage, the klspec commit that decodes (KLSPEC_COMMIT,
# set by a frozen build; else this checkout's HEAD, "+dirty" with local changes), lscpu's model name and the time,
# so rows kept in the repository say what decoded them and where.
# Source it after setting OUT.
stage_commit() {
  if [ -n "${KLSPEC_COMMIT:-}" ]; then echo "$KLSPEC_COMMIT"; return; fi
  local head; head=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then head="$head+dirty"; fi
  echo "$head"
}
stage() {
  local name=$1; shift
  if [ -f "$OUT/$name.done" ]; then return; fi
  if [ -n "${KLSPEC_STAGES:-}" ] && [[ " $KLSPEC_STAGES " != *" $name "* ]]; then return; fi
  echo "[$(date -u +%H:%M:%S)] $name: $*"
  python3 - "$name" "$(stage_commit)" "$(lscpu | sed -n 's/^Model name: *//p' | head -1)" "$*" \
    >> "$OUT/provenance.jsonl" <<'PY'
import datetime, json, sys
stage, commit, cpu, command = sys.argv[1:]
started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({"stage": stage, "commit": commit, "cpu": cpu, "started": started, "command": command}))
PY
  "$@"
  touch "$OUT/$name.done"
}
