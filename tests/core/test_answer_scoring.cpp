#include <gtest/gtest.h>

#include "core/answer_scoring.h"
#include "core/error.h"

namespace klspec {
namespace {

TEST(Gsm8kScorer, TakesTheNumberAfterTheFirstMarker) {
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "Sam starts with 12. 12 + 7 = 19. The answer is 19."), "19");
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "The answer is 7. The answer is 8."), "7");
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "The answer is -3."), "-3");
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "The answer is 120"), "120");
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "The answer is $1,200.50 in all."), "1200.5");
}

TEST(Gsm8kScorer, NoAnswerWithoutANumberAfterTheMarker) {
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "12 + 7 = 19."), std::nullopt);
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "The answer is"), std::nullopt);
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "The answer is seven."), std::nullopt);
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "the answer is 4"), std::nullopt);
}

TEST(Gsm8kScorer, ComparesAsNumbers) {
    EXPECT_TRUE(is_correct(Scorer::Gsm8k, "The answer is 1,200.", "1200"));
    EXPECT_TRUE(is_correct(Scorer::Gsm8k, "The answer is 19.0 apples.", " 19"));
    EXPECT_FALSE(is_correct(Scorer::Gsm8k, "The answer is 18.", "19"));
    EXPECT_FALSE(is_correct(Scorer::Gsm8k, "no answer", "19"));
}

TEST(MmluProScorer, FollowsTheCascade) {
    // 1: "answer is (X)" wins over a later "Answer: Y".
    EXPECT_EQ(extract_answer(Scorer::MmluPro, "So the answer is (C). Answer: D"), "C");
    EXPECT_EQ(extract_answer(Scorer::MmluPro, "The answer is B."), "B");
    // 2: the LAST "Answer:" when no "answer is".
    EXPECT_EQ(extract_answer(Scorer::MmluPro, "Answer: A\nthen\nanswer:  E"), "E");
    // 3: the last standalone letter.
    EXPECT_EQ(extract_answer(Scorer::MmluPro, "It is B, not D, we think"), "D");
    EXPECT_EQ(extract_answer(Scorer::MmluPro, "Bob and Dave"), std::nullopt);
    EXPECT_TRUE(is_correct(Scorer::MmluPro, "78 x 4 = 312. That is option (C). The answer is (C).", "C"));
    EXPECT_FALSE(is_correct(Scorer::MmluPro, "The answer is (K).", "K"));
}

TEST(LcbOutputScorer, TakesTheLastOutputLineStripped) {
    EXPECT_EQ(extract_answer(Scorer::LcbOutput, "t = 20. It prints 40.\nOutput: 40"), "40");
    EXPECT_EQ(extract_answer(Scorer::LcbOutput, "Output: 1\nOutput:  [1, 2] \nmore"), "[1, 2]");
    EXPECT_EQ(extract_answer(Scorer::LcbOutput, "It prints 40."), std::nullopt);
    EXPECT_TRUE(is_correct(Scorer::LcbOutput, "Output: 40", "40 "));
    EXPECT_FALSE(is_correct(Scorer::LcbOutput, "Output: 40.0", "40"));
}

TEST(Scorers, NamesRoundTripAndUnknownNamesAreRefused) {
    for (Scorer s : {Scorer::Gsm8k, Scorer::MmluPro, Scorer::LcbOutput}) EXPECT_EQ(parse_scorer(to_string(s)), s);
    EXPECT_THROW(parse_scorer("math"), Error);
}

}  // namespace
}  // namespace klspec
