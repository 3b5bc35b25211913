// OpenAI's `logprobs`: each emitted token's log-probability under the target's distribution (its raw
// logits, temperature 1: what the model thinks, whatever the sampler or the judge did) and the most likely
// alternatives at its position.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace klspec {

constexpr int32_t kMaxTopLogprobs = 20;  // OpenAI's limit for top_logprobs

struct TokenLogprob {
    int32_t token = 0;
    float logprob = 0.0f;
};

struct TokenLogprobs {
    TokenLogprob chosen;
    std::vector<TokenLogprob> top;  // the n_top most likely tokens, most likely first (ties: lower id first)
};

// log softmax(logits)[token] and the n_top largest entries of log softmax(logits).
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t n_top);

}  // namespace klspec
