// The draft / verify / judge / emit / roll-back loop of DESIGN.md ("One speculative step"), and
// target-only decoding as its special case without a draft.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/judge.h"
#include "core/sampling.h"
#include "core/stats.h"
#include "engine/context.h"
#include "engine/model.h"

namespace klspec {

struct GenerationOptions {
    int32_t max_tokens = 128;  // -n: generated tokens at most
    int32_t draft_max = 16;    // γ: draft tokens proposed per target call
    SamplingParams sampling;
    std::vector<std::string> stop_strings;
};

enum class StopReason { EndOfGeneration, MaxTokens, StopString, ContextFull };
std::string_view to_string(StopReason reason);

struct GenerationResult {
    std::string text;
    std::vector<int32_t> tokens;  // generated tokens, the stop token excluded
    StopReason stop_reason = StopReason::MaxTokens;
    GenerationStats stats;
};

// Receives generated text as soon as it is final (never text that a stop string removes).
using TextCallback = std::function<void(std::string_view)>;

class SpeculativeDecoder {
public:
    // `draft` may be null: target-only decoding. Throws klspec::Error on an unusable pair.
    SpeculativeDecoder(const Model& target, const Model* draft, const ContextOptions& options);

    GenerationResult generate(const std::string& prompt, const GenerationOptions& options, Judge& judge,
                              const TextCallback& on_text = {});

    bool has_draft() const { return draft_ctx_ != nullptr; }

private:
    const Model& target_;
    ModelContext target_ctx_;
    std::unique_ptr<ModelContext> draft_ctx_;
    bool hidden_states_;
};

}  // namespace klspec
