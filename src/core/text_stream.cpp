#include "core/text_stream.h"

#include <algorithm>

namespace klspec {

std::pair<size_t, bool> LineIndentLimit::indentation_end(std::string_view text, size_t line) const {
    size_t pos = line;
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
    return {pos, pos < text.size()};
}

std::optional<size_t> LineIndentLimit::check(std::string_view text, std::string_view piece) {
    if (min_indent_ <= 0) return std::nullopt;
    std::optional<size_t> cut;
    if (has_new_line_) {
        if (line_start_ > 0) {
            const auto [end, more] = indentation_end(text, line_start_);
            if (more && end - line_start_ < static_cast<size_t>(min_indent_)) cut = end;
        }
        if (const size_t next = text.find('\n', line_start_); next != std::string_view::npos) line_start_ = next + 1;
    }
    if (piece.find('\n') != std::string_view::npos) has_new_line_ = true;
    return cut;
}

size_t LineIndentLimit::settled(std::string_view text) const {
    if (min_indent_ <= 0) return text.size();
    size_t line = line_start_;
    if (line == 0) {
        const size_t first = text.find('\n');
        line = first == std::string_view::npos ? text.size() : first + 1;
    }
    // A line whose indentation was long enough stays; the first one still undecided may lose what follows it.
    while (line < text.size()) {
        const auto [end, more] = indentation_end(text, line);
        if (!more || end - line < static_cast<size_t>(min_indent_)) return end;
        const size_t next = text.find('\n', line);
        line = next == std::string_view::npos ? text.size() : next + 1;
    }
    return text.size();
}

TextStream::TextStream(std::vector<std::string> stop_strings, int32_t min_line_indent)
    : stop_strings_(std::move(stop_strings)), indent_limit_(min_line_indent) {
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
    if (earliest == std::string::npos) {
        const std::optional<size_t> cut = indent_limit_.check(text_, piece);
        if (!cut) return false;
        earliest = *cut;
        stopped_by_indentation_ = true;
    }
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
    size_t end =
        finished_ ? text_.size() : std::min(text_.size() - pending_stop_prefix(), indent_limit_.settled(text_));
    // A character split across tokens is shown whole, once its last byte has arrived.
    if (!finished_) end -= incomplete_utf8_tail(std::string_view(text_).substr(0, end));
    if (end <= taken_) return {};
    std::string_view stable = std::string_view(text_).substr(taken_, end - taken_);
    taken_ = end;
    return stable;
}

}  // namespace klspec
