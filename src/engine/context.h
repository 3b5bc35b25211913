// One llama.cpp inference context over a model: a KV cache for sequence 0, batched decoding, and
// access to the output rows (logits, and hidden states when enabled).
#pragma once

#include <cstdint>
#include <span>

#include "engine/model.h"
#include "llama.h"


namespace klspec {

struct ContextOptions {
    int32_t n_ctx = 2048;
    int32_t n_batch = 512;
    int32_t n_threads = 0;       // 0: all hardware threads
    bool hidden_states = false;  // also output last-layer hidden states (after the final norm)
};

// Which positions of a decoded batch produce an output row.
enum class Outputs { None, Last, All };

class ModelContext {
public:
    ModelContext(const Model& model, const ContextOptions& options);
    ~ModelContext();
    ModelContext(const ModelContext&) = delete;
    ModelContext& operator=(const ModelContext&) = delete;

    // Decodes `tokens` at positions first_pos.. of sequence 0, in chunks of n_batch (only a batch
    // that fits one chunk may ask for outputs other than the last).
    void decode(std::span<const int32_t> tokens, int32_t first_pos, Outputs outputs);
    // Output of the token at index i of the last decoded batch (-1: its last token).
    std::span<const float> logits(int32_t i) const;
    std::span<const float> hidden_state(int32_t i) const;
    // Forgets every cached position >= n_keep.
    void truncate(int32_t n_keep);
    void clear();

    int32_t n_ctx() const { return n_ctx_; }
    const Model& model() const { return model_; }

private:
    const Model& model_;
    llama_context* ctx_ = nullptr;
    int32_t n_ctx_ = 0;
    int32_t n_batch_ = 0;
    int32_t n_vocab_ = 0;
    int32_t n_embd_ = 0;
    llama_batch batch_{};  // reused by every decode
};

}  // namespace klspec
