// A fuzz test of the request parser: tens of thousands of malformed and hostile bodies, built by a seeded
// generator from valid ones, never crash it; each gets either a usable request or a one-line 4xx error.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/request.h"

namespace klspec::server {
namespace {

// Values a client could send for any field: every JSON type, extremes, and deep nesting.
nlohmann::json hostile_value(std::mt19937_64& rng) {
    switch (rng() % 16) {
        case 0:
            return nullptr;
        case 1:
            return true;
        case 2:
            return -1;
        case 3:
            return 0;
        case 4:
            return int64_t(rng());  // huge
        case 5:
            return -1e308;
        case 6:
            return 1e-320;  // denormal
        case 7:
            return 0.5;
        case 8:
            return "";
        case 9:
            return std::string(1 + rng() % 5000, 'x');
        case 10:
            return "kl";
        case 11:
            return "\xff\xfe not UTF-8";
        case 12:
            return nlohmann::json::array({1, "a", nullptr});
        case 13:
            return nlohmann::json::object({{"a", 1}});
        case 14: {
            nlohmann::json deep = 1;
            for (int i = 0; i < 200; ++i) deep = nlohmann::json::array({deep});
            return deep;
        }
        default:
            return std::vector<std::string>{"stop", ""};
    }
}

// A body: a valid request with some fields replaced by hostile values, serialised, and sometimes cut,
// with bytes flipped or inserted.
std::string fuzzed_body(std::mt19937_64& rng, Endpoint endpoint) {
    static const std::vector<std::string> fields = {
        "prompt", "messages", "judge", "judge_threshold", "judge_topk", "confidence_mask", "draft_max", "temperature",
        "top_k",  "top_p",    "seed",  "max_tokens",      "stop",       "stream",          "model"};
    nlohmann::json body = {{"max_tokens", 16}, {"judge", "kl"}, {"judge_threshold", 0.3}};
    if (endpoint == Endpoint::Completions)
        body["prompt"] = "Once upon a time";
    else
        body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}});
    for (int k = int(rng() % 4); k > 0; --k) body[fields[rng() % fields.size()]] = hostile_value(rng);
    std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    switch (rng() % 4) {
        case 0:
            text.resize(rng() % (text.size() + 1));
            break;  // cut
        case 1:
            text[rng() % text.size()] = char(rng());
            break;  // a byte flipped
        case 2:
            text.insert(rng() % text.size(), 1, "{}[]\",:\\\0"[rng() % 9]);
            break;  // a token inserted
        default:
            break;
    }
    return text;
}

TEST(ServerRequestFuzz, HostileBodiesGiveARequestOrAOneLine4xx) {
    RequestDefaults defaults;
    defaults.generation.max_tokens = 64;
    defaults.n_ctx = 512;
    std::mt19937_64 rng(20261123);
    size_t accepted = 0, refused = 0;
    for (int i = 0; i < 20000; ++i) {
        const Endpoint endpoint = i % 2 ? Endpoint::Completions : Endpoint::ChatCompletions;
        const std::string body = fuzzed_body(rng, endpoint);
        std::variant<CompletionRequest, ApiError> parsed;
        ASSERT_NO_THROW(parsed = parse_completion_request(body, endpoint, defaults)) << body;
        if (const ApiError* error = std::get_if<ApiError>(&parsed)) {
            ++refused;
            EXPECT_GE(error->status, 400) << body;
            EXPECT_LT(error->status, 500) << body;
            EXPECT_FALSE(error->message.empty()) << body;
            EXPECT_EQ(error->message.find('\n'), std::string::npos) << error->message;
            EXPECT_NO_THROW((void)error->to_json().dump()) << body;
        } else {
            ++accepted;
            const CompletionRequest& request = std::get<CompletionRequest>(parsed);
            ASSERT_NE(request.generation.judge, nullptr) << body;
            EXPECT_NO_THROW(validate(request.generation)) << body;
            EXPECT_LE(request.generation.max_tokens, defaults.n_ctx) << body;
        }
    }
    // Both outcomes occur: the generator is not refusing (or accepting) everything.
    EXPECT_GT(accepted, 1000u);
    EXPECT_GT(refused, 1000u);
}

}  // namespace
}  // namespace klspec::server
