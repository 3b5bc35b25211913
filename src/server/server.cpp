#include "server/server.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string_view>

#include <fmt/format.h>
#include <httplib.h>

#include "core/error.h"
#include "engine/infill_prompt.h"
#include "engine/model.h"
#include "server/page.h"

namespace klspec::server {
namespace {

using nlohmann::json;

constexpr const char* kJson = "application/json";
constexpr int kRpcCheckTimeoutMs = 1000;  // /health's connection to each RPC server

// Invalid UTF-8 (a token boundary inside a character) is replaced, never a reason to fail a response.
std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string_view finish_reason(StopReason reason) {
    switch (reason) {
        case StopReason::EndOfGeneration:
        case StopReason::StopString:
            return "stop";
        case StopReason::MaxTokens:
        case StopReason::ContextFull:
        case StopReason::Indentation:
        case StopReason::TimeLimit:
            return "length";
        case StopReason::Cancelled:
            return "cancelled";
    }
    return "stop";
}

json usage_json(const GenerationStats& stats) {
    return {{"prompt_tokens", stats.prompt_tokens},
            {"completion_tokens", stats.emitted},
            {"total_tokens", stats.prompt_tokens + stats.emitted},
            {"prompt_tokens_details", {{"cached_tokens", stats.prompt_cached_tokens}}}};
}

// The judge a response names: its rule and where it could relax.
struct JudgeEcho {
    std::string rule;
    std::string span;
};

json speculative_json(const GenerationStats& stats, const JudgeEcho& judge) {
    json out = {{"judge", judge.rule},        {"judge_span", judge.span},          {"drafted", stats.drafted},
                {"accepted", stats.accepted}, {"relaxed", stats.relaxed_accepted}, {"target_calls", stats.target_calls},
                {"mat", stats.mat()}};
    if (judge.span != "all") {
        out["outside_span"] = stats.outside_span;
        out["span_blocked"] = stats.span_blocked;
    }
    return out;
}

json provenance_json(const std::vector<TokenOrigin>& origins) {
    json list = json::array();
    for (const TokenOrigin& origin : origins) list.push_back(to_string(origin.provenance));
    return list;
}

json spans_json(const std::vector<TextSpan>& spans) {
    json list = json::array();
    for (const TextSpan& span : spans) {
        json item = {{"text", span.text}, {"provenance", to_string(span.origin.provenance)}};
        if (span.origin.judge_statistic) item["judge_statistic"] = *span.origin.judge_statistic;
        list.push_back(std::move(item));
    }
    return list;
}

json token_json(const Model& model, const TokenLogprob& entry) {
    const std::string piece = model.piece(entry.token);
    json bytes = json::array();
    for (const char byte : piece) bytes.push_back(static_cast<uint8_t>(byte));
    return {{"token", piece}, {"logprob", entry.logprob}, {"bytes", std::move(bytes)}};
}

// OpenAI's legacy completions logprobs: parallel arrays, each token's offset into the choice's text.
class LegacyLogprobs {
public:
    LegacyLogprobs(const Model& model, size_t& text_offset) : model_(model), text_offset_(text_offset) {}
    // A token without a logprob (the first token of an echoed prompt): null entries, as OpenAI gives.
    void add(int32_t token, const TokenLogprobs* logprobs) {
        const std::string piece = model_.piece(token);
        tokens_.push_back(piece);
        json top = json::object();
        if (logprobs != nullptr)
            for (const TokenLogprob& alternative : logprobs->top)
                top[model_.piece(alternative.token)] = alternative.logprob;
        token_logprobs_.push_back(logprobs != nullptr ? json(logprobs->chosen.logprob) : json(nullptr));
        top_logprobs_.push_back(logprobs != nullptr ? std::move(top) : json(nullptr));
        offsets_.push_back(text_offset_);
        text_offset_ += piece.size();
    }
    json to_json() const {
        return {{"tokens", tokens_},
                {"token_logprobs", token_logprobs_},
                {"top_logprobs", top_logprobs_},
                {"text_offset", offsets_}};
    }

private:
    const Model& model_;
    size_t& text_offset_;
    json tokens_ = json::array(), token_logprobs_ = json::array(), top_logprobs_ = json::array(),
         offsets_ = json::array();
};

// An echoed prompt: its tokens and, when logprobs were asked for, each one's after the first.
struct PromptEcho {
    std::span<const int32_t> tokens;
    std::span<const TokenLogprobs> logprobs;
};

// OpenAI's logprobs object: chat's {"content": [{token, logprob, bytes, top_logprobs}]}, completions'
// {tokens, token_logprobs, top_logprobs, text_offset} (offsets into the completion's text, carried across a
// stream's chunks by `text_offset`), an echoed prompt's tokens first.
json logprobs_json(const Model& model, Endpoint endpoint, std::span<const TokenLogprobs> logprobs, size_t& text_offset,
                   const PromptEcho* echo = nullptr) {
    if (endpoint == Endpoint::ChatCompletions) {
        json content = json::array();
        for (const TokenLogprobs& token : logprobs) {
            json entry = token_json(model, token.chosen);
            entry["top_logprobs"] = json::array();
            for (const TokenLogprob& top : token.top) entry["top_logprobs"].push_back(token_json(model, top));
            content.push_back(std::move(entry));
        }
        return {{"content", std::move(content)}};
    }
    LegacyLogprobs legacy(model, text_offset);
    if (echo != nullptr)
        for (size_t i = 0; i < echo->tokens.size(); ++i)
            legacy.add(echo->tokens[i], i == 0 ? nullptr : &echo->logprobs[i - 1]);
    for (const TokenLogprobs& token : logprobs) legacy.add(token.chosen.token, &token);
    return legacy.to_json();
}

// The fields every response and chunk of one request shares.
struct ResponseHead {
    std::string id;
    int64_t created = 0;
    std::string model;
    Endpoint endpoint = Endpoint::Completions;
    const Model* tokenizer = nullptr;  // non-null: the request asked for logprobs

