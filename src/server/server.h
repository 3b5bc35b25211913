// `klspec serve`: an OpenAI-compatible HTTP server (cpp-httplib) over one SpeculativeDecoder.
// GET / (a page that shows each token's provenance), POST /v1/completions and /v1/chat/completions (JSON
// or SSE streaming), llama-server's POST /infill (fill-in-the-middle for editors), GET /v1/models, /health and /metrics
// (Prometheus text), and llama-server's POST /tokenize, /detokenize, GET /props and /slots. Every request may choose
// its own judge; requests share target batches through the Scheduler.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/chat_template.h"
#include "server/request.h"
#include "server/scheduler.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace klspec::server {

struct ServerOptions {
    std::string host = "127.0.0.1";   // address to listen on
    int port = 8080;                  // TCP port; 0: any free port (tests)
    int32_t slots = 1;                // -np: requests decoded together; more wait in the queue
    size_t max_body_bytes = 1 << 20;  // a larger request body is refused with 413
    std::string model_name;           // the id /v1/models lists and responses carry; empty: the target file's stem
    std::string chat_template;        // ChatTemplate's choice: empty (the model's, else chatml), a name, a file
    // Keys a request must bring as `Authorization: Bearer <key>` on every path but /health (401 otherwise);
    // none: no key is asked for.
    std::vector<std::string> api_keys;
    // The ggml-rpc-servers ("HOST:PORT") the models run on. Once ready, GET /health connects to each and answers
    // 503 {"status": "error"} naming one that does not answer: ggml-rpc aborts the process at the next request
    // that uses a dead one, so a balancer must take the replica out first.
    std::vector<std::string> rpc_servers;
};

class Server {
public:
    // A server without models yet: it can bind and listen at once, and until attach() and set_ready() it is
    // *loading*: GET /health answers 503 {"status": "loading"} and every other path 503 model_loading with
    // Retry-After (a readiness probe's "not yet", as llama-server while it loads).
    explicit Server(ServerOptions options);
    // A server ready from the start: Server(options), attach(decoder, defaults), set_ready().
    Server(SpeculativeDecoder& decoder, RequestDefaults defaults, ServerOptions options);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Gives the loading server its decoder (which needs options.slots sequences) and the defaults requests
    // override, and starts the thread that decodes; it still answers "loading" until set_ready(), so that work
    // on the decoder thread (the step costs' timing) can come first. Once only. Throws klspec::Error for an
    // unusable chat template.
    void attach(SpeculativeDecoder& decoder, RequestDefaults defaults);
    // From now on /health answers 200 {"status": "ok"} and the API serves. Needs attach() first.
    void set_ready();
    bool ready() const { return ready_.load(std::memory_order_acquire); }

    // Binds the socket; returns the port (the chosen one when options.port is 0). Throws klspec::Error.
    int bind();
    // Serves until stop() (from another thread or a signal handler's helper thread).
    void listen();
    // Whether listen() has started accepting (stop() before that would not stop it).
    bool listening() const;
    void stop();
    // A graceful shutdown's first half (stop() is the second): from now on every request but GET /health
    // gets 503 with Retry-After, and /health answers {"status": "draining"} with 503. Waits up to `timeout`
    // for the completion requests in flight (a stream until its last chunk is sent); then cancels those left
    // (a stream ends with finish_reason "cancelled") and waits for their answers. Returns whether every
    // request finished within the timeout. `log` (if set) gets a line when the drain starts (how many requests it
    // waits for and how long at most) and one when it ends (whether all finished, how many were cancelled, and
    // after how long): an operator sees what a draining replica did.
    bool drain(std::chrono::seconds timeout, const std::function<void(const std::string&)>& log = {});

    // Runs `task` with the decoder on the thread that decodes (Scheduler::run_on_decoder_thread) and waits:
    // the only way to use the decoder once the server has it (attach()).
    void run_on_decoder_thread(const std::function<void(SpeculativeDecoder&)>& task) {
        scheduler_->run_on_decoder_thread(task);
    }

    // How /v1/chat/completions turns messages into a prompt (after attach()).
    const ChatTemplate& chat_template() const { return *chat_template_; }
    // The Prometheus text of /metrics.
    std::string metrics_text() const;

private:
    class InFlight;
    // Counts a completion request in flight until the returned guard is destroyed; null while draining.
    std::shared_ptr<InFlight> admit();
    bool draining() const { return draining_; }
    void add_routes();
    // The error object's shape: OpenAI's on the OpenAI routes, llama-server's on its own (/infill).
    enum class ErrorShape { OpenAI, LlamaServer };
    // Answers with an error counted in /metrics' klspec:request_error_total.
    void reject(httplib::Response& response, const ApiError& error, ErrorShape shape = ErrorShape::OpenAI);
    // 503 server_shutting_down with Retry-After: a draining server takes no new work.
    void reject_draining(httplib::Response& response);
    // 503 model_loading with Retry-After: the models are not loaded, or the step costs not timed, yet.
    void reject_loading(httplib::Response& response);
    void handle_completion(Endpoint endpoint, const httplib::Request& request, httplib::Response& response);
    // The server-sent events of one delta of a stream; with the last delta's result, everything to the end.
    using EventWriter = std::function<std::string(const Delta& delta, const GenerationResult* result)>;
    // Streams the request's deltas as `events` writes them.
    void stream_events(httplib::Response& response, std::shared_ptr<RequestChannel> channel,
                       std::shared_ptr<InFlight> in_flight, ErrorShape shape, EventWriter events);
    // Each prompt's tokens (a chat's after its template, an infill's as llama-server lays it out). Throws ApiError.
    std::vector<std::vector<int32_t>> prompt_tokens(const CompletionRequest& request) const;
    nlohmann::json tokenizer_info_json() const;
    nlohmann::json props_json() const;
    nlohmann::json slots_json() const;

    // Set once by attach() before ready_ is (release); handlers read them only after seeing ready_ (acquire).
    SpeculativeDecoder* decoder_ = nullptr;
    RequestDefaults defaults_;
    ServerOptions options_;
    std::optional<ChatTemplate> chat_template_;
    std::string page_;  // GET /: the page, with the server's rule preselected
    std::unique_ptr<Scheduler> scheduler_;
    std::atomic<bool> ready_ = false;
    std::atomic<int64_t> next_id_ = 0;
    std::atomic<int64_t> requests_received_ = 0;
    std::atomic<int64_t> requests_rejected_ = 0;  // answered with an error before decoding
    std::mutex drain_mutex_;
    std::condition_variable in_flight_changed_;
    std::atomic<bool> draining_ = false;  // set under drain_mutex_, so admit() never admits after it
    std::atomic<int64_t> retry_after_s_ = 1;
    int64_t in_flight_ = 0;  // under drain_mutex_
    std::unique_ptr<httplib::Server> http_;
};

}  // namespace klspec::server
