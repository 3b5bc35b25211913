#include "engine/model.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "ggml-backend.h"
#include "llama.h"

namespace klspec {
namespace {

bool g_llama_verbose = false;
// The first error llama.cpp logged since the last clear: the reason behind a failed call, folded
// into klspec's own one-line message instead of being printed separately.
thread_local std::string g_llama_error;

void log_llama(ggml_log_level level, const char* text, void*) {
    if (g_llama_verbose) std::fputs(text, stderr);
    if (level == GGML_LOG_LEVEL_ERROR && g_llama_error.empty()) {
        g_llama_error = text;
        while (!g_llama_error.empty() && (g_llama_error.back() == '\n' || g_llama_error.back() == ' ')) {
            g_llama_error.pop_back();
        }
    }
}

void init_backend_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        llama_log_set(log_llama, nullptr);
        llama_backend_init();
    });
}

void require_gguf_file(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(path, ec)) throw Error(fmt::format("model file not found: {}", path));
    if (!fs::is_regular_file(path, ec)) throw Error(fmt::format("model path is not a file: {}", path));
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    if (!in.read(magic, sizeof magic) || std::memcmp(magic, "GGUF", 4) != 0) {
        throw Error(fmt::format("not a GGUF file (bad magic): {}", path));
    }
}

struct RpcEndpoint {
    std::string host;
    std::string port;
};

// "HOST:PORT" as ggml's RPC client reads it (host up to the first colon, so no IPv6 literals).
RpcEndpoint parse_rpc_endpoint(const std::string& endpoint) {
    const size_t colon = endpoint.find(':');
    const std::string port = colon == std::string::npos ? "" : endpoint.substr(colon + 1);
    const bool port_ok = !port.empty() && port.size() <= 5 &&
                         std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                         std::stoi(port) >= 1 && std::stoi(port) <= 65535;
    if (colon == 0 || !port_ok) {
        throw Error(
            fmt::format("malformed RPC server address '{}' (expected HOST:PORT, e.g. 127.0.0.1:50052)", endpoint));
    }
    return {endpoint.substr(0, colon), port};
}

// ggml's RPC client aborts the whole process when it cannot connect, so first open (and close) a plain
// TCP connection, 3 s at most, and turn a failure into an error that names the server.
void require_reachable(const std::string& endpoint) {
    if (const std::optional<std::string> problem = rpc_server_unreachable(endpoint, 3000)) throw Error(*problem);
}

// The devices of the ggml-rpc-servers at `endpoints`, null-terminated as llama_model_params.devices
// wants. Found through the backend registry, as llama.cpp's --rpc does, so klspec links no RPC symbol.
// They are given to this model only: registering them globally would offload the other model too.
std::vector<ggml_backend_dev_t> rpc_devices(const std::vector<std::string>& endpoints) {
    ggml_backend_reg_t rpc = ggml_backend_reg_by_name("RPC");
    if (rpc == nullptr) throw Error("--rpc needs llama.cpp built with GGML_RPC=ON (scripts/build-llama.sh does)");
    using AddServer = ggml_backend_reg_t (*)(const char* endpoint);
    const auto add_server =
        reinterpret_cast<AddServer>(ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_add_server"));
    if (add_server == nullptr) throw Error("llama.cpp's RPC backend has no ggml_backend_rpc_add_server");
    for (auto it = endpoints.begin(); it != endpoints.end(); ++it) {  // every address checked before any connection
        parse_rpc_endpoint(*it);
        if (std::find(endpoints.begin(), it, *it) != it) throw Error(fmt::format("RPC server {} is given twice", *it));
    }
    std::vector<ggml_backend_dev_t> devices;
    for (const std::string& endpoint : endpoints) {
        require_reachable(endpoint);
        ggml_backend_reg_t server = add_server(endpoint.c_str());
        if (server == nullptr || ggml_backend_reg_dev_count(server) == 0) {
            throw Error(fmt::format("RPC server {} offers no devices", endpoint));
        }
        for (size_t d = 0; d < ggml_backend_reg_dev_count(server); ++d)
            devices.push_back(ggml_backend_reg_dev_get(server, d));
    }
    devices.push_back(nullptr);
    return devices;
}

}  // namespace