    json object(std::string_view type, json choices) const {
        return {{"id", id}, {"object", type}, {"created", created}, {"model", model}, {"choices", std::move(choices)}};
    }
    std::string_view chunk_type() const {
        return endpoint == Endpoint::ChatCompletions ? "chat.completion.chunk" : "text_completion";
    }
};

// One choice of a response; an echo puts the prompt's text (its tokens' pieces) and tokens first.
json choice_json(const ResponseHead& head, const Model& model, size_t index, const GenerationResult& result,
                 const PromptEcho* echo) {
    json choice = {{"index", index}, {"finish_reason", finish_reason(result.stop_reason)}};
    if (head.endpoint == Endpoint::ChatCompletions) {
        choice["message"] = {{"role", "assistant"}, {"content", result.text}};
    } else {
        std::string text;
        if (echo != nullptr)
            for (const int32_t token : echo->tokens) text += model.piece(token);
        choice["text"] = text + result.text;
    }
    size_t text_offset = 0;
    choice["logprobs"] = head.tokenizer
                             ? logprobs_json(*head.tokenizer, head.endpoint, result.logprobs, text_offset, echo)
                             : json(nullptr);
    return choice;
}

json completion_json(const ResponseHead& head, json choices, const GenerationStats& stats, const JudgeEcho& judge) {
    json out = head.object(head.endpoint == Endpoint::ChatCompletions ? "chat.completion" : "text_completion",
                           std::move(choices));
    out["usage"] = usage_json(stats);
    out["speculative"] = speculative_json(stats, judge);
    return out;
}

// A streamed chunk: text, the provenance of the tokens behind it and the text cut into one span per token
// (the page at GET / colours these), or with the final chunk the finish reason, usage and statistics.
json chunk_json(const ResponseHead& head, const Delta& delta, const GenerationResult* result, const JudgeEcho& judge,
                bool first, size_t& text_offset) {
    json choice = {{"index", 0}, {"finish_reason", result ? json(finish_reason(result->stop_reason)) : json(nullptr)}};
    const bool chat = head.endpoint == Endpoint::ChatCompletions;
    if (chat) {
        choice["delta"] = json::object();
        if (first) choice["delta"]["role"] = "assistant";
        if (!delta.text.empty()) choice["delta"]["content"] = delta.text;
    } else {
        choice["text"] = delta.text;
    }
    if (head.tokenizer && !delta.logprobs.empty())
        choice["logprobs"] = logprobs_json(*head.tokenizer, head.endpoint, delta.logprobs, text_offset);
    if (!delta.origins.empty()) choice["provenance"] = provenance_json(delta.origins);
    if (!delta.spans.empty()) choice["spans"] = spans_json(delta.spans);
    json out = head.object(head.chunk_type(), json::array({std::move(choice)}));
    if (result) {
        out["usage"] = usage_json(result->stats);
        out["speculative"] = speculative_json(result->stats, judge);
    }
    return out;
}

// stream_options.include_usage: OpenAI's last chunk, with no choices and the usage.
json usage_chunk_json(const ResponseHead& head, const GenerationResult& result) {
    json out = head.object(head.chunk_type(), json::array());
    out["usage"] = usage_json(result.stats);
    return out;
}

std::string sse(const json& chunk) { return "data: " + dump(chunk) + "\n\n"; }

// llama-server's stop_type: why generation ended, in its four words.
std::string_view stop_type(StopReason reason) {
    switch (reason) {
        case StopReason::EndOfGeneration:
            return "eos";
        case StopReason::StopString:
            return "word";
        case StopReason::Cancelled:
            return "none";
        default:
            return "limit";
    }
}

// llama-server's timings (server_slot_stats::to_json): cache_n prompt tokens reused from the slot's cells,
// prompt_n evaluated, predicted_n generated.
json timings_json(const GenerationStats& stats) {
    const int64_t prompt_n = stats.prompt_tokens - stats.prompt_cached_tokens;
    const double prompt_ms = 1e3 * stats.prompt_seconds;
    const double predicted_ms = 1e3 * stats.decode_seconds();
    const auto per_token = [](double ms, int64_t n) { return n > 0 ? ms / double(n) : 0.0; };
    const auto per_second = [](double ms, int64_t n) { return ms > 0 ? 1e3 * double(n) / ms : 0.0; };
    json timings = {{"cache_n", stats.prompt_cached_tokens},
                    {"prompt_n", prompt_n},
                    {"prompt_ms", prompt_ms},
                    {"prompt_per_token_ms", per_token(prompt_ms, prompt_n)},
                    {"prompt_per_second", per_second(prompt_ms, prompt_n)},
                    {"predicted_n", stats.emitted},
                    {"predicted_ms", predicted_ms},
                    {"predicted_per_token_ms", per_token(predicted_ms, stats.emitted)},
                    {"predicted_per_second", per_second(predicted_ms, stats.emitted)}};
    if (stats.drafted > 0) {
        timings["draft_n"] = stats.drafted;
        timings["draft_n_accepted"] = stats.accepted;
    }
    return timings;
}

// llama-server's response_fields: only the paths asked for ("timings/prompt_n" reads a nested field), each
// under its path; a path the answer lacks is left out (json_get_nested_values upstream).
json select_fields(const std::vector<std::string>& paths, const json& answer) {
    json selected = json::object();
    for (const std::string& path : paths) {
        const json* current = &answer;
        for (size_t begin = 0; current != nullptr;) {
            const size_t end = std::min(path.find('/', begin), path.size());
            const std::string key = path.substr(begin, end - begin);
            current = current->is_object() && current->contains(key) ? &(*current)[key] : nullptr;
            if (end == path.size()) break;
            begin = end + 1;
        }
        if (current != nullptr) selected[path] = *current;
    }
    return selected;
}

// One /infill request as llama-server answers it (server_task_result_cmpl_final / _partial's non-OpenAI JSON),
// with klspec's `speculative` statistics.
struct InfillAnswer {
    GenerationOptions generation;
    std::vector<std::string> response_fields;
    bool return_tokens = false;
    std::string model;
    std::string prompt_text;  // the assembled prompt, special tokens as text
    int64_t prompt_tokens = 0;
    int32_t slot = 0;
    JudgeEcho judge;

