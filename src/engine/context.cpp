#include "engine/context.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

namespace klspec {
namespace {

// ggml's GGML_MAX_N_THREADS: its thread pool cannot hold more.
constexpr int32_t kMaxThreads = 512;
// Well below llama.cpp's own limit (LLAMA_MAX_SEQ, 256); more slots than this only split a small machine.
constexpr int32_t kMaxSequences = 64;

}  // namespace

void validate(const ContextOptions& options) {
    if (options.n_ctx <= 0) throw Error(fmt::format("context size must be >= 1, got {}", options.n_ctx));
    if (options.n_batch <= 0) throw Error(fmt::format("batch size must be >= 1, got {}", options.n_batch));
    if (options.n_threads < 0 || options.n_threads > kMaxThreads)
        throw Error(
            fmt::format("threads must be in 0..{} (0 = all hardware threads), got {}", kMaxThreads, options.n_threads));
    if (options.n_threads_draft < 0 || options.n_threads_draft > kMaxThreads)
        throw Error(fmt::format("draft threads must be in 0..{} (0 = as --threads), got {}", kMaxThreads,
                                options.n_threads_draft));
    if (options.n_sequences < 1 || options.n_sequences > kMaxSequences)
        throw Error(fmt::format("parallel sequences must be in 1..{}, got {}", kMaxSequences, options.n_sequences));
}

Batch::Batch(int32_t capacity) : batch_(llama_batch_init(capacity, 0, 1)), capacity_(capacity) {}

Batch::~Batch() { llama_batch_free(batch_); }

void Batch::reserve(int32_t capacity) {
    if (capacity <= capacity_) return;
    llama_batch_free(batch_);
    batch_ = llama_batch_init(capacity, 0, 1);
    capacity_ = capacity;
}

int32_t Batch::add(int32_t token, int32_t pos, int32_t sequence_id, bool wants_output) {
    if (batch_.n_tokens >= capacity_) throw Error(fmt::format("batch is full ({} tokens)", capacity_));
    const int32_t row = batch_.n_tokens++;
    batch_.token[row] = token;
    batch_.pos[row] = pos;
    batch_.n_seq_id[row] = 1;
    batch_.seq_id[row][0] = sequence_id;
    batch_.logits[row] = wants_output;
    return row;
}

ModelContext::ModelContext(const Model& model, const ContextOptions& options)
    : model_((validate(options), model)),  // validated before the members below are built from it
      n_sequences_(options.n_sequences),
      n_vocab_(model.n_vocab()),
      n_embd_(model.n_embd()),
      hidden_states_(options.hidden_states),
      chunk_(std::min(options.n_batch, options.n_ctx)) {
    llama_context_params params = llama_context_default_params();
    // One KV stream per sequence (not llama.cpp's unified cache): each token then attends to its own
    // sequence's cells only. With a unified cache every token scans all sequences' cells, masked: at
    // -np 8 on the default pair attention took 40 % of the time and throughput fell 15 % (measured,
    // docs/performance.md). The price: llama.cpp cuts a batch into ubatches of equal tokens per sequence,
    // which verify batches mostly are (every sequence drafts γ). A unified cache also makes llama.cpp
    // validate every batch against 256 possible sequences (11 % of a small model's decode, perf).
    params.n_ctx = static_cast<uint32_t>(options.n_ctx) * static_cast<uint32_t>(options.n_sequences);
    params.n_seq_max = static_cast<uint32_t>(options.n_sequences);
    params.kv_unified = false;
    params.n_batch = static_cast<uint32_t>(std::max(std::min(options.n_batch, options.n_ctx), 1));
    params.n_ubatch = params.n_batch;
    const int32_t threads =
        options.n_threads > 0 ? options.n_threads : static_cast<int32_t>(std::thread::hardware_concurrency());
    params.n_threads = threads;
    params.n_threads_batch = threads;
    params.embeddings = options.hidden_states;
    params.pooling_type = LLAMA_POOLING_TYPE_NONE;
    params.no_perf = true;
    // A target's one-token and batched passes must compute attention alike, or speculative output leaves
    // target-only output at near ties (measured on Qwen2.5-Coder-1.5B: 3 of 16 HumanEval answers, logits 0.66
    // apart past 256 cells of context). ggml's CPU flash attention takes other paths by shape when K and V
    // are both F16 (or F32): a single query row over 512 or more cells is split across the threads and the
    // partial softmaxes merged, 64 or more rows are tiled. With V in BF16 (K stays F16) klspec's patched ggml
    // sends every row count through the tiled kernel, which computes each row alike whatever the batch, so one-
    // token logits come out bit for bit at any context length, at the tiled kernel's prompt speed (the stock
    // one-row kernel that BF16 took ran prompts at 0.58x: scripts/patches/ggml-flash-attn-batch-invariant.patch).
    // llama.cpp casts an F32 cache to F16 for flash attention, so F32 would not do; BF16 keeps F16's size and range.
    // Repacked weights need nothing more: klspec's patched ggml gives their batches one token's products
    // (scripts/patches/, checked at load by load_target).
    if (options.batch_invariant_attention && model.cpu_resident()) {
        params.type_v = GGML_TYPE_BF16;
    }
    ctx_ = llama_init_from_model(model.get(), params);
    if (ctx_ == nullptr) throw Error(fmt::format("failed to create a llama.cpp context for {}", model.path()));
    // llama.cpp may round the context up; the caller's limit is the one to honour.
    n_ctx_ = std::min(options.n_ctx, static_cast<int32_t>(llama_n_ctx(ctx_)) / options.n_sequences);
    n_batch_ = static_cast<int32_t>(llama_n_batch(ctx_));
}

ModelContext::~ModelContext() { llama_free(ctx_); }

void ModelContext::decode(const Batch& batch) {
    const auto start = std::chrono::steady_clock::now();
    const int32_t status = llama_decode(ctx_, batch.get());
    // On a GPU backend llama_decode returns once the graph is queued; the cost model and the statistics
    // need the device's time, so wait here (the CPU backend has already finished: this returns at once).
    llama_synchronize(ctx_);
    decode_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++decode_calls_;
    if (status != 0) throw Error(fmt::format("llama_decode failed with status {} ({})", status, model_.path()));
}

void ModelContext::decode_chunks(int32_t sequence_id, std::span<const int32_t> tokens, int32_t first_pos,
                                 size_t first_output, const std::function<void(size_t start)>& after_chunk) {
    for (size_t start = 0; start < tokens.size(); start += static_cast<size_t>(chunk_.capacity())) {
        chunk_.clear();
        const size_t end = std::min(tokens.size(), start + static_cast<size_t>(chunk_.capacity()));
        for (size_t i = start; i < end; ++i)
            chunk_.add(tokens[i], first_pos + static_cast<int32_t>(i), sequence_id, i >= first_output);
        decode(chunk_);
        if (after_chunk) after_chunk(start);
    }
}

void ModelContext::prefill(int32_t sequence_id, std::span<const int32_t> tokens, int32_t first_pos) {
    decode_chunks(sequence_id, tokens, first_pos, tokens.size(), {});
}

void ModelContext::forward_rows(int32_t sequence_id, std::span<const int32_t> tokens, int32_t first_pos,
                                const std::function<void(size_t index, int32_t row)>& on_row, size_t first_output) {
    decode_chunks(sequence_id, tokens, first_pos, first_output, [&](size_t start) {
        for (int32_t row = 0; row < chunk_.size(); ++row)
            if (start + static_cast<size_t>(row) >= first_output) on_row(start + static_cast<size_t>(row), row);
    });
}

void ModelContext::prefill_last_logits(int32_t sequence_id, std::span<const int32_t> tokens, int32_t first_pos,
                                       std::vector<float>& logits) {
    forward_rows(
        sequence_id, tokens, first_pos,
        [&](size_t, int32_t row) {
            const std::span<const float> last = this->logits(row);
            logits.assign(last.begin(), last.end());
        },
        tokens.size() - 1);
}

std::span<const float> ModelContext::logits(int32_t row) const {
    return {llama_get_logits_ith(ctx_, row), static_cast<size_t>(n_vocab_)};
}

std::span<const float> ModelContext::hidden_state(int32_t row) const {
    return {llama_get_embeddings_ith(ctx_, row), static_cast<size_t>(n_embd_)};
}

void ModelContext::truncate(int32_t sequence_id, int32_t n_keep) {
    llama_memory_seq_rm(llama_get_memory(ctx_), sequence_id, n_keep, -1);
}

void ModelContext::copy_prefix(int32_t from, int32_t to, int32_t n) {
    // One KV stream per sequence: llama.cpp copies a whole stream (at the next decode), then the rest goes.
    llama_memory_t memory = llama_get_memory(ctx_);
    llama_memory_seq_cp(memory, from, to, -1, -1);
    llama_memory_seq_rm(memory, to, n, -1);
}

void ModelContext::shift_left(int32_t sequence_id, int32_t from, int32_t n, int32_t to) {
    llama_memory_t memory = llama_get_memory(ctx_);
    llama_memory_seq_rm(memory, sequence_id, to, from);
    llama_memory_seq_add(memory, sequence_id, from, from + n, to - from);
}

bool ModelContext::can_shift() const { return llama_memory_can_shift(llama_get_memory(ctx_)); }

std::vector<uint8_t> ModelContext::save_sequence(int32_t sequence_id) const {
    std::vector<uint8_t> cells(llama_state_seq_get_size(ctx_, sequence_id));
    const size_t written = llama_state_seq_get_data(ctx_, cells.data(), cells.size(), sequence_id);
    if (written != cells.size())
        throw Error(fmt::format("llama.cpp could not save sequence {}'s cells ({})", sequence_id, model_.path()));
    return cells;
}

void ModelContext::load_sequence(int32_t sequence_id, std::span<const uint8_t> cells) {
    if (llama_state_seq_set_data(ctx_, cells.data(), cells.size(), sequence_id) != cells.size())
        throw Error(fmt::format("llama.cpp could not load sequence {}'s cells ({})", sequence_id, model_.path()));
}

}  // namespace klspec
