#include "engine/context.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

namespace klspec {

ModelContext::ModelContext(const Model& model, const ContextOptions& options)
    : model_(model), n_vocab_(model.n_vocab()), n_embd_(model.n_embd()) {
    llama_context_params params = llama_context_default_params();
    params.n_ctx = static_cast<uint32_t>(options.n_ctx);
    params.n_batch = static_cast<uint32_t>(std::min(options.n_batch, options.n_ctx));
    params.n_ubatch = params.n_batch;
    const int32_t threads = options.n_threads > 0 ? options.n_threads
                                                  : static_cast<int32_t>(std::thread::hardware_concurrency());
    params.n_threads = threads;
    params.n_threads_batch = threads;
    params.embeddings = options.hidden_states;
    params.pooling_type = LLAMA_POOLING_TYPE_NONE;
    params.no_perf = true;
    ctx_ = llama_init_from_model(model.get(), params);
    if (ctx_ == nullptr) throw Error(fmt::format("failed to create a llama.cpp context for {}", model.path()));
    // llama.cpp may round the context up; the caller's limit is the one to honour.
    n_ctx_ = std::min(options.n_ctx, static_cast<int32_t>(llama_n_ctx(ctx_)));
    n_batch_ = static_cast<int32_t>(llama_n_batch(ctx_));
    batch_ = llama_batch_init(n_batch_, 0, 1);
}

ModelContext::~ModelContext() {
    llama_batch_free(batch_);
    llama_free(ctx_);
}

void ModelContext::decode(std::span<const int32_t> tokens, int32_t first_pos, Outputs outputs) {
    const int32_t n = static_cast<int32_t>(tokens.size());
    if (outputs == Outputs::All && n > n_batch_) throw Error("batch with all outputs exceeds n_batch");
    llama_batch& batch = batch_;
    for (int32_t start = 0; start < n; start += n_batch_) {
        const int32_t count = std::min(n_batch_, n - start);
        batch.n_tokens = count;
        for (int32_t j = 0; j < count; ++j) {
            const int32_t i = start + j;
            batch.token[j] = tokens[i];
            batch.pos[j] = first_pos + i;
            batch.n_seq_id[j] = 1;
            batch.seq_id[j][0] = 0;
            batch.logits[j] = outputs == Outputs::All || (outputs == Outputs::Last && i == n - 1);
        }
        const int32_t status = llama_decode(ctx_, batch);
        if (status != 0) throw Error(fmt::format("llama_decode failed with status {} ({})", status, model_.path()));
    }
}

std::span<const float> ModelContext::logits(int32_t i) const {
    return {llama_get_logits_ith(ctx_, i), static_cast<size_t>(n_vocab_)};
}

std::span<const float> ModelContext::hidden_state(int32_t i) const {
    return {llama_get_embeddings_ith(ctx_, i), static_cast<size_t>(n_embd_)};
}

void ModelContext::truncate(int32_t n_keep) { llama_memory_seq_rm(llama_get_memory(ctx_), 0, n_keep, -1); }

void ModelContext::clear() { llama_memory_clear(llama_get_memory(ctx_), true); }

}  // namespace klspec