    json settings() const {
        const GenerationOptions& gen = generation;
        return {{"n_predict", gen.max_tokens},
                {"temperature", gen.sampling.temperature},
                {"top_k", gen.sampling.top_k},
                {"top_p", gen.sampling.top_p},
                {"seed", gen.sampling.seed},
                {"stop", gen.stop_strings},
                {"n_indent", gen.min_line_indent},
                {"t_max_predict_ms", gen.max_predict_seconds ? int64_t(*gen.max_predict_seconds * 1e3) : -1},
                {"cache_prompt", gen.cache_prompt},
                {"n_cache_reuse", gen.cache_reuse_min_chunk},
                {"judge", judge.rule},
                {"judge_span", judge.span}};
    }
    json tokens(std::span<const int32_t> ids) const {
        return return_tokens ? json(std::vector<int32_t>(ids.begin(), ids.end())) : json::array();
    }
    // A stream's final object carries no text or tokens: its partial objects had them (as upstream). Upstream
    // counts and lists the end-of-generation token as a predicted one (its text is empty).
    json final_json(const GenerationResult& result, bool streamed) const {
        const GenerationStats& stats = result.stats;
        std::vector<int32_t> predicted = result.tokens;
        if (result.end_of_generation_token >= 0) predicted.push_back(result.end_of_generation_token);
        const json answer = {{"index", 0},
                             {"content", streamed ? "" : result.text},
                             {"tokens", streamed ? json::array() : tokens(predicted)},
                             {"id_slot", slot},
                             {"stop", true},
                             {"model", model},
                             {"tokens_predicted", std::ssize(predicted)},
                             {"tokens_evaluated", prompt_tokens},
                             {"generation_settings", settings()},
                             {"prompt", prompt_text},
                             {"has_new_line", result.text.find('\n') != std::string::npos},
                             {"truncated", result.stop_reason == StopReason::ContextFull},
                             {"stop_type", stop_type(result.stop_reason)},
                             {"stopping_word", ""},
                             {"tokens_cached", stats.prompt_tokens + stats.emitted},
                             {"timings", timings_json(stats)},
                             {"speculative", speculative_json(stats, judge)}};
        return response_fields.empty() ? answer : select_fields(response_fields, answer);
    }
    // One stderr line per request, as llama-server logs each slot's task: an editor's user sees the reuse.
    void log(const GenerationStats& stats) const {
        std::fprintf(
            stderr,
            "klspec serve: /infill slot %d: prompt %lld tokens, %lld from the cache, %lld evaluated in %.1f ms; "
            "%lld generated in %.1f ms\n",
            slot, static_cast<long long>(prompt_tokens), static_cast<long long>(stats.prompt_cached_tokens),
            static_cast<long long>(stats.prompt_tokens - stats.prompt_cached_tokens), 1e3 * stats.prompt_seconds,
            static_cast<long long>(stats.emitted), 1e3 * stats.decode_seconds());
    }
    json partial_json(const Delta& delta, int64_t predicted) const {
        json partial = {
            {"index", 0},      {"content", delta.text},         {"tokens", tokens(delta.tokens)},   {"stop", false},
            {"id_slot", slot}, {"tokens_predicted", predicted}, {"tokens_evaluated", prompt_tokens}};
        if (!delta.origins.empty()) partial["provenance"] = provenance_json(delta.origins);
        return partial;
    }
};

// A token's text, or its bytes when they are not valid UTF-8 on their own (part of a character), as llama-server.
json piece_json(const std::string& piece) {
    try {
        (void)json(piece).dump();  // the strict error handler throws on invalid UTF-8
        return piece;
    } catch (const json::type_error&) {
        return std::vector<uint8_t>(piece.begin(), piece.end());
    }
}

void append_metric(std::string& out, std::string_view name, std::string_view type, std::string_view help,
                   double value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
}

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
    // Handlers block while their request waits or streams: enough threads for every slot, a full queue
    // behind them and /health or /metrics beside them.
    const size_t threads = std::max<size_t>(16, 4 * static_cast<size_t>(options_.slots));
    http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http_->set_payload_max_length(options_.max_body_bytes);
    // A response is two writes (headers, body); with Nagle's algorithm the body waits for the client's delayed
    // ACK of the headers, 40-50 ms a request on a kept-alive connection (lm-evaluation-harness's thousands of
    // short requests). llama-server builds cpp-httplib with CPPHTTPLIB_TCP_NODELAY; Debian's is built without.
    http_->set_tcp_nodelay(true);
    // SO_REUSEADDR alone, as llama-server: Debian's cpp-httplib adds SO_REUSEPORT, with which a second server on
    // the same port starts without an error and takes half of the first one's connections.
    http_->set_socket_options([](socket_t sock) {
        const int on = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    });
    add_routes();
}

Server::Server(SpeculativeDecoder& decoder, RequestDefaults defaults, ServerOptions options)
    : Server(std::move(options)) {
    attach(decoder, std::move(defaults));
    set_ready();
}

void Server::attach(SpeculativeDecoder& decoder, RequestDefaults defaults) {
    if (decoder_ != nullptr) throw Error("the server already has its decoder");
    chat_template_.emplace(decoder.target(), options_.chat_template);
    defaults_ = std::move(defaults);
    defaults_.n_vocab = decoder.target().n_vocab();
    if (options_.model_name.empty())
        options_.model_name = std::filesystem::path(decoder.target().path()).stem().string();
    // A `think` span reads its markers from the template the server applies (--chat-template or the model's).
    if (const std::optional<ChatTemplate::ReasoningMarkers> markers = chat_template_->reasoning_markers()) {
        defaults_.reasoning_span.open = markers->open;
        defaults_.reasoning_span.close = markers->close;
    }
    defaults_.generation.judge_span = resolve_judge_span(defaults_.generation.judge_span, *chat_template_);
    page_ = page_html(defaults_.judge.rule);
    scheduler_ = std::make_unique<Scheduler>(decoder, options_.slots);
    decoder_ = &decoder;
}

void Server::set_ready() {
    if (decoder_ == nullptr) throw Error("the server has no decoder yet (attach() first)");
    ready_.store(true, std::memory_order_release);
}

Server::~Server() { stop(); }

class Server::InFlight {
public:
    explicit InFlight(Server& server) : server_(server) {}
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;
    ~InFlight() {
        {
            std::lock_guard lock(server_.drain_mutex_);
            --server_.in_flight_;
        }
        server_.in_flight_changed_.notify_all();
    }

private:
    Server& server_;
};

std::shared_ptr<Server::InFlight> Server::admit() {
    std::lock_guard lock(drain_mutex_);
    if (draining_) return nullptr;
    ++in_flight_;
    return std::make_shared<InFlight>(*this);
}

bool Server::drain(std::chrono::seconds timeout, const std::function<void(const std::string&)>& log) {
    const auto start = std::chrono::steady_clock::now();
    const auto say = [&](const std::string& line) {
        if (log) log(line);
    };
    const auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    std::unique_lock lock(drain_mutex_);
    retry_after_s_ = std::max<int64_t>(1, timeout.count());  // this process is gone by then
    draining_ = true;
    say(fmt::format("drain started: new requests get 503; waiting up to {} s for {} request(s) in flight",
                    timeout.count(), in_flight_));
    if (in_flight_changed_.wait_for(lock, timeout, [&] { return in_flight_ == 0; })) {
        say(fmt::format("drain ended: every request finished, after {:.1f} s", elapsed()));
        return true;
    }
    // Each cancelled request ends after its next step; a stream's write to a client that stopped reading
    // fails after httplib's write timeout.
    const int64_t cancelled = in_flight_;
    if (scheduler_) scheduler_->cancel_all();
    in_flight_changed_.wait(lock, [&] { return in_flight_ == 0; });
    say(fmt::format("drain ended: {} request(s) still running after {} s were cancelled, all answered after {:.1f} s",
                    cancelled, timeout.count(), elapsed()));
    return false;
}

void Server::reject(httplib::Response& response, const ApiError& error, ErrorShape shape) {
    ++requests_rejected_;
    response.status = error.status;
    response.set_content(dump(shape == ErrorShape::LlamaServer ? error.to_llama_server_json() : error.to_json()),
                         kJson);
}

void Server::reject_draining(httplib::Response& response) {
    response.set_header("Retry-After", std::to_string(retry_after_s_));
    reject(response, ApiError{503, "the server is shutting down", "server_error", "", "server_shutting_down"});
}

void Server::reject_loading(httplib::Response& response) {
    response.set_header("Retry-After", "1");
    reject(response, ApiError{503, "Loading model", "unavailable_error", "", "model_loading"});
}

int Server::bind() {
    if (options_.port == 0) {
        const int port = http_->bind_to_any_port(options_.host);
        if (port < 0) throw Error(fmt::format("cannot listen on {}", options_.host));
        return port;
    }
    if (!http_->bind_to_port(options_.host, options_.port))
        throw Error(fmt::format("cannot listen on {}:{} (in use, or not an address of this machine?)", options_.host,
                                options_.port));
    return options_.port;
}

void Server::listen() { http_->listen_after_bind(); }

bool Server::listening() const { return http_->is_running(); }

void Server::stop() { http_->stop(); }

void Server::add_routes() {
    // Known paths and their one method: another method gets 405, an unknown path 404 (error handler).
    static const std::map<std::string, std::string> kMethods = {
        {"/", "GET"},        {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"},
        {"/infill", "POST"}, {"/v1/models", "GET"},       {"/health", "GET"},
        {"/metrics", "GET"}, {"/tokenize", "POST"},       {"/detokenize", "POST"},
        {"/props", "GET"},   {"/slots", "GET"},           {"/tokenizer_info", "GET"}};
    // Before routing, in llama-server's order: a draining server refuses, then a missing or wrong key (on
    // unknown paths too, so that they tell nothing), then a wrong method. /health is always open.
    http_->set_pre_routing_handler([this](const httplib::Request& request, httplib::Response& response) {
        if (request.path != "/health" && draining()) {
            reject_draining(response);
            return httplib::Server::HandlerResponse::Handled;
        }
        // Loading (the models, or the step costs' timing): only /health answers, with its 503.
        if (request.path != "/health" && !ready()) {
            reject_loading(response);
            return httplib::Server::HandlerResponse::Handled;
        }
        if (request.path != "/health" && !options_.api_keys.empty() &&
            !api_key_authorized(request.get_header_value("Authorization"), options_.api_keys)) {
            reject(response, ApiError{401, "Invalid API Key", "authentication_error", "", "invalid_api_key"});
            return httplib::Server::HandlerResponse::Handled;
        }
        const auto known = kMethods.find(request.path);
        if (known == kMethods.end() || known->second == request.method ||
            (request.method == "HEAD" && known->second == "GET"))
            return httplib::Server::HandlerResponse::Unhandled;
        response.set_header("Allow", known->second);
        reject(response, ApiError{405, fmt::format("{} takes {}, not {}", request.path, known->second, request.method),
                                  "invalid_request_error", "", "method_not_allowed"});
        return httplib::Server::HandlerResponse::Handled;
    });
    http_->set_error_handler(
        httplib::Server::HandlerWithResponse([this](const httplib::Request& request, httplib::Response& response) {
            if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // ours already
            ApiError error{response.status, fmt::format("HTTP {}", response.status), "invalid_request_error", "", ""};
            if (response.status == 404)
                error = {404, fmt::format("no route {} {}", request.method, request.path), "invalid_request_error", "",
                         "not_found"};
            if (response.status == 413)
                error = {413, fmt::format("the request body is larger than {} bytes", options_.max_body_bytes),
                         "invalid_request_error", "", "request_too_large"};
            reject(response, error);
            return httplib::Server::HandlerResponse::Handled;
        }));
    http_->Post("/v1/completions", [this](const httplib::Request& request, httplib::Response& response) {
        handle_completion(Endpoint::Completions, request, response);
    });
    http_->Post("/v1/chat/completions", [this](const httplib::Request& request, httplib::Response& response) {
        handle_completion(Endpoint::ChatCompletions, request, response);
    });
    http_->Post("/infill", [this](const httplib::Request& request, httplib::Response& response) {
        handle_completion(Endpoint::Infill, request, response);
    });
    http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& response) {
        const json model = {{"id", options_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "klspec"}};
        response.set_content(dump({{"object", "list"}, {"data", json::array({model})}}), kJson);
    });
    http_->Get("/", [this](const httplib::Request&, httplib::Response& response) {
        response.set_content(page_, "text/html; charset=utf-8");
    });
    // The readiness probe: 200 only once the models are loaded and the step costs timed, and not while draining.
    http_->Get("/health", [this](const httplib::Request&, httplib::Response& response) {
        if (draining()) {
            response.status = 503;
            response.set_header("Retry-After", std::to_string(retry_after_s_));
            return response.set_content(R"({"status":"draining"})", kJson);
        }
        if (!ready()) {
            response.status = 503;
            response.set_header("Retry-After", "1");
            return response.set_content(R"({"status":"loading"})", kJson);
        }
        for (const std::string& endpoint : options_.rpc_servers) {
            // Well within a balancer's check timeout: a dead local server refuses at once.
            if (const std::optional<std::string> problem = rpc_server_unreachable(endpoint, kRpcCheckTimeoutMs)) {
                response.status = 503;
                return response.set_content(dump(json{{"status", "error"}, {"error", *problem}}), kJson);
            }
        }
        response.set_content(R"({"status":"ok"})", kJson);
    });
    http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
        response.set_content(metrics_text(), "text/plain; version=0.0.4");
    });
    http_->Post("/tokenize", [this](const httplib::Request& request, httplib::Response& response) {
        const std::variant<TokenizeRequest, ApiError> parsed = parse_tokenize_request(request.body);
        if (const ApiError* error = std::get_if<ApiError>(&parsed)) return reject(response, *error);
        const TokenizeRequest& tokenize = std::get<TokenizeRequest>(parsed);
        const Model& model = decoder_->target();
        json tokens = json::array();
        // Special-token text is parsed, as in a prompt (and llama-server's default).
        for (const int32_t id : model.tokenize(tokenize.content, tokenize.add_special, /*parse_special=*/true))
            tokens.push_back(tokenize.with_pieces ? json{{"id", id}, {"piece", piece_json(model.piece(id))}}
                                                  : json(id));
        response.set_content(dump({{"tokens", std::move(tokens)}}), kJson);
    });
    http_->Post("/detokenize", [this](const httplib::Request& request, httplib::Response& response) {
        const std::variant<std::vector<int32_t>, ApiError> parsed =
            parse_detokenize_request(request.body, decoder_->target().n_vocab());
        if (const ApiError* error = std::get_if<ApiError>(&parsed)) return reject(response, *error);
        std::string content;
        for (const int32_t id : std::get<std::vector<int32_t>>(parsed)) content += decoder_->target().piece(id);
        // llama-server's field, and vLLM's (lm-evaluation-harness's remote tokenizer reads it).
        response.set_content(dump({{"content", content}, {"prompt", content}}), kJson);
    });
    http_->Get("/tokenizer_info", [this](const httplib::Request&, httplib::Response& response) {
        response.set_content(dump(tokenizer_info_json()), kJson);
    });
    http_->Get("/props", [this](const httplib::Request&, httplib::Response& response) {
        response.set_content(dump(props_json()), kJson);
    });
    http_->Get("/slots", [this](const httplib::Request&, httplib::Response& response) {
        response.set_content(dump(slots_json()), kJson);
    });
}

