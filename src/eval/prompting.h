// How a benchmark's problems are put to a model (issue 10; docs/datasets.md, "Prompts"): the GGUF's chat
// template when it has one, else a plain prompt per benchmark; few-shot exemplars where the benchmark's
// convention uses them; the stop strings that end an answer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/model.h"
#include "eval/dataset.h"

namespace klspec {

enum class ChatMode { Auto, On, Off };
ChatMode parse_chat_mode(const std::string& text);  // auto, on, off

struct PromptOptions {
    ChatMode chat = ChatMode::Auto;  // auto: the chat template when the target GGUF has one
    std::optional<int> few_shot;     // exemplars; default: GSM8K 8, MMLU-Pro 5 in plain prompts, else 0
};

// What format_prompts did, for the run's settings and report.
struct PromptFormat {
    bool chat = false;
    int few_shot = 0;
    std::vector<std::string> stop_strings;  // to add to the generation's
    // Where the benchmark's answer starts in an output ("The answer is", "answer is", "\\boxed{"); empty for code,
    // whose whole output is the answer. sweep and mine relax only before it by default (relax_until_answer).
    std::string answer_marker;
};

// Rewrites each problem's prompt for its benchmark (`dataset` names it: gsm8k, mmlu-pro, math500,
// math500-hard, humaneval, mbpp-plus, livecodebench; anything else is a JSONL file whose prompts are used
// as written, or as the user message under a chat template). Exemplars come from `data_dir` (GSM8K train,
// MMLU-Pro validation, same category). Throws klspec::Error for a benchmark without exemplars when
// few_shot > 0, or chat On without a template.
PromptFormat format_prompts(std::vector<Problem>& problems, const std::string& dataset, const std::string& data_dir,
                            const PromptOptions& options, const Model& target);

}  // namespace klspec
