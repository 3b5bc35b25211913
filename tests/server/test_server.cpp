// `klspec serve`'s HTTP API end to end: a Server on a free loopback port over stories260K and its Q4_0
// draft, spoken to with cpp-httplib's client.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "build_paths.h"
#include "core/judge_factory.h"
#include "core/token_logprobs.h"
#include "server/server.h"
#include "test_support.h"

extern char** environ;

namespace klspec::server {
namespace {

using nlohmann::json;

constexpr int32_t kSlots = 2;
constexpr int32_t kContext = 384;

struct HttpReply {
    int status = 0;
    std::string body;
    httplib::Headers headers;
    json parsed() const { return json::parse(body); }
};

HttpReply call(int port, const std::string& method, const std::string& path, const std::string& body = "",
               const httplib::Headers& headers = {}) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30);
    httplib::Result r =
        method == "GET" ? c.Get(path.c_str(), headers) : c.Post(path.c_str(), headers, body, "application/json");
    if (!r) return {-1, httplib::to_string(r.error()), {}};
    return {r->status, r->body, r->headers};
}

// A streamed POST; `on_chunk` sees the body received so far after each chunk.
HttpReply stream(int port, const std::string& path, const json& body,
                 const std::function<void(const std::string&)>& on_chunk = {}, const httplib::Headers& headers = {}) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60);
    httplib::Request request;
    request.method = "POST";
    request.path = path;
    request.body = body.dump();
    request.headers = headers;
    request.set_header("Content-Type", "application/json");
    std::string received;
    request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
        received.append(data, size);
        if (on_chunk) on_chunk(received);
        return true;
    };
    httplib::Response response;
    httplib::Error error = httplib::Error::Success;
    if (!c.send(request, response, error)) return {-1, httplib::to_string(error), {}};
    return {response.status, received, response.headers};
}

// A Server on a free loopback port over `target_path` and its draft (stories260K's Q4_0 by default), with
// n-gram drafters before it when given, listening on its own thread until destroyed.
struct TestServer {
    explicit TestServer(const std::string& target_path, const std::string& draft_path = test::kDraftQ4,
                        std::vector<std::string> api_keys = {}, const NgramOptions& ngram = {})
        : target(target_path, test::offload()),
          draft(draft_path, test::offload()),
          decoder(target, &draft, context(), ngram),
          server(decoder, defaults(), options(std::move(api_keys))) {
        port = server.bind();
        listener = std::thread([this] { server.listen(); });
    }
    ~TestServer() {
        server.stop();
        listener.join();
    }
    static ContextOptions context() {
        ContextOptions context;
        context.n_threads = 1;
        context.n_ctx = kContext;
        context.n_sequences = kSlots;
        return context;
    }
    static RequestDefaults defaults() {
        RequestDefaults defaults;
        defaults.generation.max_tokens = 32;
        defaults.n_ctx = kContext;
        return defaults;
    }
    static ServerOptions options(std::vector<std::string> api_keys) {
        ServerOptions options;
        options.api_keys = std::move(api_keys);
        options.port = 0;
        options.slots = kSlots;
        options.max_body_bytes = 16 * 1024;
        options.model_name = "stories260K";
        return options;
    }

    Model target;
    Model draft;
    SpeculativeDecoder decoder;
    Server server;
    int port = 0;
    std::thread listener;
};

// Tests on one server per suite; the model is stories260K itself, or a copy with a chat template.
template <bool kWithChatTemplate>
class ServerFixture : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        server_ =
            std::make_unique<TestServer>(kWithChatTemplate ? test::stories_with_chat_template() : test::kTargetModel);
    }
    static void TearDownTestSuite() { server_.reset(); }

    static int port() { return server_->port; }
    static httplib::Client client() {
        httplib::Client c("127.0.0.1", port());
        c.set_read_timeout(30);
        return c;
    }
    static HttpReply post(const std::string& path, const std::string& body) { return call(port(), "POST", path, body); }
    static HttpReply post(const std::string& path, const json& body) { return post(path, body.dump()); }
    static HttpReply get(const std::string& path) { return call(port(), "GET", path); }
    // The value of a Prometheus sample line `name value`.
    static double metric(const std::string& name) {
        const std::string text = get("/metrics").body;
        const size_t at = text.find("\n" + name + " ");
        if (at == std::string::npos) {
            ADD_FAILURE() << name << " missing from /metrics:\n" << text;
            return -1;
        }
        return std::stod(text.substr(at + name.size() + 2));
    }
    // Waits (bounded) until no request is decoding or waiting: after a disconnect the slot frees itself.
    static bool wait_idle() {
        for (int i = 0; i < 200; ++i) {
            if (metric("klspec:num_requests_running") == 0 && metric("klspec:num_requests_waiting") == 0) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(25));
        }
        return false;
    }

    static std::unique_ptr<TestServer> server_;
};

template <bool kWithChatTemplate>
std::unique_ptr<TestServer> ServerFixture<kWithChatTemplate>::server_;

using ServerTest = ServerFixture<false>;
using ChatServerTest = ServerFixture<true>;

// The `data:` payloads of an SSE body, in order.
std::vector<std::string> sse_events(const std::string& body) {
    std::vector<std::string> events;
    size_t at = 0;
    while ((at = body.find("data: ", at)) != std::string::npos) {
        const size_t end = body.find("\n\n", at);
        events.push_back(body.substr(at + 6, end - at - 6));
        at = end;
    }
    return events;
}

// Greedy vanilla judge decoding is lossless: the server returns what `klspec generate` prints.
TEST_F(ServerTest, CompletionEqualsGenerate) {
    const test::CommandResult cli =
        test::run_command(test::kCli + " generate -m " + test::kTargetModel + " -md " + test::kDraftQ4 +
                          " -p 'Once upon a time' -n 32 -t 1 --draft-policy fixed --json");
    ASSERT_EQ(cli.exit_code, 0) << cli.errors;
    const json expected = json::parse(cli.output);

    const HttpReply reply = post("/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 32}});
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json out = reply.parsed();
    EXPECT_EQ(out.at("object"), "text_completion");
    EXPECT_EQ(out.at("model"), "stories260K");
    EXPECT_EQ(out.at("id").get<std::string>().rfind("cmpl-", 0), 0u);
    const json& choice = out.at("choices").at(0);
    EXPECT_EQ(choice.at("text"), expected.at("text"));
    EXPECT_EQ(choice.at("finish_reason"), expected.at("stop_reason") == "max_tokens" ? "length" : "stop");
    const json& usage = out.at("usage");
    EXPECT_EQ(usage.at("completion_tokens"), expected.at("tokens").size());
    EXPECT_EQ(usage.at("prompt_tokens"), expected.at("stats").at("prompt_tokens"));
    EXPECT_EQ(usage.at("total_tokens"),
              usage.at("prompt_tokens").get<int>() + usage.at("completion_tokens").get<int>());
    const json& spec = out.at("speculative");
    EXPECT_EQ(spec.at("judge"), "vanilla");
    EXPECT_EQ(spec.at("drafted"), expected.at("stats").at("drafted"));
    EXPECT_EQ(spec.at("accepted"), expected.at("stats").at("accepted"));
    EXPECT_EQ(spec.at("relaxed"), 0);
    EXPECT_GT(spec.at("mat").get<double>(), 1.0);
}

// A request's judge span is echoed with what it kept exact, plain and streamed; outside it every token is
// the target's, so a loose KL confined to a span that closes at once decodes as vanilla.
TEST_F(ServerTest, JudgeSpanIsEchoedAndConfinesTheRule) {
    const json loose = {{"prompt", "Once upon a time"}, {"max_tokens", 48},       {"judge", "kl"},
                        {"judge_threshold", 1e6},       {"confidence_mask", 1.0}, {"draft_policy", "fixed"}};
    const HttpReply vanilla =
        post("/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 48}, {"draft_policy", "fixed"}});
    ASSERT_EQ(vanilla.status, 200) << vanilla.body;
    json confined = loose;
    confined["judge_span"] = "until:,";  // the story's first comma comes at once
    for (const bool stream : {false, true}) {
        confined["stream"] = stream;
        const HttpReply reply = post("/v1/completions", confined);
        ASSERT_EQ(reply.status, 200) << reply.body;
        const json spec =
            stream ? json::parse(sse_events(reply.body).end()[-2]).at("speculative") : reply.parsed().at("speculative");
        EXPECT_EQ(spec.at("judge"), "kl");
        EXPECT_EQ(spec.at("judge_span"), "until:,");
        EXPECT_GT(spec.at("outside_span").get<int>(), 40);
        EXPECT_GT(spec.at("span_blocked").get<int>(), 0);
        EXPECT_EQ(spec.at("relaxed"), 0);
        if (!stream) {
            EXPECT_EQ(reply.parsed().at("choices").at(0).at("text"), vanilla.parsed().at("choices").at(0).at("text"));
        }
    }
    const HttpReply everywhere = post("/v1/completions", loose);
    ASSERT_EQ(everywhere.status, 200) << everywhere.body;
    EXPECT_EQ(everywhere.parsed().at("speculative").at("judge_span"), "all");
    EXPECT_GT(everywhere.parsed().at("speculative").at("relaxed").get<int>(), 0);
    EXPECT_FALSE(everywhere.parsed().at("speculative").contains("outside_span"));
}

// logprobs in OpenAI's shapes, plain and streamed, equal to the engine's (the target's log-softmax at every
// emitted token, relaxed ones included).
TEST_F(ServerTest, LogprobsInOpenAIsShapesPlainAndStreamed) {
    const std::string prompt = "One day, a little girl named Lily";
    const json loose = {{"judge", "kl"}, {"judge_threshold", 50.0}, {"confidence_mask", 1.0}};
    GenerationOptions options;
    options.max_tokens = 24;
    options.draft_max = 16;
    options.logprobs = 2;
    JudgeOptions kl;
    kl.rule = "kl";
    kl.threshold = 50.0;
    kl.confidence_mask = 1.0;
    options.judge = make_judge(kl);
    SpeculativeDecoder alone(server_->target, &server_->draft, TestServer::context());
    const GenerationResult expected = alone.generate(prompt, options);
    ASSERT_GT(expected.stats.relaxed_accepted, 0);

    json request = loose;
    request.update(
        json{{"prompt", prompt}, {"max_tokens", 24}, {"draft_max", 16}, {"draft_policy", "fixed"}, {"logprobs", 2}});
    const HttpReply reply = post("/v1/completions", request);
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json choice = reply.parsed().at("choices").at(0);
    const json& logprobs = choice.at("logprobs");
    ASSERT_EQ(logprobs.at("tokens").size(), expected.tokens.size()) << reply.body;
    std::string joined;
    for (size_t i = 0; i < expected.tokens.size(); ++i) {
        EXPECT_EQ(logprobs.at("text_offset").at(i), joined.size());
        joined += logprobs.at("tokens").at(i).get<std::string>();
        EXPECT_FLOAT_EQ(logprobs.at("token_logprobs").at(i).get<float>(), expected.logprobs[i].chosen.logprob) << i;
        EXPECT_LE(logprobs.at("top_logprobs").at(i).size(), 2u);
        EXPECT_FLOAT_EQ(logprobs.at("top_logprobs").at(i).at(server_->target.piece(expected.logprobs[i].top[0].token)),
                        expected.logprobs[i].top[0].logprob);
    }
    EXPECT_EQ(joined, choice.at("text").get<std::string>());

    // Chat: {"content": [{token, logprob, bytes, top_logprobs}]}; the streamed chunks' lists add up to it.
    json chat = loose;
    chat.update(json{{"messages", json::array({json{{"role", "user"}, {"content", prompt}}})},
                     {"max_tokens", 24},
                     {"logprobs", true},
                     {"top_logprobs", 3}});
    const HttpReply plain = post("/v1/chat/completions", chat);
    ASSERT_EQ(plain.status, 200) << plain.body;
    const json content = plain.parsed().at("choices").at(0).at("logprobs").at("content");
    ASSERT_EQ(content.size(), plain.parsed().at("usage").at("completion_tokens"));
    std::string text;
    for (const json& entry : content) {
        const std::string token = entry.at("token");
        text += token;
        EXPECT_EQ(entry.at("bytes").size(), token.size());
        EXPECT_LE(entry.at("logprob").get<double>(), 0.0);
        ASSERT_EQ(entry.at("top_logprobs").size(), 3u);
        EXPECT_GE(entry.at("top_logprobs").at(0).at("logprob").get<double>(), entry.at("logprob").get<double>());
    }
    EXPECT_EQ(text, plain.parsed().at("choices").at(0).at("message").at("content").get<std::string>());
    chat["stream"] = true;
    const HttpReply streamed = post("/v1/chat/completions", chat);
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    json streamed_content = json::array();
    for (const std::string& event : sse_events(streamed.body)) {
        if (event == "[DONE]") break;
        const json chunk_choice = json::parse(event).at("choices").at(0);
        if (chunk_choice.contains("logprobs"))
            for (const json& entry : chunk_choice.at("logprobs").at("content")) streamed_content.push_back(entry);
    }
    EXPECT_EQ(streamed_content, content);
    EXPECT_TRUE(post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 4}})
                    .parsed()
                    .at("choices")
                    .at(0)
                    .at("logprobs")
                    .is_null());
}