// llama-server's names where it has the field; the defaults under the request fields that override them.
json Server::props_json() const {
    const GenerationOptions& gen = defaults_.generation;
    const JudgeOptions& judge = defaults_.judge;
    auto or_null = [](const auto& value) { return value ? json(*value) : json(nullptr); };
    // kl's --max-tv ε stands for its τ, what a request's judge_threshold would be.
    const std::optional<double> threshold =
        judge.max_tv ? std::optional<double>(max_tv_threshold(*judge.max_tv)) : judge.threshold;
    const json params = {{"max_tokens", gen.max_tokens},
                         {"draft_max", gen.draft_max},
                         {"draft_policy", draft_policy_name(gen.draft_policy)},
                         {"temperature", gen.sampling.temperature},
                         {"top_k", gen.sampling.top_k},
                         {"top_p", gen.sampling.top_p},
                         {"seed", gen.sampling.seed},
                         {"stop", gen.stop_strings},
                         {"judge", judge.rule},
                         {"judge_threshold", or_null(threshold)},
                         {"judge_topk", or_null(judge.topk)},
                         {"confidence_mask", judge.confidence_mask},
                         {"judge_span", gen.judge_span.to_string()}};
    return {{"model_alias", options_.model_name},
            {"model_path", decoder_->target().path()},
            // false where load_target's probe found this CPU's repacked kernels inexact (docs/repacked-kernels.md)
            {"target_repacked", decoder_->target().repacked()},
            {"total_slots", scheduler_->slots()},
            {"default_generation_settings", {{"n_ctx", defaults_.n_ctx}, {"params", params}}}};
}