std::optional<std::string> rpc_server_unreachable(const std::string& endpoint, int timeout_ms) {
    const RpcEndpoint parsed = parse_rpc_endpoint(endpoint);
    const auto unreachable = [&](const std::string& reason) {
        return fmt::format("cannot reach RPC server {}: {} (is ggml-rpc-server running there?)", endpoint, reason);
    };
    addrinfo hints{};
    hints.ai_family = AF_INET;  // as ggml's client (gethostbyname)
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(parsed.host.c_str(), parsed.port.c_str(), &hints, &found); rc != 0)
        return unreachable(gai_strerror(rc));
    const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
    const int fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, found->ai_protocol);
    if (fd < 0) return unreachable(std::strerror(errno));
    int error = connect(fd, found->ai_addr, found->ai_addrlen) == 0 ? 0 : errno;
    if (error == EINPROGRESS) {
        pollfd writable{fd, POLLOUT, 0};
        const int ready = poll(&writable, 1, timeout_ms);
        socklen_t size = sizeof error;
        if (ready == 0)
            error = ETIMEDOUT;
        else if (ready < 0)
            error = errno;
        else
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    }
    close(fd);
    if (error != 0) return unreachable(std::strerror(error));
    return std::nullopt;
}

namespace {

std::optional<int32_t> unless_null(llama_token token) {
    return token == LLAMA_TOKEN_NULL ? std::nullopt : std::optional<int32_t>(token);
}

}  // namespace

void set_llama_verbose(bool verbose) {
    g_llama_verbose = verbose;
    init_backend_once();
}

Model::Model(const std::string& path, const ModelOptions& options) : path_(path) {
    require_gguf_file(path);
    init_backend_once();
    llama_model_params params = llama_model_default_params();
    std::vector<ggml_backend_dev_t> devices;
    if (options.cpu_only && !options.rpc_servers.empty()) throw Error("a CPU-only model cannot use RPC servers");
    if (!options.rpc_servers.empty()) {
        devices = rpc_devices(options.rpc_servers);  // null-terminated, as llama.cpp wants
    } else if (options.cpu_only) {
        devices = {nullptr};  // an empty list: no device
    }
    if (!devices.empty()) params.devices = devices.data();
    constexpr int32_t kAllLayers = -1;  // llama.cpp: a negative count offloads every layer
    params.n_gpu_layers = options.gpu_layers.value_or(options.rpc_servers.empty() ? 0 : kAllLayers);
    cpu_resident_ = params.n_gpu_layers == 0;
    params.vocab_only = options.vocab_only;
    params.use_extra_bufts = options.repack;
    repacked_ = options.repack && cpu_resident_;
    g_llama_error.clear();
    model_ = llama_model_load_from_file(path.c_str(), params);
    if (model_ == nullptr) {
        throw Error(fmt::format("failed to load model {}: {}", path,
                                g_llama_error.empty() ? "truncated or corrupt GGUF?" : g_llama_error));
    }
    vocab_ = llama_model_get_vocab(model_);
}

Model::~Model() { llama_model_free(model_); }

int32_t Model::n_vocab() const { return llama_vocab_n_tokens(vocab_); }
int32_t Model::n_embd() const { return llama_model_n_embd(model_); }
uint64_t Model::n_params() const { return llama_model_n_params(model_); }

std::vector<int32_t> Model::tokenize(const std::string& text, bool add_bos, bool parse_special) const {
    // Usually one token per byte at most; but an SPM vocabulary without "▁" spells each space as three
    // byte tokens, so on a negative count (the size needed) tokenize again with room for it.
    std::vector<llama_token> tokens(text.size() + 2);
    const auto run = [&] {
        try {
            return llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                                  static_cast<int32_t>(tokens.size()), add_bos, parse_special);
        } catch (const std::out_of_range&) {  // llama.cpp looks a piece up that the vocabulary lacks (a cut one)
            throw PromptError(
                fmt::format("{}: its vocabulary cannot spell the text (a piece it needs is missing)", path_));
        }
    };
    int32_t n = run();
    if (n < 0) {
        tokens.resize(static_cast<size_t>(-n));
        n = run();
    }
    if (n < 0) throw PromptError("tokenization failed");
    tokens.resize(n);
    return tokens;
}

std::string Model::piece(int32_t token, bool special) const {
    char buf[256];
    const int32_t n = llama_token_to_piece(vocab_, token, buf, sizeof buf, /*lstrip=*/0, special);
    if (n < 0) {
        std::string big(static_cast<size_t>(-n), '\0');
        llama_token_to_piece(vocab_, token, big.data(), -n, 0, special);
        return big;
    }
    return std::string(buf, static_cast<size_t>(n));
}

