#include "apps/serve_command.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "apps/run_options.h"
#include "core/error.h"
#include "server/server.h"

namespace klspec {
namespace {

struct ServeOptions {
    RunOptions run;
    server::ServerOptions server;
    bool no_cache_prompt = false;
    int32_t cache_reuse = 0;
    int64_t cache_ram_mib = 8192;  // llama-server's default
    int32_t prefill_chunk = 128;
    bool add_bos_to_token_prompts = false;
    std::string api_key_file;
    int drain_timeout_s = 30;
};

// One key per line, surrounding whitespace (a CRLF file's \r) dropped, blank lines skipped.
std::vector<std::string> read_api_keys(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(fmt::format("--api-key-file {}: cannot read it", path));
    std::vector<std::string> keys;
    for (std::string line; std::getline(in, line);) {
        const size_t begin = line.find_first_not_of(" \t\r");
        if (begin != std::string::npos) keys.push_back(line.substr(begin, line.find_last_not_of(" \t\r") + 1 - begin));
    }
    if (keys.empty()) throw Error(fmt::format("--api-key-file {}: holds no key", path));
    return keys;
}

// Set by SIGINT/SIGTERM. A handler may only store a lock-free atomic; a watcher thread stops the server
// (which is not async-signal-safe). Threads started by libraries before this command may take the
// signal, so it is handled, not blocked and waited for.
std::atomic<bool> stop_requested = false;
static_assert(std::atomic<bool>::is_always_lock_free);

// "kl", or "kl inside think" when a span confines it.
std::string judge_description(const Judge& judge, const JudgeSpan& span) {
    return span.is_all() ? std::string(judge.name()) : fmt::format("{} inside {}", judge.name(), span.to_string());
}

void run_serve(const ServeOptions& options) {
    server::ServerOptions server_options = options.server;
    server_options.rpc_servers = options.run.model.rpc_servers;
    server_options.rpc_servers.insert(server_options.rpc_servers.end(), options.run.draft_rpc_servers.begin(),
                                      options.run.draft_rpc_servers.end());
    if (!options.api_key_file.empty()) {  // before the models load: a bad file fails at once
        for (std::string& key : read_api_keys(options.api_key_file)) server_options.api_keys.push_back(std::move(key));
    }
    // The socket first, so that a readiness probe gets an answer while the models load: /health 503
    // {"status": "loading"} (every other path 503 model_loading) until the models are loaded and the step
    // costs timed. The stdout line comes only when the server is ready: scripts read it for the port.
    DecodingSession session;  // declared first: the server (its decoding thread) goes before the models
    server::Server server(server_options);
    const int port = server.bind();
    std::thread listener([&] { server.listen(); });
    while (!server.listening()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // Nothing printed here: a start that fails (a bad model or chat template) stays a one-line error.
    const auto stop_listening = [&] {
        server.stop();
        listener.join();
    };
    GenerationOptions generation;
    try {
        RunOptions run = options.run;
        run.context.n_sequences = options.server.slots;
        run.judge.span = {};  // the server resolves a `think` span with the chat template it applies
        // Loaded on a thread that ends here, so that the decoding thread is the process's only OpenMP master. The
        // start-up decoding (warm-up, the repack probe) leaves its thread a libgomp team; with two teams libgomp
        // manages more threads than cores and cuts every barrier's spin from 300,000 to 100, so the compute
        // threads sleep and wake hundreds of times a token (docs/server.md, "One OpenMP team").
        session = std::async(std::launch::async, [&run] { return open_session(run); }).get();
        session.generation.judge_span = options.run.judge.span;
        generation = session.generation;
        generation.cache_prompt = !options.no_cache_prompt;
        generation.first_token_from_prompt = true;  // as llama-server: the first token from the prompt's logits
        generation.cache_reuse_min_chunk = options.cache_reuse;
        session.decoder->use_prompt_cache(options.cache_ram_mib < 0 ? -1 : options.cache_ram_mib << 20);
        session.decoder->set_prefill_chunk(options.prefill_chunk);
        server::RequestDefaults defaults{
            .generation = generation, .judge = run.judge, .n_ctx = run.context.n_ctx, .n_batch = run.context.n_batch};
        defaults.add_bos_to_token_prompts = options.add_bos_to_token_prompts;
        server.attach(*session.decoder, defaults);
        if (generation.draft_policy == DraftPolicy::Auto &&
            (session.decoder->has_draft() || session.decoder->has_ngram_drafter())) {
            // The automatic draft length's step costs, timed before the first request rather than inside it,
            // on the thread that decodes (docs/server.md). On stderr: stdout's first line is the listening line.
            const auto start = std::chrono::steady_clock::now();
            server.run_on_decoder_thread(
                [&](SpeculativeDecoder& decoder) { decoder.calibrate_step_costs(generation.draft_max); });
            std::fprintf(stderr, "klspec serve: timed the step costs for --draft-policy auto in %.1f s\n",
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
    } catch (...) {
        stop_listening();
        throw;
    }

    std::signal(SIGINT, [](int) { stop_requested = true; });
    std::signal(SIGTERM, [](int) { stop_requested = true; });
    // A client that hangs up mid-stream is a failed write (its request is cancelled), not a reason to exit.
    std::signal(SIGPIPE, SIG_IGN);
    std::atomic<bool> serving = true;
    std::thread stop_watcher([&] {
        while (serving && !stop_requested) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (stop_requested)
            server.drain(std::chrono::seconds(options.drain_timeout_s),
                         [](const std::string& line) { std::fprintf(stderr, "klspec serve: %s\n", line.c_str()); });
        server.stop();
    });
    server.set_ready();
    std::printf("klspec serve: listening on http://%s:%d (model %s, %d slots, judge %s, chat template %s)\n",
                server_options.host.c_str(), port,
                std::filesystem::path(session.target->path()).stem().string().c_str(), server_options.slots,
                judge_description(*session.generation.judge, options.run.judge.span).c_str(),
                server.chat_template().origin().c_str());
    std::fflush(stdout);
    listener.join();
    serving = false;
    stop_watcher.join();
}

}  // namespace

void register_serve_command(CLI::App& app) {
    auto options = std::make_shared<ServeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "serve",
        "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions; llama-server's /infill, "
        "/tokenize, /detokenize, /props, /slots) with per-request judges; the flags below are the defaults a "
        "request's fields override");
    add_model_options(*cmd, options->run);
    options->run.generation.draft_policy = DraftPolicy::Auto;  // the cost model chooses gamma
    add_generation_options(*cmd, options->run.generation);
    add_judge_options(*cmd, options->run.judge, /*with_rule=*/true);
    add_cost_trace_option(*cmd, options->run);  // why the automatic γ drafts, step by step, over all slots
    cmd->add_option("--host", options->server.host, "Address to listen on")->capture_default_str();
    cmd->add_option("--port", options->server.port, "TCP port (0 = any free port, printed when listening)")
        ->capture_default_str()
        ->check(CLI::Range(0, 65535));
    cmd->add_option("--parallel", options->server.slots,
                    "Slots (also -np): requests decoded together, their drafts verified in one target batch; more "
                    "requests wait in a queue")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    cmd->add_option("--chat-template", options->server.chat_template,
                    "How /v1/chat/completions formats messages: a built-in template name (" +
                        builtin_chat_template_names() +
                        ") or a Jinja template file; default: the model's own template (Jinja, as llama-server), "
                        "chatml when it has none");
    cmd->add_option("--chat-template-file", options->server.chat_template,
                    "A Jinja chat template file (llama-server's "
                    "spelling of --chat-template FILE)")
        ->check(CLI::ExistingFile);
    cmd->add_flag(
        "--no-cache-prompt", options->no_cache_prompt,
        "Do not keep a finished request's KV cells for the next request in its slot (the request field "
        "cache_prompt overrides; default: keep them and reuse the longest shared prompt prefix, as llama-server)");
    cmd->add_option("--cache-reuse", options->cache_reuse,
                    "llama-server's --cache-reuse N: past the shared prefix, reuse kept runs of at least N tokens that "
                    "the prompt holds further on by shifting their KV cells (an editor's moving window; the request "
                    "field n_cache_reuse overrides; 0: off)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--cache-ram", options->cache_ram_mib,
                    "llama-server's --cache-ram N: keep the prompt cells a slot loses to another request in host "
                    "memory, up to N MiB (-1: no limit, 0: off), and load them back for a later request that shares "
                    "more with them than with any free slot (clients cycling through more prompts than there are "
                    "slots then prefill each prompt once)")
        ->capture_default_str()
        ->check(CLI::Range(int64_t{-1}, int64_t{1} << 40));
    cmd->add_option(
           "--prefill-chunk", options->prefill_chunk,
           "Chunked prefill: a new request's prompt goes in chunks of at most N tokens, each in one decoding "
           "step's batch beside the running requests' rows, so their streams keep flowing while a long prompt "
           "arrives (as vLLM's chunked prefill; llama-server puts up to -b tokens in one batch). With no stream "
           "running, prompts go in whole batches of -b. The output is the same either way. 0: each prompt is "
           "prefilled whole before the next step")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->add_flag("--add-bos-to-token-prompts", options->add_bos_to_token_prompts,
                  "Prepend the BOS token to a token-id prompt that does not start with it, where the model's text "
                  "prompts get one (lm-evaluation-harness's remote tokenizer sends ids without it); the request field "
                  "add_bos_to_token_prompts overrides");
    cmd->add_option("--max-body", options->server.max_body_bytes, "Largest request body in bytes (larger: 413)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    cmd->add_option(
           "--api-key", options->server.api_keys,
           "Require `Authorization: Bearer KEY` on every endpoint but /health (401 otherwise); repeat the flag "
           "for more keys")
        ->allow_extra_args(false)
        ->check([](const std::string& key) { return key.empty() ? std::string("an API key cannot be empty") : ""; });
    cmd->add_option("--api-key-file", options->api_key_file,
                    "Read more keys for --api-key from FILE, one per line (blank lines are skipped)");
    cmd->add_option("--drain-timeout", options->drain_timeout_s,
                    "On SIGTERM or SIGINT: refuse new requests with 503 and let those in flight (streams included) "
                    "finish for up to this many seconds, then cancel the rest and exit 0 (0: stop at once)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->callback([options] { run_serve(*options); });
}

}  // namespace klspec
