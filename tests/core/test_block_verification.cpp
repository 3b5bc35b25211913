// Block verification (core/block_verification.h) by exact enumeration: over every draft block and every
// stopping point, the output's joint distribution is the target's, and its expected accepted length is never
// below token-by-token verification's; the paper's two-token example gives its 11/9 against 10/9.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/block_verification.h"

namespace klspec {
namespace {

using Prefix = std::vector<int32_t>;
using Model = std::function<std::vector<double>(const Prefix&)>;  // the next-token distribution after a prefix

// A context-dependent model on `vocab` tokens: each prefix gets its own distribution, fixed by `seed`.
Model random_model(int32_t vocab, uint32_t seed) {
    return [vocab, seed](const Prefix& prefix) {
        std::seed_seq sequence_seed{
            seed, static_cast<uint32_t>(prefix.size()),
            static_cast<uint32_t>(
                std::accumulate(prefix.begin(), prefix.end(), 7, [](int32_t a, int32_t b) { return a * 31 + b; }))};
        std::mt19937 rng(sequence_seed);
        std::gamma_distribution<double> gamma(0.7);
        std::vector<double> p(static_cast<size_t>(vocab));
        double sum = 0;
        for (double& x : p) sum += x = gamma(rng) + 1e-3;
        for (double& x : p) x /= sum;
        return p;
    };
}

Model fixed_model(std::vector<double> p) {
    return [p](const Prefix&) { return p; };
}

struct Enumeration {
    std::map<Prefix, double> output;  // joint law of the first γ + 1 output tokens
    double block_accepted = 0;        // E[τ]
    double token_accepted = 0;        // E[accepted] of token-by-token verification on the same drafts
};

// The target continues where a step's output is shorter than `length` tokens.
void continue_with_target(const Model& target, Prefix prefix, double mass, size_t length,
                          std::map<Prefix, double>& out) {
    if (prefix.size() == length) {
        out[prefix] += mass;
        return;
    }
    const std::vector<double> p = target(prefix);
    for (size_t x = 0; x < p.size(); ++x) {
        prefix.push_back(static_cast<int32_t>(x));
        continue_with_target(target, prefix, mass * p[x], length, out);
        prefix.pop_back();
    }
}

Enumeration enumerate(const Model& target, const Model& draft, int32_t vocab, int32_t gamma) {
    Enumeration e;
    const size_t length = static_cast<size_t>(gamma) + 1;
    std::function<void(Prefix, double)> over_drafts = [&](Prefix drafts, double probability) {
        if (drafts.size() < static_cast<size_t>(gamma)) {
            const std::vector<double> q = draft(drafts);
            for (int32_t x = 0; x < vocab; ++x) {
                Prefix next = drafts;
                next.push_back(x);
                over_drafts(next, probability * q[static_cast<size_t>(x)]);
            }
            return;
        }
        std::vector<std::vector<double>> p_rows, q_rows;
        for (size_t i = 0; i <= drafts.size(); ++i) {
            const Prefix prefix(drafts.begin(), drafts.begin() + static_cast<std::ptrdiff_t>(i));
            p_rows.push_back(target(prefix));
            if (i < drafts.size()) q_rows.push_back(draft(prefix));
        }
        const std::vector<std::span<const double>> p(p_rows.begin(), p_rows.end()), q(q_rows.begin(), q_rows.end());
        const std::vector<double> pass = block_pass_probabilities(drafts, p, q);
        double token_run = 1;
        for (int32_t i = 0; i < gamma; ++i) {
            const size_t d = static_cast<size_t>(drafts[static_cast<size_t>(i)]);
            token_run *= std::min(1.0, p_rows[static_cast<size_t>(i)][d] / q_rows[static_cast<size_t>(i)][d]);
            e.token_accepted += probability * token_run;
        }
        for (int32_t tau = 0; tau <= gamma; ++tau) {
            double law = tau == 0 ? 1.0 : pass[static_cast<size_t>(tau - 1)];
            for (int32_t j = tau + 1; j <= gamma; ++j) law *= 1 - pass[static_cast<size_t>(j - 1)];
            if (law <= 0) continue;
            // Uniforms that stop the block exactly at τ: η_τ = 0 passes, η_j = 1 never does.
            std::vector<double> uniforms(static_cast<size_t>(gamma), 1.0);
            if (tau > 0) uniforms[static_cast<size_t>(tau - 1)] = 0.0;
            const BlockVerdict verdict = verify_block(drafts, p, q, uniforms);
            EXPECT_EQ(verdict.accepted, tau);
            e.block_accepted += probability * law * tau;
            Prefix kept(drafts.begin(), drafts.begin() + tau);
            for (size_t y = 0; y < verdict.next.size(); ++y) {
                Prefix out = kept;
                out.push_back(static_cast<int32_t>(y));
                continue_with_target(target, out, probability * law * verdict.next[y], length, e.output);
            }
        }
    };
    over_drafts({}, 1.0);
    return e;
}

void expect_target_law(const Enumeration& e, const Model& target, size_t length) {
    std::map<Prefix, double> expected;
    continue_with_target(target, {}, 1.0, length, expected);
    ASSERT_EQ(e.output.size(), expected.size());
    for (const auto& [sequence, probability] : expected)
        EXPECT_NEAR(e.output.at(sequence), probability, 1e-12) << "sequence starting " << sequence[0];
}

TEST(BlockVerification, ThePapersTwoTokenExample) {
    // Context-free models on {a, b}: the target 1/3, 2/3; the draft 2/3, 1/3; γ = 2.
    const Model target = fixed_model({1.0 / 3, 2.0 / 3}), draft = fixed_model({2.0 / 3, 1.0 / 3});
    const Enumeration e = enumerate(target, draft, 2, 2);
    EXPECT_NEAR(e.token_accepted, 10.0 / 9, 1e-12);
    EXPECT_NEAR(e.block_accepted, 11.0 / 9, 1e-12);
    expect_target_law(e, target, 3);
}

TEST(BlockVerification, OutputFollowsTheTargetAndAcceptsAtLeastAsManyAsTokenByToken) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
        for (const int32_t gamma : {1, 2, 3}) {
            const Model target = random_model(3, seed), draft = random_model(3, 100 + seed);
            const Enumeration e = enumerate(target, draft, 3, gamma);
            expect_target_law(e, target, static_cast<size_t>(gamma) + 1);
            EXPECT_GE(e.block_accepted, e.token_accepted - 1e-12) << "seed " << seed << ", γ " << gamma;
            if (gamma == 1) {
                EXPECT_NEAR(e.block_accepted, e.token_accepted, 1e-12);  // one token: the same test
            }
        }
    }
}

