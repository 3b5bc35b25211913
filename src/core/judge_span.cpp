#include "core/judge_span.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace klspec {

JudgeSpan JudgeSpan::parse(std::string_view spec) {
    JudgeSpan span;
    if (spec == "all") return span;
    if (spec.starts_with("until:")) {
        span.kind = Kind::Until;
        if (spec.size() == 6) throw Error("judge span 'until:' needs a string after the colon (until:The answer is)");
        span.close = {std::string(spec.substr(6))};
        return span;
    }
    span.kind = Kind::Between;
    if (spec == "think") return span;
    if (spec.starts_with("think:")) {
        std::vector<std::string> markers;
        for (std::string_view rest = spec.substr(6);;) {
            const size_t comma = rest.find(',');
            markers.emplace_back(rest.substr(0, comma));
            if (comma == std::string_view::npos) break;
            rest.remove_prefix(comma + 1);
        }
        const bool empty_marker =
            std::any_of(markers.begin(), markers.end(), [](const std::string& m) { return m.empty(); });
        if (markers.size() < 2 || empty_marker)
            throw Error(fmt::format("judge span '{}': expected think:OPEN,CLOSE with non-empty markers", spec));
        span.open = markers.front();
        span.close.assign(markers.begin() + 1, markers.end());
        return span;
    }
    throw Error(fmt::format("unknown judge span '{}' (all, until:STRING, think, think:OPEN,CLOSE)", spec));
}

std::string JudgeSpan::to_string() const {
    switch (kind) {
        case Kind::All:
            return "all";
        case Kind::Until:
            return "until:" + (close.empty() ? std::string() : close.front());
        case Kind::Between:
            return needs_markers() ? "think" : fmt::format("think:{},{}", open, fmt::join(close, ","));
    }
    return "all";
}

SpanTracker::SpanTracker(JudgeSpan span) : span_(std::move(span)), inside_(span_.kind != JudgeSpan::Kind::Between) {
    longest_marker_ = span_.open.size();
    for (const std::string& marker : span_.close) longest_marker_ = std::max(longest_marker_, marker.size());
}

void SpanTracker::feed(std::string_view piece) {
    if (span_.is_all() || piece.empty()) return;
    if (span_.kind == JudgeSpan::Kind::Until && !inside_) return;  // an until span never reopens
    scratch_.assign(tail_);
    scratch_.append(piece);
    const std::string_view text = scratch_;
    // Markers take effect in the order they start in the text. Those wholly inside the carried-over tail
    // are the latest ones seen before; replayed in order they leave the state they left.
    const auto starts_at = [&](size_t at, const std::string& marker) {
        return !marker.empty() && text.substr(at, marker.size()) == marker;
    };
    for (size_t at = 0; at < text.size(); ++at) {
        if (span_.kind == JudgeSpan::Kind::Between && starts_at(at, span_.open)) inside_ = true;
        for (const std::string& marker : span_.close)
            if (starts_at(at, marker)) inside_ = false;
    }
    const size_t keep = longest_marker_ - 1;
    tail_.assign(text.substr(text.size() - std::min(keep, text.size())));
}

bool SpanTracker::feed_and_check(std::string_view piece) {
    const bool before = inside_;
    feed(piece);
    return before && inside_;
}

}  // namespace klspec
