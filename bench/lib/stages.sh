# Resumable stages for the long benchmark scripts (bench/model_pairs/*_paper.sh): `stage NAME COMMAND...` runs
# COMMAND unless $OUT/NAME.done exists, and marks it done when it succeeds, so a rerun goes on where an interrupt
# stopped it. KLSPEC_STAGES="a b" runs only the stages named, so a short goal can go before a long sweep.
# Source it after setting OUT.
stage() {
  local name=$1; shift
  if [ -f "$OUT/$name.done" ]; then return; fi
  if [ -n "${KLSPEC_STAGES:-}" ] && [[ " $KLSPEC_STAGES " != *" $name "* ]]; then return; fi
  echo "[$(date -u +%H:%M:%S)] $name: $*"
  "$@"
  touch "$OUT/$name.done"
}
