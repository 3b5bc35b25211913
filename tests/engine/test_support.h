// Paths and prompts shared by the model-based tests (stories260K and drafts quantized from it).
#pragma once

#include <string>
#include <vector>

namespace klspec::test {

inline const std::string kTargetModel = KLSPEC_STORIES_GGUF;
inline const std::string kDraftQ8 = std::string(KLSPEC_MODEL_DIR) + "/stories260K-q8_0.gguf";
inline const std::string kDraftQ4 = std::string(KLSPEC_MODEL_DIR) + "/stories260K-q4_0.gguf";
inline const std::string kCli = KLSPEC_CLI;
inline const std::string kReasoningTarget = std::string(KLSPEC_SOURCE_DIR) + "/models/reasoning-target.gguf";
inline const std::string kReasoningDraft = std::string(KLSPEC_SOURCE_DIR) + "/models/reasoning-draft.gguf";
inline const std::string kReasoningTestSet = std::string(KLSPEC_SOURCE_DIR) + "/data/reasoning_test.jsonl";

// `count` story openings and `count` GSM8K test questions (the first ones of the file).
std::vector<std::string> story_and_gsm8k_prompts(size_t count);

struct CommandResult {
    int exit_code = 0;
    std::string output;  // stdout and stderr together
};
// Runs a shell command line and captures what it prints.
CommandResult run_command(const std::string& command_line);

// A fresh path under the test's temporary directory.
std::string temp_path(const std::string& name);

}  // namespace klspec::test
