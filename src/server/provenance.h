// Where each generated token came from (an accepted draft, a draft only the judge kept, or the target's
// own token), and the generated text cut into spans of one token each so it can be coloured by that: the
// server's streamed `spans`, its page at GET / and `klspec generate --color` all show the same thing.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/acceptance.h"

namespace klspec::server {

enum class Provenance { Draft, Relaxed, Target };
std::string_view to_string(Provenance provenance);

struct TokenOrigin {
    Provenance provenance = Provenance::Target;
    std::optional<double> judge_statistic;  // relaxed tokens: the number the judge compared with its knob
};

// The origins of a step's `n_tokens` emitted tokens from its verdicts (StepResult::verdicts):
// token i came from the draft when verdict i is accepted or relaxed, else from the target.
std::vector<TokenOrigin> step_origins(size_t n_tokens, std::span<const PositionVerdict> verdicts);

struct TextSpan {
    std::string text;
    TokenOrigin origin;
};

// Lines the text a decoder streams up with the tokens behind it. The stream may hold text back (a stop
// string could still remove it) and release it a step later, so a step's text need not be its tokens'
// pieces: tokens queue here and text takes from the front. The streamed text is always a prefix of the
// tokens' pieces, cut at a stop string.
class ProvenanceSpans {
public:
    void add_token(std::string_view piece, TokenOrigin origin);
    // Spans that exactly cover `text`, the next text the stream released. A span never ends inside a UTF-8
    // character (a character split over byte tokens takes its first token's origin).
    std::vector<TextSpan> take(std::string_view text);

private:
    struct Pending {
        size_t bytes;  // of the token's piece, not yet covered by a span
        TokenOrigin origin;
    };
    void consume(size_t bytes);

    std::deque<Pending> pending_;
};

}  // namespace klspec::server
