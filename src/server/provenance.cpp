#include "server/provenance.h"

#include <algorithm>

namespace klspec::server {

std::string_view to_string(Provenance provenance) {
    switch (provenance) {
        case Provenance::Draft:
            return "draft";
        case Provenance::Relaxed:
            return "relaxed";
        case Provenance::Target:
            return "target";
    }
    return "target";
}

std::vector<TokenOrigin> step_origins(size_t n_tokens, std::span<const PositionVerdict> verdicts) {
    std::vector<TokenOrigin> origins(n_tokens);
    for (size_t i = 0; i < n_tokens && i < verdicts.size(); ++i) {
        if (verdicts[i].verdict == Verdict::Accepted) origins[i].provenance = Provenance::Draft;
        if (verdicts[i].verdict == Verdict::Relaxed) origins[i] = {Provenance::Relaxed, verdicts[i].decision.statistic};
    }
    return origins;
}

void ProvenanceSpans::add_token(std::string_view piece, TokenOrigin origin) {
    if (!piece.empty()) pending_.push_back({piece.size(), origin});
}

void ProvenanceSpans::consume(size_t bytes) {
    while (bytes > 0 && !pending_.empty()) {
        const size_t taken = std::min(bytes, pending_.front().bytes);
        pending_.front().bytes -= taken;
        bytes -= taken;
        if (pending_.front().bytes == 0) pending_.pop_front();
    }
}

std::vector<TextSpan> ProvenanceSpans::take(std::string_view text) {
    std::vector<TextSpan> spans;
    const auto continuation = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; };
    size_t at = 0;
    while (at < text.size()) {
        // Text beyond the queued tokens cannot come from the decoder's stream; shown as the target's.
        const TokenOrigin origin = pending_.empty() ? TokenOrigin{} : pending_.front().origin;
        size_t end = pending_.empty() ? text.size() : std::min(text.size(), at + pending_.front().bytes);
        while (end < text.size() && continuation(text[end])) ++end;
        consume(end - at);
        spans.push_back({std::string(text.substr(at, end - at)), origin});
        at = end;
    }
    return spans;
}

}  // namespace klspec::server
