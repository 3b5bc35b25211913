#include "build_paths.h"

namespace klspec::test::build_paths {

const char* const source_dir = KLSPEC_SOURCE_DIR;
const char* const shared_dir = KLSPEC_SHARED_DIR;
const char* const cli = KLSPEC_CLI;
const char* const stories_gguf = KLSPEC_STORIES_GGUF;
const char* const model_dir = KLSPEC_MODEL_DIR;
const char* const llama_tools_dir = KLSPEC_LLAMA_TOOLS_DIR;
const char* const llama_models_dir = KLSPEC_LLAMA_MODELS_DIR;
const char* const family_model_dir = KLSPEC_FAMILY_MODEL_DIR;
const char* const real_model_dir = KLSPEC_REAL_MODEL_DIR;
const char* const real_pair_dir = KLSPEC_REAL_PAIR_DIR;

}  // namespace klspec::test::build_paths
