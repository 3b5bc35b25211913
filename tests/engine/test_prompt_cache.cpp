// PromptCache, the host-memory prompt cache (llama-server's --cache-ram): which entry a prompt gets, and what
// the byte budget drops. Its use by the decoder: Step.PromptCacheInHostMemoryBringsBackAPromptItsSlotLost.
#include <gtest/gtest.h>

#include "engine/prompt_cache.h"

namespace klspec {
namespace {

PromptCache::Entry entry(std::vector<int32_t> tokens, size_t bytes) {
    return {std::move(tokens), 0, std::vector<uint8_t>(bytes, 7), {}};
}

TEST(PromptCache, GivesTheEntrySharingTheLongestPrefixOnlyWhenItBeatsTheSlot) {
    PromptCache cache(-1);
    cache.save(entry({1, 2, 3, 4}, 10));
    cache.save(entry({1, 2, 9}, 10));
    cache.save(entry({5, 6}, 10));
    const std::vector<int32_t> prompt = {1, 2, 3, 7};
    EXPECT_EQ(cache.best(prompt, 3), nullptr) << "the slot's 3 shared tokens are as good";
    const PromptCache::Entry* best = cache.best(prompt, 2);
    ASSERT_NE(best, nullptr);
    EXPECT_EQ(best->tokens, (std::vector<int32_t>{1, 2, 3, 4}));
    EXPECT_EQ(cache.entries(), 3u) << "it stays for the next prompt it belongs to";
    EXPECT_EQ(cache.bytes(), 30u);
    EXPECT_EQ(cache.best(std::vector<int32_t>{1, 2, 9}, 0)->tokens, (std::vector<int32_t>{1, 2, 9}));
    EXPECT_EQ(cache.best(std::vector<int32_t>{8}, 0), nullptr) << "nothing shared";
}

TEST(PromptCache, TheBudgetDropsTheLeastRecentlyUsedAndRefusesWhatCannotFit) {
    PromptCache cache(25);
    cache.save(entry({1}, 10));
    cache.save(entry({2}, 10));
    cache.save(entry({1}, 12));  // the same tokens again: replaces the first, now the most recent
    EXPECT_EQ(cache.entries(), 2u);
    EXPECT_EQ(cache.bytes(), 22u);
    ASSERT_NE(cache.best(std::vector<int32_t>{2}, 0), nullptr);  // used: {1} is now the least recently used
    cache.save(entry({3}, 10));                                  // 32 bytes > 25: {1} goes
    EXPECT_EQ(cache.entries(), 2u);
    EXPECT_EQ(cache.bytes(), 20u);
    EXPECT_EQ(cache.best(std::vector<int32_t>{1}, 0), nullptr);
    EXPECT_NE(cache.best(std::vector<int32_t>{2}, 0), nullptr);
    cache.save(entry({4}, 26));  // larger than the whole budget: not kept, nothing dropped for it
    EXPECT_EQ(cache.entries(), 2u);
    EXPECT_EQ(cache.bytes(), 20u);
}

}  // namespace
}  // namespace klspec
