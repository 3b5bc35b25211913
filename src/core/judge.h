// The verification rule ("judge") interface. Every rule has the form of docs/design.md:
//   if relaxed(i) then accept d_i, else apply the vanilla rule.
// A judge only answers relaxed(i); the vanilla fallback lives in the acceptance step (acceptance.h).
// Judges are pure: decide() has no side effects, so one judge can serve many sequences at once.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace klspec {

// What a judge sees about one drafted position i.
struct DraftPosition {
    // Shaped logits (sampling.h: shape_logits) of the target's p_i and the draft's q_i, same length. Both
    // draft spans are empty for a drafter without a distribution (n-gram lookup): q_i is then a point mass
    // at draft_token.
    std::span<const float> target_logits;
    std::span<const float> draft_logits;
    // softmax(draft_logits) when the drafting step already computed it (sampling); empty otherwise.
    std::span<const float> draft_probabilities;
    int32_t draft_token = -1;
    // Last-layer hidden states at the position whose input token is d_i; filled only for judges that
    // ask for them (needs_hidden_states()).
    std::span<const float> target_hidden;
    std::span<const float> draft_hidden;
    // The judge span (core/judge_span.h) is open before and after d_i. Outside it the acceptance step
    // applies the exact test alone; the judge is still asked, for the record.
    bool in_span = true;
};

// The position as judges see it when the two vocabularies differ in size (llama.cpp allows up to 128):
// target_logits and draft_logits cut to the ids both models have, [0, min(V_target, V_draft)), so that
// p and q are the softmax of those logits, each renormalised over the common ids (docs/judges.md, "Pairs
// whose vocabularies differ"); draft_probabilities, not renormalised, is left out. Equal sizes: unchanged.
DraftPosition over_common_ids(const DraftPosition& position);

struct JudgeDecision {
    bool relaxed = false;
    // The number the rule compared with its knob: KL, an entropy, the rank of d_i, the head's score.
    double statistic = 0;
};

class Judge {
public:
    virtual ~Judge() = default;
    virtual std::string_view name() const = 0;
    virtual JudgeDecision decide(const DraftPosition& position) const = 0;
    virtual bool needs_hidden_states() const { return false; }
    // Whether decide() reads q_i: such a rule cannot judge drafts without a distribution (n-gram).
    virtual bool needs_draft_distribution() const { return false; }
    // A rule that reads q_i or the draft's hidden states needs a draft model as its drafter.
    bool needs_draft_model() const { return needs_draft_distribution() || needs_hidden_states(); }
    // Whether decide() reads the logit rows; when it does not, greedy drafting need not keep them.
    virtual bool needs_distributions() const { return true; }
    // A bound ε the rule guarantees on TV(p_i, q_i) at every relaxed position, when it has one (kl: by
    // Pinsker, TV <= sqrt(KL / 2) < sqrt(τ / 2)). When sampling, a relaxed token is drawn from q_i, so its
    // distribution is within ε of the target's in total variation.
    virtual std::optional<double> total_variation_bound() const { return std::nullopt; }
    // W > 0: a relaxation at i also needs the next W drafts to pass the exact test natively (FLy).
    virtual int32_t lookahead() const { return 0; }
};

// The lossless rule: never relaxed.
class VanillaJudge final : public Judge {
public:
    static constexpr std::string_view kName = "vanilla";
    std::string_view name() const override { return kName; }
    JudgeDecision decide(const DraftPosition&) const override { return {}; }
    bool needs_distributions() const override { return false; }
};

}  // namespace klspec
