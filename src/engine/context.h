// One llama.cpp inference context over a model: KV caches for several sequences (each with its own id
// and up to n_ctx positions), batched decoding across them, and the output rows of the last decode
// (logits, and hidden states when enabled).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/model.h"
#include "llama.h"

namespace klspec {

struct ContextOptions {
    int32_t n_ctx = 2048;         // positions per sequence (prompt + output)
    int32_t n_batch = 512;        // tokens per llama_decode call at most (prompt chunks)
    int32_t n_threads = 0;        // CPU threads; 0: all hardware threads
    int32_t n_threads_draft = 0;  // a speculative decoder's draft context: 0 = n_threads
    int32_t n_sequences = 1;      // sequences decoded together (-np); each gets n_ctx positions
    bool hidden_states = false;   // also output last-layer hidden states (after the final norm)
    // One attention kernel for one token and for a batch (a BF16 V cache, on the CPU: context.cpp says why), so
    // that verification gives one-token decoding's logits exactly. On for targets; a draft's speed matters more.
    bool batch_invariant_attention = true;
};

// The tokens of one llama_decode call, from any number of sequences. Reused between calls.
class Batch {
public:
    explicit Batch(int32_t capacity);
    ~Batch();
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;

    void clear() { batch_.n_tokens = 0; }
    // Makes room for `capacity` tokens (only between decodes: the contents are dropped).
    void reserve(int32_t capacity);
    // Appends a token; returns its row, the index that logits() and hidden_state() take.
    int32_t add(int32_t token, int32_t pos, int32_t sequence_id, bool wants_output);
    int32_t size() const { return batch_.n_tokens; }
    int32_t capacity() const { return capacity_; }
    const llama_batch& get() const { return batch_; }

private:
    llama_batch batch_{};
    int32_t capacity_ = 0;
};

class ModelContext {
public:
    ModelContext(const Model& model, const ContextOptions& options);
    ~ModelContext();
    ModelContext(const ModelContext&) = delete;
    ModelContext& operator=(const ModelContext&) = delete;

    // One llama_decode call. Throws klspec::Error if llama.cpp refuses the batch.
    void decode(const Batch& batch);
    // Decodes `tokens` at positions first_pos.. of one sequence in chunks of n_batch, without outputs.
    void prefill(int32_t sequence_id, std::span<const int32_t> tokens, int32_t first_pos);
    // Teacher-forced pass over `tokens` at positions first_pos.. of one sequence, every row from
    // tokens[first_output] on output, calling on_row(i, row) once the output of tokens[i] is batch row `row`
    // of the last decode (read it with logits(row) or hidden_state(row) inside the call): memory for one
    // chunk, not n×V. The chunks are the same whatever first_output is; rows before it skip the output head.
    void forward_rows(int32_t sequence_id, std::span<const int32_t> tokens, int32_t first_pos,
                      const std::function<void(size_t index, int32_t row)>& on_row, size_t first_output = 0);
    // Prefills `tokens` at positions first_pos.. of one sequence, copying the last token's logits into `logits`.
    void prefill_last_logits(int32_t sequence_id, std::span<const int32_t> tokens, int32_t first_pos,
                             std::vector<float>& logits);
    // Output of batch row i of the last decode.
    std::span<const float> logits(int32_t row) const;
    std::span<const float> hidden_state(int32_t row) const;
    // Forgets the sequence's cached positions >= n_keep (all of them for n_keep = 0).
    void truncate(int32_t sequence_id, int32_t n_keep);
    // Sequence `to` gets a copy of the cells of positions [0, n) of sequence `from` (what `to` held is dropped).
    void copy_prefix(int32_t from, int32_t to, int32_t n);
    // Moves the cells of positions [from, from + n) to [to, to + n), to <= from, dropping what lay between
    // (llama.cpp re-rotates their keys: a KV shift). Only where can_shift().
    void shift_left(int32_t sequence_id, int32_t from, int32_t n, int32_t to);
    bool can_shift() const;
    // The sequence's cells as llama.cpp serialises them (positions, keys and values), and back: into a context of
    // a model of the same shape with the same options (a repacked copy of the target: SpeculativeDecoder's
    // prompt context). load_sequence replaces what the sequence held; throws klspec::Error if llama.cpp refuses.
    std::vector<uint8_t> save_sequence(int32_t sequence_id) const;
    void load_sequence(int32_t sequence_id, std::span<const uint8_t> cells);

    int32_t n_ctx() const { return n_ctx_; }  // per sequence
    int32_t n_sequences() const { return n_sequences_; }
    int32_t n_batch() const { return n_batch_; }  // tokens one decode() takes at most
    bool has_hidden_states() const { return hidden_states_; }
    const Model& model() const { return model_; }
    // Wall time spent inside llama_decode, the device's work included, since the context was created.
    double decode_seconds() const { return decode_seconds_; }
    // llama_decode calls since the context was created.
    int64_t decode_calls() const { return decode_calls_; }

private:
    // Decodes `tokens` in chunks of n_batch, the rows from tokens[first_output] on with an output, calling
    // `after_chunk(start)` after each (start: the index of its first token).
    void decode_chunks(int32_t sequence_id, std::span<const int32_t> tokens, int32_t first_pos, size_t first_output,
                       const std::function<void(size_t start)>& after_chunk);

    const Model& model_;
    llama_context* ctx_ = nullptr;
    int32_t n_ctx_ = 0;
    int32_t n_sequences_ = 1;
    int32_t n_batch_ = 0;
    int32_t n_vocab_ = 0;
    int32_t n_embd_ = 0;
    bool hidden_states_ = false;
    double decode_seconds_ = 0;
    int64_t decode_calls_ = 0;
    Batch chunk_;  // prefill and forward chunks
};

// Validates ContextOptions with one-line klspec::Errors (thread counts llama.cpp cannot create, ...).
void validate(const ContextOptions& options);

}  // namespace klspec
