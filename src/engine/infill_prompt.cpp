#include "engine/infill_prompt.h"

#include <algorithm>

#include "core/error.h"

namespace klspec {
namespace {

using Tokens = std::vector<int32_t>;

Tokens plain_tokens(const Model& model, const std::string& text) { return model.tokenize(text, false, false); }

void append(Tokens& to, const Tokens& tokens) { to.insert(to.end(), tokens.begin(), tokens.end()); }

// Every chunk after its file header, all of it; the budget later keeps its end.
Tokens extra_context(const Model& model, const Model::FimTokens& fim, const std::vector<InfillChunk>& chunks) {
    Tokens extra;
    if (fim.repo) {
        extra.push_back(*fim.repo);
        append(extra, plain_tokens(model, "myproject\n"));  // llama-server's fixed project name
    }
    for (const InfillChunk& chunk : chunks) {
        if (fim.file_separator) {
            extra.push_back(*fim.file_separator);
            append(extra, plain_tokens(model, chunk.filename + "\n"));
        } else {
            append(extra, plain_tokens(model, "\n\n--- snippet ---\n\n"));
        }
        append(extra, plain_tokens(model, chunk.text));
    }
    if (fim.file_separator) {
        extra.push_back(*fim.file_separator);
        append(extra, plain_tokens(model, "filename\n"));  // the current file's, fixed upstream too
    }
    return extra;
}

}  // namespace

std::optional<std::string> missing_fim_tokens(const Model& model) {
    const Model::FimTokens fim = model.fim_tokens();
    std::string missing;
    if (!fim.prefix) missing += "prefix token is missing. ";
    if (!fim.suffix) missing += "suffix token is missing. ";
    if (!fim.middle) missing += "middle token is missing. ";
    if (missing.empty()) return std::nullopt;
    return missing;
}

std::vector<int32_t> infill_prompt(const Model& model, const InfillInput& input, const InfillBudget& budget) {
    if (const std::optional<std::string> missing = missing_fim_tokens(model))
        throw Error("Infill is not supported by this model: " + *missing);
    const Model::FimTokens fim = model.fim_tokens();
    Tokens prefix = plain_tokens(model, input.prefix);
    Tokens suffix = plain_tokens(model, input.suffix);
    const Tokens prompt = model.tokenize(input.prompt, false, /*parse_special=*/true);
    const Tokens extra = extra_context(model, fim, input.extra);

    const int32_t quarter = budget.n_batch / 4;
    const auto prefix_take = std::min<size_t>(prefix.size(), static_cast<size_t>(3 * quarter));
    const auto suffix_take = std::min<size_t>(
        suffix.size(), static_cast<size_t>(std::max<int64_t>(0, quarter - (2 + int64_t(prompt.size())))));
    const auto extra_take =
        std::min<size_t>(extra.size(), static_cast<size_t>(std::max<int64_t>(
                                           0, int64_t(budget.n_ctx) - budget.n_batch - 2 * int64_t(budget.n_predict))));

    Tokens out(extra.end() - static_cast<std::ptrdiff_t>(extra_take), extra.end());
    if (const std::optional<int32_t> bos = model.prompt_bos_token()) out.push_back(*bos);
    out.push_back(*fim.prefix);
    out.insert(out.end(), prefix.end() - static_cast<std::ptrdiff_t>(prefix_take), prefix.end());
    append(out, prompt);
    out.push_back(*fim.suffix);
    out.insert(out.end(), suffix.begin(), suffix.begin() + static_cast<std::ptrdiff_t>(suffix_take));
    out.push_back(*fim.middle);
    return out;
}

}  // namespace klspec
