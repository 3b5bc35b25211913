// `klspec generate --rpc`: stories260K's layers on two ggml-rpc-servers of this machine give the local
// run's tokens, target-only and speculative; bad server lists are one-line errors.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "build_paths.h"
#include "core/error.h"
#include "test_support.h"

namespace klspec {
namespace {

const std::string kRpcServer = std::string(build_paths::llama_tools_dir) + "/ggml-rpc-server";

// A loopback port nobody listens on: bound, read back, released.
int free_loopback_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
        close(fd);
        throw std::runtime_error("no free loopback port");
    }
    close(fd);
    return ntohs(address.sin_port);
}

bool accepts_connections(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    close(fd);
    return connected;
}

// A ggml-rpc-server child process (its CPU device, one thread) on a free loopback port; killed and
// reaped when this goes out of scope, so no test leaves one running.
class RpcServerProcess {
public:
    RpcServerProcess()
        : port_(free_loopback_port()), log_path_(test::temp_path("rpc-server-" + std::to_string(port_) + ".log")) {
        pid_ = fork();
        if (pid_ == 0) {
            freopen(log_path_.c_str(), "w", stdout);
            dup2(fileno(stdout), fileno(stderr));
            const std::string port = std::to_string(port_);
            execl(kRpcServer.c_str(), kRpcServer.c_str(), "-H", "127.0.0.1", "-p", port.c_str(), "-t", "1", nullptr);
            _exit(127);
        }
        for (int tries = 0; tries < 100 && !accepts_connections(port_); ++tries) {
            if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
                pid_ = -1;
                throw std::runtime_error("ggml-rpc-server exited at start: " + log());
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
    ~RpcServerProcess() {
        if (pid_ <= 0) return;
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
    RpcServerProcess(const RpcServerProcess&) = delete;
    RpcServerProcess& operator=(const RpcServerProcess&) = delete;

    std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
    pid_t pid() const { return pid_; }
    std::string log() const {
        std::ostringstream text;
        text << std::ifstream(log_path_).rdbuf();
        return text.str();
    }

private:
    int port_;
    std::string log_path_;
    pid_t pid_ = -1;
};

struct Generation {
    std::vector<int32_t> tokens;
    std::string llama_log;  // llama.cpp's own log (-v): where the layers went
};

Generation generate(const std::string& flags) {
    const test::CommandResult r = test::run_command(test::kCli + " generate -m " + test::kTargetModel +
                                                    " -p 'Once upon a time' -n 48 -t 1 --temp 0 --json -v " + flags);
    if (r.exit_code != 0) throw std::runtime_error("klspec generate " + flags + " failed: " + r.errors);
    return {nlohmann::json::parse(r.output).at("tokens").get<std::vector<int32_t>>(), r.errors};
}

TEST(Rpc, TargetOnTwoServersGivesTheLocalTokens) {
    if (!std::filesystem::exists(kRpcServer)) GTEST_SKIP() << kRpcServer << " is absent: RPC not tested";
    std::vector<pid_t> server_pids;
    {
        RpcServerProcess first, second;
        server_pids = {first.pid(), second.pid()};
        const std::string rpc = " --rpc " + first.endpoint() + "," + second.endpoint();
        for (const std::string& draft : {std::string(), " -md " + test::kDraftQ4}) {
            SCOPED_TRACE(draft.empty() ? "target-only" : "speculative, local Q4_0 draft");
            const Generation local = generate(draft);
            const Generation remote = generate(draft + rpc);
            EXPECT_EQ(remote.tokens, local.tokens);
            EXPECT_EQ(local.tokens.size(), 48u);
            // Both servers hold part of the weights (llama.cpp names a buffer by device and server); locally none does.
            for (const RpcServerProcess* server : {&first, &second}) {
                EXPECT_NE(remote.llama_log.find("RPC0[" + server->endpoint() + "] model buffer size"),
                          std::string::npos)
                    << remote.llama_log;
            }
            EXPECT_EQ(local.llama_log.find("RPC"), std::string::npos);
        }
    }
    for (pid_t pid : server_pids) EXPECT_NE(kill(pid, 0), 0) << "ggml-rpc-server " << pid << " left running";
}

TEST(Rpc, BadServerListsAreOneLineErrors) {
    const std::string unused = "127.0.0.1:" + std::to_string(free_loopback_port());
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"localhost", "malformed RPC server address 'localhost'"},
        {"127.0.0.1:99999", "malformed RPC server address '127.0.0.1:99999'"},
        {unused + ",", "malformed RPC server address ''"},
        {unused, "cannot reach RPC server " + unused},
    };
    for (const auto& [servers, message] : cases) {
        const test::CommandResult r = test::run_command(test::kCli + " generate -m " + test::kTargetModel +
                                                        " -p 'Once upon a time' -n 4 -t 1 --rpc '" + servers + "'");
        EXPECT_NE(r.exit_code, 0) << servers;
        EXPECT_NE(r.errors.find(message), std::string::npos) << r.errors;
        EXPECT_EQ(r.errors.find('\n'), r.errors.size() - 1) << "not one line: " << r.errors;
    }
}

// A CPU-only model (the GPU tests' CPU reference) cannot also run on RPC servers: the two ask for opposite
// device lists.
TEST(Rpc, ACpuOnlyModelRefusesRpcServers) {
    ModelOptions options;
    options.cpu_only = true;
    options.rpc_servers = {"127.0.0.1:" + std::to_string(free_loopback_port())};
    try {
        const Model model(test::kTargetModel, options);
        ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "a CPU-only model cannot use RPC servers");
    }
    options.rpc_servers.clear();
    const Model cpu(test::kTargetModel, options);
    EXPECT_EQ(cpu.n_vocab(), 512);
}

}  // namespace
}  // namespace klspec
