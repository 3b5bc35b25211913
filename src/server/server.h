// `klspec serve`: an OpenAI-compatible HTTP server (cpp-httplib) over one SpeculativeDecoder.
// GET / (a page that shows each token's provenance), POST /v1/completions and /v1/chat/completions (JSON
// or SSE streaming), GET /v1/models, /health and /metrics (Prometheus text). Every request may choose its own judge; requests share target batches
// through the Scheduler.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

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
    std::string host = "127.0.0.1";          // address to listen on
    int port = 8080;                          // TCP port; 0: any free port (tests)
    int32_t slots = 1;                        // -np: requests decoded together; more wait in the queue
    size_t max_body_bytes = 1 << 20;          // a larger request body is refused with 413
    std::string model_name;                   // the id /v1/models lists and responses carry
    std::string chat_template;                // ChatTemplate's choice: empty (the model's, else chatml), a name, a file
};

class Server {
public:
    // The decoder needs options.slots sequences; `defaults` are what requests override. Throws klspec::Error
    // for an unusable chat template.
    Server(SpeculativeDecoder& decoder, RequestDefaults defaults, ServerOptions options);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Binds the socket; returns the port (the chosen one when options.port is 0). Throws klspec::Error.
    int bind();
    // Serves until stop() (from another thread or a signal handler's helper thread).
    void listen();
    void stop();

    // How /v1/chat/completions turns messages into a prompt.
    const ChatTemplate& chat_template() const { return chat_template_; }
    // The Prometheus text of /metrics.
    std::string metrics_text() const;

private:
    void add_routes();
    void handle_completion(Endpoint endpoint, const httplib::Request& request, httplib::Response& response);

    SpeculativeDecoder& decoder_;
    RequestDefaults defaults_;
    ServerOptions options_;
    ChatTemplate chat_template_;
    Scheduler scheduler_;
    std::atomic<int64_t> next_id_ = 0;
    std::atomic<int64_t> requests_received_ = 0;
    std::atomic<int64_t> requests_rejected_ = 0;  // answered with an error before decoding
    std::unique_ptr<httplib::Server> http_;
};

}  // namespace klspec::server
