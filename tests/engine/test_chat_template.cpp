// Chat templates through llama.cpp's common library (src/engine/chat_template.h): real families' Jinja
// templates, on their real tokenizers (the pinned tree's vocab-only GGUFs), render as libllama's own
// formatting of the family; the fallback, the choices and every bad template are clear errors.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/chrono.h>

#include "build_paths.h"
#include "core/error.h"
#include "engine/chat_template.h"
#include "llama.h"
#include "llama_server_prompt.h"
#include "test_support.h"

namespace klspec {
namespace {

const std::string kLlamaModels = build_paths::llama_models_dir;

std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = test::temp_path(name);
    std::ofstream(path) << text;
    return path;
}

struct Family {
    std::string jinja;    // models/templates/<jinja>.jinja
    std::string vocab;    // models/ggml-vocab-<vocab>.gguf
    std::string builtin;  // libllama's name for the family's format
    ChatMessages messages;
    std::string system_preamble;  // what the Jinja template adds to the system turn and libllama's format does not
};

TEST(ChatTemplate, RealFamilyTemplatesRenderAsLlamaCppsBuiltInFormatting) {
    const ChatMessages with_system = {
        {"system", "You are terse."}, {"user", "Hi there"}, {"assistant", "Hello."}, {"user", "What is 2 + 2?"}};
    const ChatMessages alternating = {{"user", "Hi there"}, {"assistant", "Hello."}, {"user", "What is 2 + 2?"}};
    const std::vector<Family> families = {
        {"Qwen-Qwen2.5-7B-Instruct", "qwen2", "chatml", with_system, ""},
        {"google-gemma-2-2b-it", "gemma-4", "gemma", alternating, ""},
        {"microsoft-Phi-3.5-mini-instruct", "phi-3", "phi3", with_system, ""},
        {"meta-llama-Llama-3.1-8B-Instruct", "llama-bpe", "llama3", with_system,
         fmt::format("Cutting Knowledge Date: December 2023\nToday Date: {:%d %b %Y}\n\n",
                     fmt::localtime(std::time(nullptr)))},
    };
    for (const Family& family : families) {
        const std::string jinja = kLlamaModels + "/templates/" + family.jinja + ".jinja";
        const std::string vocab = kLlamaModels + "/ggml-vocab-" + family.vocab + ".gguf";
        if (!std::filesystem::exists(jinja) || !std::filesystem::exists(vocab)) GTEST_SKIP() << "no " << jinja;
        ModelOptions vocab_only;
        vocab_only.vocab_only = true;
        const Model model(vocab, vocab_only);
        const ChatTemplate from_file(model, jinja);
        const ChatTemplate builtin(model, family.builtin);
        EXPECT_EQ(from_file.origin(), "file " + jinja);
        EXPECT_EQ(builtin.origin(), "built-in " + family.builtin);
        const std::string rendered = from_file.apply(family.messages);
        std::string expected = builtin.apply(family.messages);
        if (!family.system_preamble.empty()) expected.insert(expected.find("You are terse."), family.system_preamble);
        EXPECT_EQ(rendered, expected) << family.jinja;
        EXPECT_NE(rendered.find("What is 2 + 2?"), std::string::npos) << family.jinja;
    }
}

// klspec serve's chat prompt (ChatTemplate, as server.cpp applies it, then the decoder's tokenization) on the
// real tokenizers: the model's own template, and files from the pinned tree's models/templates, give what
// llama-server gives, text and tokens, one BOS at most.
TEST(ChatTemplate, ServesChatPromptIsLlamaServersOnRealFamilies) {
    const ChatMessages chat = {{"system", "You are terse."},
                               {"user", "Hi there"},
                               {"assistant", "Hello."},
                               {"user", "What is 2 + 2? Grüße 🙂"}};
    const std::vector<std::pair<std::string, std::string>> cases = {
        // vocabulary, template ("": the model's own)
        {"qwen2", ""},
        {"qwen35", ""},
        {"gemma-4", ""},
        {"phi-3", ""},
        {"llama-bpe", "meta-llama-Llama-3.1-8B-Instruct"},
        {"llama-bpe", "meta-llama-Llama-3.3-70B-Instruct"},
        {"qwen2", "Qwen-Qwen2.5-7B-Instruct"},
        {"qwen35", "Qwen3.5-4B"},
        {"qwen35", "Qwen-Qwen3-0.6B"},
        {"gemma-4", "google-gemma-4-31B-it"},
        {"phi-3", "microsoft-Phi-3.5-mini-instruct"},
        {"deepseek-llm", "deepseek-ai-DeepSeek-V3.1"},
        {"llama-spm", "mistralai-Mistral-Nemo-Instruct-2407"},
    };
    ModelOptions vocab_only;
    vocab_only.vocab_only = true;
    for (const auto& [vocabulary, jinja] : cases) {
        const std::string vocab_path = kLlamaModels + "/ggml-vocab-" + vocabulary + ".gguf";
        const std::string file = jinja.empty() ? "" : kLlamaModels + "/templates/" + jinja + ".jinja";
        ASSERT_TRUE(std::filesystem::exists(vocab_path)) << vocab_path;
        ASSERT_TRUE(file.empty() || std::filesystem::exists(file)) << file;
        const Model model(vocab_path, vocab_only);
        if (jinja.empty()) {
            ASSERT_TRUE(model.chat_template().has_value()) << vocabulary;
        }
        std::string source;
        if (!file.empty()) {
            std::ifstream in(file);
            source.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        }
        const std::string label = vocabulary + " with " + (jinja.empty() ? "its own template" : jinja);
        const std::string rendered = ChatTemplate(model, file).apply(chat);
        const std::string expected = test::llama_server_prompt(model, source, chat);
        EXPECT_EQ(rendered, expected) << label;
        EXPECT_NE(rendered.find("What is 2 + 2? Grüße 🙂"), std::string::npos) << label;
        const std::vector<int32_t> tokens = model.tokenize(rendered, /*add_bos=*/true, /*parse_special=*/true);
        const int32_t bos = llama_vocab_bos(model.vocab());
        EXPECT_FALSE(tokens.size() > 1 && tokens[0] == bos && tokens[1] == bos) << label << ": two BOS tokens";
    }
}

TEST(ChatTemplate, TheModelsOwnElseChatmlAsLlamaServer) {
    const ChatMessages chat = {{"user", "hi"}};
    const std::string chatml = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
    const Model plain(test::kTargetModel);  // stories260K: no template
    const ChatTemplate fallback(plain, "");
    EXPECT_EQ(fallback.origin(), "chatml (the model has none)");
    EXPECT_EQ(fallback.apply(chat), chatml);
    EXPECT_EQ(ChatTemplate(plain, "chatml").apply(chat), chatml);

    const Model templated(test::stories_with_chat_template());
    const ChatTemplate own(templated, "");
    EXPECT_EQ(own.origin(), "the model's own");
    EXPECT_EQ(own.source(), *templated.chat_template());
    EXPECT_EQ(own.apply(chat), chatml);  // its Jinja text writes chatml
    // A file overrides the model's own.
    const ChatTemplate custom(templated,
                              write_file("custom.jinja",
                                         "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n"
                                         "{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"));
    EXPECT_EQ(custom.apply({{"system", "be brief"}, {"user", "hi"}}), "[system] be brief\n[user] hi\n[assistant] ");
}

TEST(ChatTemplate, BadChoicesAndTemplatesAreOneLineErrors) {
    const Model model(test::kTargetModel);
    const auto message_of = [&](const std::string& choice) {
        try {
            ChatTemplate(model, choice);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message_of("no-such-template").find("neither a file nor a built-in template ("), std::string::npos);
    EXPECT_NE(message_of("no-such-template").find(", llama3, "), std::string::npos);
    EXPECT_NE(message_of(write_file("empty.jinja", "")).find("cannot read the file, or it is empty"),
              std::string::npos);
    const std::string unparsable = message_of(write_file("broken.jinja", "{% for m in messages %}{{ m.content }"));
    EXPECT_NE(unparsable.find("chat template (file "), std::string::npos) << unparsable;
    EXPECT_EQ(unparsable.find('\n'), std::string::npos) << unparsable;

    // A template may refuse a chat at request time (many raise on roles that do not alternate): an Error.
    const ChatTemplate strict(model, write_file("strict.jinja",
                                                "{% for m in messages %}{% if m.content == 'forbidden' %}"
                                                "{{ raise_exception('no such content') }}"
                                                "{% endif %}{{ m.content }}{% endfor %}"));
    EXPECT_THROW(strict.apply({{"user", "forbidden"}}), Error);
    EXPECT_EQ(strict.apply({{"user", "hi"}}), "hi");
}

TEST(ChatTemplate, ReasoningMarkersComeFromTheTemplateAsLlamaCppReadsThem) {
    const std::string vocab = kLlamaModels + "/ggml-vocab-qwen2.gguf";
    const auto template_file = [&](const std::string& name) { return kLlamaModels + "/templates/" + name + ".jinja"; };
    for (const std::string& name :
         {std::string("Qwen-Qwen3-0.6B"), std::string("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"),
          std::string("Qwen-Qwen2.5-7B-Instruct")})
        if (!std::filesystem::exists(template_file(name)) || !std::filesystem::exists(vocab))
            GTEST_SKIP() << "no " << name;
    ModelOptions vocab_only;
    vocab_only.vocab_only = true;
    const Model model(vocab, vocab_only);
    for (const std::string& name :
         {std::string("Qwen-Qwen3-0.6B"), std::string("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B")}) {
        const JudgeSpan span = resolve_judge_span(JudgeSpan::parse("think"), ChatTemplate(model, template_file(name)));
        EXPECT_EQ(span.open, "<think>") << name;
        ASSERT_FALSE(span.close.empty()) << name;
        EXPECT_EQ(span.close.front(), "</think>") << name;
    }
    // A template without a reasoning span: a one-line error that says what to do instead.
    try {
        resolve_judge_span(JudgeSpan::parse("think"), ChatTemplate(model, template_file("Qwen-Qwen2.5-7B-Instruct")));
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("marks no reasoning span"), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
    // Given markers and other spans pass through unchanged.
    EXPECT_EQ(resolve_judge_span(JudgeSpan::parse("think:<a>,</a>"), ChatTemplate(model, "")).to_string(),
              "think:<a>,</a>");
    EXPECT_EQ(resolve_judge_span(JudgeSpan::parse("until:x"), model).to_string(), "until:x");
}

}  // namespace
}  // namespace klspec