// vLLM's /tokenizer_info, the fields lm-evaluation-harness's remote tokenizer reads: the special tokens'
// text (which /tokenize turns back into their ids) and the chat template it renders for chat tasks.
json Server::tokenizer_info_json() const {
    const Model& model = decoder_->target();
    const auto text = [&](std::optional<int32_t> token) {
        return token ? json(model.piece(*token, true)) : json(nullptr);
    };
    return {{"tokenizer_class", "llama.cpp"},
            {"eos_token", text(model.eos_token())},
            {"bos_token", text(model.bos_token())},
            {"pad_token", text(model.pad_token())},
            {"chat_template", chat_template_->is_jinja() ? json(chat_template_->source()) : json(nullptr)},
            {"model_max_length", defaults_.n_ctx}};
}

json Server::slots_json() const {
    json slots = json::array();
    for (const SlotState& slot : scheduler_->slot_states())
        slots.push_back({{"id", slot.id},
                         {"n_ctx", defaults_.n_ctx},
                         {"is_processing", slot.processing},
                         {"judge", slot.processing ? json(slot.judge) : json(nullptr)},
                         {"n_prompt_tokens", slot.prompt_tokens},
                         {"n_cached_tokens", slot.cached_tokens}});
    return slots;
}

std::vector<std::vector<int32_t>> Server::prompt_tokens(const CompletionRequest& request) const {
    const Model& model = decoder_->target();
    std::vector<std::vector<int32_t>> prompts;
    if (request.endpoint == Endpoint::ChatCompletions) {
        try {
            prompts.push_back(
                model.tokenize(chat_template_->apply(request.messages), /*add_bos=*/true, /*parse_special=*/true));
        } catch (const Error& e) {
            throw ApiError{400, e.what(), "invalid_request_error", "messages", "chat_template_error"};
        }
        return prompts;
    }
    if (request.endpoint == Endpoint::Infill) {
        prompts.push_back(infill_prompt(model, request.infill.input,
                                        {defaults_.n_batch, defaults_.generation.max_tokens, defaults_.n_ctx}));
        return prompts;
    }
    const std::optional<int32_t> bos = request.add_bos_to_token_prompts ? model.prompt_bos_token() : std::nullopt;
    for (const PromptInput& prompt : request.prompts) {
        try {
            prompts.push_back(prompt.tokens ? *prompt.tokens : model.tokenize(prompt.text, true, true));
        } catch (const Error& e) {
            throw ApiError{400, e.what(), "invalid_request_error", "prompt", ""};
        }
        if (prompt.tokens && bos && prompts.back().front() != *bos) prompts.back().insert(prompts.back().begin(), *bos);
    }
    return prompts;
}

