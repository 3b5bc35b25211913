// Token provenance from a step's verdicts, and the streamed text cut into one span per token
// (src/server/provenance.h).
#include <gtest/gtest.h>

#include "server/provenance.h"

namespace klspec::server {
namespace {

std::string joined(const std::vector<TextSpan>& spans) {
    std::string text;
    for (const TextSpan& span : spans) text += span.text;
    return text;
}

TEST(StepOrigins, DraftsThenTheTargetsToken) {
    const std::vector<PositionVerdict> verdicts = {{Verdict::Accepted, false, {}},
                                                   {Verdict::Relaxed, true, {true, 0.25}},
                                                   {Verdict::Rejected, true, {false, 3.0}}};
    const std::vector<TokenOrigin> origins = step_origins(3, verdicts);
    ASSERT_EQ(origins.size(), 3u);
    EXPECT_EQ(origins[0].provenance, Provenance::Draft);
    EXPECT_FALSE(origins[0].judge_statistic);
    EXPECT_EQ(origins[1].provenance, Provenance::Relaxed);
    EXPECT_EQ(origins[1].judge_statistic, 0.25);
    EXPECT_EQ(origins[2].provenance, Provenance::Target);  // the rejected draft's place: the target's token
    EXPECT_FALSE(origins[2].judge_statistic);
    // Every draft accepted: the last token is the target's bonus token, which has no verdict.
    const std::vector<TokenOrigin> all_accepted = step_origins(2, std::span(verdicts).first(1));
    EXPECT_EQ(all_accepted[1].provenance, Provenance::Target);
}

TEST(ProvenanceSpans, OneSpanPerTokenEvenWhenTextIsHeldBack) {
    ProvenanceSpans spans;
    spans.add_token(" Once", {Provenance::Draft, {}});
    spans.add_token(" upon", {Provenance::Relaxed, 0.5});
    spans.add_token(" a", {Provenance::Target, {}});
    // The stream held back " a" (a stop string might start there) and part of " upon".
    const std::vector<TextSpan> first = spans.take(" Once up");
    ASSERT_EQ(first.size(), 2u);
    EXPECT_EQ(first[0].text, " Once");
    EXPECT_EQ(first[0].origin.provenance, Provenance::Draft);
    EXPECT_EQ(first[1].text, " up");
    EXPECT_EQ(first[1].origin.provenance, Provenance::Relaxed);
    EXPECT_EQ(first[1].origin.judge_statistic, 0.5);
    spans.add_token(" time", {Provenance::Draft, {}});
    const std::vector<TextSpan> second = spans.take("on a time");
    EXPECT_EQ(joined(second), "on a time");
    ASSERT_EQ(second.size(), 3u);
    EXPECT_EQ(second[0].origin.provenance, Provenance::Relaxed);
    EXPECT_EQ(second[1].text, " a");
    EXPECT_EQ(second[1].origin.provenance, Provenance::Target);
    EXPECT_EQ(second[2].origin.provenance, Provenance::Draft);
    EXPECT_TRUE(spans.take("").empty());
}

TEST(ProvenanceSpans, ACharacterSplitOverByteTokensStaysWhole) {
    ProvenanceSpans spans;
    const std::string e_acute = "\xC3\xA9";  // é as two byte-fallback tokens
    spans.add_token("caf", {Provenance::Draft, {}});
    spans.add_token(e_acute.substr(0, 1), {Provenance::Relaxed, 1.0});
    spans.add_token(e_acute.substr(1), {Provenance::Target, {}});
    spans.add_token("!", {Provenance::Target, {}});
    const std::vector<TextSpan> out = spans.take("caf" + e_acute + "!");
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[1].text, e_acute);
    EXPECT_EQ(out[1].origin.provenance, Provenance::Relaxed);
    EXPECT_EQ(out[2].text, "!");
    EXPECT_EQ(out[2].origin.provenance, Provenance::Target);
}

TEST(ProvenanceSpans, EmptyPiecesMakeNoSpans) {
    ProvenanceSpans spans;
    spans.add_token("", {Provenance::Relaxed, 0.1});
    spans.add_token("x", {Provenance::Draft, {}});
    const std::vector<TextSpan> out = spans.take("x");
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].origin.provenance, Provenance::Draft);
}

}  // namespace
}  // namespace klspec::server
