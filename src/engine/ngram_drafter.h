// Drafting without a second model: llama.cpp's n-gram drafters (common/speculative.h, its --spec-type
// ngram-*), which look a sequence's next tokens up in its own prompt and output. Their drafts are token
// ids without a distribution: the acceptance step treats each as a point mass (core/judge.h), so only the
// rules that read the target alone can judge them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct common_speculative;

namespace klspec {

struct NgramOptions {
    // Tried in llama.cpp's order of preference (ngram-simple first), the first to find a draft wins; a draft
    // model, when there is one, drafts where none of them does. Empty: no n-gram drafting.
    std::vector<std::string> types;
    // llama.cpp's defaults. ngram-simple, ngram-map-k, ngram-map-k4v: the lookup n-gram and the m-gram
    // after it that is proposed (its length caps the draft), and the hits an n-gram needs (map-k, k4v).
    int32_t size_n = 12;
    int32_t size_m = 48;
    int32_t min_hits = 1;
    // ngram-mod: the lookup length, and the draft's length bounds (a shorter continuation is no draft).
    int32_t mod_n_match = 24;
    int32_t mod_n_min = 48;
    int32_t mod_n_max = 64;

    bool enabled() const { return !types.empty(); }
};

// The n-gram types klspec drafts with (llama.cpp's names, in its order of preference).
std::span<const std::string_view> ngram_type_names();
// Throws klspec::Error with a one-line reason for an unknown type or a bad size.
void validate(const NgramOptions& options);

class NgramDrafter {
public:
    NgramDrafter(const NgramOptions& options, int32_t n_sequences);
    ~NgramDrafter();
    NgramDrafter(const NgramDrafter&) = delete;
    NgramDrafter& operator=(const NgramDrafter&) = delete;

    // A sequence starts on `id` with these tokens (its prompt).
    void begin(int32_t id, std::span<const int32_t> tokens);
    // Asks for a draft of at most `max_length` tokens to follow `tokens`, all of the id's tokens so far (the
    // tokens begin() was given and those emitted since).
    void request(int32_t id, std::span<const int32_t> tokens, int32_t max_length);
    // Drafts every requested id in one call; afterwards draft(id) is the id's proposal (empty: none found),
    // and no id is requested.
    void draft_requested();
    std::span<const int32_t> draft(int32_t id) const { return drafts_.at(static_cast<size_t>(id)); }
    // The target kept the first `accepted` tokens of the id's last draft (the drafters adapt to it).
    void accept(int32_t id, int32_t accepted);

private:
    struct Free {
        void operator()(common_speculative* spec) const;
    };
    std::unique_ptr<common_speculative, Free> spec_;
    std::vector<std::vector<int32_t>> histories_;  // per id: its tokens but the last (llama.cpp's `prompt`)
    std::vector<std::vector<int32_t>> drafts_;
};

}  // namespace klspec