void Server::handle_completion(Endpoint endpoint, const httplib::Request& http_request, httplib::Response& response) {
    ++requests_received_;
    const ErrorShape shape = endpoint == Endpoint::Infill ? ErrorShape::LlamaServer : ErrorShape::OpenAI;
    const auto fail = [&](const ApiError& error) { reject(response, error, shape); };
    // Checked again here, atomically with the count drain() waits on: a request the pre-routing check let
    // through just before the drain began is refused, never left running past it.
    const std::shared_ptr<InFlight> in_flight = admit();
    if (!in_flight) return reject_draining(response);
    // llama-server checks the model before the body.
    if (const std::optional<std::string> missing =
            endpoint == Endpoint::Infill ? missing_fim_tokens(decoder_->target()) : std::nullopt)
        return fail(ApiError{501, "Infill is not supported by this model: " + *missing, "not_supported_error", "", ""});
    std::variant<CompletionRequest, ApiError> parsed = parse_completion_request(http_request.body, endpoint, defaults_);
    if (const ApiError* error = std::get_if<ApiError>(&parsed)) return fail(*error);
    const CompletionRequest& request = std::get<CompletionRequest>(parsed);
    std::vector<std::vector<int32_t>> prompts;
    try {
        prompts = prompt_tokens(request);
    } catch (const ApiError& error) {
        return fail(error);
    }
    const JudgeEcho judge{std::string(request.generation.judge->name()), request.generation.judge_span.to_string()};
    const Model* tokenizer = request.generation.logprobs ? &decoder_->target() : nullptr;
    // Every prompt of a list is a request of its own: they decode side by side in the slots.
    std::vector<std::shared_ptr<RequestChannel>> channels;
    for (const std::vector<int32_t>& prompt : prompts) {
        channels.push_back(std::make_shared<RequestChannel>(prompt, request.generation,
                                                            request.echo ? request.generation.logprobs : std::nullopt));
        scheduler_->submit(channels.back());
    }
    std::optional<ApiError> start_error;
    for (const std::shared_ptr<RequestChannel>& channel : channels)
        if (std::optional<ApiError> error = channel->wait_started(); error && !start_error) start_error = error;
    if (start_error) {
        for (const std::shared_ptr<RequestChannel>& channel : channels) channel->cancel();
        for (const std::shared_ptr<RequestChannel>& channel : channels) channel->wait_result();
        return fail(*start_error);
    }
    if (endpoint == Endpoint::Infill) {
        std::string prompt_text;
        for (const int32_t token : prompts.front()) prompt_text += decoder_->target().piece(token, /*special=*/true);
        const InfillAnswer answer{
            request.generation,     request.infill.response_fields, request.infill.return_tokens, options_.model_name,
            std::move(prompt_text), std::ssize(prompts.front()),    channels.front()->slot(),     judge};
        if (!request.stream) {
            const GenerationResult result = channels.front()->wait_result();
            if (const std::optional<ApiError> error = channels.front()->failure()) return fail(*error);
            answer.log(result.stats);
            return response.set_content(dump(answer.final_json(result, false)), kJson);
        }
        // Upstream's stream of a non-OpenAI endpoint: partial objects, the final one, and no [DONE].
        return stream_events(
            response, channels.front(), in_flight, shape,
            [answer, predicted = int64_t{0}](const Delta& delta, const GenerationResult* result) mutable {
                predicted += std::ssize(delta.tokens);
                std::string events;
                if (!delta.text.empty() || !delta.tokens.empty()) events = sse(answer.partial_json(delta, predicted));
                if (result && result->end_of_generation_token >= 0) {  // upstream's partial for it
                    Delta end;
                    end.tokens = {result->end_of_generation_token};
                    events += sse(answer.partial_json(end, ++predicted));
                }
                if (result) {
                    answer.log(result->stats);
                    events += sse(answer.final_json(*result, true));
                }
                return events;
            });
    }
    const ResponseHead head{
        fmt::format("{}-{}", endpoint == Endpoint::ChatCompletions ? "chatcmpl" : "cmpl", next_id_++),
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(),
        options_.model_name, endpoint, tokenizer};
    if (!request.stream) {
        json choices = json::array();
        GenerationStats total;
        for (size_t i = 0; i < channels.size(); ++i) {
            const GenerationResult result = channels[i]->wait_result();
            if (const std::optional<ApiError> error = channels[i]->failure()) return fail(*error);
            const PromptEcho echo{prompts[i], channels[i]->prompt_logprobs()};
            choices.push_back(choice_json(head, decoder_->target(), i, result, request.echo ? &echo : nullptr));
            total += result.stats;
        }
        response.set_content(dump(completion_json(head, std::move(choices), total, judge)), kJson);
        return;
    }
    // A stream has one prompt.
    stream_events(response, channels.front(), in_flight, shape,
                  [head, judge, include_usage = request.include_usage, first = true, text_offset = size_t{0}](
                      const Delta& delta, const GenerationResult* result) mutable {
                      std::string events;
                      if (!delta.text.empty() || !delta.origins.empty() || result) {
                          events = sse(chunk_json(head, delta, result, judge, first, text_offset));
                          first = false;
                      }
                      if (result)
                          events += (include_usage ? sse(usage_chunk_json(head, *result)) : "") + "data: [DONE]\n\n";
                      return events;
                  });
}

