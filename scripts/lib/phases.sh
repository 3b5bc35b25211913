# Wall time by phase for scripts/test.sh (issue: a test suite that leaves room to work). Sourced by the scripts
# it runs; each phase appends "NAME<TAB>SECONDS" to $KLSPEC_PHASE_TIMES when that is set (test.sh sets it), so a
# phase run twice (the packages and llama.cpp checks of both halves) is summed in the report.

# phase NAME COMMAND...: runs COMMAND and records its wall time under NAME; returns COMMAND's status.
phase() {
  # Prefixed: bash's locals are seen by the functions COMMAND calls, which may set a "name" of their own.
  local _phase_name=$1 _phase_start=$SECONDS _phase_status=0
  shift
  "$@" || _phase_status=$?
  if [[ -n "${KLSPEC_PHASE_TIMES:-}" ]]; then
    printf '%s\t%d\n' "$_phase_name" $((SECONDS - _phase_start)) >>"$KLSPEC_PHASE_TIMES"
  fi
  return "$_phase_status"
}

# phase_report FILE: each phase's total in the order first run, then the whole.
phase_report() {
  awk -F'\t' '!($1 in s) { order[n++] = $1 } { s[$1] += $2; total += $2 }
    END { print "wall time by phase:"
          for (i = 0; i < n; i++) printf "  %-18s %6d s  %5.1f min\n", order[i], s[order[i]], s[order[i]] / 60
          printf "  %-18s %6d s  %5.1f min\n", "total", total, total / 60 }' "$1"
}

# slowest_tests CTEST_OUTPUT N TITLE: the N slowest tests of one ctest run, from its "Test #k: name ... sec" lines.
slowest_tests() {
  echo "$3"
  sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) [ .*]+[A-Za-z*]+[^0-9]*([0-9.]+) sec$/\2\t\1/p' "$1" |
    sort -t$'\t' -k1,1 -gr | awk -F'\t' -v n="$2" 'NR <= n { printf "  %8.1f s  %s\n", $1, $2 }'
}
