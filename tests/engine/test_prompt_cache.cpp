// PromptCache, the host-memory prompt cache (llama-server's --cache-ram): which entry a prompt gets, and what
// the byte budget drops. Its use by the decoder: Step.PromptCacheInHostMemoryBringsBackAPromptItsSlotLost.
#include <gtest/gtest.h>

#include "engine/prompt_cache.h"

namespace klspec {
namespace {

PromptCache::Entry entry(std::vector<int32_t> tokens, size_t bytes) {
    return {std::move(tokens), 0, std::vector<uint8_t>(bytes, 7), {}};
}

TEST(PromptCache, TakesTheEntrySharingTheLongestPrefixOnlyWhenItBeatsTheSlot) {
    PromptCache cache(-1);
    cache.save(entry({1, 2, 3, 4}, 10));
    cache.save(entry({1, 2, 9}, 10));
    cache.save(entry({5, 6}, 10));
    const std::vector<int32_t> prompt = {1, 2, 3, 7};
    EXPECT_FALSE(cache.take_best(prompt, 3).has_value()) << "the slot's 3 shared tokens are as good";
    const std::optional<PromptCache::Entry> best = cache.take_best(prompt, 2);
    ASSERT_TRUE(best.has_value());
    EXPECT_EQ(best->tokens, (std::vector<int32_t>{1, 2, 3, 4}));
    EXPECT_EQ(cache.entries(), 2u) << "taken, not copied";
    EXPECT_EQ(cache.bytes(), 20u);
    EXPECT_EQ(cache.take_best(prompt, 0)->tokens, (std::vector<int32_t>{1, 2, 9}));
    EXPECT_FALSE(cache.take_best(std::vector<int32_t>{8}, 0).has_value()) << "nothing shared";
}

TEST(PromptCache, TheBudgetDropsTheLeastRecentlyUsedAndRefusesWhatCannotFit) {
    PromptCache cache(25);
    cache.save(entry({1}, 10));
    cache.save(entry({2}, 10));
    cache.save(entry({1}, 12));  // the same tokens again: replaces the first, now the most recent
    EXPECT_EQ(cache.entries(), 2u);
    EXPECT_EQ(cache.bytes(), 22u);
    cache.save(entry({3}, 10));  // 32 bytes > 25: {2}, the least recently used, goes
    EXPECT_EQ(cache.entries(), 2u);
    EXPECT_FALSE(cache.take_best(std::vector<int32_t>{2}, 0).has_value());
    EXPECT_TRUE(cache.take_best(std::vector<int32_t>{1}, 0).has_value());
    cache.save(entry({4}, 26));  // larger than the whole budget: not kept, nothing dropped for it
    EXPECT_EQ(cache.entries(), 1u);
    EXPECT_EQ(cache.bytes(), 10u);
}

}  // namespace
}  // namespace klspec
