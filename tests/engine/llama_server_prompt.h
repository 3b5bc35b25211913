// The chat prompt llama-server renders, for tests that compare klspec's chat templates with it (links
// llama.cpp's common library, klspec_llama_common).
#pragma once

#include <string>

#include "chat.h"  // llama.cpp's common library: the reference
#include "common.h"
#include "engine/chat_template.h"
#include "engine/model.h"

namespace klspec::test {

// What llama-server sends the model for a chat: its chat code with the inputs it sets by default
// (tools/server: oaicompat_chat_params_parse, and the server context's chat_params), then its tokenizer
// with special tokens added and parsed.
inline std::string llama_server_prompt(const Model& model, const std::string& template_source,
                                       const ChatMessages& chat) {
    const common_params defaults{};
    const common_chat_templates_ptr templates = common_chat_templates_init(model.get(), template_source);
    common_chat_templates_inputs inputs;
    for (const auto& [role, content] : chat) {
        common_chat_msg message;
        message.role = role;
        message.content = content;
        inputs.messages.push_back(message);
    }
    inputs.use_jinja = defaults.use_jinja;
    inputs.add_generation_prompt = true;
    inputs.reasoning_format = defaults.reasoning_format;
    inputs.enable_thinking =
        defaults.enable_reasoning != 0 && common_chat_templates_support_enable_thinking(templates.get());
    return common_chat_templates_apply(templates.get(), inputs).prompt;
}

}  // namespace klspec::test