// The chunks add up to the non-streamed text; their provenance lists account for every token; a loose
// per-request KL judge relaxes tokens the default (vanilla) would not.
TEST_F(ServerTest, StreamingConcatenationEqualsTheText) {
    for (const json& judge :
         {json{{"judge", "vanilla"}}, json{{"judge", "kl"}, {"judge_threshold", 50.0}, {"confidence_mask", 1.0}}}) {
        json request = {{"prompt", "One day, a little girl named Lily"}, {"max_tokens", 48}};
        request.update(judge);
        const HttpReply whole = post("/v1/completions", request);
        ASSERT_EQ(whole.status, 200) << whole.body;
        request["stream"] = true;
        const HttpReply streamed = post("/v1/completions", request);
        ASSERT_EQ(streamed.status, 200) << streamed.body;

        const std::vector<std::string> events = sse_events(streamed.body);
        ASSERT_GE(events.size(), 2u) << streamed.body;
        EXPECT_EQ(events.back(), "[DONE]");
        std::string text;
        int64_t tokens = 0, relaxed = 0;
        json last;
        for (size_t i = 0; i + 1 < events.size(); ++i) {
            last = json::parse(events[i]);
            const json& choice = last.at("choices").at(0);
            text += choice.at("text").get<std::string>();
            // The spans cut the chunk's text into tokens; only relaxed ones carry the judge's statistic.
            std::string spans_text;
            for (const json& span : choice.value("spans", json::array())) {
                spans_text += span.at("text").get<std::string>();
                EXPECT_EQ(span.contains("judge_statistic"), span.at("provenance") == "relaxed") << span;
            }
            EXPECT_EQ(spans_text, choice.at("text").get<std::string>());
            for (const json& p : choice.value("provenance", json::array())) {
                ++tokens;
                relaxed += p == "relaxed";
                EXPECT_TRUE(p == "draft" || p == "relaxed" || p == "target") << p;
            }
            if (i + 2 < events.size()) {
                EXPECT_TRUE(choice.at("finish_reason").is_null());
            }
        }
        const json expected = whole.parsed();
        EXPECT_EQ(text, expected.at("choices").at(0).at("text").get<std::string>()) << judge;
        EXPECT_EQ(last.at("choices").at(0).at("finish_reason"), expected.at("choices").at(0).at("finish_reason"));
        EXPECT_EQ(tokens, last.at("usage").at("completion_tokens").get<int64_t>());
        EXPECT_EQ(relaxed, last.at("speculative").at("relaxed").get<int64_t>());
        EXPECT_EQ(last.at("speculative"), expected.at("speculative"));
        if (judge.at("judge") == "kl") {
            EXPECT_GT(relaxed, 0) << "a KL threshold of 50 relaxed nothing";
        } else {
            EXPECT_EQ(relaxed, 0);
        }
    }
}

// Five requests on two slots: three wait in the queue, none is dropped, and batching does not change
// greedy outputs (each equals target-only decoding of its prompt).
TEST_F(ServerTest, MoreConcurrentRequestsThanSlotsAllComplete) {
    const std::vector<std::string> prompts = test::story_prompts(5);
    std::vector<std::future<HttpReply>> replies;
    for (const std::string& prompt : prompts)
        replies.push_back(std::async(std::launch::async, [prompt] {
            return post("/v1/completions",
                        json{{"prompt", prompt}, {"max_tokens", 40}, {"stream", prompt.size() % 2 == 0}});
        }));
    ContextOptions context;
    context.n_threads = 1;
    context.n_ctx = kContext;
    SpeculativeDecoder target_only(server_->target, nullptr, context);
    GenerationOptions options;
    options.max_tokens = 40;
    for (size_t i = 0; i < prompts.size(); ++i) {
        const HttpReply reply = replies[i].get();
        ASSERT_EQ(reply.status, 200) << reply.body;
        std::string text;
        if (prompts[i].size() % 2 == 0) {
            for (const std::string& event : sse_events(reply.body))
                if (event != "[DONE]") text += json::parse(event).at("choices").at(0).at("text").get<std::string>();
        } else {
            text = reply.parsed().at("choices").at(0).at("text");
        }
        EXPECT_EQ(text, target_only.generate(prompts[i], options).text) << prompts[i];
    }
    EXPECT_TRUE(wait_idle());
}

// A streaming client that hangs up after its first chunk cancels its sequence: the slot is freed, the
// request counts as cancelled, and the server serves the next request.
TEST_F(ServerTest, DisconnectingStreamFreesItsSlot) {
    const double cancelled = metric("klspec:request_cancelled_total");
    const double generated = metric("klspec:generation_tokens_total");
    httplib::Client c = client();
    httplib::Request request;
    request.method = "POST";
    request.path = "/v1/completions";
    request.body = json{
        {"prompt", "Once upon a time"},
        {"max_tokens", kContext},
        {"stream", true},
        {"temperature", 1.0},
        {"seed", 3}}.dump();
    request.set_header("Content-Type", "application/json");
    int chunks = 0;
    request.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 1; };
    httplib::Response response;
    httplib::Error error = httplib::Error::Success;
    EXPECT_FALSE(c.send(request, response, error));
    EXPECT_EQ(chunks, 1);
    c.stop();
    ASSERT_TRUE(wait_idle());
    EXPECT_EQ(metric("klspec:request_cancelled_total"), cancelled + 1);
    EXPECT_LT(metric("klspec:generation_tokens_total") - generated, kContext - 8) << "the sequence ran to its end";

    const HttpReply next =
        post("/v1/completions", json{{"prompt", "Tom and his dog went to the park."}, {"max_tokens", 8}});
    EXPECT_EQ(next.status, 200) << next.body;
}

