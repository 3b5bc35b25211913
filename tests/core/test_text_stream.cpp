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

// Byte-level tokenizers (Llama 3, Qwen, GPT-2 style) split a character across tokens: a stream shows it
// whole, once its last byte has arrived, and never a chunk that ends inside it.
TEST(TextStream, ACharacterSplitAcrossPiecesIsShownWhole) {
    TextStream stream;
    EXPECT_FALSE(stream.append("caf\xC3"));  // é = C3 A9
    EXPECT_EQ(stream.take_stable(), "caf");
    EXPECT_FALSE(stream.append("\xA9 \xF0\x9F"));  // then the first half of 🙂 = F0 9F 99 82
    EXPECT_EQ(stream.take_stable(), "\xC3\xA9 ");
    EXPECT_FALSE(stream.append("\x99"));
    EXPECT_EQ(stream.take_stable(), "");
    EXPECT_FALSE(stream.append("\x82!"));
    EXPECT_EQ(stream.take_stable(), "\xF0\x9F\x99\x82!");
    // Bytes that can no longer become a character (a lead byte followed by ASCII) are passed on as they are.
    EXPECT_FALSE(stream.append("\xE3\x81"));
    EXPECT_EQ(stream.take_stable(), "");
    EXPECT_FALSE(stream.append("x"));
    EXPECT_EQ(stream.take_stable(), "\xE3\x81x");
    // finish() releases an unfinished character.
    EXPECT_FALSE(stream.append("\xE2"));
    EXPECT_EQ(stream.take_stable(), "");
    stream.finish();
    EXPECT_EQ(stream.take_stable(), "\xE2");
}

TEST(TextStream, AHeldBackCharacterAndAStopStringPrefixTogether) {
    TextStream stream({"\xC3\xA9!"});  // "é!"
    EXPECT_FALSE(stream.append("a\xC3"));
    EXPECT_EQ(stream.take_stable(), "a");
    EXPECT_FALSE(stream.append("\xA9"));
    EXPECT_EQ(stream.take_stable(), "");  // "é" may begin the stop string
    EXPECT_TRUE(stream.append("!"));
    stream.finish();
    EXPECT_EQ(stream.take_stable(), "");
    EXPECT_EQ(stream.text(), "a");
}

// llama-server's n_indent (process_token in tools/server/server-context.cpp), piece by piece: a line is looked
// at from the piece after the one that ended the line before it, and cut after its indentation.
TEST(TextStream, ALineIndentedLessThanTheLimitEndsTheTextAfterItsIndentation) {
    TextStream stream({}, 4);
    for (const char* piece : {"def f():", "\n", "    return 1", "\n"}) EXPECT_FALSE(stream.append(piece)) << piece;
    EXPECT_EQ(stream.take_stable(), "def f():\n    return 1\n");
    EXPECT_TRUE(stream.append("x = 2"));
    EXPECT_TRUE(stream.stopped_by_indentation());
    EXPECT_EQ(stream.text(), "def f():\n    return 1\n");
    EXPECT_EQ(stream.take_stable(), "");
}

TEST(TextStream, TheFirstLineIsLookedAtOnePieceLateAndStreamingHoldsItBack) {
    TextStream stream({}, 1);
    EXPECT_FALSE(stream.append("a\n"));
    EXPECT_FALSE(stream.append("b"));        // upstream looks at this line only with the next piece
    EXPECT_EQ(stream.take_stable(), "a\n");  // so it may still go
    EXPECT_TRUE(stream.append("c"));
    EXPECT_EQ(stream.text(), "a\n");
    EXPECT_TRUE(stream.stopped_by_indentation());
}

TEST(TextStream, WithoutALimitOrBeforeANewLineNothingIsCut) {
    TextStream off;
    for (const char* piece : {"a\n", "b", "c"}) EXPECT_FALSE(off.append(piece));
    TextStream first_line({}, 8);
    for (const char* piece : {"x", "y", "  z"}) EXPECT_FALSE(first_line.append(piece));
    EXPECT_EQ(first_line.take_stable(), "xy  z");
    EXPECT_FALSE(first_line.stopped_by_indentation());
}

}  // namespace
}  // namespace klspec
