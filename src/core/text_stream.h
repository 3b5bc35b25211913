// Generated text as it grows: stop-string detection, and streaming that never shows a caller text
// that a stop string later removes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace klspec {

class TextStream {
public:
    explicit TextStream(std::vector<std::string> stop_strings = {});

    // Appends a generated piece. Returns true when the text now contains a stop string; the text is
    // then cut just before it and nothing more should be appended.
    bool append(std::string_view piece);

    // Text not yet taken that no stop string can still remove, without a UTF-8 character whose last bytes
    // are still to come (all of it once `finish` was called).
    std::string_view take_stable();
    void finish() { finished_ = true; }

    const std::string& text() const { return text_; }

private:
    // Length of the longest suffix of text_ that is a proper prefix of some stop string.
    size_t pending_stop_prefix() const;

    std::vector<std::string> stop_strings_;
    std::string text_;
    size_t taken_ = 0;
    bool finished_ = false;
};

}  // namespace klspec
