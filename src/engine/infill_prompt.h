// The prompt of a fill-in-the-middle request (llama-server's /infill): the code before and after the cursor,
// extra context from other files, in Qwen2.5-Coder's repo-level layout when the vocabulary has its tokens.
// Exactly llama-server's format_prompt_infill (tools/server/server-common.cpp in the pinned tree), which the
// server tests compare token for token.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/model.h"

namespace klspec {

struct InfillChunk {
    std::string filename = "tmp";  // llama-server's name for a chunk without one
    std::string text;
};

struct InfillInput {
    std::string prefix;              // the text before the cursor
    std::string suffix;              // the text after it
    std::vector<InfillChunk> extra;  // other files' text, oldest first (the newest is kept when it must be cut)
    std::string prompt;              // the current line's text up to the cursor (special tokens parsed)
};

// How the context is split, with llama-server's names: the prefix takes up to 3/4 of n_batch, the suffix what
// is left of its last quarter after the prompt, and the extra chunks n_ctx − n_batch − 2·n_predict.
struct InfillBudget {
    int32_t n_batch = 512;
    int32_t n_predict = -1;  // the server's default token limit (-1: none)
    int32_t n_ctx = 2048;    // per slot
};

// llama-server's reason when the vocabulary lacks a FIM token ("prefix token is missing. ..."); nullopt when
// infill is possible.
std::optional<std::string> missing_fim_tokens(const Model& model);

// [<|repo_name|>myproject\n][<|file_sep|>NAME\nTEXT]...[<|file_sep|>filename\n][BOS]<|fim_prefix|>PREFIX PROMPT
// <|fim_suffix|>SUFFIX<|fim_middle|>, each part cut to the budget (without the repo-level tokens a chunk is
// introduced by "\n\n--- snippet ---\n\n"). Throws klspec::Error when missing_fim_tokens says so.
std::vector<int32_t> infill_prompt(const Model& model, const InfillInput& input, const InfillBudget& budget);

}  // namespace klspec
