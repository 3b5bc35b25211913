// The judge span: parsing, and where a span opens and closes over text given piece by piece.
#include "core/judge_span.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace klspec {
namespace {

// Feeds the pieces in order; returns, per piece, whether a token with that text could be relaxed.
std::vector<bool> relaxable(const std::string& spec, const std::vector<std::string>& pieces) {
    SpanTracker tracker(JudgeSpan::parse(spec));
    std::vector<bool> out;
    for (const std::string& piece : pieces) out.push_back(tracker.feed_and_check(piece));
    return out;
}

TEST(JudgeSpan, ParsesEachKindAndPrintsItBack) {
    EXPECT_TRUE(JudgeSpan::parse("all").is_all());
    const JudgeSpan until = JudgeSpan::parse("until:The answer is");
    EXPECT_EQ(until.kind, JudgeSpan::Kind::Until);
    EXPECT_EQ(until.close, std::vector<std::string>{"The answer is"});
    EXPECT_EQ(until.to_string(), "until:The answer is");
    EXPECT_TRUE(JudgeSpan::parse("think").needs_markers());
    EXPECT_EQ(JudgeSpan::parse("think").to_string(), "think");
    const JudgeSpan think = JudgeSpan::parse("think:<think>,</think>,<tool_call>");
    EXPECT_EQ(think.open, "<think>");
    EXPECT_EQ(think.close, (std::vector<std::string>{"</think>", "<tool_call>"}));
    EXPECT_FALSE(think.needs_markers());
    EXPECT_EQ(think.to_string(), "think:<think>,</think>,<tool_call>");
}

TEST(JudgeSpan, RefusesMalformedSpecsInOneLine) {
    for (const char* bad :
         {"", "some", "until:", "think:", "think:<think>", "think:<think>,", "think:,</think>", "ALL"}) {
        try {
            JudgeSpan::parse(bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const Error& e) {
            EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
        }
    }
}

TEST(SpanTracker, AllIsAlwaysOpen) {
    EXPECT_EQ(relaxable("all", {"The answer is", " 4", "</think>"}), (std::vector<bool>{true, true, true}));
}

TEST(SpanTracker, UntilClosesAtTheTokenThatCompletesTheString) {
    // The token carrying the string's last bytes is not relaxable, nor is anything after it, ever.
    EXPECT_EQ(
        relaxable("until:The answer is", {"So", " 2 + 2 = 4.", " The", " answer", " is", " 4", ".", " The answer is"}),
        (std::vector<bool>{true, true, true, true, false, false, false, false}));
    // The string inside one token, with more text after it.
    EXPECT_EQ(relaxable("until:answer is", {"x", "The answer is 4", "y"}), (std::vector<bool>{true, false, false}));
    // Split in the middle of a word across three pieces.
    EXPECT_EQ(relaxable("until:answer", {"an", "sw", "er", "!"}), (std::vector<bool>{true, true, false, false}));
    // A near miss keeps it open.
    EXPECT_EQ(relaxable("until:answer", {"answe", "r"}), (std::vector<bool>{true, false}));
    EXPECT_EQ(relaxable("until:answer", {"answe", "d", "answer"}), (std::vector<bool>{true, true, false}));
}

TEST(SpanTracker, ThinkIsOpenStrictlyBetweenItsMarkers) {
    EXPECT_EQ(relaxable("think:<think>,</think>", {"Hi", "<think>", "a", "b", "</think>", "c"}),
              (std::vector<bool>{false, false, true, true, false, false}));
    // Markers split across pieces.
    EXPECT_EQ(relaxable("think:<think>,</think>", {"<th", "ink>", "x", "</", "think", ">", "y"}),
              (std::vector<bool>{false, false, true, true, true, false, false}));
    // Closed and opened again within one piece: open after it; open and closed within one: closed after it.
    EXPECT_EQ(relaxable("think:<think>,</think>", {"<think>a</think>", "b", "</think>c<think>", "d"}),
              (std::vector<bool>{false, false, false, true}));
    // A closing marker shorter than the opening one stays closed while it sits in the carried-over tail.
    EXPECT_EQ(relaxable("think:<|channel|>analysis<|message|>,<|end|>",
                        {"<|channel|>analysis<|message|>", "a", "<|end|>", "b", "c"}),
              (std::vector<bool>{false, true, false, false, false}));
    // Any of several closing markers closes it.
    EXPECT_EQ(relaxable("think:<think>,</think>,<tool_call>", {"<think>", "a", "<tool_call>", "b"}),
              (std::vector<bool>{false, true, false, false}));
}

TEST(SpanTracker, ThinkOpenedByThePromptStartsOpen) {
    SpanTracker tracker(JudgeSpan::parse("think:<think>,</think>"));
    for (const char* prompt_piece : {"<|im_start|>assistant\n", "<think>", "\n"}) tracker.feed(prompt_piece);
    EXPECT_TRUE(tracker.inside());
    EXPECT_TRUE(tracker.feed_and_check("Let"));
    EXPECT_FALSE(tracker.feed_and_check("</think>"));
}

}  // namespace
}  // namespace klspec
