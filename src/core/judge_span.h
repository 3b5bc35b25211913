// Where in an output the lossy rule may relax: everywhere (the paper's setting), until a string has been
// emitted (e.g. "The answer is": relax the working, never the answer), or inside the reasoning span
// between two markers (<think> ... </think>), as production engines' relaxed acceptance does. Outside the
// span every draft token gets the exact (vanilla) test. The markers are matched on the output's text, so
// a marker split across tokens or across drafts is found all the same.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace klspec {

struct JudgeSpan {
    enum class Kind { All, Until, Between };
    Kind kind = Kind::All;
    // Between: the opening marker. Empty for a `think` span not yet resolved from the model's template.
    std::string open;
    // Until: the one string whose emission ends the span. Between: the markers that close it (a template may
    // end reasoning with more than one, e.g. </think> or a tool call's opening).
    std::vector<std::string> close;

    // "all", "until:STRING", "think" (markers from the model's chat template: resolve_judge_span in
    // engine/chat_template.h), "think:OPEN,CLOSE[,CLOSE...]". Throws klspec::Error with a one-line reason for
    // anything else.
    static JudgeSpan parse(std::string_view spec);
    // The spec again ("all", "until:The answer is", "think:<think>,</think>").
    std::string to_string() const;
    bool is_all() const { return kind == Kind::All; }
    // A Between span whose markers are still to be read from the model's template.
    bool needs_markers() const { return kind == Kind::Between && (open.empty() || close.empty()); }
};

// Follows the span over a text given piece by piece. Until: inside until its string has appeared in the
// pieces fed; Between: inside after an `open` with no closing marker after it. All: always inside. A token may be
// relaxed only when the span is open both before and after its text (so the token that opens or closes the
// span, or carries a marker's last bytes, is always the target's own choice).
class SpanTracker {
public:
    SpanTracker() = default;
    explicit SpanTracker(JudgeSpan span);

    void feed(std::string_view piece);
    bool inside() const { return inside_; }
    // feed(piece), returning whether the span was open before and after it.
    bool feed_and_check(std::string_view piece);

private:
    JudgeSpan span_;
    bool inside_ = true;
    size_t longest_marker_ = 0;
    std::string tail_;     // the last bytes fed, shorter than the longest marker: a marker may end in the next piece
    std::string scratch_;  // tail_ + piece, reused
};

}  // namespace klspec
