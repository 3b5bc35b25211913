// Request parsing and validation of `klspec serve` (src/server/request.h): no model, no sockets.
#include <gtest/gtest.h>

#include <span>

#include <fmt/format.h>

#include "server/request.h"

namespace klspec::server {
namespace {

RequestDefaults server_defaults() {
    RequestDefaults defaults;
    defaults.generation.max_tokens = 64;
    defaults.n_ctx = 512;
    defaults.n_vocab = 100;
    return defaults;
}

CompletionRequest parse_ok(std::string_view body, Endpoint endpoint = Endpoint::Completions,
                           const RequestDefaults& defaults = server_defaults()) {
    auto parsed = parse_completion_request(body, endpoint, defaults);
    if (const ApiError* error = std::get_if<ApiError>(&parsed)) ADD_FAILURE() << body << ": " << error->message;
    return std::get<CompletionRequest>(std::move(parsed));
}

ApiError parse_error(std::string_view body, Endpoint endpoint = Endpoint::Completions,
                     const RequestDefaults& defaults = server_defaults()) {
    auto parsed = parse_completion_request(body, endpoint, defaults);
    if (!std::holds_alternative<ApiError>(parsed)) {
        ADD_FAILURE() << body << " was accepted";
        return {};
    }
    return std::get<ApiError>(parsed);
}

// Each {body, field}: the body is a 400 whose param names the field.
void expect_400_naming_the_field(std::span<const std::pair<const char*, const char*>> cases) {
    for (const auto& [body, param] : cases) {
        const ApiError error = parse_error(body);
        EXPECT_EQ(error.status, 400) << body;
        EXPECT_EQ(error.param, param) << body << ": " << error.message;
    }
}

TEST(ServerRequest, MinimalCompletionTakesTheServerDefaults) {
    const CompletionRequest request = parse_ok(R"({"prompt": "Once upon a time", "model": "any"})");
    ASSERT_EQ(request.prompts.size(), 1u);
    EXPECT_EQ(request.prompts[0].text, "Once upon a time");
    EXPECT_FALSE(request.prompts[0].tokens);
    EXPECT_FALSE(request.echo);
    EXPECT_EQ(request.generation.max_tokens, 64);
    EXPECT_FALSE(request.stream);
    ASSERT_NE(request.generation.judge, nullptr);
    EXPECT_EQ(request.generation.judge->name(), "vanilla");
}

// OpenAI's four prompt shapes; token ids are kept as given (no BOS is added to them).
TEST(ServerRequest, PromptsAreTextTokenIdsOrListsOfEither) {
    const CompletionRequest texts = parse_ok(R"({"prompt": ["first", "second"], "echo": true})");
    ASSERT_EQ(texts.prompts.size(), 2u);
    EXPECT_EQ(texts.prompts[1].text, "second");
    EXPECT_TRUE(texts.echo);
    const CompletionRequest ids = parse_ok(R"({"prompt": [7, 0, 99]})");
    ASSERT_EQ(ids.prompts.size(), 1u);
    EXPECT_EQ(ids.prompts[0].tokens, (std::vector<int32_t>{7, 0, 99}));
    const CompletionRequest lists =
        parse_ok(R"({"prompt": [[1, 2], [3]], "max_tokens": 0, "echo": true, "logprobs": 1})");
    ASSERT_EQ(lists.prompts.size(), 2u);
    EXPECT_EQ(lists.prompts[0].tokens, (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(lists.prompts[1].tokens, (std::vector<int32_t>{3}));
    EXPECT_EQ(lists.generation.max_tokens, 0);
    EXPECT_EQ(lists.generation.logprobs, 1);
    // Chat has no echo: the field is ignored there, as OpenAI clients may send it.
    EXPECT_FALSE(
        parse_ok(R"({"messages": [{"role": "user", "content": "x"}], "echo": true})", Endpoint::ChatCompletions).echo);
}

// Whether token-id prompts get a BOS: the server's default, which a request's field overrides either way.
TEST(ServerRequest, AddBosToTokenPromptsTakesTheDefaultOrTheRequestsField) {
    RequestDefaults with_bos = server_defaults();
    with_bos.add_bos_to_token_prompts = true;
    EXPECT_FALSE(parse_ok(R"({"prompt": [1, 2]})").add_bos_to_token_prompts);
    EXPECT_TRUE(parse_ok(R"({"prompt": [1, 2]})", Endpoint::Completions, with_bos).add_bos_to_token_prompts);
    EXPECT_TRUE(parse_ok(R"({"prompt": [1, 2], "add_bos_to_token_prompts": true})").add_bos_to_token_prompts);
    EXPECT_FALSE(parse_ok(R"({"prompt": [1, 2], "add_bos_to_token_prompts": false})", Endpoint::Completions, with_bos)
                     .add_bos_to_token_prompts);
}

TEST(ServerRequest, FieldsOverrideTheDefaults) {
    const CompletionRequest request = parse_ok(
        R"({"prompt": "x", "judge": "kl", "judge_threshold": 0.5, "confidence_mask": 0.8, "draft_max": 4,
            "temperature": 0.7, "top_k": 40, "top_p": 0.9, "seed": 7, "max_tokens": 10, "stream": true})");
    const GenerationOptions& gen = request.generation;
    EXPECT_EQ(gen.judge->name(), "kl");
    EXPECT_EQ(gen.draft_max, 4);
    EXPECT_FLOAT_EQ(gen.sampling.temperature, 0.7f);
    EXPECT_EQ(gen.sampling.top_k, 40);
    EXPECT_FLOAT_EQ(gen.sampling.top_p, 0.9f);
    EXPECT_EQ(gen.sampling.seed, 7u);
    EXPECT_EQ(gen.max_tokens, 10);
    EXPECT_TRUE(request.stream);
}

TEST(ServerRequest, JudgeSpanTakesTheServersReasoningMarkersForThink) {
    RequestDefaults defaults = server_defaults();
    EXPECT_TRUE(parse_ok(R"({"prompt": "x"})").generation.judge_span.is_all());
    EXPECT_EQ(parse_ok(R"({"prompt": "x", "judge_span": "until:The answer is"})").generation.judge_span.to_string(),
              "until:The answer is");
    EXPECT_EQ(parse_ok(R"({"prompt": "x", "judge_span": "think:<a>,</a>"})").generation.judge_span.to_string(),
              "think:<a>,</a>");
    // think: the markers of the server's template, or a 400 when it has none.
    const ApiError none = parse_error(R"({"prompt": "x", "judge_span": "think"})");
    EXPECT_EQ(none.status, 400);
    EXPECT_EQ(none.param, "judge_span");
    EXPECT_NE(none.message.find("marks no reasoning span"), std::string::npos) << none.message;
    defaults.reasoning_span = JudgeSpan::parse("think:<think>,</think>");
    EXPECT_EQ(parse_ok(R"({"prompt": "x", "judge_span": "think"})", Endpoint::Completions, defaults)
                  .generation.judge_span.to_string(),
              "think:<think>,</think>");
    const std::pair<const char*, const char*> bad[] = {{R"({"prompt": "x", "judge_span": "until:"})", "judge_span"},
                                                       {R"({"prompt": "x", "judge_span": "sometimes"})", "judge_span"},
                                                       {R"({"prompt": "x", "judge_span": 3})", "judge_span"}};
    expect_400_naming_the_field(bad);
}

TEST(ServerRequest, MalformedJsonIs400) {
    for (const char* body : {"{", "not json", R"({"prompt": "x",})", ""}) {
        const ApiError error = parse_error(body);
        EXPECT_EQ(error.status, 400) << body;
        EXPECT_NE(error.message.find("JSON"), std::string::npos) << error.message;
    }
    EXPECT_EQ(parse_error(R"(["prompt"])").status, 400);
}

TEST(ServerRequest, WrongTypesNameTheField) {
    const std::pair<const char*, const char*> cases[] = {
        {R"({"prompt": 5})", "prompt"},
        {R"({"prompt": ["a", 5]})", "prompt"},
        {R"({"prompt": []})", "prompt"},
        {R"({"prompt": [[]]})", "prompt"},
        {R"({"prompt": [1, "a"]})", "prompt"},
        {R"({"prompt": [1, 100]})", "prompt"},
        {R"({"prompt": [[1], [-1]]})", "prompt"},
        {R"({"prompt": [1.5]})", "prompt"},
        {R"({"prompt": {"text": "x"}})", "prompt"},
        {R"({"prompt": "x", "echo": 1})", "echo"},
        {R"({"prompt": [1], "add_bos_to_token_prompts": "yes"})", "add_bos_to_token_prompts"},
        {R"({"prompt": "x", "echo": true, "stream": true})", "echo"},
        {R"({"prompt": ["x", "y"], "stream": true})", "prompt"},
        {R"({"prompt": "x", "temperature": "hot"})", "temperature"},
        {R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens"},
        {R"({"prompt": "x", "max_tokens": -1})", "max_tokens"},
        {R"({"prompt": "x", "stream": "yes"})", "stream"},
        {R"({"prompt": "x", "top_p": 0})", "top_p"},
        {R"({"prompt": "x", "top_k": -2})", "top_k"},
        {R"({"prompt": "x", "draft_max": 0})", "draft_max"},
        {R"({"prompt": "x", "seed": -1})", "seed"},
        {R"({"prompt": "x", "judge": 3})", "judge"},
        {R"({"prompt": "x", "judge": "topk", "judge_topk": "five"})", "judge_topk"},
        {R"({"max_tokens": 4})", "prompt"},
    };
    for (const auto& [body, param] : cases) {
        const ApiError error = parse_error(body);
        EXPECT_EQ(error.status, 400) << body;
        EXPECT_EQ(error.param, param) << body << ": " << error.message;
        EXPECT_EQ(error.type, "invalid_request_error");
    }
}

TEST(ServerRequest, UnknownJudgeIs400NamingTheRules) {
    const ApiError error = parse_error(R"({"prompt": "x", "judge": "oracle"})");
    EXPECT_EQ(error.status, 400);
    EXPECT_EQ(error.param, "judge");
    EXPECT_NE(error.message.find("unknown judge 'oracle'"), std::string::npos) << error.message;
    EXPECT_NE(error.message.find("kl"), std::string::npos) << error.message;
}

TEST(ServerRequest, JudgeKnobsAreCheckedByMakeJudge) {
    const std::pair<const char*, const char*> cases[] = {
        {R"({"prompt": "x", "judge": "prob-threshold", "judge_threshold": 1.5})", "judge_threshold"},
        {R"({"prompt": "x", "judge": "kl", "judge_threshold": -0.1})", "judge_threshold"},
        {R"({"prompt": "x", "judge": "kl"})", "judge_threshold"},
        {R"({"prompt": "x", "judge": "topk"})", "judge_topk"},
        {R"({"prompt": "x", "judge": "topk", "judge_topk": 0})", "judge_topk"},
        {R"({"prompt": "x", "judge": "vanilla", "judge_threshold": 0.5})", "judge_threshold"},
        {R"({"prompt": "x", "judge": "kl", "judge_threshold": 0.5, "confidence_mask": 1.5})", "confidence_mask"},
        {R"({"prompt": "x", "judge": "fsd", "judge_threshold": 0.5, "judge_divergence": "hellinger"})",
         "judge_divergence"},
        {R"({"prompt": "x", "judge": "kl", "judge_threshold": 0.5, "judge_divergence": "js"})", "judge_divergence"},
        {R"({"prompt": "x", "judge": "topn-delta", "judge_threshold": 0.5})", "judge_topk"},
        {R"({"prompt": "x", "judge": "autojudge"})", "judge"},
    };
    expect_400_naming_the_field(cases);
}

TEST(ServerRequest, VerifyIsTokenOrBlockAndBlockNeedsTheVanillaJudge) {
    EXPECT_EQ(parse_ok(R"({"prompt": "x"})").generation.verification, Verification::Token);
    EXPECT_EQ(parse_ok(R"({"prompt": "x", "verify": "block"})").generation.verification, Verification::Block);
    const ApiError misspelt = parse_error(R"({"prompt": "x", "verify": "blok"})");
    EXPECT_EQ(misspelt.param, "verify");
    EXPECT_NE(misspelt.message.find("token or block"), std::string::npos) << misspelt.message;
    const ApiError judged = parse_error(R"({"prompt": "x", "verify": "block", "judge": "kl", "judge_threshold": 0.3})");
    EXPECT_EQ(judged.status, 400);
    EXPECT_NE(judged.message.find("block verification needs the vanilla judge, not kl"), std::string::npos)
        << judged.message;
}

// The server's threshold belongs to the server's rule: a request naming another rule is not refused for it.
TEST(ServerRequest, ARequestsRuleDoesNotInheritTheServersKnobs) {
    RequestDefaults defaults = server_defaults();
    defaults.judge.rule = "kl";
    defaults.judge.threshold = 0.3;
    EXPECT_EQ(parse_ok(R"({"prompt": "x"})", Endpoint::Completions, defaults).generation.judge->name(), "kl");
    EXPECT_EQ(parse_ok(R"({"prompt": "x", "judge": "topk", "judge_topk": 3})", Endpoint::Completions, defaults)
                  .generation.judge->name(),
              "topk");
    EXPECT_EQ(
        parse_ok(R"({"prompt": "x", "judge": "vanilla"})", Endpoint::Completions, defaults).generation.judge->name(),
        "vanilla");
}

// A request's K replaces the server's when the rule is the same: the draft token ranked 3rd (0-based 2) is
// in the server's top 5 but not in the request's top 2.
TEST(ServerRequest, ARequestsTopKOverridesTheServersK) {
    RequestDefaults defaults = server_defaults();
    defaults.judge.rule = "topk";
    defaults.judge.topk = 5;
    const std::vector<float> target = {3.0f, 2.0f, 1.0f, 0.0f}, draft = {0.0f, 0.0f, 0.0f, 0.0f};
    DraftPosition third;
    third.target_logits = target;
    third.draft_logits = draft;
    third.draft_token = 2;
    EXPECT_TRUE(
        parse_ok(R"({"prompt": "x"})", Endpoint::Completions, defaults).generation.judge->decide(third).relaxed);
    for (const char* body :
         {R"({"prompt": "x", "judge_topk": 2})", R"({"prompt": "x", "judge": "topk", "judge_topk": 2})"})
        EXPECT_FALSE(parse_ok(body, Endpoint::Completions, defaults).generation.judge->decide(third).relaxed) << body;
}

TEST(ServerRequest, StopIsAStringOrAnArrayOfStrings) {
    EXPECT_EQ(parse_ok(R"({"prompt": "x", "stop": "Lily"})").generation.stop_strings, std::vector<std::string>{"Lily"});
    EXPECT_EQ(parse_ok(R"({"prompt": "x", "stop": ["a", "bc"]})").generation.stop_strings,
              (std::vector<std::string>{"a", "bc"}));
    EXPECT_TRUE(parse_ok(R"({"prompt": "x", "stop": null})").generation.stop_strings.empty());
    for (const char* body : {R"({"prompt": "x", "stop": 3})", R"({"prompt": "x", "stop": ["a", 3]})"}) {
        const ApiError error = parse_error(body);
        EXPECT_EQ(error.status, 400) << body;
        EXPECT_EQ(error.param, "stop");
    }
}

TEST(ServerRequest, HugeMaxTokensIsClampedToTheContext) {
    EXPECT_EQ(parse_ok(R"({"prompt": "x", "max_tokens": 100000000000})").generation.max_tokens, 512);
    EXPECT_EQ(parse_ok(R"({"prompt": "x", "max_tokens": 0})").generation.max_tokens, 0);
}

TEST(ServerRequest, ChatMessagesAreRoleContentPairs) {
    const CompletionRequest request =
        parse_ok(R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})",
                 Endpoint::ChatCompletions);
    ASSERT_EQ(request.messages.size(), 2u);
    EXPECT_EQ(request.messages[1], (std::pair<std::string, std::string>{"user", "Hi"}));
    for (const char* body :
         {R"({"prompt": "x"})", R"({"messages": []})", R"({"messages": "hi"})", R"({"messages": [{"role": "user"}]})",
          R"({"messages": [{"role": "user", "content": 1}]})"}) {
        const ApiError error = parse_error(body, Endpoint::ChatCompletions);
        EXPECT_EQ(error.status, 400) << body;
        EXPECT_EQ(error.param, "messages") << body;
    }
}

TEST(ServerRequest, LogprobsInOpenAIsTwoSpellings) {
    EXPECT_FALSE(parse_ok(R"({"prompt": "x"})").generation.logprobs.has_value());
    EXPECT_EQ(parse_ok(R"({"prompt": "x", "logprobs": 3})").generation.logprobs, 3);
    EXPECT_EQ(parse_ok(R"({"prompt": "x", "logprobs": 0})").generation.logprobs, 0);
    constexpr Endpoint chat = Endpoint::ChatCompletions;
    const char* const kMessages = R"("messages": [{"role": "user", "content": "hi"}])";
    const auto chat_body = [&](std::string_view fields) { return fmt::format("{{{}, {}}}", kMessages, fields); };
    EXPECT_EQ(parse_ok(chat_body(R"("logprobs": true)"), chat).generation.logprobs, 0);
    EXPECT_EQ(parse_ok(chat_body(R"("logprobs": true, "top_logprobs": 20)"), chat).generation.logprobs, 20);
    EXPECT_FALSE(parse_ok(chat_body(R"("logprobs": false)"), chat).generation.logprobs.has_value());

    EXPECT_EQ(parse_error(R"({"prompt": "x", "logprobs": 21})").param, "logprobs");
    EXPECT_EQ(parse_error(R"({"prompt": "x", "logprobs": -1})").param, "logprobs");
    EXPECT_EQ(parse_error(R"({"prompt": "x", "logprobs": true})").param, "logprobs");
    EXPECT_EQ(parse_error(chat_body(R"("logprobs": 2)"), chat).param, "logprobs");
    EXPECT_EQ(parse_error(chat_body(R"("logprobs": true, "top_logprobs": 21)"), chat).param, "top_logprobs");
    EXPECT_EQ(parse_error(chat_body(R"("logprobs": true, "top_logprobs": "2")"), chat).param, "top_logprobs");
    const ApiError alone = parse_error(chat_body(R"("top_logprobs": 2)"), chat);
    EXPECT_EQ(alone.param, "top_logprobs");
    EXPECT_EQ(alone.message, "'top_logprobs' needs 'logprobs': true");
}

TEST(ServerRequest, ErrorJsonHasOpenAIsShape) {
    const nlohmann::json json = parse_error(R"({"prompt": "x", "temperature": "hot"})").to_json();
    const nlohmann::json& error = json.at("error");
    EXPECT_TRUE(error.at("message").is_string());
    EXPECT_EQ(error.at("type"), "invalid_request_error");
    EXPECT_EQ(error.at("param"), "temperature");
    EXPECT_TRUE(error.at("code").is_null());
}

// As OpenAI: stream_options only with stream=true, an object whose include_usage is a boolean.
TEST(ServerRequest, StreamOptionsNeedStreamAndABooleanIncludeUsage) {
    EXPECT_TRUE(
        parse_ok(R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": true}})").include_usage);
    EXPECT_FALSE(parse_ok(R"({"prompt": "x", "stream": true, "stream_options": {}})").include_usage);
    EXPECT_FALSE(parse_ok(R"({"prompt": "x", "stream": true})").include_usage);
    EXPECT_FALSE(parse_ok(R"({"prompt": "x", "stream_options": null})").include_usage);
    const std::pair<const char*, const char*> cases[] = {
        {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
        {R"({"prompt": "x", "stream": false, "stream_options": {"include_usage": true}})", "stream_options"},
        {R"({"prompt": "x", "stream": true, "stream_options": true})", "stream_options"},
        {R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": "yes"}})",
         "stream_options.include_usage"},
    };
    expect_400_naming_the_field(cases);
}

TEST(ServerRequest, TokenizeTakesContentAndTwoBooleans) {
    auto parsed = parse_tokenize_request(R"({"content": "Once upon"})");
    ASSERT_TRUE(std::holds_alternative<TokenizeRequest>(parsed));
    EXPECT_EQ(std::get<TokenizeRequest>(parsed).content, "Once upon");
    EXPECT_FALSE(std::get<TokenizeRequest>(parsed).add_special);
    EXPECT_FALSE(std::get<TokenizeRequest>(parsed).with_pieces);
    parsed = parse_tokenize_request(R"({"content": "", "add_special": true, "with_pieces": true})");
    ASSERT_TRUE(std::holds_alternative<TokenizeRequest>(parsed));
    EXPECT_TRUE(std::get<TokenizeRequest>(parsed).add_special);
    EXPECT_TRUE(std::get<TokenizeRequest>(parsed).with_pieces);
    // vLLM's names, which lm-evaluation-harness's remote tokenizer sends.
    const auto vllm = parse_tokenize_request(R"({"prompt": "b", "add_special_tokens": true})");
    ASSERT_TRUE(std::holds_alternative<TokenizeRequest>(vllm));
    EXPECT_EQ(std::get<TokenizeRequest>(vllm).content, "b");
    EXPECT_TRUE(std::get<TokenizeRequest>(vllm).add_special);
    const std::pair<const char*, const char*> cases[] = {
        {R"({})", "content"},
        {R"({"prompt": 5})", "prompt"},
        {R"({"content": 5})", "content"},
        {R"({"content": ["a"]})", "content"},
        {R"({"content": "a", "add_special": 1})", "add_special"},
        {R"({"content": "a", "with_pieces": "true"})", "with_pieces"},
        {R"(["content"])", ""},
        {R"({"content": )", ""},
    };
    for (const auto& [body, param] : cases) {
        const auto error = parse_tokenize_request(body);
        ASSERT_TRUE(std::holds_alternative<ApiError>(error)) << body;
        EXPECT_EQ(std::get<ApiError>(error).status, 400) << body;
        EXPECT_EQ(std::get<ApiError>(error).param, param) << body;
    }
}

TEST(ServerRequest, DetokenizeTakesIdsOfTheVocabulary) {
    const auto ids = parse_detokenize_request(R"({"tokens": [0, 5, 99]})", 100);
    ASSERT_TRUE(std::holds_alternative<std::vector<int32_t>>(ids));
    EXPECT_EQ(std::get<std::vector<int32_t>>(ids), (std::vector<int32_t>{0, 5, 99}));
    EXPECT_TRUE(std::get<std::vector<int32_t>>(parse_detokenize_request(R"({"tokens": []})", 100)).empty());
    for (const char* body : {R"({"tokens": [100]})", R"({"tokens": [-1]})", R"({"tokens": [1.5]})",
                             R"({"tokens": ["7"]})", R"({"tokens": [18446744073709551615]})",
                             R"({"tokens": [4294967296]})", R"({"tokens": 5})", R"({"tokens": null})", R"({})"}) {
        const auto error = parse_detokenize_request(body, 100);
        ASSERT_TRUE(std::holds_alternative<ApiError>(error)) << body;
        EXPECT_EQ(std::get<ApiError>(error).status, 400) << body;
        EXPECT_EQ(std::get<ApiError>(error).param, "tokens") << body;
    }
}

TEST(ServerRequest, ApiKeyMustBeABearerTokenEqualToAKey) {
    const std::vector<std::string> keys = {"sk-first", "sk-second-key"};
    EXPECT_TRUE(api_key_authorized("Bearer sk-first", keys));
    EXPECT_TRUE(api_key_authorized("Bearer sk-second-key", keys));
    for (const char* header :
         {"", "Bearer ", "sk-first", "Bearer sk-firs", "Bearer sk-firstt", "Bearer sk-fIrst", "Bearer sk-first ",
          "bearer sk-first", "Basic sk-first", "Bearer  sk-first", "Bearer sk-second-kez", "Bearer sk-first\n"})
        EXPECT_FALSE(api_key_authorized(header, keys)) << "'" << header << "'";
    EXPECT_FALSE(api_key_authorized("Bearer sk-first", {}));
}

// /infill: llama-server's fields and limits, beside every completion field (a judge per request).
TEST(ServerRequest, InfillTakesLlamaServersFieldsAndTheJudge) {
    const CompletionRequest request = parse_ok(
        R"({"input_prefix": "def f(", "input_suffix": ")\n", "prompt": "x", "input_extra": [{"filename": "a.py",
            "text": "import os"}, {"text": "pass"}], "n_predict": 32, "n_indent": 4, "t_max_predict_ms": 250,
            "n_cache_reuse": 16, "response_fields": ["content", "timings/prompt_n"], "return_tokens": true,
            "t_max_prompt_ms": 500, "id_slot": 0, "samplers": ["top_k"], "judge": "kl", "judge_threshold": 0.3})",
        Endpoint::Infill);
    const InfillInput& input = request.infill.input;
    EXPECT_EQ(input.prefix, "def f(");
    EXPECT_EQ(input.suffix, ")\n");
    EXPECT_EQ(input.prompt, "x");
    ASSERT_EQ(input.extra.size(), 2u);
    EXPECT_EQ(input.extra[0].filename, "a.py");
    EXPECT_EQ(input.extra[1].filename, "tmp");  // llama-server's default
    EXPECT_EQ(input.extra[1].text, "pass");
    EXPECT_EQ(request.generation.max_tokens, 32);
    EXPECT_EQ(request.generation.min_line_indent, 4);
    EXPECT_DOUBLE_EQ(request.generation.max_predict_seconds.value_or(0), 0.25);
    EXPECT_EQ(request.generation.cache_reuse_min_chunk, 16);
    EXPECT_EQ(request.infill.response_fields, (std::vector<std::string>{"content", "timings/prompt_n"}));
    EXPECT_TRUE(request.infill.return_tokens);
    EXPECT_EQ(request.generation.judge->name(), "kl");
    // n_predict -1 (llama-server: no limit) is the context; t_max_predict_ms 0 is no limit.
    const CompletionRequest unlimited = parse_ok(
        R"({"input_prefix": "", "input_suffix": "", "n_predict": -1, "t_max_predict_ms": 0})", Endpoint::Infill);
    EXPECT_EQ(unlimited.generation.max_tokens, server_defaults().n_ctx);
    EXPECT_FALSE(unlimited.generation.max_predict_seconds);
}

