#include <gtest/gtest.h>

#include "core/answer_scoring.h"

namespace klspec {
namespace {

TEST(AnswerScoring, TakesTheNumberAfterTheFirstMarker) {
    EXPECT_EQ(extract_final_answer("Sam starts with 12. 12 + 7 = 19. The answer is 19."), 19);
    EXPECT_EQ(extract_final_answer("The answer is 7. The answer is 8."), 7);
    EXPECT_EQ(extract_final_answer("The answer is -3."), -3);
    EXPECT_EQ(extract_final_answer("The answer is 120"), 120);
}

TEST(AnswerScoring, NoAnswerWithoutANumberAfterTheMarker) {
    EXPECT_EQ(extract_final_answer("12 + 7 = 19."), std::nullopt);
    EXPECT_EQ(extract_final_answer("The answer is"), std::nullopt);
    EXPECT_EQ(extract_final_answer("The answer is seven."), std::nullopt);
    EXPECT_EQ(extract_final_answer("the answer is 4"), std::nullopt);
}

}  // namespace
}  // namespace klspec
