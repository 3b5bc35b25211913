#include "engine/prompt_cache.h"

#include <algorithm>

#include "engine/decoder_helpers.h"

namespace klspec {

void PromptCache::save(Entry entry) {
    if (max_bytes_ >= 0 && entry.bytes() > static_cast<size_t>(max_bytes_)) return;
    const auto same =
        std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.tokens == entry.tokens; });
    if (same != entries_.end()) {
        bytes_ -= same->bytes();
        entries_.erase(same);
    }
    bytes_ += entry.bytes();
    entries_.push_front(std::move(entry));
    while (max_bytes_ >= 0 && bytes_ > static_cast<size_t>(max_bytes_)) {
        bytes_ -= entries_.back().bytes();
        entries_.pop_back();
    }
}

const PromptCache::Entry* PromptCache::best(std::span<const int32_t> prompt, int32_t at_least) {
    auto best = entries_.end();
    int32_t best_shared = at_least;
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const int32_t shared = detail::common_prefix(it->tokens, prompt);
        if (shared > best_shared) {
            best = it;
            best_shared = shared;
        }
    }
    if (best == entries_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, best);
    return &entries_.front();
}

}  // namespace klspec