TEST_F(ServerTest, ErrorsGetTheirStatusAndTheServerKeepsServing) {
    const std::string too_long_prompt = [] {
        std::string text;
        for (int i = 0; i < kContext; ++i) text += "the cat sat. ";
        return text;
    }();
    struct Case {
        std::string method, path, body;
        int status;
        std::string param;  // the error's param, "" when none
    };
    const std::vector<Case> cases = {
        {"POST", "/v1/completions", "{not json", 400, ""},
        {"POST", "/v1/completions", R"({"prompt": "x", "max_tokens": "many"})", 400, "max_tokens"},
        {"POST", "/v1/completions", R"({"prompt": "x", "judge": "oracle"})", 400, "judge"},
        {"POST", "/v1/completions", R"({"prompt": "x", "judge": "prob-threshold", "judge_threshold": 2})", 400,
         "judge_threshold"},
        {"POST", "/v1/completions", json{{"prompt", too_long_prompt}}.dump(), 400, "prompt"},
        {"POST", "/v1/completions", json{{"prompt", std::string(20000, 'a')}}.dump(), 413, ""},
        {"GET", "/v1/completions", "", 405, ""},
        {"POST", "/health", "{}", 405, ""},
        {"GET", "/tokenize", "", 405, ""},
        {"GET", "/detokenize", "", 405, ""},
        {"POST", "/props", "{}", 405, ""},
        {"POST", "/slots", "{}", 405, ""},
        {"POST", "/tokenize", R"({"content": 1})", 400, "content"},
        {"POST", "/detokenize", R"({"tokens": [1, "a"]})", 400, "tokens"},
        {"GET", "/v1/nothing", "", 404, ""},
        // autojudge needs a head file, which this server was not given.
        {"POST", "/v1/completions", R"({"prompt": "x", "judge": "autojudge", "judge_threshold": 0.5})", 400, "judge"},
    };
    for (const Case& c : cases) {
        const HttpReply reply = c.method == "GET" ? get(c.path) : post(c.path, c.body);
        EXPECT_EQ(reply.status, c.status)
            << c.method << " " << c.path << " " << c.body.substr(0, 80) << ": " << reply.body;
        const json error = json::parse(reply.body, nullptr, false);
        ASSERT_TRUE(error.contains("error")) << reply.body;
        EXPECT_TRUE(error["error"]["message"].is_string());
        if (!c.param.empty()) {
            EXPECT_EQ(error["error"]["param"], c.param) << reply.body;
        }
        if (c.body.size() > 1000 && c.status == 400) {
            EXPECT_EQ(error["error"]["code"], "context_length_exceeded") << reply.body;
        }
        const HttpReply ok = post("/v1/completions", json{{"prompt", "The cat was sad because"}, {"max_tokens", 4}});
        EXPECT_EQ(ok.status, 200) << "after " << c.path << ": " << ok.body;
    }
    // A max_tokens beyond the context is clamped: generation stops at the context (or the story's end). The
    // last generated token is never fed back, so prompt and output together hold at most one more than it.
    const HttpReply huge =
        post("/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 1'000'000'000'000}});
    ASSERT_EQ(huge.status, 200) << huge.body;
    EXPECT_LE(huge.parsed().at("usage").at("total_tokens").get<int>(), kContext + 1);
}

// A server whose drafts come from llama.cpp's n-gram drafter first: answers are still target-only greedy
// output, the n-gram's share shows in /metrics, and a request for a rule that reads the draft model is a 400.
TEST(NgramServer, AnswersAreLosslessAndRulesThatReadTheDraftAre400) {
    NgramOptions ngram;
    ngram.types = {"ngram-simple"};
    ngram.size_n = 2;
    ngram.size_m = 8;
    const TestServer server(test::kTargetModel, test::kDraftQ4, {}, ngram);
    SpeculativeDecoder target_only(server.target, nullptr, TestServer::context());
    double ngram_drafted = 0;
    for (const std::string& prompt : test::story_prompts(4)) {
        GenerationOptions options;
        options.max_tokens = 48;
        const std::string expected = target_only.generate(prompt, options).text;
        const HttpReply reply = call(server.port, "POST", "/v1/completions",
                                     json{{"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0}}.dump());
        ASSERT_EQ(reply.status, 200) << reply.body;
        EXPECT_EQ(reply.parsed().at("choices").at(0).at("text").get<std::string>(), expected) << prompt;
    }
    const std::string metrics = call(server.port, "GET", "/metrics").body;
    const std::string name = "klspec:spec_decode_num_ngram_draft_tokens_total ";
    const size_t at = metrics.find("\n" + name);
    ASSERT_NE(at, std::string::npos) << metrics;
    ngram_drafted = std::stod(metrics.substr(at + 1 + name.size()));
    EXPECT_GT(ngram_drafted, 0);
    const HttpReply kl = call(server.port, "POST", "/v1/completions",
                              json{{"prompt", "x"}, {"judge", "kl"}, {"judge_threshold", 0.5}}.dump());
    EXPECT_EQ(kl.status, 400) << kl.body;
    EXPECT_NE(kl.body.find("n-gram drafts do not have"), std::string::npos) << kl.body;
}

TEST_F(ServerTest, ModelsHealthAndMetrics) {
    const HttpReply models = get("/v1/models");
    ASSERT_EQ(models.status, 200);
    EXPECT_EQ(models.parsed().at("data").at(0).at("id"), "stories260K");
    EXPECT_EQ(get("/health").parsed().at("status"), "ok");

    const char* const counters[] = {"klspec:request_success_total",
                                    "klspec:prompt_tokens_total",
                                    "klspec:generation_tokens_total",
                                    "klspec:spec_decode_num_target_calls_total",
                                    "klspec:spec_decode_num_draft_tokens_total",
                                    "klspec:spec_decode_num_accepted_tokens_total"};
    std::vector<double> before;
    for (const char* name : counters) before.push_back(metric(name));
    const double relaxed = metric("klspec:spec_decode_num_relaxed_accepted_tokens_total");
    const HttpReply reply = post("/v1/completions", json{{"prompt", "Ben found a shiny stone"},
                                                         {"max_tokens", 24},
                                                         {"judge", "kl"},
                                                         {"judge_threshold", 50},
                                                         {"confidence_mask", 1}});
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json out = reply.parsed();
    for (size_t i = 0; i < std::size(counters); ++i) EXPECT_GT(metric(counters[i]), before[i]) << counters[i];
    EXPECT_EQ(metric("klspec:request_success_total"), before[0] + 1);
    EXPECT_EQ(metric("klspec:generation_tokens_total"),
              before[2] + out.at("usage").at("completion_tokens").get<double>());
    EXPECT_EQ(metric("klspec:spec_decode_num_relaxed_accepted_tokens_total"),
              relaxed + out.at("speculative").at("relaxed").get<double>());
    EXPECT_GT(metric("klspec:spec_decode_mean_accepted_tokens"), 1.0);
    EXPECT_EQ(metric("klspec:num_slots"), kSlots);
}

// llama-server's /tokenize and /detokenize: the model's own tokens (BOS only when asked for), pieces that
// add up to the text, and ids outside the vocabulary refused.
TEST_F(ServerTest, TokenizeAndDetokenize) {
    const std::string text = "Once upon a time, Lily<s>";
    const std::vector<int32_t> expected = server_->target.tokenize(text, /*add_bos=*/false, /*parse_special=*/true);
    const HttpReply plain = post("/tokenize", json{{"content", text}});
    ASSERT_EQ(plain.status, 200) << plain.body;
    EXPECT_EQ(plain.parsed().at("tokens").get<std::vector<int32_t>>(), expected);

    const HttpReply special = post("/tokenize", json{{"content", text}, {"add_special", true}, {"with_pieces", true}});
    ASSERT_EQ(special.status, 200) << special.body;
    const json pieces = special.parsed().at("tokens");
    ASSERT_EQ(pieces.size(), expected.size() + 1) << special.body;
    EXPECT_EQ(pieces.at(0).at("id"), server_->target.tokenize("", true, true).at(0));  // BOS
    std::vector<int32_t> ids;
    std::string joined;
    for (const json& piece : pieces) {
        ids.push_back(piece.at("id"));
        joined += piece.at("piece").get<std::string>();
    }
    EXPECT_EQ(std::vector<int32_t>(ids.begin() + 1, ids.end()), expected);
    EXPECT_NE(joined.find("Once upon a time, Lily"), std::string::npos) << joined;

    const HttpReply back = post("/detokenize", json{{"tokens", expected}});
    ASSERT_EQ(back.status, 200) << back.body;
    EXPECT_EQ(back.parsed().at("content"), joined);

    const int32_t n_vocab = server_->target.n_vocab();
    for (const json& tokens : {json::array({n_vocab}), json::array({-1}), json::array({1.5}), json("1 2")}) {
        const HttpReply bad = post("/detokenize", json{{"tokens", tokens}});
        EXPECT_EQ(bad.status, 400) << tokens;
        EXPECT_EQ(json::parse(bad.body).at("error").at("param"), "tokens") << bad.body;
    }
    EXPECT_EQ(post("/detokenize", json{{"tokens", {n_vocab - 1}}}).status, 200);
    EXPECT_EQ(post("/tokenize", json{{"text", text}}).status, 400);
}

// OpenAI's legacy echo, which lm-evaluation-harness scores loglikelihoods with: one choice per prompt of a
// list, token-id prompts as given, each prompt token after the first with the target's teacher-forced
// logprob (the first: null), offsets into the echoed text; a completion follows with its own logprobs.
TEST_F(ServerTest, EchoGivesEachPromptTokenTheTargetsLogprob) {
    const Model& target = server_->target;
    const std::vector<int32_t> first = target.tokenize("Once upon a time, Lily", true, true);
    const std::vector<int32_t> second = target.tokenize("The cat sat", false, true);
    const HttpReply reply =
        post("/v1/completions", json{{"prompt", {first, second}}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 2}});
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json out = reply.parsed();
    ASSERT_EQ(out.at("choices").size(), 2u);
    EXPECT_EQ(out.at("usage").at("prompt_tokens"), first.size() + second.size());
    EXPECT_EQ(out.at("usage").at("completion_tokens"), 0);
    const int32_t n_vocab = target.n_vocab();
    for (size_t c = 0; c < 2; ++c) {
        const std::vector<int32_t>& prompt = c == 0 ? first : second;
        const json& choice = out.at("choices")[c];
        EXPECT_EQ(choice.at("index"), c);
        const json& logprobs = choice.at("logprobs");
        ASSERT_EQ(logprobs.at("tokens").size(), prompt.size()) << logprobs;
        EXPECT_TRUE(logprobs.at("token_logprobs")[0].is_null());
        EXPECT_TRUE(logprobs.at("top_logprobs")[0].is_null());
        std::vector<float> logits;
        server_->server.run_on_decoder_thread(
            [&](SpeculativeDecoder& decoder) { logits = decoder.forward(ModelRole::Target, prompt, false, 0).logits; });
        std::string text;
        for (size_t i = 0; i < prompt.size(); ++i) {
            EXPECT_EQ(logprobs.at("text_offset")[i], text.size());
            text += target.piece(prompt[i]);
            if (i == 0) continue;
            const std::span<const float> row =
                std::span<const float>(logits).subspan((i - 1) * size_t(n_vocab), size_t(n_vocab));
            const TokenLogprobs expected = token_logprobs(row, prompt[i], 2);
            EXPECT_NEAR(logprobs.at("token_logprobs")[i].get<double>(), expected.chosen.logprob, 1e-5) << i;
            const json& top = logprobs.at("top_logprobs")[i];
            ASSERT_EQ(top.size(), 2u) << top;
            EXPECT_NEAR(top.at(target.piece(expected.top[0].token)).get<double>(), expected.top[0].logprob, 1e-5)
                << top;
        }
        EXPECT_EQ(choice.at("text"), text);
    }

    const json plain = post("/v1/completions", json{{"prompt", first}, {"max_tokens", 4}, {"logprobs", 1}}).parsed();
    const json echoed =
        post("/v1/completions", json{{"prompt", first}, {"max_tokens", 4}, {"logprobs", 1}, {"echo", true}}).parsed();
    const json& completion = plain.at("choices")[0];
    const json& whole = echoed.at("choices")[0];
    EXPECT_EQ(whole.at("text"),
              out.at("choices")[0].at("text").get<std::string>() + completion.at("text").get<std::string>());
    const json& completion_logprobs = completion.at("logprobs").at("token_logprobs");
    const json& whole_logprobs = whole.at("logprobs").at("token_logprobs");
    ASSERT_EQ(whole_logprobs.size(), first.size() + completion_logprobs.size());
    for (size_t i = 0; i < completion_logprobs.size(); ++i)
        EXPECT_EQ(whole_logprobs[first.size() + i], completion_logprobs[i]) << i;

    // Echo streams are refused, and token ids must be the vocabulary's.
    EXPECT_EQ(post("/v1/completions", json{{"prompt", "x"}, {"echo", true}, {"stream", true}}).status, 400);
    EXPECT_EQ(post("/v1/completions", json{{"prompt", {n_vocab}}, {"echo", true}}).status, 400);
}

// An echo's logprob pass leaves its cells as the slot's cached prompt: the completion after it decodes no prompt
// token again (every cached prompt token reused), and gives the tokens a plain request gives.
TEST_F(ServerTest, EchoReusesTheLogprobPassAsTheCachedPrompt) {
    const std::string prompt = "Zebras never nap at noon, said the old owl";  // shares no prefix with other tests'
    const size_t n_prompt = server_->target.tokenize(prompt, true, true).size();
    const json echoed =
        post("/v1/completions",
             json{{"prompt", prompt}, {"max_tokens", 6}, {"echo", true}, {"logprobs", 1}, {"cache_prompt", true}})
            .parsed();  // cache_prompt: serve's default, not this test server's
    EXPECT_EQ(echoed.at("usage").at("prompt_tokens"), n_prompt);
    EXPECT_EQ(echoed.at("usage").at("prompt_tokens_details").at("cached_tokens"), n_prompt - 1);  // all but the last
    const json plain = post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 6}}).parsed();
    const std::string echoed_text = echoed.at("choices")[0].at("text");
    EXPECT_TRUE(echoed_text.ends_with(plain.at("choices")[0].at("text").get<std::string>())) << echoed_text;
}

