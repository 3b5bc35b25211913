#include "server/request.h"

#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"

namespace klspec::server {
namespace {

using nlohmann::json;

ApiError bad_field(std::string param, std::string message) {
    return ApiError{400, std::move(message), "invalid_request_error", std::move(param), ""};
}

// The field's value when present and not null; throws ApiError naming it when its type is wrong.
const json* field(const json& body, const char* name) {
    const auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number_field(const json& body, const char* name) {
    const json* value = field(body, name);
    if (value == nullptr) return std::nullopt;
    if (!value->is_number()) throw bad_field(name, fmt::format("'{}' must be a number", name));
    return value->get<double>();
}

std::optional<int64_t> integer_field(const json& body, const char* name) {
    const json* value = field(body, name);
    if (value == nullptr) return std::nullopt;
    if (!value->is_number_integer() ||
        (value->is_number_unsigned() && value->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())))
        throw bad_field(name, fmt::format("'{}' must be an integer", name));
    return value->get<int64_t>();
}

// An integer in [min, int32 max]: the engine's counts are int32.
std::optional<int32_t> count_field(const json& body, const char* name, int32_t min) {
    const std::optional<int64_t> value = integer_field(body, name);
    if (!value) return std::nullopt;
    if (*value < min || *value > std::numeric_limits<int32_t>::max())
        throw bad_field(name, fmt::format("'{}' must be in [{}, {}], got {}", name, min,
                                          std::numeric_limits<int32_t>::max(), *value));
    return static_cast<int32_t>(*value);
}

std::optional<bool> bool_field(const json& body, const char* name) {
    const json* value = field(body, name);
    if (value == nullptr) return std::nullopt;
    if (!value->is_boolean()) throw bad_field(name, fmt::format("'{}' must be a boolean", name));
    return value->get<bool>();
}

std::optional<std::string> string_field(const json& body, const char* name) {
    const json* value = field(body, name);
    if (value == nullptr) return std::nullopt;
    if (!value->is_string()) throw bad_field(name, fmt::format("'{}' must be a string", name));
    return value->get<std::string>();
}

ChatMessages parse_messages(const json& body) {
    const json* value = field(body, "messages");
    if (value == nullptr) throw bad_field("messages", "'messages' is required");
    if (!value->is_array() || value->empty())
        throw bad_field("messages", "'messages' must be a non-empty array of {role, content} objects");
    ChatMessages messages;
    for (const json& message : *value) {
        if (!message.is_object() || !message.contains("role") || !message["role"].is_string() ||
            !message.contains("content") || !message["content"].is_string())
            throw bad_field("messages", "each message must be an object with string 'role' and 'content'");
        messages.emplace_back(message["role"].get<std::string>(), message["content"].get<std::string>());
    }
    return messages;
}

std::vector<std::string> parse_stop(const json& body) {
    const json* value = field(body, "stop");
    if (value == nullptr) return {};
    if (value->is_string()) return {value->get<std::string>()};
    const char* const kType = "'stop' must be a string or an array of strings";
    if (!value->is_array()) throw bad_field("stop", kType);
    std::vector<std::string> stops;
    for (const json& stop : *value) {
        if (!stop.is_string()) throw bad_field("stop", kType);
        stops.push_back(stop.get<std::string>());
    }
    return stops;
}

// Token ids (an array) of a vocabulary of n_vocab; throws naming `param` for anything else.
std::vector<int32_t> parse_token_ids(const json& ids, int32_t n_vocab, const char* param) {
    const std::string kType = fmt::format("'{}' must be an array of token ids in [0, {})", param, n_vocab);
    if (!ids.is_array()) throw bad_field(param, kType);
    std::vector<int32_t> tokens;
    for (const json& id : ids) {
        // An unsigned id beyond int64 reads as negative.
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n_vocab)
            throw bad_field(param, fmt::format("{}, got {}", kType, id.dump()));
        tokens.push_back(id.get<int32_t>());
    }
    return tokens;
}

std::vector<int32_t> parse_prompt_tokens(const json& ids, int32_t n_vocab) {
    if (ids.empty()) throw bad_field("prompt", "a token-id prompt must not be empty");
    return parse_token_ids(ids, n_vocab, "prompt");
}

// OpenAI's four shapes: a string, a list of strings, a list of token ids, a list of token-id lists.
std::vector<PromptInput> parse_prompts(const json& body, int32_t n_vocab) {
    const json* prompt = field(body, "prompt");
    if (prompt == nullptr) throw bad_field("prompt", "'prompt' is required");
    if (prompt->is_string()) return {PromptInput{prompt->get<std::string>(), std::nullopt}};
    const char* const kShapes =
        "'prompt' must be a string, a list of strings, a list of token ids or a list of "
        "token-id lists";
    if (!prompt->is_array() || prompt->empty()) throw bad_field("prompt", kShapes);
    if ((*prompt)[0].is_number()) return {PromptInput{"", parse_prompt_tokens(*prompt, n_vocab)}};
    std::vector<PromptInput> prompts;
    for (const json& item : *prompt) {
        if (item.is_string())
            prompts.push_back({item.get<std::string>(), std::nullopt});
        else if (item.is_array())
            prompts.push_back({"", parse_prompt_tokens(item, n_vocab)});
        else
            throw bad_field("prompt", kShapes);
    }
    return prompts;
}

std::string required_string(const json& body, const char* name) {
    const std::optional<std::string> value = string_field(body, name);
    if (!value) throw bad_field(name, fmt::format("\"{}\" is required", name));
    return *value;
}

std::vector<InfillChunk> parse_input_extra(const json& body) {
    const json* extra = field(body, "input_extra");
    if (extra == nullptr) return {};
    if (!extra->is_array())
        throw bad_field("input_extra", "\"input_extra\" must be an array of {\"filename\": string, \"text\": string}");
    std::vector<InfillChunk> chunks;
    for (const json& chunk : *extra) {
        if (!chunk.is_object() || !chunk.contains("text") || !chunk["text"].is_string())
            throw bad_field("input_extra", "extra_context chunk must contain a \"text\" field with a string value");
        InfillChunk parsed;
        parsed.text = chunk["text"].get<std::string>();
        if (chunk.contains("filename")) {
            if (!chunk["filename"].is_string())
                throw bad_field("input_extra", "extra_context chunk's \"filename\" field must be a string");
            parsed.filename = chunk["filename"].get<std::string>();
        }
        chunks.push_back(std::move(parsed));
    }
    return chunks;
}

// llama-server's /infill fields, checked in its order with its messages (tools/server/server-context.cpp).
InfillFields parse_infill_fields(const json& body) {
    InfillFields infill;
    if (const json* prompt = field(body, "prompt"); prompt != nullptr && !prompt->is_string())
        throw bad_field("prompt", "\"prompt\" must be a string");
    infill.input.prompt = string_field(body, "prompt").value_or("");
    infill.input.prefix = required_string(body, "input_prefix");
    infill.input.suffix = required_string(body, "input_suffix");
    infill.input.extra = parse_input_extra(body);
    if (const json* fields = field(body, "response_fields")) {
        const char* const kType = "'response_fields' must be an array of strings";
        if (!fields->is_array()) throw bad_field("response_fields", kType);
        for (const json& name : *fields) {
            if (!name.is_string()) throw bad_field("response_fields", kType);
            infill.response_fields.push_back(name.get<std::string>());
        }
    }
    infill.return_tokens = bool_field(body, "return_tokens").value_or(false);
    return infill;
}

// llama-server's limits, under its names: n_predict (-1: none, so the context), n_indent, t_max_predict_ms
// (0 or less: none), n_cache_reuse.
void parse_llama_server_limits(const json& body, int32_t n_ctx, GenerationOptions& gen) {
    if (const std::optional<int64_t> n_predict = integer_field(body, "n_predict"))
        gen.max_tokens = static_cast<int32_t>(*n_predict < 0 ? n_ctx : std::min<int64_t>(*n_predict, n_ctx));
    if (const std::optional<int32_t> indent = count_field(body, "n_indent", 0)) gen.min_line_indent = *indent;
    if (const std::optional<int64_t> ms = integer_field(body, "t_max_predict_ms"); ms && *ms > 0)
        gen.max_predict_seconds = static_cast<double>(*ms) / 1000.0;
    if (const std::optional<int32_t> reuse = count_field(body, "n_cache_reuse", 0)) gen.cache_reuse_min_chunk = *reuse;
}

// OpenAI's two spellings: completions take `logprobs: N` (the number of alternatives), chat completions
// `logprobs: true` with `top_logprobs: N`.
std::optional<int32_t> parse_logprobs(const json& body, Endpoint endpoint) {
    const auto top_count = [&](const char* name) {
        const std::optional<int64_t> n = integer_field(body, name);
        if (n && (*n < 0 || *n > kMaxTopLogprobs))
            throw bad_field(name, fmt::format("'{}' must be in [0, {}], got {}", name, kMaxTopLogprobs, *n));
        return n ? std::optional<int32_t>(static_cast<int32_t>(*n)) : std::nullopt;
    };
    if (endpoint != Endpoint::ChatCompletions) return top_count("logprobs");
    const json* wanted = field(body, "logprobs");
    if (wanted != nullptr && !wanted->is_boolean()) throw bad_field("logprobs", "'logprobs' must be a boolean");
    const std::optional<int32_t> top = top_count("top_logprobs");
    if (wanted == nullptr || !wanted->get<bool>()) {
        if (top) throw bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        return std::nullopt;
    }
    return top.value_or(0);
}

// The judge fields over the server's judge. A request that names a rule brings that rule's knobs itself:
// the server's threshold or K belong to the server's rule (its window and head file are kept for the
// rules that take them).
JudgeOptions parse_judge(const json& body, const JudgeOptions& server_judge) {
    JudgeOptions judge = server_judge;
    if (const std::optional<std::string> rule = string_field(body, "judge"); rule && *rule != server_judge.rule) {
        judge = JudgeOptions{};
        judge.rule = *rule;
        judge.confidence_mask = server_judge.confidence_mask;
        for (const JudgeRule& known : judge_rules()) {
            if (known.name != *rule) continue;
            if (known.window != Knob::Refused) judge.window = server_judge.window;
            if (known.head != Knob::Refused) judge.head_path = server_judge.head_path;
        }
    }
    if (const std::optional<double> threshold = number_field(body, "judge_threshold")) {
        judge.threshold = threshold;
        judge.max_tv.reset();  // a request's threshold replaces the server's --max-tv
    }
    if (const std::optional<int64_t> topk = integer_field(body, "judge_topk")) {
        if (*topk > std::numeric_limits<int32_t>::max()) throw bad_field("judge_topk", "'judge_topk' is too large");
        judge.topk = static_cast<int32_t>(*topk);
    }
    if (const std::optional<double> mask = number_field(body, "confidence_mask")) judge.confidence_mask = *mask;
    if (const std::optional<std::string> divergence = string_field(body, "judge_divergence"))
        judge.divergence = divergence;
    return judge;
}

// The request field of the judge option make_judge refused (the window and the head file are the server's own).
std::string request_field(JudgeField field) {
    switch (field) {
        case JudgeField::Threshold:
        case JudgeField::MaxTv:
            return "judge_threshold";
        case JudgeField::TopK:
            return "judge_topk";
        case JudgeField::ConfidenceMask:
            return "confidence_mask";
        case JudgeField::Divergence:
            return "judge_divergence";
        case JudgeField::Rule:
        case JudgeField::Window:
        case JudgeField::Head:
            return "judge";
    }
    return "judge";
}

CompletionRequest parse_object(const json& body, Endpoint endpoint, const RequestDefaults& defaults) {
    CompletionRequest request;
    request.endpoint = endpoint;
    if (endpoint == Endpoint::Completions) {
        request.prompts = parse_prompts(body, defaults.n_vocab);
        request.echo = bool_field(body, "echo").value_or(false);
        request.add_bos_to_token_prompts =
            bool_field(body, "add_bos_to_token_prompts").value_or(defaults.add_bos_to_token_prompts);
    } else if (endpoint == Endpoint::ChatCompletions) {
        request.messages = parse_messages(body);
    } else {
        request.infill = parse_infill_fields(body);
    }

    GenerationOptions& gen = request.generation;
    gen = defaults.generation;
    if (const std::optional<int64_t> max_tokens = integer_field(body, "max_tokens")) {
        if (*max_tokens < 0)
            throw bad_field("max_tokens", fmt::format("'max_tokens' must be >= 0, got {}", *max_tokens));
        gen.max_tokens = static_cast<int32_t>(std::min<int64_t>(*max_tokens, defaults.n_ctx));
    }
    if (endpoint == Endpoint::Infill) parse_llama_server_limits(body, defaults.n_ctx, gen);
    if (auto draft_max = count_field(body, "draft_max", 1)) gen.draft_max = *draft_max;
    gen.draft_min = std::min(gen.draft_min, gen.draft_max);  // a request's shorter γ keeps the server's draft-min valid
    if (const std::optional<std::string> policy = string_field(body, "draft_policy")) {
        const std::optional<DraftPolicy> parsed = parse_draft_policy(*policy);
        if (!parsed)
            throw bad_field("draft_policy",
                            fmt::format("'draft_policy' must be auto, fixed, adaptive or off, got '{}'", *policy));
        gen.draft_policy = *parsed;
    }
    if (auto temperature = number_field(body, "temperature")) {
        if (!(*temperature >= 0))
            throw bad_field("temperature", fmt::format("'temperature' must be >= 0, got {}", *temperature));
        gen.sampling.temperature = static_cast<float>(*temperature);
    }
    if (auto top_k = count_field(body, "top_k", 0)) gen.sampling.top_k = *top_k;
    if (auto top_p = number_field(body, "top_p")) {
        if (!(*top_p > 0 && *top_p <= 1))
            throw bad_field("top_p", fmt::format("'top_p' must be in (0, 1], got {}", *top_p));
        gen.sampling.top_p = static_cast<float>(*top_p);
    }
    if (auto seed = integer_field(body, "seed")) {
        if (*seed < 0) throw bad_field("seed", fmt::format("'seed' must be >= 0, got {}", *seed));
        gen.sampling.seed = static_cast<uint64_t>(*seed);
    }
    if (body.contains("stop")) gen.stop_strings = parse_stop(body);
    gen.logprobs = parse_logprobs(body, endpoint);
    if (const std::optional<bool> cache = bool_field(body, "cache_prompt")) gen.cache_prompt = *cache;
    if (const std::optional<std::string> verify = string_field(body, "verify")) {
        try {
            gen.verification = parse_verification(*verify);
        } catch (const Error& e) {
            throw bad_field("verify", e.what());
        }
    }
    request.stream = bool_field(body, "stream").value_or(false);
    if (request.stream && request.prompts.size() > 1)
        throw bad_field("prompt", "a streamed completion takes one prompt, not a list");
    if (request.stream && request.echo) throw bad_field("echo", "'echo' is not supported with 'stream'");
    if (const json* options = field(body, "stream_options")) {
        if (!request.stream)
            throw bad_field("stream_options", "'stream_options' is only allowed when 'stream' is true");
        if (!options->is_object()) throw bad_field("stream_options", "'stream_options' must be an object");
        const json* include_usage = field(*options, "include_usage");
        if (include_usage != nullptr && !include_usage->is_boolean())
            throw bad_field("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
        request.include_usage = include_usage != nullptr && include_usage->get<bool>();
    }
    try {
        gen.judge = make_judge(parse_judge(body, defaults.judge));
    } catch (const JudgeOptionError& e) {
        throw bad_field(request_field(e.field), e.what());
    }
    if (const std::optional<std::string> span = string_field(body, "judge_span")) {
        try {
            gen.judge_span = JudgeSpan::parse(*span);
        } catch (const Error& e) {
            throw bad_field("judge_span", e.what());
        }
        if (gen.judge_span.needs_markers()) {
            if (defaults.reasoning_span.needs_markers())
                throw bad_field("judge_span",
                                "judge_span 'think': the server's chat template marks no reasoning span; "
                                "give the markers (think:<think>,</think>) or use until:STRING");
            gen.judge_span = defaults.reasoning_span;
        }
    }
    try {
        validate(gen);
    } catch (const Error& e) {
        throw bad_field("", e.what());
    }
    return request;
}

// A JSON object body handed to `parse`, which throws ApiError for a bad field.
template <class Parse>
auto parse_body(std::string_view body, Parse parse) -> std::variant<decltype(parse(json())), ApiError> {
    const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return bad_field("", "the request body is not valid JSON");
    if (!parsed.is_object()) return bad_field("", "the request body must be a JSON object");
    try {
        return parse(parsed);
    } catch (const ApiError& error) {
        return error;
    }
}

}  // namespace

nlohmann::json ApiError::to_json() const {
    auto or_null = [](const std::string& text) { return text.empty() ? json(nullptr) : json(text); };
    return {{"error", {{"message", message}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}};
}

nlohmann::json ApiError::to_llama_server_json() const {
    // llama-server's type for a prompt over the context (format_error_response in tools/server/server-common.cpp).
    const std::string llama_type = code == "context_length_exceeded" ? "exceed_context_size_error" : type;
    return {{"error", {{"code", status}, {"message", message}, {"type", llama_type}}}};
}

std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body, Endpoint endpoint,
                                                                   const RequestDefaults& defaults) {
    return parse_body(body, [&](const json& object) { return parse_object(object, endpoint, defaults); });
}

std::variant<TokenizeRequest, ApiError> parse_tokenize_request(std::string_view body) {
    return parse_body(body, [](const json& object) {
        TokenizeRequest request;
        std::optional<std::string> content = string_field(object, "content");
        if (!content) content = string_field(object, "prompt");
        if (!content) throw bad_field("content", "'content' (or 'prompt') is required");
        request.content = std::move(*content);
        request.add_special =
            bool_field(object, "add_special").value_or(bool_field(object, "add_special_tokens").value_or(false));
        request.with_pieces = bool_field(object, "with_pieces").value_or(false);
        return request;
    });
}

std::variant<std::vector<int32_t>, ApiError> parse_detokenize_request(std::string_view body, int32_t n_vocab) {
    return parse_body(body, [n_vocab](const json& object) {
        const json* tokens = field(object, "tokens");
        return parse_token_ids(tokens == nullptr ? json() : *tokens, n_vocab, "tokens");
    });
}

bool api_key_authorized(std::string_view authorization, const std::vector<std::string>& keys) {
    constexpr std::string_view kScheme = "Bearer ";
    const bool bearer = authorization.starts_with(kScheme);
    const std::string_view given = bearer ? authorization.substr(kScheme.size()) : std::string_view();
    bool authorized = false;
    for (const std::string& key : keys) {
        // Over the key's bytes, never the header's: a differing byte or length ends nothing early.
        unsigned differ = given.size() != key.size();
        for (size_t i = 0; i < key.size(); ++i)
            differ |=
                static_cast<unsigned char>(key[i]) ^ (i < given.size() ? static_cast<unsigned char>(given[i]) : 0u);
        authorized |= bearer && differ == 0;
    }
    return authorized;
}

}  // namespace klspec::server
