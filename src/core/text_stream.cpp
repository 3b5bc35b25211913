#include "core/text_stream.h"

#include <algorithm>

namespace klspec {

TextStream::TextStream(std::vector<std::string> stop_strings) : stop_strings_(std::move(stop_strings)) {
    std::erase_if(stop_strings_, [](const std::string& s) { return s.empty(); });
}

bool TextStream::append(std::string_view piece) {
    const size_t old_size = text_.size();
    text_.append(piece);
    // The text ends before the earliest match of any stop string (one piece can hold several).
    size_t earliest = std::string::npos;
    for (const std::string& stop : stop_strings_) {
        // A match must end inside the new piece; start looking where it could begin.
        const size_t from = old_size >= stop.size() ? old_size - stop.size() + 1 : 0;
        earliest = std::min(earliest, text_.find(stop, from));
    }
    if (earliest == std::string::npos) return false;
    text_.resize(earliest);
    finished_ = true;
    return true;
}

namespace {

// Bytes at the end of `text` that begin a UTF-8 character without completing it: a lead byte followed by
// fewer continuation bytes than it announces. Anything else (complete, or not UTF-8 at all) is 0.
size_t incomplete_utf8_tail(std::string_view text) {
    for (size_t back = 1; back <= std::min<size_t>(4, text.size()); ++back) {
        const auto byte = static_cast<unsigned char>(text[text.size() - back]);
        if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: look further back for the lead
        const size_t length = (byte & 0xE0) == 0xC0 ? 2 : (byte & 0xF0) == 0xE0 ? 3 : (byte & 0xF8) == 0xF0 ? 4 : 1;
        return length > back ? back : 0;
    }
    return 0;
}

}  // namespace

size_t TextStream::pending_stop_prefix() const {
    size_t longest = 0;
    for (const std::string& stop : stop_strings_) {
        for (size_t len = std::min(stop.size() - 1, text_.size()); len > longest; --len) {
            if (std::string_view(text_).substr(text_.size() - len) == std::string_view(stop).substr(0, len)) {
                longest = len;
                break;
            }
        }
    }
    return longest;
}

std::string_view TextStream::take_stable() {
    size_t end = finished_ ? text_.size() : text_.size() - pending_stop_prefix();
    // A character split across tokens is shown whole, once its last byte has arrived.
    if (!finished_) end -= incomplete_utf8_tail(std::string_view(text_).substr(0, end));
    if (end <= taken_) return {};
    std::string_view stable = std::string_view(text_).substr(taken_, end - taken_);
    taken_ = end;
    return stable;
}

}  // namespace klspec
