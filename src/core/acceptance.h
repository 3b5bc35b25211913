// Steps 3 and 4 of one speculative step (DESIGN.md): judge the drafted tokens in order, stop at the
// first rejection, and emit the accepted tokens plus one target token (replacement or bonus).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/judge.h"
#include "core/sampling.h"

namespace klspec {

struct StepOutcome {
    int32_t accepted = 0;          // drafted tokens kept (d_1..d_accepted)
    int32_t relaxed_accepted = 0;  // of those, kept only because the judge relaxed them
    int32_t next_token = -1;       // the target's token after them: replacement or bonus
};

// Supplies DraftPosition i (0-based) for i < n_drafted. Lazily, so that a caller can skip work
// (e.g. shaping logits) for positions after the first rejection.
using PositionSource = std::function<DraftPosition(int32_t i)>;

class AcceptanceStep {
public:
    AcceptanceStep(const SamplingParams& params, Judge& judge) : params_(params), judge_(judge) {}

    // `bonus_target_logits` are the shaped logits of p_{n_drafted+1}, used when every draft is kept.
    StepOutcome run(int32_t n_drafted, const PositionSource& position,
                    std::span<const float> bonus_target_logits, Rng& rng);

    // The vanilla rule alone for one position. Greedy: accept iff d = argmax p. Stochastic: accept with
    // probability min(1, p(d)/q(d)); on rejection `replacement` is drawn from normalize(max(0, p - q)).
    bool vanilla_accepts(const DraftPosition& position, Rng& rng, int32_t& replacement);

private:
    int32_t draw(std::span<const float> shaped_logits, Rng& rng);

    SamplingParams params_;
    Judge& judge_;
    std::vector<float> p_;
    std::vector<float> q_;
};

}  // namespace klspec