// add_bos_to_token_prompts: a token-id prompt without BOS is decoded as the text prompt (which gets one); one
// that starts with BOS keeps its one BOS; without the field the ids are the prompt as given.
TEST_F(ServerTest, TokenPromptsGetTheBosTheTextPromptGets) {
    const Model& target = server_->target;
    ASSERT_TRUE(target.prompt_bos_token());  // stories260K's prompts start with BOS
    const std::vector<int32_t> with_bos = target.tokenize("Once upon a time", true, true);
    const std::vector<int32_t> without_bos(with_bos.begin() + 1, with_bos.end());
    ASSERT_EQ(with_bos.front(), *target.prompt_bos_token());
    const auto completion = [&](const json& prompt, std::optional<bool> add_bos) {
        json body{{"prompt", prompt}, {"max_tokens", 8}, {"echo", true}, {"logprobs", 1}};
        if (add_bos) body["add_bos_to_token_prompts"] = *add_bos;
        const HttpReply reply = post("/v1/completions", body);
        EXPECT_EQ(reply.status, 200) << reply.body;
        return reply.parsed();
    };
    const json text = completion("Once upon a time", std::nullopt);
    EXPECT_EQ(text.at("usage").at("prompt_tokens"), with_bos.size());
    for (const json& prompt : {json(without_bos), json(with_bos)}) {
        const json ids = completion(prompt, true);
        EXPECT_EQ(ids.at("usage").at("prompt_tokens"), with_bos.size()) << prompt;
        EXPECT_EQ(ids.at("choices")[0].at("logprobs").at("tokens"), text.at("choices")[0].at("logprobs").at("tokens"));
        EXPECT_EQ(ids.at("choices")[0].at("text"), text.at("choices")[0].at("text")) << prompt;
    }
    EXPECT_EQ(completion(without_bos, false).at("usage").at("prompt_tokens"), without_bos.size());
    EXPECT_EQ(completion(without_bos, std::nullopt).at("usage").at("prompt_tokens"), without_bos.size());
}