void Server::stream_events(httplib::Response& response, std::shared_ptr<RequestChannel> channel,
                           std::shared_ptr<InFlight> in_flight, ErrorShape shape, EventWriter events) {
    response.set_header("Cache-Control", "no-cache");
    response.set_chunked_content_provider(
        "text/event-stream",
        // The provider holds `in_flight` until the response is sent: drain() waits for the stream's end.
        [channel, in_flight, shape, events = std::move(events)](size_t, httplib::DataSink& sink) mutable {
            const Delta delta = channel->wait_delta();
            if (const std::optional<ApiError> error = delta.last ? channel->failure() : std::nullopt) {
                // Failed mid-stream: the error as the last event, as llama-server does.
                const std::string event =
                    sse(shape == ErrorShape::LlamaServer ? error->to_llama_server_json() : error->to_json());
                sink.write(event.data(), event.size());
                sink.done();
                return true;
            }
            const GenerationResult result = delta.last ? channel->wait_result() : GenerationResult{};
            const std::string text = events(delta, delta.last ? &result : nullptr);
            // A client that went away: its sequence stops after the current step and frees its slot.
            if (!text.empty() && !sink.write(text.data(), text.size())) {
                channel->cancel();
                return false;
            }
            if (delta.last) sink.done();
            return true;
        },
        [channel](bool success) {
            if (!success) channel->cancel();
        });
}

