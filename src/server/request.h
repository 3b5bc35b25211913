// An OpenAI-style request body turned into decoding options, or the 4xx error the client gets. Pure: no
// model is needed, so every check is unit-tested (tests/server/test_request.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/judge_factory.h"
#include "engine/chat_template.h"
#include "engine/infill_prompt.h"
#include "engine/speculative_decoder.h"

namespace klspec::server {

// /infill is llama-server's fill-in-the-middle endpoint, with its own fields and answer (not OpenAI's).
enum class Endpoint { Completions, ChatCompletions, Infill };

// The error object of OpenAI's API: {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;  // the request field at fault; empty: none
    std::string code;   // empty: none

    nlohmann::json to_json() const;
    // llama-server's shape, which its own endpoints (/infill) answer: {"error": {"code": status, "message", "type"}}.
    nlohmann::json to_llama_server_json() const;
};

// What the server was started with; a request overrides field by field.
struct RequestDefaults {
    GenerationOptions generation;  // its judge is ignored: `judge` below describes it
    JudgeOptions judge;
    int32_t n_ctx = 2048;   // a max_tokens above the context is clamped to it (the context stops generation anyway)
    int32_t n_vocab = 0;    // a prompt's token ids must be below it
    int32_t n_batch = 512;  // -b: /infill's prompt budget (InfillBudget) splits it
    // Token-id prompts get the BOS token a text prompt gets, where they lack it (lm-evaluation-harness's remote
    // tokenizer sends ids without it, which lowers Gemma's and Llama's loglikelihoods); the request field
    // add_bos_to_token_prompts overrides.
    bool add_bos_to_token_prompts = false;
    // A request's judge_span "think": the reasoning span of the server's chat template (needs_markers()
    // when the template has none).
    JudgeSpan reasoning_span = JudgeSpan::parse("think");
};

// One prompt of /v1/completions: text (tokenized as a prompt: BOS added, special tokens parsed) or token
// ids, used as given (no BOS added: the client's tokenization is the prompt, as OpenAI and llama-server)
// unless the request's add_bos_to_token_prompts says otherwise.
struct PromptInput {
    std::string text;
    std::optional<std::vector<int32_t>> tokens;
};

// /infill's own fields, llama-server's names.
struct InfillFields {
    InfillInput input;                         // input_prefix, input_suffix, input_extra, prompt
    std::vector<std::string> response_fields;  // only these fields ("a/b": nested) in the answer; none: all
    bool return_tokens = false;                // the answer lists the generated token ids
};

struct CompletionRequest {
    Endpoint endpoint = Endpoint::Completions;
    std::vector<PromptInput> prompts;  // /v1/completions: one, or one choice each when `prompt` is a list
    ChatMessages messages;             // /v1/chat/completions (the server applies the model's chat template)
    InfillFields infill;               // /infill
    GenerationOptions generation;      // defaults and the request's fields, its judge built and checked
    // Completions: the prompt comes back before the completion, and with `logprobs` each prompt token's
    // target logprob (the first token's null), OpenAI's legacy echo (lm-evaluation-harness scores with it).
    bool echo = false;
    bool add_bos_to_token_prompts = false;  // RequestDefaults' field of that name, or the request's
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage: a last chunk with no choices and the usage
};

// Parses and validates a body. Fields: prompt (a string, strings, token ids or lists of them) | messages, echo, judge,
// judge_threshold, judge_topk, confidence_mask, judge_span (all | until:STRING | think | think:OPEN,CLOSE), draft_max,
// draft_policy (auto | fixed | adaptive | off), temperature, top_k, top_p, seed, max_tokens, stop (string or array),
// stream, stream_options ({"include_usage": bool}, only with stream, as OpenAI), logprobs (completions: an integer;
// chat: a boolean, with top_logprobs), cache_prompt and add_bos_to_token_prompts (booleans); others (model, user, ...)
// are ignored as OpenAI clients send them. /infill: input_prefix and input_suffix (strings, required), input_extra
// ([{filename, text}]), prompt (a string, optional), n_predict (max_tokens; -1: up to the context), n_indent,
// t_max_predict_ms, n_cache_reuse, response_fields, return_tokens; t_max_prompt_ms, id_slot and samplers are taken and
// ignored (llama-server implements no t_max_prompt_ms).
std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body, Endpoint endpoint,
                                                                   const RequestDefaults& defaults);

// POST /tokenize, llama-server's fields; vLLM's names (prompt, add_special_tokens) too, which
// lm-evaluation-harness's remote tokenizer sends.
struct TokenizeRequest {
    std::string content;       // required: content or prompt
    bool add_special = false;  // add_special or add_special_tokens: prepend the BOS token, as a prompt gets
    bool with_pieces = false;  // [{"id", "piece"}] instead of [id]
};
std::variant<TokenizeRequest, ApiError> parse_tokenize_request(std::string_view body);

// POST /detokenize: {"tokens": [id]}; every id must be in [0, n_vocab).
std::variant<std::vector<int32_t>, ApiError> parse_detokenize_request(std::string_view body, int32_t n_vocab);

// Whether an Authorization header value is "Bearer <one of keys>". Every byte of every key is compared
// whatever the header holds (no early exit), so the time taken tells nothing but the keys' lengths.
bool api_key_authorized(std::string_view authorization, const std::vector<std::string>& keys);

}  // namespace klspec::server
