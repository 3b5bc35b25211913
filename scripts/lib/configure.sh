# klspec's CMake configure against an install of scripts/build-llama.sh, shared by the build and test scripts.
# Sourced with $root set to the clone. configure_klspec BUILD_DIR LLAMA_DIR [CMAKE ARGS...]
# -U: what an earlier configure of BUILD_DIR found of another llama.cpp build (its cache key changes with the build
# flags) is looked up again; kept, it linked klspec against the old build's libraries beside the new ones.
configure_klspec() {
  local build_dir=$1 llama_dir=$2
  shift 2
  cmake -S "$root" -B "$build_dir" -U 'llama_*' -U 'ggml_*' -U 'KLSPEC_LLAMA_*' -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$llama_dir/install" "$@" >/dev/null
}
