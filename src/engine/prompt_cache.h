#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <vector>

namespace klspec {

// Host-memory copies of sequences' KV cells, llama-server's prompt cache (--cache-ram): a slot's cells are saved
// before another prompt overwrites them, and loaded back into the slot of a later prompt that shares more with
// them than with what the slot holds. Four clients cycling through eight prompts on four slots then prefill each
// prompt once, not every time. Least recently used entries go first when the byte budget is full.
class PromptCache {
public:
    struct Entry {
        std::vector<int32_t> tokens;        // what the target's cells hold, from position 0
        int32_t draft_tokens = 0;           // how many of them the draft's cells hold (it may lag behind)
        std::vector<uint8_t> target_cells;  // ModelContext::save_sequence's bytes
        std::vector<uint8_t> draft_cells;   // empty without draft cells
        size_t bytes() const { return target_cells.size() + draft_cells.size(); }
    };

    // max_bytes < 0: no limit.
    explicit PromptCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

    // Keeps the entry as the most recently used, in place of one with the same tokens, and drops the least
    // recently used ones beyond the budget; an entry larger than the whole budget is not kept.
    void save(Entry entry);
    // The entry whose tokens share the longest prefix with `prompt`, if that prefix is longer than `at_least`
    // tokens, marked the most recently used; null if none. It stays (a slot loading it for a token or two must
    // not take it from the prompt it belongs to); the pointer holds until the next save().
    const Entry* best(std::span<const int32_t> prompt, int32_t at_least);

    size_t entries() const { return entries_.size(); }
    size_t bytes() const { return bytes_; }

private:
    std::list<Entry> entries_;  // most recently used first
    int64_t max_bytes_;
    size_t bytes_ = 0;
};

}  // namespace klspec
