// Where this build keeps what the model-based tests read: the clone, ../shared, the models made at build time,
// the pinned llama.cpp's tools. Compiled into one file (build_paths.cpp, the only one given these paths on its
// command line), so that no other test object depends on where the clone is and ccache reuses them across
// clones (scripts/lib/ccache.sh).
#pragma once

namespace klspec::test::build_paths {

extern const char* const source_dir;        // the clone
extern const char* const shared_dir;        // ../shared beside it
extern const char* const cli;               // the klspec binary
extern const char* const stories_gguf;      // stories260K, the target of the engine tests
extern const char* const model_dir;         // models derived at build time (drafts quantized from it)
extern const char* const llama_tools_dir;   // the pinned llama.cpp's tools (llama-speculative-simple, ...)
extern const char* const llama_models_dir;  // its source tree's models/ (vocabularies, chat templates)
extern const char* const family_model_dir;  // tests/model_families' pairs
extern const char* const real_model_dir;    // the real model's links (fixture real_model.make)
extern const char* const real_pair_dir;     // the real pair's links (fixture real_pair.make)

}  // namespace klspec::test::build_paths

// The same from any namespace a test file uses.
namespace build_paths = klspec::test::build_paths;
