#include "core/block_verification.h"

#include <algorithm>
#include <stdexcept>

namespace klspec {
namespace {

void check_sizes(std::span<const int32_t> drafts, std::span<const std::span<const double>> target,
                 std::span<const std::span<const double>> draft) {
    if (target.size() != drafts.size() + 1 || draft.size() != drafts.size())
        throw std::invalid_argument("verify_block: need γ + 1 target and γ draft distributions for γ drafts");
    for (size_t i = 0; i < drafts.size(); ++i) {
        if (drafts[i] < 0 || static_cast<size_t>(drafts[i]) >= draft[i].size() || draft[i].size() != target[i].size())
            throw std::invalid_argument("verify_block: a draft token or distribution size is out of range");
    }
}

// Σ_x max(0, w · p(x) - q(x)).
double residual_mass(double w, std::span<const double> p, std::span<const double> q) {
    double mass = 0;
    for (size_t x = 0; x < p.size(); ++x) mass += std::max(0.0, w * p[x] - q[x]);
    return mass;
}

// The weights w_0..w_γ (w_0 = 1) and each position's pass probability r_1..r_γ.
struct BlockWeights {
    std::vector<double> w;
    std::vector<double> pass;
};

BlockWeights block_weights(std::span<const int32_t> drafts, std::span<const std::span<const double>> target,
                           std::span<const std::span<const double>> draft) {
    check_sizes(drafts, target, draft);
    const size_t gamma = drafts.size();
    BlockWeights out{std::vector<double>(gamma + 1, 1.0), std::vector<double>(gamma)};
    for (size_t i = 1; i <= gamma; ++i) {
        const size_t d = static_cast<size_t>(drafts[i - 1]);
        const double w = out.w[i] = std::min(1.0, out.w[i - 1] * target[i - 1][d] / draft[i - 1][d]);
        const double h = i < gamma ? residual_mass(w, target[i], draft[i]) : w;
        const double denominator = h + (1 - w);  // so that w = 1 gives exactly 1
        // h = 0 with w = 1 means p_i = q_i: nothing is left to correct at i, so the block never stops there
        // unless a later position passes.
        out.pass[i - 1] = denominator > 0 ? std::min(1.0, h / denominator) : 0.0;
    }
    return out;
}

}  // namespace

std::vector<double> block_pass_probabilities(std::span<const int32_t> drafts,
                                             std::span<const std::span<const double>> target,
                                             std::span<const std::span<const double>> draft) {
    return block_weights(drafts, target, draft).pass;
}

BlockVerdict verify_block(std::span<const int32_t> drafts, std::span<const std::span<const double>> target,
                          std::span<const std::span<const double>> draft, std::span<const double> uniforms) {
    if (uniforms.size() != drafts.size()) throw std::invalid_argument("verify_block: need one uniform per draft");
    const BlockWeights weights = block_weights(drafts, target, draft);
    BlockVerdict verdict;
    for (size_t i = 0; i < weights.pass.size(); ++i)
        if (uniforms[i] < weights.pass[i]) verdict.accepted = static_cast<int32_t>(i + 1);
    const size_t tau = static_cast<size_t>(verdict.accepted);
    const std::span<const double> p = target[tau];
    if (tau == drafts.size()) {
        verdict.next.assign(p.begin(), p.end());
        return verdict;
    }
    const double w = weights.w[tau];
    verdict.next.resize(p.size());
    double mass = 0;
    for (size_t x = 0; x < p.size(); ++x) mass += verdict.next[x] = std::max(0.0, w * p[x] - draft[tau][x]);
    if (mass <= 0) {
        verdict.next.assign(p.begin(), p.end());  // only where w_τ p_τ = q_τ, a zero-probability stop
        return verdict;
    }
    for (double& x : verdict.next) x /= mass;
    return verdict;
}

}  // namespace klspec
