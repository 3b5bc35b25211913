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

TEST(Gsm8kScorer, FallsBackToTheLastBoxedNumber) {
    // Qwen2.5-Coder-1.5B-Instruct's answers to GSM8K test problems 0 and 1, in the chat template.
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "She makes 9 * 2 = 18 dollars.\n\nThe final answer is \\(\\boxed{18}\\)."),
              "18");
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "\\boxed{2} bolts of blue, so \\[\\boxed{3}\\]"), "3");
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "\\boxed{\\$1,200.50}"), "1200.5");
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "\\boxed{x = -4 \\text{ apples}}"), "-4");
    // The marker comes first, as before; a box without a number gives none.
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "The answer is 7. \\boxed{8}"), "7");
    EXPECT_EQ(extract_answer(Scorer::Gsm8k, "\\boxed{seven}"), std::nullopt);
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
    for (Scorer s : {Scorer::Gsm8k, Scorer::MmluPro, Scorer::LcbOutput, Scorer::Math})
        EXPECT_EQ(parse_scorer(to_string(s)), s);
    EXPECT_THROW(parse_scorer("humaneval"), Error);
}

}  // namespace
}  // namespace klspec

namespace klspec {
namespace {

TEST(MathScorer, NormalizesLikePrm800k) {
    EXPECT_EQ(normalize_math_answer("\\left( 3, \\frac{\\pi}{2} \\right)"), "(3,\\frac{\\pi}{2})");
    EXPECT_EQ(normalize_math_answer("\\dfrac12"), "\\frac{1}{2}");
    EXPECT_EQ(normalize_math_answer("\\frac1{72}"), "\\frac{1}{72}");
    EXPECT_EQ(normalize_math_answer("0.5"), "\\frac{1}{2}");
    EXPECT_EQ(normalize_math_answer("3/4"), "\\frac{3}{4}");
    EXPECT_EQ(normalize_math_answer("x = 5"), "5");
    EXPECT_EQ(normalize_math_answer("90^\\circ"), "90");
    EXPECT_EQ(normalize_math_answer("\\text{Evelyn}"), "Evelyn");
    EXPECT_EQ(normalize_math_answer("10\\%"), "10");
    EXPECT_EQ(normalize_math_answer("11\\sqrt2"), "11\\sqrt{2}");
    EXPECT_EQ(normalize_math_answer("5 \\text{ cm}"), "5");
    EXPECT_EQ(normalize_math_answer(".5"), "\\frac{1}{2}");
    EXPECT_EQ(normalize_math_answer("\\$18.90"), "18.90");
    // Where prm800k's own code raises and gives the answer back unchanged: two "\text{ " units.
    EXPECT_EQ(normalize_math_answer("1 \\text{ m} 2 \\text{ cm}"), "1 \\text{ m} 2 \\text{ cm}");
}

TEST(MathScorer, TakesTheLastBoxedWithBalancedBraces) {
    EXPECT_EQ(last_boxed("so $\\boxed{1}$ or rather $\\boxed{\\frac{1}{2}}$."), "\\frac{1}{2}");
    EXPECT_EQ(last_boxed("\\fbox{7} then \\boxed{8}"), "8");
    EXPECT_EQ(last_boxed("no box"), std::nullopt);
    EXPECT_EQ(last_boxed("\\boxed{\\frac{1}{2}"), std::nullopt);  // unbalanced
    EXPECT_TRUE(is_correct(Scorer::Math, "Thus $\\boxed{\\dfrac{1}{2}}$.", "\\frac{1}{2}"));
    EXPECT_TRUE(is_correct(Scorer::Math, "$\\boxed{x=5}$", "5"));
    EXPECT_FALSE(is_correct(Scorer::Math, "$\\boxed{6}$", "5"));
    EXPECT_FALSE(is_correct(Scorer::Math, "The answer is 5.", "5"));  // MATH wants a box
}

}  // namespace
}  // namespace klspec
