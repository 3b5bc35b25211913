# ccache for klspec's own builds, plain and sanitized, and the in-tree check's (issue: a test suite that leaves room
# to work). Objects are kept outside any clone, in $KLSPEC_CCACHE_DIR (default ~/.cache/klspec/ccache), and paths
# inside the clone are hashed relative to it (CCACHE_BASEDIR), so CI's fresh clone recompiles only what changed.
# Sourced with $root set to the clone; sets ccache_launcher, cmake's launcher options (empty without ccache).
export CCACHE_DIR=${KLSPEC_CCACHE_DIR:-${KLSPEC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/klspec}/ccache}
export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
ccache_launcher=()
if command -v ccache >/dev/null; then
  ccache_launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
