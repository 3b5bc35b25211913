#include <gtest/gtest.h>

#include "core/text_stream.h"

namespace klspec {
namespace {

TEST(TextStream, WithoutStopStringsEverythingIsStable) {
    TextStream stream;
    EXPECT_FALSE(stream.append("Once "));
    EXPECT_EQ(stream.take_stable(), "Once ");
    EXPECT_FALSE(stream.append("upon"));
    EXPECT_EQ(stream.take_stable(), "upon");
    EXPECT_EQ(stream.take_stable(), "");
}

TEST(TextStream, StopStringAcrossPiecesCutsTheText) {
    TextStream stream({"\nQ:"});
    EXPECT_FALSE(stream.append("The answer is 7."));
    EXPECT_FALSE(stream.append("\n"));
    // "\n" may start the stop string: held back.
    EXPECT_EQ(stream.take_stable(), "The answer is 7.");
    EXPECT_TRUE(stream.append("Q: next"));
    EXPECT_EQ(stream.text(), "The answer is 7.");
    EXPECT_EQ(stream.take_stable(), "");
}

// Found by fuzz_text_stream: one piece holding two stop strings ends before the earlier match, whichever
// stop string is listed first.
TEST(TextStream, OnePieceWithTwoStopStringsCutsAtTheEarlierMatch) {
    TextStream stream({"Lily", "\n"});
    EXPECT_TRUE(stream.append("The end.\nLily went home."));
    EXPECT_EQ(stream.text(), "The end.");
}

TEST(TextStream, HeldBackTextIsReleasedWhenItCannotMatch) {
    TextStream stream({"END"});
    EXPECT_FALSE(stream.append("the EN"));
    EXPECT_EQ(stream.take_stable(), "the ");
    EXPECT_FALSE(stream.append("X"));
    EXPECT_EQ(stream.take_stable(), "ENX");
}

TEST(TextStream, FinishReleasesHeldBackText) {
    TextStream stream({"END"});
    EXPECT_FALSE(stream.append("the E"));
    EXPECT_EQ(stream.take_stable(), "the ");
    stream.finish();
    EXPECT_EQ(stream.take_stable(), "E");
}

TEST(TextStream, EmptyStopStringsAreIgnored) {
    TextStream stream({""});
    EXPECT_FALSE(stream.append("abc"));
    EXPECT_EQ(stream.take_stable(), "abc");
}

}  // namespace
}  // namespace klspec
