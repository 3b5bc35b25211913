// Block verification (Sun et al., "Block Verification Accelerates Speculative Decoding", ICLR 2025,
// Algorithm 2): the drafted block is accepted jointly rather than token by token. The output still follows
// the target's distribution exactly, and the expected number of accepted drafts is never below token-by-token
// verification's (it is the optimum over valid verification schemes).
//
// With w_0 = 1 and, for i = 1..γ, the weight w_i = min(1, w_{i-1} · p_{i-1}(d_i) / q_{i-1}(d_i)), the residual
// mass h_i = Σ_x max(0, w_i · p_i(x) - q_i(x)) (i < γ) or h_γ = w_γ: position i passes when its own uniform
// η_i ≤ h_i / (h_i + 1 - w_i), and the block keeps d_1..d_τ for the last passing i = τ (0 when none passes).
// The token after them is drawn from p_γ when τ = γ, else from normalize(max(0, w_τ · p_τ - q_τ)). Unlike
// token-by-token verification a rejection at i does not end the step: a later position may still pass.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace klspec {

struct BlockVerdict {
    int32_t accepted = 0;      // τ: drafts kept
    std::vector<double> next;  // the distribution of the token after them (sums to 1)
};

// drafts: d_1..d_γ. target[i] (i = 0..γ): the target's distribution after d_1..d_i; draft[i] (i = 0..γ-1):
// the draft's, from which d_{i+1} was drawn (so draft[i][d_{i+1}] > 0). uniforms: η_1..η_γ in [0, 1).
// Throws std::invalid_argument on mismatched sizes.
BlockVerdict verify_block(std::span<const int32_t> drafts, std::span<const std::span<const double>> target,
                          std::span<const std::span<const double>> draft, std::span<const double> uniforms);

// The probability that position i (1-based) passes, for i = 1..γ: what verify_block compares η_i with. The
// exact law of τ follows: P(τ = i) = r_i · Π_{j > i} (1 - r_j).
std::vector<double> block_pass_probabilities(std::span<const int32_t> drafts,
                                             std::span<const std::span<const double>> target,
                                             std::span<const std::span<const double>> draft);

}  // namespace klspec