std::string Server::metrics_text() const {
    const ServerCounters c = scheduler_->counters();
    const GenerationStats& s = c.stats;
    std::string out;
    append_metric(out, "klspec:num_requests_running", "gauge", "Requests decoding in a slot.", c.active);
    append_metric(out, "klspec:num_requests_waiting", "gauge", "Requests queued for a free slot.", c.queued);
    append_metric(out, "klspec:num_slots", "gauge", "Slots (-np): requests decoded together.", scheduler_->slots());
    append_metric(out, "klspec:request_received_total", "counter", "Completion requests received.",
                  double(requests_received_.load()));
    append_metric(out, "klspec:request_success_total", "counter", "Requests decoded to their end (cancelled included).",
                  double(c.requests_finished));
    append_metric(out, "klspec:request_cancelled_total", "counter", "Streaming requests whose client went away.",
                  double(c.requests_cancelled));
    append_metric(out, "klspec:request_error_total", "counter", "Requests answered with an HTTP error.",
                  double(requests_rejected_.load()));
    append_metric(out, "klspec:prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
                  double(s.prompt_tokens));
    append_metric(out, "klspec:generation_tokens_total", "counter", "Generated tokens of finished requests.",
                  double(s.emitted));
    append_metric(out, "klspec:spec_decode_num_target_calls_total", "counter", "Target verification calls.",
                  double(s.target_calls));
    append_metric(out, "klspec:spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed.",
                  double(s.drafted));
    append_metric(out, "klspec:spec_decode_num_accepted_tokens_total", "counter",
                  "Draft tokens accepted (relaxed ones included).", double(s.accepted));
    append_metric(out, "klspec:spec_decode_num_relaxed_accepted_tokens_total", "counter",
                  "Draft tokens accepted only because the judge relaxed them.", double(s.relaxed_accepted));
    append_metric(out, "klspec:spec_decode_mean_accepted_tokens", "gauge",
                  "MAT: generated tokens per target call over finished requests.", s.mat());
    append_metric(out, "klspec:spec_decode_draft_length_total", "counter",
                  "Sum over target calls of the draft length gamma the draft policy chose.",
                  double(s.draft_length_sum));
    append_metric(out, "klspec:spec_decode_target_only_steps_total", "counter",
                  "Target calls that verified no draft (the cost model chose target-only, or no draft).",
                  double(s.target_only_steps));
    append_metric(out, "klspec:spec_decode_num_ngram_draft_tokens_total", "counter",
                  "Of the draft tokens: the n-gram drafter's (--spec-type ngram-*).", double(s.ngram_drafted));
    append_metric(out, "klspec:spec_decode_num_ngram_accepted_tokens_total", "counter",
                  "Of the accepted tokens: the n-gram drafter's.", double(s.ngram_accepted));
    append_metric(out, "klspec:spec_decode_mean_draft_length", "gauge",
                  "Mean gamma per target call over finished requests.", s.mean_draft_length());
    append_metric(out, "klspec:judge_seconds_total", "counter", "Seconds spent in judges.", s.judge_seconds);
    return out;
}

}  // namespace klspec::server
