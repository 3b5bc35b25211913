// Chat templates as llama-server applies them: llama.cpp's own `common` library (its Jinja engine for a
// GGUF's template or a template file, libllama's built-in formatting for a template name such as llama3).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/judge_span.h"
#include "engine/model.h"

namespace klspec {

using ChatMessages = std::vector<std::pair<std::string, std::string>>;  // {role, content}

class ChatTemplate {
public:
    // `choice`: empty: the model's own template (tokenizer.chat_template), chatml when it has none, as
    // llama-server; a name of llama.cpp's built-in templates (chatml, llama3, gemma, ...); or the path of a
    // Jinja template file. Throws klspec::Error for anything else, a template that does not parse, or one
    // that cannot render a one-message chat.
    ChatTemplate(const Model& model, const std::string& choice);
    ~ChatTemplate();
    ChatTemplate(ChatTemplate&&) noexcept;
    ChatTemplate& operator=(ChatTemplate&&) noexcept;

    // The messages with the assistant's turn opened. Throws klspec::Error when the template refuses them
    // (a template may raise, e.g. on roles that do not alternate).
    std::string apply(const ChatMessages& messages) const;
    // Where the template came from, for logs and /props: "the model's own", "chatml (the model has none)",
    // "built-in llama3", "file PATH".
    const std::string& origin() const { return origin_; }
    // The template's text (Jinja), or the built-in name.
    std::string source() const;
    // Whether source() is Jinja (a built-in is libllama's own formatting, with no Jinja text).
    bool is_jinja() const { return jinja_; }
    // The reasoning span's opening marker and closing markers as llama.cpp's chat code reads them from the
    // template (e.g. <think> and </think>); none when the template has no reasoning span.
    struct ReasoningMarkers {
        std::string open;
        std::vector<std::string> close;
    };
    std::optional<ReasoningMarkers> reasoning_markers() const;

private:
    struct Templates;
    std::unique_ptr<Templates> templates_;
    bool jinja_ = true;
    std::string origin_;
};

// A `think` span with its markers read from the template; any other span as given. Throws klspec::Error
// when the template has no reasoning span.
JudgeSpan resolve_judge_span(JudgeSpan span, const ChatTemplate& chat_template);
// The same with the model's own template (chatml when it has none), read only for a `think` span.
JudgeSpan resolve_judge_span(JudgeSpan span, const Model& model);

// The names of llama.cpp's built-in templates, comma-separated (for --help and errors).
std::string builtin_chat_template_names();

}  // namespace klspec
