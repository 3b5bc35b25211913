#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "build_paths.h"
#include "core/distribution_stats.h"
#include "engine/speculative_decoder.h"
#include "gguf.h"

namespace klspec::test {

namespace {
std::optional<int32_t> gpu_layers_from_environment() {
    const char* value = std::getenv("KLSPEC_TEST_GPU_LAYERS");
    if (value == nullptr || *value == '\0') return std::nullopt;
    return static_cast<int32_t>(std::stoi(value));
}
}  // namespace

ModelOptions offload() {
    ModelOptions options;
    options.gpu_layers = gpu_layers_from_environment();
    return options;
}

bool offloaded() { return gpu_layers_from_environment().value_or(0) > 0; }

float near_tie_gap() { return offloaded() ? kGpuNearTieGap : kNearTieGap; }

std::vector<std::string> offload_args() {
    const std::optional<int32_t> layers = gpu_layers_from_environment();
    if (!layers) return {};
    return {"-ngl", std::to_string(*layers)};
}

std::vector<std::string> story_prompts(size_t count) {
    static const std::vector<std::string> openings = {
        "Once upon a time",
        "One day, a little girl named Lily",
        "Tom and his dog went to the park.",
        "The sun was shining and the birds",
        "There was a big red ball in the garden.",
        "Sara wanted to bake a cake for her mom.",
        "Ben found a shiny stone",
        "The cat was sad because",
        "Once there was a small boat",
        "Mia liked to draw pictures of",
        "In the forest lived a kind old bear",
        "Tim had a toy car that he loved.",
        "It was a rainy day, so",
        "The little bird could not fly",
        "Anna and Max were best friends.",
        "A frog sat on a log and",
        "Lily saw a butterfly in the sky.",
        "The king had a golden crown",
        "Every morning, the farmer",
        "Jack wanted to climb the tall tree.",
        "The dog barked at the mailman",
        "Sue went to the store with her dad.",
        "Once upon a time, there was a happy dragon",
        "The children played in the snow",
        "Grandma told a story about",
    };
    return {openings.begin(), openings.begin() + static_cast<std::ptrdiff_t>(std::min(count, openings.size()))};
}

std::vector<std::string> gsm8k_prompts(size_t count) {
    std::vector<std::string> prompts;
    std::ifstream gsm8k(std::string(build_paths::shared_dir) + "/datasets/gsm8k/test.jsonl");
    if (!gsm8k) return prompts;
    std::string line;
    for (size_t i = 0; i < count && std::getline(gsm8k, line); ++i) {
        prompts.push_back(nlohmann::json::parse(line).at("question").get<std::string>());
    }
    return prompts;
}

CommandResult run_command(const std::string& command_line) {
    CommandResult result;
    char errors_path[] = "/tmp/klspec-test-stderr-XXXXXX";
    const int errors_fd = mkstemp(errors_path);
    if (errors_fd < 0) throw std::runtime_error("mkstemp failed");
    close(errors_fd);
    FILE* pipe = popen(("(" + command_line + ") 2>'" + errors_path + "'").c_str(), "r");
    if (pipe == nullptr) throw std::runtime_error("popen failed");
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
    const int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream errors(errors_path);
    result.errors.assign(std::istreambuf_iterator<char>(errors), std::istreambuf_iterator<char>());
    std::remove(errors_path);
    return result;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The header rewritten with the template, the tensor data copied.
std::string stories_with_chat_template() {
    const std::string path = temp_path("stories-chatml.gguf");
    gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
    gguf_context* ctx = gguf_init_from_file(kTargetModel.c_str(), params);
    if (ctx == nullptr) throw std::runtime_error("cannot read " + kTargetModel);
    const size_t data_offset = gguf_get_data_offset(ctx);
    gguf_set_val_str(ctx, "tokenizer.chat_template",
                     "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                     "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
    const bool written = gguf_write_to_file(ctx, path.c_str(), /*only_meta=*/true);
    gguf_free(ctx);
    if (!written) throw std::runtime_error("cannot write " + path);
    std::ifstream in(kTargetModel, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(data_offset));
    std::ofstream(path, std::ios::binary | std::ios::app) << in.rdbuf();
    return path;
}

GreedyReference greedy_reference(const Model& target, const std::string& prompt, int32_t max_tokens,
                                 const ContextOptions& context) {
    return greedy_reference(target, target.tokenize(prompt, /*add_bos=*/true, /*parse_special=*/true), max_tokens,
                            context);
}

GreedyReference greedy_reference(const Model& target, std::vector<int32_t> tokens, int32_t max_tokens,
                                 const ContextOptions& context) {
    ModelContext ctx(target, context);
    ctx.prefill(0, std::span<const int32_t>(tokens.data(), tokens.size() - 1), 0);
    Batch batch(1);
    GreedyReference reference;
    while (static_cast<int32_t>(reference.tokens.size()) < max_tokens &&
           static_cast<int32_t>(tokens.size()) < ctx.n_ctx()) {
        batch.clear();
        batch.add(tokens.back(), static_cast<int32_t>(tokens.size()) - 1, 0, true);
        ctx.decode(batch);
        const std::span<const float> logits = ctx.logits(0);
        const int32_t next = argmax(logits);
        float second = -std::numeric_limits<float>::infinity();
        for (size_t i = 0; i < logits.size(); ++i)
            if (static_cast<int32_t>(i) != next) second = std::max(second, logits[i]);
        reference.top2_gap.push_back(logits[static_cast<size_t>(next)] - second);
        reference.logits.insert(reference.logits.end(), logits.begin(), logits.end());
        if (target.is_end_of_generation(next)) break;
        reference.tokens.push_back(next);
        tokens.push_back(next);
    }
    return reference;
}

double max_batch_single_difference(const std::string& model_path, const std::vector<std::string>& prompts,
                                   int32_t tokens, const ContextOptions& context, const ModelOptions& model) {
    return max_batch_single_differences(model_path, prompts, tokens, context, model, {context.n_batch}).front();
}

std::vector<double> max_batch_single_differences(const std::string& model_path, const std::vector<std::string>& prompts,
                                                 int32_t tokens, const ContextOptions& context,
                                                 const ModelOptions& model, const std::vector<int32_t>& batch_sizes) {
    const Model target(model_path, model);
    ContextOptions reference_context = context;
    reference_context.n_batch = batch_sizes.back();
    ContextOptions prompt_context = context;
    prompt_context.n_batch = batch_sizes.front();
    std::vector<double> largest(batch_sizes.size(), 0.0);
    for (const std::string& prompt : prompts) {
        const GreedyReference single = greedy_reference(target, prompt, tokens, reference_context);
        std::vector<int32_t> sequence = target.tokenize(prompt, true, true);
        const size_t first_row = sequence.size() - 1;  // the row after the prompt's last token
        sequence.insert(sequence.end(), single.tokens.begin(), single.tokens.end());
        // The prompt's cells once (in batches of another size than the reference's: a prompt's cells must not
        // depend on its batches either), loaded for each size; then the reference's tokens in batches of the size.
        std::vector<uint8_t> prompt_cells;
        {
            ModelContext prompt_ctx(target, prompt_context);
            prompt_ctx.prefill(0, std::span<const int32_t>(sequence).first(first_row), 0);
            prompt_cells = prompt_ctx.save_sequence(0);
        }
        const std::span<const int32_t> forced = std::span<const int32_t>(sequence).subspan(first_row);
        for (size_t b = 0; b < batch_sizes.size(); ++b) {
            ContextOptions verification = context;
            verification.n_batch = batch_sizes[b];
            ModelContext ctx(target, verification);
            ctx.load_sequence(0, prompt_cells);
            ctx.forward_rows(0, forced, static_cast<int32_t>(first_row), [&](size_t step, int32_t row) {
                if (step >= single.top2_gap.size()) return;
                const std::span<const float> batched = ctx.logits(row);
                for (size_t v = 0; v < batched.size(); ++v)
                    largest[b] = std::max(
                        largest[b], std::abs(double(single.logits[step * batched.size() + v]) - double(batched[v])));
            });
        }
    }
    return largest;
}

int64_t check_equal_up_to_near_tie(const GreedyReference& reference, const std::vector<int32_t>& tokens,
                                   const std::string& label, int64_t& divergences, float gap) {
    const std::vector<int32_t>& expected = reference.tokens;
    size_t d = 0;
    while (d < expected.size() && d < tokens.size() && expected[d] == tokens[d]) ++d;
    if (d == expected.size() && d == tokens.size()) return -1;
    // Both ran to the same -n, or one stopped at EOG: the tokens chosen at position d differ.
    EXPECT_LT(d, reference.top2_gap.size()) << label << ": output is longer than the reference's run";
    if (d >= reference.top2_gap.size()) return static_cast<int64_t>(d);
    EXPECT_LT(reference.top2_gap[d], gap)
        << label << ": leaves target-only output at token " << d << " where its top-2 logit gap is "
        << reference.top2_gap[d] << ", not a near tie";
    ++divergences;
    return static_cast<int64_t>(d);
}

SpanCheck check_outside_span(const Model& target, const std::string& prompt, const std::vector<int32_t>& tokens,
                             const std::function<bool(const std::string&)>& outside, const ContextOptions& context) {
    SpeculativeDecoder decoder(target, nullptr, context);
    std::vector<int32_t> all = target.tokenize(prompt, true, true);
    const size_t n_prompt = all.size();
    all.insert(all.end(), tokens.begin(), tokens.end());
    const ForwardResult forward = decoder.forward(ModelRole::Target, all, false);
    const size_t n_vocab = static_cast<size_t>(forward.n_vocab);
    SpanCheck check;
    std::string text;
    for (size_t j = 0; j < tokens.size(); ++j) {
        text += target.piece(tokens[j]);
        if (!outside(text)) continue;
        ++check.outside;
        const std::span<const float> row(forward.logits.data() + (n_prompt + j - 1) * n_vocab, n_vocab);
        const float gap = row[static_cast<size_t>(argmax(row))] - row[static_cast<size_t>(tokens[j])];
        check.not_target_choice += gap >= near_tie_gap();
    }
    return check;
}

}  // namespace klspec::test
