// Generated text as it grows: stop-string detection, llama-server's line-indentation limit (n_indent), and
// streaming that never shows a caller text that either later removes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace klspec {

// llama-server's n_indent (/infill): once a piece held a new line, every later line must start with at least
// `min_indent` spaces or tabs, else generation stops with that line cut after its indentation. Replays
// llama-server's bookkeeping (process_token in tools/server/server-context.cpp) piece by piece, including that
// it looks at a line one piece after the one that ended the line before it.
class LineIndentLimit {
public:
    explicit LineIndentLimit(int32_t min_indent) : min_indent_(min_indent) {}
    // After `piece` was appended to `text`: the length to cut `text` to when the limit stops generation.
    std::optional<size_t> check(std::string_view text, std::string_view piece);
    // Text before this position can no longer be cut.
    size_t settled(std::string_view text) const;

private:
    // The end of the indentation of the line that starts at `line`, and whether the line has more after it.
    std::pair<size_t, bool> indentation_end(std::string_view text, size_t line) const;

    int32_t min_indent_ = 0;
    bool has_new_line_ = false;
    size_t line_start_ = 0;  // llama-server's last_nl_pos: the line the next check looks at (0: none yet)
};

class TextStream {
public:
    explicit TextStream(std::vector<std::string> stop_strings = {}, int32_t min_line_indent = 0);

    // Appends a generated piece. Returns true when the text now contains a stop string, or a line breaks the
    // indentation limit (stopped_by_indentation()); the text is then cut and nothing more should be appended.
    bool append(std::string_view piece);
    bool stopped_by_indentation() const { return stopped_by_indentation_; }

    // Text not yet taken that no stop string can still remove, without a UTF-8 character whose last bytes
    // are still to come (all of it once `finish` was called).
    std::string_view take_stable();
    void finish() { finished_ = true; }

    const std::string& text() const { return text_; }

private:
    // Length of the longest suffix of text_ that is a proper prefix of some stop string.
    size_t pending_stop_prefix() const;

    std::vector<std::string> stop_strings_;
    LineIndentLimit indent_limit_;
    bool stopped_by_indentation_ = false;
    std::string text_;
    size_t taken_ = 0;
    bool finished_ = false;
};

}  // namespace klspec