// Seconds for each of `requests` POSTs of `body` to `path` on one kept-alive connection, each request sent in one
// write with TCP_NODELAY (as Python's http.client sends it), timed until its whole body is in; empty when the
// connection fails.
std::vector<double> kept_alive_reply_seconds(int port, const std::string& path, const std::string& body, int requests) {
    const int sock = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int on = 1;
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    std::vector<double> seconds;
    if (connect(sock, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) return close(sock), seconds;
    const std::string request = fmt::format(
        "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: {}\r\n\r\n{}",
        path, body.size(), body);
    for (int i = 0; i < requests; ++i) {
        const auto start = std::chrono::steady_clock::now();
        if (send(sock, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) break;
        std::string reply;
        size_t head_end = std::string::npos, length = 0;
        char buffer[4096];
        while (head_end == std::string::npos || reply.size() < head_end + 4 + length) {
            const ssize_t got = recv(sock, buffer, sizeof buffer, 0);
            if (got <= 0) return close(sock), std::vector<double>();
            reply.append(buffer, static_cast<size_t>(got));
            if (head_end == std::string::npos && (head_end = reply.find("\r\n\r\n")) != std::string::npos) {
                const size_t at = reply.find("Content-Length: ");
                length = at < head_end ? std::stoul(reply.substr(at + 16)) : 0;
            }
        }
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    close(sock);
    return seconds;
}

// A reply is two writes (headers, body): without TCP_NODELAY the body waited for the client's delayed ACK, 40-50 ms
// a request on a kept-alive connection (lm-evaluation-harness's loglikelihood requests took 37 s for 240 where
// they take 25). cpp-httplib keeps a connection for 5 requests; the first is answered at once either way.
TEST_F(ServerTest, KeptAliveConnectionsAnswerWithoutWaitingForAnAck) {
    std::vector<double> seconds =
        kept_alive_reply_seconds(port(), "/tokenize", R"({"content": "Once upon a time"})", 4);
    ASSERT_EQ(seconds.size(), 4u);
    seconds.erase(seconds.begin());
    std::sort(seconds.begin(), seconds.end());
    EXPECT_LT(seconds[1], 0.02) << "median of the kept-alive replies; a delayed ACK takes 40 ms";
}

// vLLM's /tokenizer_info, lm-evaluation-harness's remote tokenizer's first call: the special tokens' text
// (which /tokenize turns back into their ids) and the chat template.
TEST_F(ServerTest, TokenizerInfoNamesTheSpecialTokens) {
    const HttpReply reply = get("/tokenizer_info");
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json info = reply.parsed();
    const std::string bos = info.at("bos_token");
    const json tokenized = post("/tokenize", json{{"prompt", bos}, {"add_special_tokens", false}}).parsed();
    EXPECT_EQ(tokenized.at("tokens"), json::array({*server_->target.bos_token()})) << bos;
    EXPECT_TRUE(info.at("eos_token").is_string());
    EXPECT_NE(info.at("chat_template").get<std::string>().find("<|im_start|>"), std::string::npos);  // chatml
    EXPECT_EQ(info.at("model_max_length"), kContext);
}

TEST_F(ServerTest, PropsShowTheServersDefaults) {
    const HttpReply reply = get("/props");
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json props = reply.parsed();
    EXPECT_EQ(props.at("model_alias"), "stories260K");
    EXPECT_EQ(props.at("model_path"), test::kTargetModel);
    EXPECT_EQ(props.at("total_slots"), kSlots);
    EXPECT_EQ(props.at("target_repacked"), true) << "the default, where the kernel probe finds nothing amiss";
    const json& settings = props.at("default_generation_settings");
    EXPECT_EQ(settings.at("n_ctx"), kContext);
    const json& params = settings.at("params");
    EXPECT_EQ(params.at("max_tokens"), 32);
    EXPECT_EQ(params.at("draft_max"), GenerationOptions{}.draft_max);
    EXPECT_EQ(params.at("draft_policy"), "fixed");
    EXPECT_EQ(params.at("temperature"), 0.0);
    EXPECT_EQ(params.at("judge"), "vanilla");
    EXPECT_TRUE(params.at("judge_threshold").is_null());
    EXPECT_EQ(params.at("stop"), json::array());
}

// GET /slots while a stream decodes in one slot: that slot is busy with the request's judge; afterwards
// both are idle and the slot keeps the request's prompt length.
TEST_F(ServerTest, SlotsShowWhatEachSlotDecodes) {
    ASSERT_TRUE(wait_idle());
    json during;
    const json request = {{"prompt", "Once upon a time"},
                          {"max_tokens", kContext},
                          {"stream", true},
                          {"temperature", 1.0},
                          {"seed", 3},
                          {"judge", "kl"},
                          {"judge_threshold", 0.5}};
    const HttpReply streamed = stream(port(), "/v1/completions", request, [&](const std::string&) {
        if (during.is_null()) during = get("/slots").parsed();
    });
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    ASSERT_EQ(during.size(), size_t(kSlots)) << during;
    int busy = -1;
    for (size_t s = 0; s < during.size(); ++s) {
        EXPECT_EQ(during[s].at("id"), s);
        if (during[s].at("is_processing")) {
            busy = int(s);
            EXPECT_EQ(during[s].at("n_cached_tokens"), 0) << "the test server's requests do not cache";
        }
        EXPECT_EQ(during[s].at("judge"), during[s].at("is_processing") ? json("kl") : json(nullptr)) << during;
    }
    ASSERT_GE(busy, 0) << "no slot was processing during the stream: " << during;
    const int64_t prompt_tokens = json::parse(sse_events(streamed.body).rbegin()[1]).at("usage").at("prompt_tokens");
    EXPECT_EQ(during[busy].at("n_prompt_tokens"), prompt_tokens);

    ASSERT_TRUE(wait_idle());
    const json after = get("/slots").parsed();
    for (const json& slot : after) EXPECT_FALSE(slot.at("is_processing")) << after;
    EXPECT_EQ(after[busy].at("n_prompt_tokens"), prompt_tokens);
}

// Prompt caching: a request whose prompt extends a finished one's starts in that request's slot (the longest
// shared prefix), reuses its cells, says so in usage, and answers as an uncached request does.
TEST_F(ServerTest, PromptCacheReusesTheLongestSharedPrefix) {
    ASSERT_TRUE(wait_idle());
    const auto completion = [&](const std::string& prompt, bool cache) {
        const HttpReply reply =
            post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 24}, {"cache_prompt", cache}});
        EXPECT_EQ(reply.status, 200) << reply.body;
        return reply.parsed();
    };
    const std::string first = "Tom and his dog went to the park.";
    const json turn1 = completion(first, true);
    const std::string second = first + turn1.at("choices").at(0).at("text").get<std::string>() + " Then";
    const json cached = completion(second, true);
    const json uncached = completion(second, false);
    EXPECT_EQ(cached.at("choices").at(0).at("text"), uncached.at("choices").at(0).at("text"));
    const int64_t turn1_prompt = turn1.at("usage").at("prompt_tokens");
    const int64_t reused = cached.at("usage").at("prompt_tokens_details").at("cached_tokens");
    EXPECT_GE(reused, turn1_prompt - 1);
    EXPECT_LT(reused, cached.at("usage").at("prompt_tokens").get<int64_t>());
    EXPECT_EQ(uncached.at("usage").at("prompt_tokens_details").at("cached_tokens"), 0);
    // The uncached request took the other slot, sparing the cached one's cells.
    ASSERT_TRUE(wait_idle());
    int64_t kept = 0;
    for (const json& slot : get("/slots").parsed()) kept = std::max<int64_t>(kept, slot.at("n_cached_tokens"));
    EXPECT_GE(kept, cached.at("usage").at("prompt_tokens").get<int64_t>() - 1);
}

// stream_options.include_usage: OpenAI's extra last chunk (no choices, the usage) before [DONE]; without
// it none, and the last choice chunk still carries the usage (klspec's own).
TEST_F(ServerTest, StreamOptionsIncludeUsageAddsAUsageChunk) {
    json request = {{"prompt", "Tom had a red ball"}, {"max_tokens", 24}, {"stream", true}};
    for (const bool include_usage : {true, false}) {
        request["stream_options"] = {{"include_usage", include_usage}};
        const HttpReply reply = post("/v1/completions", request);
        ASSERT_EQ(reply.status, 200) << reply.body;
        const std::vector<std::string> events = sse_events(reply.body);
        ASSERT_GE(events.size(), 3u) << reply.body;
        EXPECT_EQ(events.back(), "[DONE]");
        const size_t choice_chunks = events.size() - (include_usage ? 2 : 1);
        for (size_t i = 0; i < choice_chunks; ++i)
            EXPECT_EQ(json::parse(events[i]).at("choices").size(), 1u) << events[i];
        const json last_choice = json::parse(events[choice_chunks - 1]);
        EXPECT_FALSE(last_choice.at("choices").at(0).at("finish_reason").is_null());
        if (!include_usage) continue;
        const json usage_chunk = json::parse(events[choice_chunks]);
        EXPECT_EQ(usage_chunk.at("choices"), json::array());
        EXPECT_EQ(usage_chunk.at("usage"), last_choice.at("usage"));
        EXPECT_EQ(usage_chunk.at("usage").at("completion_tokens"), 24);
        EXPECT_EQ(usage_chunk.at("id"), last_choice.at("id"));
        EXPECT_EQ(usage_chunk.at("object"), "text_completion");
    }
    request["stream"] = false;
    const HttpReply refused = post("/v1/completions", request);
    EXPECT_EQ(refused.status, 400) << refused.body;
    EXPECT_EQ(json::parse(refused.body).at("error").at("param"), "stream_options");
}

// With --api-key: every path but /health needs `Authorization: Bearer <key>`; a missing or wrong key is a
// 401 in OpenAI's shape, counted in klspec:request_error_total.
TEST(ServerAuth, EveryPathButHealthNeedsAKey) {
    TestServer server(test::kTargetModel, test::kDraftQ4, {"sk-alpha", "sk-beta-2"});
    const httplib::Headers right = {{"Authorization", "Bearer sk-beta-2"}};
    const auto errors = [&] {
        const std::string text = call(server.port, "GET", "/metrics", "", right).body;
        const std::string name = "\nklspec:request_error_total ";
        return std::stod(text.substr(text.find(name) + name.size()));
    };
    const double errors_before = errors();
    const std::vector<std::pair<std::string, std::string>> paths = {{"GET", "/"},
                                                                    {"GET", "/v1/models"},
                                                                    {"GET", "/props"},
                                                                    {"GET", "/slots"},
                                                                    {"GET", "/metrics"},
                                                                    {"POST", "/tokenize"},
                                                                    {"POST", "/detokenize"},
                                                                    {"POST", "/v1/completions"},
                                                                    {"POST", "/v1/chat/completions"},
                                                                    {"GET", "/no/such/path"}};
    int refused = 0;
    for (const auto& [method, path] : paths) {
        for (const httplib::Headers& wrong :
             {httplib::Headers{}, httplib::Headers{{"Authorization", "Bearer sk-alphA"}},
              httplib::Headers{{"Authorization", "sk-alpha"}},
              httplib::Headers{{"Authorization", "Bearer sk-alpha-"}}}) {
            const HttpReply reply = call(server.port, method, path, "{}", wrong);
            ++refused;
            EXPECT_EQ(reply.status, 401) << method << " " << path << ": " << reply.body;
            const json error = json::parse(reply.body, nullptr, false);
            ASSERT_TRUE(error.contains("error")) << reply.body;
            EXPECT_EQ(error["error"]["message"], "Invalid API Key");
            EXPECT_EQ(error["error"]["type"], "authentication_error");
            EXPECT_EQ(error["error"]["code"], "invalid_api_key");
        }
    }
    EXPECT_EQ(errors(), errors_before + refused);

    EXPECT_EQ(call(server.port, "GET", "/health").status, 200);
    EXPECT_EQ(call(server.port, "GET", "/v1/models", "", right).status, 200);
    EXPECT_EQ(call(server.port, "GET", "/no/such/path", "", right).status, 404);
    const HttpReply completion =
        call(server.port, "POST", "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 4}}.dump(),
             {{"Authorization", "Bearer sk-alpha"}});
    EXPECT_EQ(completion.status, 200) << completion.body;
}

