#include "engine/chat_template.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <llama.h>

#include "chat.h"  // llama.cpp's common library (include/llama-common)
#include "core/error.h"
#include "engine/common_log.h"

namespace klspec {
namespace {

std::vector<std::string> builtin_names() {
    std::vector<const char*> names(static_cast<size_t>(llama_chat_builtin_templates(nullptr, 0)));
    llama_chat_builtin_templates(names.data(), names.size());
    return {names.begin(), names.end()};
}

bool is_builtin(const std::string& name) {
    for (const std::string& known : builtin_names())
        if (known == name) return true;
    return false;
}

std::string read_template_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in || text.str().empty())
        throw Error(fmt::format("--chat-template {}: cannot read the file, or it is empty", path));
    return text.str();
}

// Jinja errors quote the template over several lines; klspec's errors are one line.
std::string one_line(std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    return text;
}

// The messages rendered with the assistant's turn opened, and what llama.cpp's chat code reads from the
// template besides (its reasoning markers).
common_chat_params render(const common_chat_templates* templates, bool jinja, const ChatMessages& messages) {
    common_chat_templates_inputs inputs;
    inputs.use_jinja = jinja;
    inputs.add_generation_prompt = true;
    for (const auto& [role, content] : messages) {
        common_chat_msg message;
        message.role = role;
        message.content = content;
        inputs.messages.push_back(std::move(message));
    }
    return common_chat_templates_apply(templates, inputs);
}

}  // namespace

struct ChatTemplate::Templates {
    common_chat_templates_ptr value;
};

std::string builtin_chat_template_names() { return fmt::format("{}", fmt::join(builtin_names(), ", ")); }

ChatTemplate::ChatTemplate(const Model& model, const std::string& choice) : templates_(std::make_unique<Templates>()) {
    silence_common_log();
    // common_chat_templates_init falls back to chatml itself when the model has none and no override is
    // given; an explicit "chatml" takes the same Jinja text, so chatml renders one way whoever asks.
    std::string override_source;
    if (choice.empty()) {
        origin_ = model.chat_template() ? "the model's own" : "chatml (the model has none)";
    } else if (choice == "chatml") {
        override_source = choice;
        origin_ = "built-in chatml";
    } else if (is_builtin(choice)) {
        override_source = choice;  // a name: libllama's own formatting of that family (legacy path)
        jinja_ = false;
        origin_ = "built-in " + choice;
    } else if (std::filesystem::is_regular_file(choice)) {
        override_source = read_template_file(choice);
        origin_ = "file " + choice;
    } else {
        throw Error(fmt::format("--chat-template '{}': neither a file nor a built-in template ({})", choice,
                                builtin_chat_template_names()));
    }
    try {
        templates_->value = common_chat_templates_init(model.get(), override_source);
        apply({{"user", "test"}});
    } catch (const std::exception& e) {
        throw Error(fmt::format("chat template ({}): {}", origin_, one_line(e.what())));
    }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::apply(const ChatMessages& messages) const {
    try {
        return render(templates_->value.get(), jinja_, messages).prompt;
    } catch (const std::exception& e) {
        throw Error(fmt::format("the chat template ({}) refused the messages: {}", origin_, one_line(e.what())));
    }
}

std::string ChatTemplate::source() const { return common_chat_templates_source(templates_->value.get()); }

std::optional<ChatTemplate::ReasoningMarkers> ChatTemplate::reasoning_markers() const {
    common_chat_params params;
    try {
        params = render(templates_->value.get(), jinja_, {{"user", "test"}});
    } catch (const std::exception&) {
        return std::nullopt;  // the constructor rendered this chat already; a template that raises has no markers
    }
    if (!params.supports_thinking || params.thinking_start_tag.empty() || params.thinking_end_tags.empty())
        return std::nullopt;
    return ReasoningMarkers{params.thinking_start_tag, params.thinking_end_tags};
}

JudgeSpan resolve_judge_span(JudgeSpan span, const ChatTemplate& chat_template) {
    if (!span.needs_markers()) return span;
    const std::optional<ChatTemplate::ReasoningMarkers> markers = chat_template.reasoning_markers();
    if (!markers)
        throw Error(
            fmt::format("judge span 'think': the chat template ({}) marks no reasoning span; give the markers "
                        "(think:<think>,</think>) or use until:STRING",
                        chat_template.origin()));
    span.open = markers->open;
    span.close = markers->close;
    return span;
}

JudgeSpan resolve_judge_span(JudgeSpan span, const Model& model) {
    if (!span.needs_markers()) return span;
    return resolve_judge_span(std::move(span), ChatTemplate(model, ""));
}

}  // namespace klspec
