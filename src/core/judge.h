// The verification rule ("judge") interface. Every rule has the form of DESIGN.md:
//   if relaxed(i) then accept d_i, else apply the vanilla rule.
// A judge only answers relaxed(i); the vanilla fallback lives in the acceptance step (acceptance.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace klspec {

// What a judge sees about one drafted position i.
struct DraftPosition {
    // Shaped logits (sampling.h: shape_logits) of the target's p_i and the draft's q_i, same length.
    std::span<const float> target_logits;
    std::span<const float> draft_logits;
    int32_t draft_token = -1;
    // Last-layer hidden states at the position whose input token is d_i; filled only for judges that
    // ask for them (needs_hidden_states()).
    std::span<const float> target_hidden;
    std::span<const float> draft_hidden;
};

class Judge {
public:
    virtual ~Judge() = default;
    virtual std::string name() const = 0;
    // True when d_i is accepted without the vanilla test.
    virtual bool relaxed(const DraftPosition& position) = 0;
    virtual bool needs_hidden_states() const { return false; }
};

// The lossless rule: never relaxed.
class VanillaJudge final : public Judge {
public:
    std::string name() const override { return "vanilla"; }
    bool relaxed(const DraftPosition&) override { return false; }
};

}  // namespace klspec