TEST(BlockVerification, EqualModelsAcceptEverything) {
    const Model model = random_model(4, 9);
    const Enumeration e = enumerate(model, model, 4, 3);
    EXPECT_NEAR(e.block_accepted, 3.0, 1e-12);
    expect_target_law(e, model, 4);
}

TEST(BlockVerification, HandComputedStep) {
    // γ = 2 on {a, b}, drafts a, a. w_1 = min(1, (1/3)/(2/3)) = 1/2, h_1 = max(0, 1/2·1/3 - 2/3) +
    // max(0, 1/2·2/3 - 1/3) = 0, so r_1 = 0 / (0 + 1/2) = 0; w_2 = min(1, 1/2·1/2) = 1/4 = h_2, r_2 = 1/4 / (1/4 +
    // 3/4) = 1/4.
    const std::vector<double> p = {1.0 / 3, 2.0 / 3}, q = {2.0 / 3, 1.0 / 3};
    const std::vector<std::span<const double>> target = {p, p, p}, draft = {q, q};
    const std::vector<int32_t> drafts = {0, 0};
    const std::vector<double> pass = block_pass_probabilities(drafts, target, draft);
    ASSERT_EQ(pass.size(), 2u);
    EXPECT_NEAR(pass[0], 0.0, 1e-15);
    EXPECT_NEAR(pass[1], 0.25, 1e-15);
    const std::vector<double> passing = {0.9, 0.2}, failing = {0.0, 0.3};
    EXPECT_EQ(verify_block(drafts, target, draft, passing).accepted, 2);
    const BlockVerdict none = verify_block(drafts, target, draft, failing);
    EXPECT_EQ(none.accepted, 0);  // η_1 = 0 does not pass r_1 = 0
    // The residual at τ = 0 is max(0, p - q) normalized: all on b.
    ASSERT_EQ(none.next.size(), 2u);
    EXPECT_NEAR(none.next[0], 0.0, 1e-15);
    EXPECT_NEAR(none.next[1], 1.0, 1e-15);
}

TEST(BlockVerification, MismatchedSizesAreRejected) {
    const std::vector<double> p = {0.5, 0.5};
    const std::vector<std::span<const double>> two = {p, p}, one = {p};
    const std::vector<int32_t> drafts = {0};
    EXPECT_THROW(verify_block(drafts, one, one, std::vector<double>{0.5}), std::invalid_argument);
    EXPECT_THROW(verify_block(drafts, two, one, std::vector<double>{}), std::invalid_argument);
    EXPECT_THROW(verify_block(std::vector<int32_t>{2}, two, one, std::vector<double>{0.5}), std::invalid_argument);
}

}  // namespace
}  // namespace klspec
