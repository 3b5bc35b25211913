// Paths and prompts shared by the model-based tests (stories260K and drafts quantized from it, and the
// project's default pair).
#pragma once

#include <string>
#include <vector>

namespace klspec::test {

inline const std::string kTargetModel = KLSPEC_STORIES_GGUF;
inline const std::string kDraftQ8 = std::string(KLSPEC_MODEL_DIR) + "/stories260K-q8_0.gguf";
inline const std::string kDraftQ4 = std::string(KLSPEC_MODEL_DIR) + "/stories260K-q4_0.gguf";
inline const std::string kCli = KLSPEC_CLI;
// The project's default pair and its test problems (tools/testbed).
inline const std::string kDefaultTarget = std::string(KLSPEC_SOURCE_DIR) + "/models/testbed-target.gguf";
inline const std::string kDefaultDraft = std::string(KLSPEC_SOURCE_DIR) + "/models/testbed-draft.gguf";
// data/testbed_<family>_test.jsonl for family word, choice or trace.
inline std::string testbed_test_set(const std::string& family) {
    return std::string(KLSPEC_SOURCE_DIR) + "/data/testbed_" + family + "_test.jsonl";
}
inline const std::string kWordTestSet = testbed_test_set("word");

// The first `count` of 25 story openings.
std::vector<std::string> story_prompts(size_t count);
// The first `count` GSM8K test questions, or none when ../shared/datasets is absent (a user's clone):
// tests that need them skip and say so.
std::vector<std::string> gsm8k_prompts(size_t count);
inline const char* const kNoSharedDatasets = "../shared/datasets/gsm8k/test.jsonl is absent: GSM8K prompts skipped";

struct CommandResult {
    int exit_code = 0;
    std::string output;  // stdout and stderr together
};
// Runs a shell command line and captures what it prints.
CommandResult run_command(const std::string& command_line);

// A fresh path under the test's temporary directory.
std::string temp_path(const std::string& name);

// stories260K with a ChatML chat template in its metadata (a fresh copy under the temporary directory).
std::string stories_with_chat_template();

}  // namespace klspec::test