TEST(ServerRequest, InfillRefusesWhatLlamaServerRefusesWithItsMessages) {
    const std::pair<const char*, const char*> cases[] = {
        {R"({"input_suffix": ""})", R"("input_prefix" is required)"},
        {R"({"input_prefix": ""})", R"("input_suffix" is required)"},
        {R"({"input_prefix": "", "input_suffix": "", "prompt": 1})", R"("prompt" must be a string)"},
        {R"({"input_prefix": "", "input_suffix": "", "input_extra": "x"})",
         R"("input_extra" must be an array of {"filename": string, "text": string})"},
        {R"({"input_prefix": "", "input_suffix": "", "input_extra": [{"filename": "a"}]})",
         R"(extra_context chunk must contain a "text" field with a string value)"},
        {R"({"input_prefix": "", "input_suffix": "", "input_extra": [{"text": "", "filename": 2}]})",
         R"(extra_context chunk's "filename" field must be a string)"},
        {R"({"input_prefix": "", "input_suffix": "", "n_indent": -1})",
         "'n_indent' must be in [0, 2147483647], got -1"},
        {R"({"input_prefix": "", "input_suffix": "", "response_fields": "content"})",
         "'response_fields' must be an array of strings"}};
    for (const auto& [body, message] : cases) {
        const ApiError error = parse_error(body, Endpoint::Infill);
        EXPECT_EQ(error.status, 400) << body;
        EXPECT_EQ(error.message, message) << body;
        EXPECT_EQ(error.to_llama_server_json()["error"]["code"], 400) << body;
        EXPECT_EQ(error.to_llama_server_json()["error"]["type"], "invalid_request_error") << body;
    }
}

}  // namespace
}  // namespace klspec::server
