// Steps 3 and 4 of one speculative step (docs/design.md): judge the drafted tokens in order, stop at the
// first rejection, and emit the accepted tokens plus one target token (replacement or bonus).
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/judge.h"
#include "core/sampling.h"

namespace klspec {

struct StepOutcome {
    int32_t accepted = 0;          // drafted tokens kept (d_1..d_accepted)
    int32_t relaxed_accepted = 0;  // of those, kept only because the judge relaxed them
    int32_t next_token = -1;       // the target's token after them: replacement or bonus
    double judge_seconds = 0;      // time spent inside Judge::decide
    int32_t span_blocked = 0;      // positions outside the judge span the judge would have relaxed
};

// How the acceptance step treated one examined position.
enum class Verdict : uint8_t {
    Accepted,  // the vanilla test kept d_i
    Relaxed,   // the vanilla test rejected d_i and the judge kept it
    Rejected,  // both rejected it: the step ends here
};
std::string_view to_string(Verdict verdict);

struct PositionVerdict {
    Verdict verdict = Verdict::Accepted;
    bool judged = false;     // the judge was consulted (only where the vanilla test rejects)
    JudgeDecision decision;  // meaningful when judged
    bool in_span = true;     // DraftPosition::in_span: outside, a relaxing decision was not applied
};

// Supplies DraftPosition i (0-based) for i < n_drafted, lazily: a caller can skip work (shaping logits)
// for positions after the first rejection.
class PositionSource {
public:
    virtual DraftPosition position(int32_t i) = 0;

protected:
    ~PositionSource() = default;
};

// How a sampled draft is verified. Token: the standard test, position by position, ending at the first
// rejection. Block: core/block_verification.h, the block accepted jointly (exact, never fewer tokens in
// expectation); only with the vanilla judge. At temperature 0 both are argmax matching.
enum class Verification : uint8_t { Token, Block };
std::string_view to_string(Verification verification);
// "token" or "block"; throws klspec::Error otherwise.
Verification parse_verification(std::string_view text);

class AcceptanceStep {
public:
    AcceptanceStep(const SamplingParams& params, const Judge& judge, Verification verification = Verification::Token)
        : params_(params), judge_(&judge), verification_(verification) {}

    // `bonus_target_logits` are the shaped logits of p_{n_drafted+1}, used when every draft is kept.
    StepOutcome run(int32_t n_drafted, PositionSource& positions, std::span<const float> bonus_target_logits, Rng& rng);
    // The same with a callable `DraftPosition(int32_t i)`.
    template <typename PositionFn>
    requires std::is_invocable_r_v<DraftPosition, PositionFn&, int32_t> StepOutcome
    run(int32_t n_drafted, PositionFn&& position_fn, std::span<const float> bonus_target_logits, Rng& rng) {
        struct Adapter final : PositionSource {
            explicit Adapter(PositionFn& f) : fn(f) {}
            DraftPosition position(int32_t i) override { return fn(i); }
            PositionFn& fn;
        } adapter(position_fn);
        return run(n_drafted, static_cast<PositionSource&>(adapter), bonus_target_logits, rng);
    }

    // One entry per position the last run examined: the accepted ones, then the rejected one if any.
    std::span<const PositionVerdict> verdicts() const { return verdicts_; }

private:
    // The vanilla rule alone. Greedy: accept iff d = argmax p. Stochastic: accept with probability
    // min(1, p(d)/q(d)); on rejection `replacement` is drawn from normalize(max(0, p - q)).
    bool vanilla_accepts(const DraftPosition& position, Rng& rng, int32_t& replacement);
    int32_t draw(std::span<const float> shaped_logits, Rng& rng);
    // FLy's lookahead: d_{i+1}..d_{i+W} all exist and equal the target's argmax there.
    bool next_drafts_match(int32_t i, int32_t n_drafted, PositionSource& positions) const;
    // Verification::Block when sampling: every position's p and q, then verify_block.
    StepOutcome run_block(int32_t n_drafted, PositionSource& positions, std::span<const float> bonus_target_logits,
                          Rng& rng);

    SamplingParams params_;
    const Judge* judge_;
    Verification verification_;
    // Reused buffers: no allocation per step once they have grown to the vocabulary size.
    std::vector<float> p_;
    std::vector<float> q_;
    std::vector<std::vector<double>> block_target_, block_draft_;  // run_block's p and q rows
    std::vector<int32_t> block_drafts_;
    std::vector<double> block_uniforms_;
    std::vector<PositionVerdict> verdicts_;
};

}  // namespace klspec
