#include "core/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace klspec {

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t n_top) {
    const float max = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (const float logit : logits) sum += std::exp(double(logit) - max);
    const double log_norm = max + std::log(sum);
    const auto logprob = [&](int32_t t) { return float(double(logits[size_t(t)]) - log_norm); };

    TokenLogprobs out;
    out.chosen = {token, logprob(token)};
    const size_t n = std::min(size_t(std::max(n_top, 0)), logits.size());
    if (n == 0) return out;  // no vocabulary-sized sort for the chosen token alone
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(n), ids.end(), [&](int32_t a, int32_t b) {
        return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
    });
    for (size_t i = 0; i < n; ++i) out.top.push_back({ids[i], logprob(ids[i])});
    return out;
}

}  // namespace klspec