std::string Model::text(std::span<const int32_t> tokens) const {
    std::string out;
    for (int32_t token : tokens)
        if (!is_end_of_generation(token)) out += piece(token);
    return out;
}

bool Model::is_end_of_generation(int32_t token) const { return llama_vocab_is_eog(vocab_, token); }

std::optional<int32_t> Model::bos_token() const { return unless_null(llama_vocab_bos(vocab_)); }

std::optional<int32_t> Model::prompt_bos_token() const {
    return llama_vocab_get_add_bos(vocab_) ? bos_token() : std::nullopt;
}
std::optional<int32_t> Model::eos_token() const { return unless_null(llama_vocab_eos(vocab_)); }
std::optional<int32_t> Model::pad_token() const { return unless_null(llama_vocab_pad(vocab_)); }

Model::FimTokens Model::fim_tokens() const {
    return {unless_null(llama_vocab_fim_pre(vocab_)), unless_null(llama_vocab_fim_suf(vocab_)),
            unless_null(llama_vocab_fim_mid(vocab_)), unless_null(llama_vocab_fim_rep(vocab_)),
            unless_null(llama_vocab_fim_sep(vocab_))};
}

std::optional<std::string> vocabulary_difference(const Model& target, const Model& draft) {
    // llama.cpp's rule, check by check and in its order: common_speculative_are_compatible in
    // common/speculative.cpp (a static function there, so reimplemented here to name the difference).
    const llama_vocab* tv = target.vocab();
    const llama_vocab* dv = draft.vocab();
    if (llama_vocab_type(tv) != llama_vocab_type(dv)) {
        const auto name = [](enum llama_vocab_type type) {
            static const char* const kNames[] = {"none", "SPM", "BPE", "WPM", "UGM", "RWKV", "PLaMo-2", "test"};
            const auto index = static_cast<size_t>(type);
            return index < std::size(kNames) ? std::string(kNames[index]) : fmt::format("type {}", index);
        };
        return fmt::format("vocabulary type {} vs {}", name(llama_vocab_type(dv)), name(llama_vocab_type(tv)));
    }
    // BOS and EOS are compared only where the tokenizer adds them.
    const bool add_bos = llama_vocab_get_add_bos(tv);
    if (add_bos != llama_vocab_get_add_bos(dv)) return fmt::format("add BOS {} vs {}", !add_bos, add_bos);
    if (add_bos && llama_vocab_bos(tv) != llama_vocab_bos(dv))
        return fmt::format("BOS token {} vs {}", llama_vocab_bos(dv), llama_vocab_bos(tv));
    const bool add_eos = llama_vocab_get_add_eos(tv);
    if (add_eos != llama_vocab_get_add_eos(dv)) return fmt::format("add EOS {} vs {}", !add_eos, add_eos);
    if (add_eos && llama_vocab_eos(tv) != llama_vocab_eos(dv))
        return fmt::format("EOS token {} vs {}", llama_vocab_eos(dv), llama_vocab_eos(tv));
    const int32_t n_target = target.n_vocab();
    const int32_t n_draft = draft.n_vocab();
    if (std::abs(n_target - n_draft) > kMaxVocabularySizeDifference)
        return fmt::format("size {} vs {}, more than {} apart", n_draft, n_target, kMaxVocabularySizeDifference);
    for (int32_t t = kFirstComparedToken; t < std::min(n_target, n_draft); ++t) {
        const char* target_text = llama_vocab_get_text(tv, t);
        const char* draft_text = llama_vocab_get_text(dv, t);
        if (std::strcmp(target_text, draft_text) != 0)
            return fmt::format("text of token {}: '{}' vs '{}'", t, draft_text, target_text);
    }
    return std::nullopt;
}

void require_compatible_vocabularies(const Model& target, const Model& draft) {
    if (const std::optional<std::string> difference = vocabulary_difference(target, draft)) {
        throw Error(fmt::format(
            "draft and target vocabularies differ where llama.cpp requires them equal: {} (draft {} vs target {})",
            *difference, draft.path(), target.path()));
    }
}

std::optional<std::string> Model::chat_template() const {
    const char* tmpl = llama_model_chat_template(model_, /*name=*/nullptr);
    if (tmpl == nullptr) return std::nullopt;
    return std::string(tmpl);
}

ModelOptions draft_model_options(ModelOptions target) {
    target.repack = true;
    return target;
}

}  // namespace klspec
