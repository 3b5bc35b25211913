// The readiness probe a load balancer routes on (docs/deployment.md): `klspec serve` listens before it loads
// its models, and GET /health answers 503 {"status": "loading"} (every other path 503 model_loading) until the
// models are loaded and the step costs timed, 200 {"status": "ok"} after.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/server.h"
#include "test_support.h"

extern char** environ;

namespace klspec::server {
namespace {

using nlohmann::json;

struct Reply {
    int status = -1;  // -1: no answer (connection refused, ...)
    std::string body;
    std::string retry_after;
};

Reply call(int port, const std::string& method, const std::string& path, const std::string& body = "") {
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(2);
    client.set_read_timeout(30);
    httplib::Result r =
        method == "GET" ? client.Get(path.c_str()) : client.Post(path.c_str(), body, "application/json");
    if (!r) return {};
    return {r->status, r->body, r->get_header_value("Retry-After")};
}

void expect_loading(int port) {
    const Reply health = call(port, "GET", "/health");
    EXPECT_EQ(health.status, 503) << health.body;
    EXPECT_EQ(json::parse(health.body).at("status"), "loading");
    EXPECT_EQ(health.retry_after, "1");
    for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{{"POST", "/v1/completions"},
                                                                                       {"POST", "/v1/chat/completions"},
                                                                                       {"GET", "/v1/models"},
                                                                                       {"GET", "/metrics"},
                                                                                       {"GET", "/slots"},
                                                                                       {"GET", "/"}}) {
        const Reply reply = call(port, method, path, R"({"prompt": "Once", "max_tokens": 4})");
        EXPECT_EQ(reply.status, 503) << method << " " << path << ": " << reply.body;
        EXPECT_EQ(json::parse(reply.body).at("error").at("code"), "model_loading") << path;
    }
}

// In process: a Server without a decoder listens and says "loading"; attached but not yet ready (the step
// costs' timing runs on its decoder thread then) still "loading"; after set_ready() it serves.
TEST(ServerReadiness, HealthIs503WhileLoadingAnd200OnceReady) {
    std::unique_ptr<Model> target, draft;  // before the server: its decoding thread stops first
    std::unique_ptr<SpeculativeDecoder> decoder;
    ServerOptions options;
    options.port = 0;
    options.slots = 2;
    Server server(options);
    const int port = server.bind();
    std::thread listener([&] { server.listen(); });
    while (!server.listening()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_FALSE(server.ready());
    expect_loading(port);

    target = std::make_unique<Model>(test::kTargetModel, test::offload());
    draft = std::make_unique<Model>(test::kDraftQ4, test::offload());
    ContextOptions context;
    context.n_threads = 1;
    context.n_ctx = 256;
    context.n_sequences = options.slots;
    decoder = std::make_unique<SpeculativeDecoder>(*target, draft.get(), context);
    RequestDefaults defaults;
    defaults.generation.max_tokens = 8;
    defaults.n_ctx = context.n_ctx;
    server.attach(*decoder, defaults);
    expect_loading(port);
    server.run_on_decoder_thread([](SpeculativeDecoder& d) { d.calibrate_step_costs(4); });
    expect_loading(port);

    server.set_ready();
    EXPECT_TRUE(server.ready());
    const Reply health = call(port, "GET", "/health");
    EXPECT_EQ(health.status, 200) << health.body;
    EXPECT_EQ(json::parse(health.body).at("status"), "ok");
    const Reply completion =
        call(port, "POST", "/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 4})");
    EXPECT_EQ(completion.status, 200) << completion.body;
    EXPECT_EQ(json::parse(completion.body).at("model"), "stories260K");  // the target file's stem
    server.stop();
    listener.join();
}

// A loopback socket that accepts connections (as a ggml-rpc-server would) until it is closed.
struct Listener {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = -1;
    Listener() {
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 && listen(fd, 8) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
            port = ntohs(address.sin_port);
    }
    void close_now() { close(std::exchange(fd, -1)); }
    ~Listener() {
        if (fd >= 0) close(fd);
    }
};

// A ready server whose RPC server stops answering: /health turns from 200 to 503 {"status": "error"} naming it,
// before any request could run into ggml-rpc's abort.
TEST(ServerReadiness, HealthIs503OnceAnRpcServerStopsAnswering) {
    Listener rpc;
    ASSERT_GT(rpc.port, 0);
    const std::string endpoint = "127.0.0.1:" + std::to_string(rpc.port);
    Model target(test::kTargetModel, test::offload());
    ContextOptions context;
    context.n_threads = 1;
    context.n_ctx = 128;
    SpeculativeDecoder decoder(target, nullptr, context);
    ServerOptions options;
    options.port = 0;
    options.rpc_servers = {endpoint};
    RequestDefaults defaults;
    defaults.n_ctx = context.n_ctx;
    Server server(decoder, defaults, options);
    const int port = server.bind();
    std::thread listener([&] { server.listen(); });
    while (!server.listening()) std::this_thread::sleep_for(std::chrono::milliseconds(1));

    const Reply alive = call(port, "GET", "/health");
    EXPECT_EQ(alive.status, 200) << alive.body;
    rpc.close_now();
    const Reply dead = call(port, "GET", "/health");
    EXPECT_EQ(dead.status, 503) << dead.body;
    EXPECT_EQ(json::parse(dead.body).at("status"), "error");
    EXPECT_NE(dead.body.find("cannot reach RPC server " + endpoint), std::string::npos) << dead.body;
    server.stop();
    listener.join();
}

// A port nothing listens on now (bound to 0, then closed).
int free_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
        port = ntohs(address.sin_port);
    close(fd);
    return port;
}

// Appends what the (non-blocking) descriptor holds now, without waiting for more.
void read_available(int fd, std::string& into) {
    char buffer[4096];
    ssize_t n = 0;
    while ((n = read(fd, buffer, sizeof buffer)) > 0) into.append(buffer, static_cast<size_t>(n));
}

// The CLI: `klspec serve` on the default pair answers /health as soon as its socket is bound, before the models
// are loaded: 503 "loading" first and 200 once stdout's listening line is out, never 200 then 503. And 200 comes
// only after the step costs are timed: serve writes its "timed the step costs" line to stderr before it turns
// ready, so that line is in the pipe when the first 200 arrives (a server ready before its timing is done
// would have the balancer route requests to a replica still calibrating).
TEST(ServerReadiness, ServeCommandListensBeforeLoadingAndTurnsReadyAfterTimingTheStepCosts) {
    int err[2], out[2];
    ASSERT_EQ(pipe(err), 0);
    ASSERT_EQ(pipe(out), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, err[0]);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    const int port = free_port();
    ASSERT_GT(port, 0);
    std::vector<std::string> args = {test::kCli, "serve",
                                     "--port",   std::to_string(port),
                                     "-t",       "1",
                                     "-np",      "4",
                                     "-c",       "1024",
                                     "-m",       test::kDefaultTarget,
                                     "-md",      test::kDefaultDraft};
    const std::vector<std::string> offload = test::offload_args();
    args.insert(args.end(), offload.begin(), offload.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, test::kCli.c_str(), &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(err[1]);
    close(out[1]);
    // stderr read without blocking while /health is polled (so that a full pipe never blocks the server).
    const int err_flags = fcntl(err[0], F_GETFL);
    ASSERT_EQ(fcntl(err[0], F_SETFL, err_flags | O_NONBLOCK), 0);
    std::string err_text;
    // The socket is bound within moments of the start (nothing answers before that).
    Reply first;
    for (int i = 0; i < 2000 && (first = call(port, "GET", "/health")).status == -1; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // Poll /health while it loads (the step costs' timing on the default pair takes about a second or more).
    std::vector<int> statuses = {first.status};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
        read_available(err[0], err_text);
        const Reply health = call(port, "GET", "/health");
        statuses.push_back(health.status);
        if (health.status != 503) break;
        EXPECT_EQ(json::parse(health.body).at("status"), "loading");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    read_available(err[0], err_text);
    EXPECT_NE(err_text.find("timed the step costs"), std::string::npos) << "ready before the step costs were timed";
    EXPECT_GT(statuses.size(), 1u);
    EXPECT_EQ(statuses.front(), 503) << "ready before the models could load";
    EXPECT_EQ(statuses.back(), 200) << "not ready, or neither 200 nor 503";
    ASSERT_EQ(fcntl(err[0], F_SETFL, err_flags), 0);
    FILE* err_stream = fdopen(err[0], "r");
    FILE* out_stream = fdopen(out[0], "r");
    char line[512] = {};
    std::thread drain_stderr([err_stream] {
        char rest[512];
        while (fgets(rest, sizeof rest, err_stream) != nullptr) {}
    });
    EXPECT_NE(fgets(line, sizeof line, out_stream), nullptr);
    EXPECT_NE(std::string(line).find("listening on"), std::string::npos) << line;
    EXPECT_EQ(call(port, "GET", "/health").status, 200);
    const Reply completion = call(port, "POST", "/v1/completions", R"({"prompt": "Q: 2 + 3?\nA:", "max_tokens": 4})");
    EXPECT_EQ(completion.status, 200) << completion.body;
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    drain_stderr.join();
    fclose(err_stream);
    fclose(out_stream);
}

}  // namespace
}  // namespace klspec::server