// GET /health until it answers other than 200 (a drain began), for 10 s at most.
HttpReply health_once_not_ok(int port) {
    HttpReply health;
    for (int i = 0; i < 1000 && (health = call(port, "GET", "/health")).status == 200; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return health;
}

// The testbed pair, target-only: slow enough (a few ms a token) that a stream is still open while the test
// starts a drain and sends more requests.
struct DrainTest : ::testing::Test {
    TestServer server{test::kDefaultTarget, test::kDefaultDraft};
    const json request = {{"prompt",
                           "Q: Ella has 38 big cookies and 50 small cookies. She sells 46. She gives 3 away. "
                           "How many cookies does Ella have?\nA:"},
                          {"max_tokens", 200},
                          {"draft_policy", "off"}};
    json streamed_request() const {
        json streamed = request;
        streamed["stream"] = true;
        return streamed;
    }
    // Streams the request on its own thread; `first_chunk` is set once the first chunk arrived.
    std::future<HttpReply> open_stream(std::promise<void>& first_chunk, std::atomic<bool>& ended) {
        return std::async(std::launch::async, [&, port = server.port, body = streamed_request()] {
            bool first = true;
            HttpReply reply = stream(port, "/v1/completions", body, [&](const std::string& received) {
                if (std::exchange(first, false)) first_chunk.set_value();
                if (received.find("data: [DONE]") != std::string::npos) ended = true;
            });
            return reply;
        });
    }
    static std::string text(const HttpReply& streamed) {
        std::string out;
        for (const std::string& event : sse_events(streamed.body))
            if (event != "[DONE]") out += json::parse(event).at("choices").at(0).at("text").get<std::string>();
        return out;
    }
    static std::string last_finish_reason(const HttpReply& streamed) {
        const std::vector<std::string> events = sse_events(streamed.body);
        return events.size() < 2 ? "" : json::parse(events.rbegin()[1]).at("choices").at(0).at("finish_reason");
    }
};

// While a drain waits for an open stream: new requests (and every endpoint but /health, which says
// "draining") get 503 with Retry-After; the stream still ends whole, and then the drain returns.
TEST_F(DrainTest, OpenStreamFinishesWhileNewRequestsGet503) {
    const HttpReply whole = call(server.port, "POST", "/v1/completions", request.dump());
    ASSERT_EQ(whole.status, 200) << whole.body;
    const std::string expected = whole.parsed().at("choices").at(0).at("text");
    ASSERT_GT(whole.parsed().at("usage").at("completion_tokens").get<int>(), 30) << whole.body;

    std::promise<void> first_chunk;
    std::atomic<bool> ended = false;
    std::future<HttpReply> open = open_stream(first_chunk, ended);
    first_chunk.get_future().wait();
    std::vector<std::string> log;  // read once the drain returned
    std::future<bool> drained = std::async(std::launch::async, [&] {
        return server.server.drain(std::chrono::seconds(30), [&](const std::string& line) { log.push_back(line); });
    });
    const HttpReply health = health_once_not_ok(server.port);
    EXPECT_EQ(health.status, 503);
    EXPECT_EQ(health.parsed().at("status"), "draining");
    for (const auto& [method, path] : {std::pair{"POST", "/v1/completions"},
                                       {"POST", "/v1/chat/completions"},
                                       {"GET", "/v1/models"},
                                       {"POST", "/tokenize"},
                                       {"GET", "/metrics"}}) {
        const HttpReply refused = call(server.port, method, path, request.dump());
        EXPECT_EQ(refused.status, 503) << path << ": " << refused.body;
        const auto retry_after = refused.headers.find("Retry-After");
        ASSERT_NE(retry_after, refused.headers.end()) << path;
        EXPECT_EQ(retry_after->second, "30") << path;
        const json error = json::parse(refused.body, nullptr, false);
        EXPECT_EQ(error["error"]["type"], "server_error") << refused.body;
        EXPECT_EQ(error["error"]["code"], "server_shutting_down") << refused.body;
    }
    ASSERT_FALSE(ended) << "the stream ended before the drain's checks: they proved nothing";
    EXPECT_EQ(drained.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
        << "the drain returned while a stream was open";

    const HttpReply streamed = open.get();
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    EXPECT_EQ(sse_events(streamed.body).back(), "[DONE]");
    EXPECT_EQ(text(streamed), expected);
    EXPECT_TRUE(drained.get());
    ASSERT_EQ(log.size(), 2u);
    EXPECT_EQ(log[0], "drain started: new requests get 503; waiting up to 30 s for 1 request(s) in flight");
    EXPECT_TRUE(log[1].starts_with("drain ended: every request finished, after ")) << log[1];
}

// A drain whose timeout passes (0: at once) cancels what is left: the open stream ends with finish_reason
// "cancelled" and [DONE], its text a prefix of the whole answer, and the drain says it did not finish in time.
TEST_F(DrainTest, TimeoutCancelsOpenStreams) {
    const HttpReply whole = call(server.port, "POST", "/v1/completions", request.dump());
    ASSERT_EQ(whole.status, 200) << whole.body;
    const std::string expected = whole.parsed().at("choices").at(0).at("text");

    std::promise<void> first_chunk;
    std::atomic<bool> ended = false;
    std::future<HttpReply> open = open_stream(first_chunk, ended);
    first_chunk.get_future().wait();
    ASSERT_FALSE(ended);
    std::vector<std::string> log;
    EXPECT_FALSE(server.server.drain(std::chrono::seconds(0), [&](const std::string& line) { log.push_back(line); }));
    ASSERT_EQ(log.size(), 2u);
    EXPECT_EQ(log[0], "drain started: new requests get 503; waiting up to 0 s for 1 request(s) in flight");
    EXPECT_TRUE(
        log[1].starts_with("drain ended: 1 request(s) still running after 0 s were cancelled, all answered after "))
        << log[1];
    const HttpReply streamed = open.get();
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    EXPECT_EQ(sse_events(streamed.body).back(), "[DONE]");
    EXPECT_EQ(last_finish_reason(streamed), "cancelled");
    EXPECT_LT(text(streamed).size(), expected.size());
    EXPECT_EQ(expected.rfind(text(streamed), 0), 0u) << text(streamed);
}

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

// The text of an HTML fragment as Chromium serializes it: tags dropped, its few entities decoded.
std::string html_text(const std::string& html) {
    std::string text;
    for (size_t at = 0; at < html.size();) {
        if (html[at] == '<') {
            at = html.find('>', at) + 1;
            continue;
        }
        bool entity = false;
        for (const auto& [escaped, plain] : {std::pair{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&nbsp;", ' '}}) {
            if (html.compare(at, std::strlen(escaped), escaped) != 0) continue;
            text += plain;
            at += std::strlen(escaped);
            entity = true;
            break;
        }
        if (!entity) text += html[at++];
    }
    return text;
}

// The page at GET /, rendered by headless Chromium: a query string fills the form and submits it. The
// dumped DOM holds the streamed text (the prompt, then exactly the completion's text) as token spans of
// all three provenances, and the final chunk's MAT and relaxed count; the screenshot is drawn.
TEST_F(ServerTest, PageColoursTokensInHeadlessChromium) {
    const HttpReply page = get("/");
    ASSERT_EQ(page.status, 200);
    EXPECT_NE(page.body.find(R"(<option value="kl")"), std::string::npos) << "the judge list comes from judge_rules()";
    if (test::run_command("command -v chromium").exit_code != 0)
        GTEST_SKIP() << "chromium is not installed (scripts/setup-deps.sh installs it): the page was not rendered";

    const std::string prompt = "One day, a little girl named Lily";
    const json knobs = {
        {"judge", "kl"}, {"judge_threshold", 0.5}, {"confidence_mask", 1}, {"draft_max", 8}, {"max_tokens", 96}};
    const std::string url = "http://127.0.0.1:" + std::to_string(port()) +
                            "/?prompt=One%20day%2C%20a%20little%20girl%20named%20Lily&judge=kl&judge_threshold=0.5"
                            "&confidence_mask=1&draft_max=8&max_tokens=96&run=1";
    // Virtual time waits for the page's streaming request to end before the DOM is dumped.
    const std::string chromium =
        "(chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
        "--virtual-time-budget=60000 --window-size=1000,620 ";
    const test::CommandResult dom = test::run_command(chromium + "--dump-dom '" + url + "' 2>/dev/null)");
    ASSERT_EQ(dom.exit_code, 0) << dom.errors;

    json request = knobs;
    request["prompt"] = prompt;
    const HttpReply reply = post("/v1/completions", request);
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json expected = reply.parsed();
    const size_t output_at = dom.output.find(R"(<div id="output">)");
    const size_t summary_at = dom.output.find(R"(<div id="summary")");
    ASSERT_NE(output_at, std::string::npos) << dom.output;
    ASSERT_NE(summary_at, std::string::npos) << dom.output;
    const std::string output = dom.output.substr(output_at, dom.output.rfind("</div>", summary_at) - output_at);
    EXPECT_EQ(html_text(output), prompt + expected.at("choices").at(0).at("text").get<std::string>());
    for (const char* kind : {"draft", "relaxed", "target"})
        EXPECT_GT(count(output, std::string("class=\"tok ") + kind + "\""), 0u) << kind << " tokens missing:\n"
                                                                                << output;
    EXPECT_EQ(
        count(output,
              R"(class="tok relaxed" title="draft token the target disagreed with, kept by the judge: statistic )"),
        count(output, R"(class="tok relaxed")"));

    const std::string summary = dom.output.substr(summary_at, dom.output.find("</div>", summary_at) - summary_at);
    const json& spec = expected.at("speculative");
    ASSERT_GT(spec.at("relaxed").get<int>(), 0);
    EXPECT_NE(summary.find("MAT " + fmt::format("{:.2f}", spec.at("mat").get<double>()) + " · relaxed " +
                           std::to_string(spec.at("relaxed").get<int>()) + " · "),
              std::string::npos)
        << summary;
    EXPECT_NE(dom.output.find(R"(<b id="count-relaxed">)" + std::to_string(spec.at("relaxed").get<int>()) + "</b>"),
              std::string::npos);

    const std::string png = test::temp_path("serve-page.png");
    const test::CommandResult shot =
        test::run_command(chromium + "--screenshot=" + png + " '" + url + "' 2>/dev/null)");
    ASSERT_EQ(shot.exit_code, 0) << shot.errors;
    std::ifstream in(png, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GE(bytes.size(), 24u) << png;
    EXPECT_EQ(bytes.substr(0, 8), "\x89PNG\r\n\x1a\n");
    const auto be32 = [&](size_t at) {
        return uint32_t(uint8_t(bytes[at])) << 24 | uint32_t(uint8_t(bytes[at + 1])) << 16 |
               uint32_t(uint8_t(bytes[at + 2])) << 8 | uint32_t(uint8_t(bytes[at + 3]));
    };
    EXPECT_EQ(be32(16), 1000u);  // IHDR: the window's width and height
    EXPECT_EQ(be32(20), 620u);
    EXPECT_GT(bytes.size(), 20'000u) << "a blank page compresses to a few kB";
}

// A model without a chat template gets ChatML, as from llama-server.
TEST_F(ServerTest, ChatWithoutATemplateIsChatml) {
    EXPECT_EQ(server_->server.chat_template().origin(), "chatml (the model has none)");
    const HttpReply chat =
        post("/v1/chat/completions",
             json{{"messages", json::array({json{{"role", "user"}, {"content", "Hi"}}})}, {"max_tokens", 16}});
    const HttpReply completion =
        post("/v1/completions",
             json{{"prompt", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"}, {"max_tokens", 16}});
    ASSERT_EQ(chat.status, 200) << chat.body;
    ASSERT_EQ(completion.status, 200) << completion.body;
    EXPECT_EQ(chat.parsed().at("choices").at(0).at("message").at("content"),
              completion.parsed().at("choices").at(0).at("text"));
    EXPECT_EQ(chat.parsed().at("usage"), completion.parsed().at("usage"));
}

// A chat completion on a model with a (ChatML) template: the answer is the completion of the templated
// prompt, plain and streamed.
TEST_F(ChatServerTest, ChatCompletionIsTheCompletionOfTheTemplatedPrompt) {
    const json messages = json::array({json{{"role", "system"}, {"content", "You tell stories."}},
                                       json{{"role", "user"}, {"content", "Tell me a story."}}});
    const HttpReply chat = post("/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 32}});
    ASSERT_EQ(chat.status, 200) << chat.body;
    const HttpReply completion = post("/v1/completions", json{{"prompt",
                                                               "<|im_start|>system\nYou tell stories.<|im_end|>\n"
                                                               "<|im_start|>user\nTell me a story.<|im_end|>\n"
                                                               "<|im_start|>assistant\n"},
                                                              {"max_tokens", 32}});
    ASSERT_EQ(completion.status, 200) << completion.body;
    const json out = chat.parsed();
    const json expected = completion.parsed();
    EXPECT_EQ(out.at("object"), "chat.completion");
    EXPECT_EQ(out.at("id").get<std::string>().rfind("chatcmpl-", 0), 0u);
    const json& choice = out.at("choices").at(0);
    EXPECT_EQ(choice.at("message").at("role"), "assistant");
    EXPECT_EQ(choice.at("message").at("content"), expected.at("choices").at(0).at("text"));
    EXPECT_FALSE(choice.at("message").at("content").get<std::string>().empty());
    EXPECT_EQ(choice.at("finish_reason"), expected.at("choices").at(0).at("finish_reason"));
    EXPECT_EQ(out.at("usage"), expected.at("usage"));

    const HttpReply streamed =
        post("/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 32}, {"stream", true}});
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    const std::vector<std::string> events = sse_events(streamed.body);
    ASSERT_GE(events.size(), 3u) << streamed.body;
    EXPECT_EQ(events.back(), "[DONE]");
    std::string content;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
        const json chunk = json::parse(events[i]);
        EXPECT_EQ(chunk.at("object"), "chat.completion.chunk");
        const json& delta = chunk.at("choices").at(0).at("delta");
        EXPECT_EQ(delta.contains("role"), i == 0) << events[i];
        content += delta.value("content", "");
    }
    EXPECT_EQ(content, choice.at("message").at("content").get<std::string>());
}

std::string last_line(std::string text) {
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text.substr(text.rfind('\n') + 1);
}

// The official OpenAI client library (npm `openai`, Node.js) against the server: completions and chat
// completions, plain and streamed, come back whole and equal to what the server answers directly.
TEST_F(ChatServerTest, OfficialOpenAiNodeClient) {
    if (test::run_command("command -v node").exit_code != 0)
        GTEST_SKIP() << "node is not installed: the OpenAI client library was not tried";
    const test::CommandResult install =
        test::run_command("bash " + std::string(build_paths::source_dir) + "/scripts/npm-openai.sh");
    if (install.exit_code != 0) GTEST_SKIP() << "no OpenAI client library: " << install.output;
    const test::CommandResult client = test::run_command(
        "NODE_PATH='" + last_line(install.output) + "' node " + build_paths::source_dir +
        "/tests/server/openai_client.cjs http://127.0.0.1:" + std::to_string(port()) + "/v1 stories260K");
    ASSERT_EQ(client.exit_code, 0) << client.errors;
    const json got = json::parse(client.output);

    const HttpReply completion = post("/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 32}});
    const json messages = json::array({json{{"role", "user"}, {"content", "Tell me a story."}}});
    const HttpReply chat =
        post("/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 32}, {"logprobs", true}});
    ASSERT_EQ(completion.status, 200) << completion.body;
    ASSERT_EQ(chat.status, 200) << chat.body;
    const json expected_completion = completion.parsed().at("choices").at(0);
    const std::string expected_chat = chat.parsed().at("choices").at(0).at("message").at("content");
    EXPECT_EQ(got.at("completion"), expected_completion.at("text"));
    EXPECT_EQ(got.at("completion_finish_reason"), expected_completion.at("finish_reason"));
    EXPECT_EQ(got.at("completion_tokens"), 32);
    EXPECT_EQ(got.at("completion_streamed"), expected_completion.at("text"));
    EXPECT_FALSE(expected_chat.empty());
    EXPECT_EQ(got.at("chat"), expected_chat);
    EXPECT_EQ(got.at("chat_role"), "assistant");
    EXPECT_EQ(got.at("chat_streamed"), expected_chat);
    EXPECT_EQ(got.at("chat_streamed_role"), "assistant");
    json expected_tokens = json::array();
    const json chat_logprobs = chat.parsed().at("choices").at(0).at("logprobs");
    for (const json& entry : chat_logprobs.at("content")) expected_tokens.push_back(entry.at("token"));
    EXPECT_EQ(expected_tokens.size(), 32u);
    EXPECT_EQ(got.at("chat_logprob_tokens"), expected_tokens);
    EXPECT_EQ(got.at("chat_streamed_logprob_tokens"), expected_tokens);
    EXPECT_EQ(got.at("chat_top_logprobs"), json(std::vector<int>(32, 2)));
    EXPECT_EQ(got.at("models"), json::array({"stories260K"}));
}

// `klspec serve ARGS` spawned with its stdout on a pipe, read until it says where it listens.
struct ServeProcess {
    pid_t pid = 0;
    int port = -1;          // -1: it did not start
    std::string listening;  // its first line
    FILE* output = nullptr;

    explicit ServeProcess(std::vector<std::string> args) {
        int out[2];
        if (pipe(out) != 0) return;
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
        posix_spawn_file_actions_addclose(&actions, out[0]);
        args.insert(args.begin(), {test::kCli, "serve", "--port", "0", "-t", "1"});
        const std::vector<std::string> offload = test::offload_args();
        args.insert(args.begin() + 2, offload.begin(), offload.end());
        std::vector<char*> argv;
        for (std::string& arg : args) argv.push_back(arg.data());
        argv.push_back(nullptr);
        const int spawned = posix_spawn(&pid, test::kCli.c_str(), &actions, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        close(out[1]);
        output = fdopen(out[0], "r");
        char line[512] = {};
        if (spawned != 0 || fgets(line, sizeof line, output) == nullptr) return;
        listening = line;
        const std::string marker = "http://127.0.0.1:";
        if (listening.find(marker) != std::string::npos)
            port = std::stoi(listening.substr(listening.find(marker) + marker.size()));
    }
    ~ServeProcess() {
        if (pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
        if (output) fclose(output);
    }
    // Its exit status, or -1 when a signal killed it.
    int wait_exit_status() {
        int status = 0;
        const pid_t waited = waitpid(pid, &status, 0);
        pid = 0;
        return waited > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
};

// The CLI: `klspec serve` prints its address, answers, and exits 0 on SIGTERM.
TEST(ServeCommand, ListensAnswersAndStopsOnSigterm) {
    ServeProcess serve({"-m", test::kTargetModel, "-md", test::kDraftQ4, "-c", "256", "-np", "2", "--judge", "kl",
                        "--judge-threshold", "0.5"});
    ASSERT_GT(serve.port, 0) << serve.listening;
    EXPECT_NE(serve.listening.find("judge kl"), std::string::npos) << serve.listening;

    const HttpReply reply =
        call(serve.port, "POST", "/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 16})");
    EXPECT_EQ(reply.status, 200) << reply.body;
    EXPECT_EQ(json::parse(reply.body).at("speculative").at("judge"), "kl");  // the server's default rule

    kill(serve.pid, SIGTERM);
    EXPECT_EQ(serve.wait_exit_status(), 0);
}

// Keys from --api-key-file (blank lines and a CRLF end skipped) and --api-key; SIGTERM while a stream is open
// (the testbed pair, target-only: a few ms a token): new requests get 503, the stream still ends whole, and
// the process exits 0.
TEST(ServeCommand, SigtermLetsAnOpenStreamEndThenExitsZero) {
    const std::string keys = test::temp_path("serve-keys.txt");
    std::ofstream(keys) << "\nsk-file-one\n\n  sk-file-two \r\n";
    ServeProcess serve({"-m", test::kDefaultTarget, "-md", test::kDefaultDraft, "-c", "512", "-np", "2",
                        "--api-key-file", keys, "--api-key", "sk-flag", "--drain-timeout", "20"});
    ASSERT_GT(serve.port, 0) << serve.listening;
    const json request = {{"prompt",
                           "Q: Ella has 38 big cookies and 50 small cookies. She sells 46. She gives 3 away. "
                           "How many cookies does Ella have?\nA:"},
                          {"max_tokens", 200},
                          {"draft_policy", "off"}};
    EXPECT_EQ(call(serve.port, "POST", "/v1/completions", request.dump()).status, 401);
    for (const char* key : {"sk-file-one", "sk-flag"})
        EXPECT_EQ(call(serve.port, "GET", "/v1/models", "", {{"Authorization", std::string("Bearer ") + key}}).status,
                  200)
            << key;
    const httplib::Headers auth = {{"Authorization", "Bearer sk-file-two"}};
    const HttpReply whole = call(serve.port, "POST", "/v1/completions", request.dump(), auth);
    ASSERT_EQ(whole.status, 200) << whole.body;

    json streamed_request = request;
    streamed_request["stream"] = true;
    std::atomic<bool> ended = false;
    std::future<HttpReply> open = std::async(std::launch::async, [&] {
        bool first = true;
        return stream(
            serve.port, "/v1/completions", streamed_request,
            [&](const std::string& received) {
                if (std::exchange(first, false)) kill(serve.pid, SIGTERM);
                if (received.find("data: [DONE]") != std::string::npos) ended = true;
            },
            auth);
    });
    const HttpReply health = health_once_not_ok(serve.port);  // the stop watcher looks every 100 ms
    EXPECT_EQ(health.status, 503) << health.body;
    const HttpReply refused = call(serve.port, "POST", "/v1/completions", request.dump(), auth);
    EXPECT_EQ(refused.status, 503) << refused.body;
    EXPECT_FALSE(ended) << "the stream ended before the drain began: the test proved nothing";

    const HttpReply streamed = open.get();
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    const std::vector<std::string> events = sse_events(streamed.body);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back(), "[DONE]");
    std::string text;
    for (size_t i = 0; i + 1 < events.size(); ++i)
        text += json::parse(events[i]).at("choices").at(0).at("text").get<std::string>();
    EXPECT_EQ(text, whole.parsed().at("choices").at(0).at("text").get<std::string>());
    EXPECT_EQ(serve.wait_exit_status(), 0);
}

// A key file that cannot be read or holds no key, or an empty --api-key, stops serve before it loads a
// model (the "model" here is a text file: loading it would fail with another reason): one line on stderr,
// exit 1.
TEST(ServeCommand, BadApiKeysAreAOneLineError) {
    const std::string blank = test::temp_path("blank-keys.txt");
    std::ofstream(blank) << "\n  \n\r\n";
    const std::pair<std::string, std::string> cases[] = {
        {"--api-key-file " + test::temp_path("no-such-file"), "cannot read it"},
        {"--api-key-file " + blank, "holds no key"},
        {"--api-key ''", "an API key cannot be empty"},
    };
    for (const auto& [flags, reason] : cases) {
        const test::CommandResult result = test::run_command(test::kCli + " serve -m " + blank + " " + flags);
        EXPECT_EQ(result.exit_code, 1) << flags << ": " << result.errors;
        EXPECT_NE(result.errors.find(reason), std::string::npos) << flags << ": " << result.errors;
        EXPECT_EQ(std::count(result.errors.begin(), result.errors.end(), '\n'), 1) << result.errors;
        EXPECT_EQ(result.output, "") << flags;
    }
}

// A second server on a port in use stops with one line, as llama-server: with the SO_REUSEPORT that Debian's
// cpp-httplib sets by default it listened too, and took half of the first one's connections.
TEST(ServeCommand, APortInUseIsAOneLineError) {
    ServeProcess first({"-m", test::kTargetModel, "-md", test::kDraftQ4, "-c", "256"});
    ASSERT_GT(first.port, 0) << first.listening;
    const test::CommandResult second =
        test::run_command(fmt::format("timeout 60 {} serve -m {} -md {} -c 256 -t 1 --port {}", test::kCli,
                                      test::kTargetModel, test::kDraftQ4, first.port));
    EXPECT_EQ(second.exit_code, 1) << second.output << second.errors;
    EXPECT_NE(second.errors.find(fmt::format("cannot listen on 127.0.0.1:{}", first.port)), std::string::npos)
        << second.errors;
    EXPECT_EQ(std::count(second.errors.begin(), second.errors.end(), '\n'), 1) << second.errors;
}

// libgomp keeps an OpenMP team for each thread that ever starts one. With two (the models' start-up decoding on the
// main thread, the steps on the decoding thread) it manages more threads than cores and cuts every barrier's spin
// from 300,000 to 100: on the real pair the compute threads then slept ~680 times a second and one client got
// 0.5-0.7x llama-server (docs/server.md, "One OpenMP team"). So `-t 2` adds one OpenMP worker to `-t 1`, not two.
// The Q8_0 target: a repackable one, whose kernel probe decodes at start-up.
TEST(ServeCommand, DecodesWithOneOpenMpTeam) {
    const auto threads_after_a_request = [](const char* threads) {
        ServeProcess serve({"-m", test::kDraftQ8, "-md", test::kDraftQ4, "-c", "256", "-t", threads});
        EXPECT_GT(serve.port, 0) << serve.listening;
        if (serve.port <= 0) return -1;
        EXPECT_EQ(
            call(serve.port, "POST", "/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 8})").status,
            200);
        const auto tasks = std::filesystem::directory_iterator(fmt::format("/proc/{}/task", serve.pid));
        return static_cast<int>(std::distance(std::filesystem::begin(tasks), std::filesystem::end(tasks)));
    };
    EXPECT_EQ(threads_after_a_request("2") - threads_after_a_request("1"), 1);
}

// A chat template that cannot serve stops `klspec serve` before it listens: one line, exit 1.
TEST(ServeCommand, BadChatTemplatesAreAOneLineError) {
    const std::string broken = test::temp_path("broken.jinja");
    std::ofstream(broken) << "{% for m in messages %}{{ m.content }";
    const std::pair<std::string, std::string> cases[] = {
        {"--chat-template " + broken, "chat template (file " + broken + "): "},
        {"--chat-template no-such-template", "neither a file nor a built-in template"},
        {"--chat-template-file " + test::temp_path("no-such.jinja"), "--chat-template-file"},
    };
    for (const auto& [flags, reason] : cases) {
        const test::CommandResult result = test::run_command(test::kCli + " serve -m " + test::kTargetModel + " -md " +
                                                             test::kDraftQ4 + " --port 0 -t 1 " + flags);
        EXPECT_EQ(result.exit_code, 1) << flags << ": " << result.errors;
        EXPECT_NE(result.errors.find(reason), std::string::npos) << flags << ": " << result.errors;
        EXPECT_EQ(std::count(result.errors.begin(), result.errors.end(), '\n'), 1) << result.errors;
        EXPECT_EQ(result.output, "") << flags;
    }
}

}  // namespace
}  // namespace klspec::server
