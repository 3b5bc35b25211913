// token_logprobs (src/core/token_logprobs.h) on hand-computed distributions.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/token_logprobs.h"

namespace klspec {
namespace {

TEST(TokenLogprobs, LogSoftmaxOfTheChosenTokenAndTheTopOnes) {
    // softmax(log 1, log 2, log 3, log 2) = (1, 2, 3, 2) / 8; the shift by 100 must not matter.
    const std::vector<float> logits = {100 + std::log(1.0f), 100 + std::log(2.0f), 100 + std::log(3.0f),
                                       100 + std::log(2.0f)};
    const TokenLogprobs out = token_logprobs(logits, 0, 3);
    EXPECT_EQ(out.chosen.token, 0);
    EXPECT_NEAR(out.chosen.logprob, std::log(1.0 / 8), 1e-5);
    ASSERT_EQ(out.top.size(), 3u);
    EXPECT_EQ(out.top[0].token, 2);
    EXPECT_NEAR(out.top[0].logprob, std::log(3.0 / 8), 1e-5);
    EXPECT_EQ(out.top[1].token, 1);  // a tie: the lower id first
    EXPECT_EQ(out.top[2].token, 3);
    EXPECT_NEAR(out.top[2].logprob, std::log(2.0 / 8), 1e-5);
}

TEST(TokenLogprobs, NoTopAndMoreThanTheVocabulary) {
    const std::vector<float> logits = {0.0f, 0.0f};
    EXPECT_TRUE(token_logprobs(logits, 1, 0).top.empty());
    const TokenLogprobs all = token_logprobs(logits, 1, 20);
    ASSERT_EQ(all.top.size(), 2u);
    EXPECT_NEAR(all.chosen.logprob, std::log(0.5), 1e-6);
}

}  // namespace
}  // namespace klspec
