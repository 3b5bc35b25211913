// A GGUF model loaded through llama.cpp, and the checks that make a draft/target pair usable.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

struct llama_model;
struct llama_vocab;

namespace klspec {

struct ModelOptions {
    // ggml-rpc-server endpoints ("HOST:PORT"): the model's offloaded layers go to their devices, split by
    // their free memory, instead of to a local GPU.
    std::vector<std::string> rpc_servers;
    // Layers offloaded to the model's devices. Unset: every layer when rpc_servers are given (llama.cpp's
    // `--rpc` with `-ngl 99`), none otherwise.
    std::optional<int32_t> gpu_layers;
    // No GPU device at all (llama.cpp's `--device none`): with gpu_layers 0 alone, llama.cpp still runs a
    // large batch's matrix products on a GPU backend (op offload). Incompatible with rpc_servers.
    bool cpu_only = false;
    // The tokenizer and metadata only (llama.cpp's vocab-only GGUFs): tokenize and chat templates work, a
    // context does not.
    bool vocab_only = false;
    // Let llama.cpp repack quantized weights for the CPU's interleaved kernels (llama.cpp's default, and klspec's).
    // The pinned ggml's x86 repacked Q4_K kernel summed a batch's rows in another order than one token's (logits
    // 0.6 apart on Qwen2.5-Coder-1.5B Q4_K_M); klspec's patched ggml gives them one token's logits bit for bit,
    // which load_target (engine/target_loading.h) checks before it keeps a target repacked.
    bool repack = true;
};

// A draft's options from its target's: the same, but repacked, since what a draft proposes is verified (its
// kernels move its acceptance, not the output) and the repacked kernels are llama.cpp's faster default.
ModelOptions draft_model_options(ModelOptions target);

class Model {
public:
    // Throws klspec::Error with a one-line reason for a missing, non-GGUF or unloadable file, a malformed
    // RPC server address or one that does not accept connections.
    Model(const std::string& path, const ModelOptions& options = {});
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const std::string& path() const { return path_; }
    llama_model* get() const { return model_; }
    const llama_vocab* vocab() const { return vocab_; }
    int32_t n_vocab() const;
    int32_t n_embd() const;
    uint64_t n_params() const;

    // parse_special: text like "<|eot_id|>" becomes that special token (prompts, as llama.cpp's server),
    // not its characters.
    std::vector<int32_t> tokenize(const std::string& text, bool add_bos, bool parse_special = false) const;
    // The token's text as it appears in output; `special`: control tokens too (a chat template's markers).
    std::string piece(int32_t token, bool special = false) const;
    // The text of generated tokens: their pieces, end-of-generation tokens left out.
    std::string text(std::span<const int32_t> tokens) const;
    bool is_end_of_generation(int32_t token) const;
    // The vocabulary's BOS, EOS and padding tokens, each when it has one.
    std::optional<int32_t> bos_token() const;
    std::optional<int32_t> eos_token() const;
    std::optional<int32_t> pad_token() const;
    // The fill-in-the-middle tokens the vocabulary has (llama.cpp finds them by id or by text, such as
    // Qwen2.5-Coder's <|fim_prefix|>); `repo` and `file_separator` mark Qwen's repo-level layout.
    struct FimTokens {
        std::optional<int32_t> prefix, suffix, middle, repo, file_separator;
    };
    FimTokens fim_tokens() const;
    // The BOS token a tokenized prompt starts with (tokenize's add_bos), if the vocabulary adds one.
    std::optional<int32_t> prompt_bos_token() const;

    // The GGUF's chat template (tokenizer.chat_template), if it has one (engine/chat_template.h applies it).
    std::optional<std::string> chat_template() const;

    // No layer offloaded: its attention runs on ggml's CPU backend (engine/context.cpp reads this).
    bool cpu_resident() const { return cpu_resident_; }
    // Its weights repacked for the CPU's interleaved kernels (ModelOptions::repack on a CPU-resident model).
    bool repacked() const { return repacked_; }

private:
    std::string path_;
    bool cpu_resident_ = true;
    bool repacked_ = false;
    llama_model* model_ = nullptr;
    const llama_vocab* vocab_ = nullptr;
};

// Whether a draft may serve a target: exactly llama.cpp's rule (common_speculative_are_compatible in
// common/speculative.cpp): the same vocabulary type; the same add-BOS flag, and the same BOS token where it
// is added; likewise EOS; sizes at most kMaxVocabularySizeDifference apart; and the same token texts
// from id kFirstComparedToken over the ids both have. Returns the first difference, as a phrase naming
// the field or the token id with the draft's and the target's value in that order; nullopt when
// compatible. Where the sizes differ the engine decodes over the common ids (docs/judges.md).
inline constexpr int32_t kMaxVocabularySizeDifference = 128;  // llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE
inline constexpr int32_t kFirstComparedToken = 5;             // llama.cpp's SPEC_VOCAB_CHECK_START_TOKEN_ID
std::optional<std::string> vocabulary_difference(const Model& target, const Model& draft);
// Throws klspec::Error with that difference and both paths unless compatible.
void require_compatible_vocabularies(const Model& target, const Model& draft);

// Why the ggml-rpc-server at endpoint ("HOST:PORT") does not accept a TCP connection within timeout_ms now (one
// line naming it), or nullopt when it does. Throws klspec::Error for a malformed address.
std::optional<std::string> rpc_server_unreachable(const std::string& endpoint, int timeout_ms);

// Routes llama.cpp's log output: silent (errors only) unless verbose.
void set_llama_verbose(bool verbose);

}  // namespace klspec
