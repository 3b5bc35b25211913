// The acceptance step: greedy bookkeeping, and the property that makes vanilla speculative sampling
// lossless: the first emitted token is distributed exactly as p.
#include "core/acceptance.h"
#include "core/distribution_stats.h"
#include "core/judge_factory.h"
#include "core/judged_position.h"
#include "draft_position.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace klspec {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Relaxes every position: shows where the judge is consulted.
class AlwaysRelaxed final : public Judge {
public:
    std::string_view name() const override { return "always"; }
    JudgeDecision decide(const DraftPosition&) const override {
        ++calls;
        return {true, 0.0};
    }
    mutable int calls = 0;
};

using test::position;

std::vector<float> logits_of(const std::vector<double>& probs) {
    std::vector<float> logits;
    for (double p : probs) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : kMinusInf);
    return logits;
}

TEST(AcceptanceStep, GreedyStopsAtTheFirstMismatch) {
    // argmax p per position: 2, 0, 1; bonus argmax 3.
    const std::vector<std::vector<float>> target{{0, 1, 5, 0}, {4, 1, 0, 0}, {0, 3, 1, 0}, {0, 0, 0, 9}};
    const std::vector<float> draft(4, 0.0f);
    const SamplingParams greedy;
    Rng rng(0);
    const auto run = [&](const Judge& judge, std::vector<int32_t> tokens) {
        AcceptanceStep step(greedy, judge);
        return step.run(
            static_cast<int32_t>(tokens.size()), [&](int32_t i) { return position(target[i], draft, tokens[i]); },
            target[tokens.size()], rng);
    };
    VanillaJudge vanilla;
    StepOutcome outcome = run(vanilla, {2, 0, 3});
    EXPECT_EQ(outcome.accepted, 2);
    EXPECT_EQ(outcome.next_token, 1);  // the replacement is argmax p_3
    outcome = run(vanilla, {2, 0, 1});
    EXPECT_EQ(outcome.accepted, 3);
    EXPECT_EQ(outcome.next_token, 3);  // bonus
    outcome = run(vanilla, {1, 0, 1});
    EXPECT_EQ(outcome.accepted, 0);
    EXPECT_EQ(outcome.next_token, 2);

    // The judge is asked only where vanilla rejects, and what it relaxes is counted apart.
    AlwaysRelaxed always;
    outcome = run(always, {2, 3, 0});
    EXPECT_EQ(outcome.accepted, 3);
    EXPECT_EQ(outcome.relaxed_accepted, 2);
    EXPECT_EQ(always.calls, 2);
}

TEST(AcceptanceStep, OutsideTheJudgeSpanOnlyTheExactTestKeepsADraft) {
    // argmax p: 2, 0, 1; bonus 3. Every draft but the first is wrong; the judge would relax them all.
    const std::vector<std::vector<float>> target{{0, 1, 5, 0}, {4, 1, 0, 0}, {0, 3, 1, 0}, {0, 0, 0, 9}};
    const std::vector<float> draft(4, 0.0f);
    const std::vector<int32_t> tokens{2, 3, 0};
    AlwaysRelaxed always;
    AcceptanceStep step(SamplingParams{}, always);
    Rng rng(0);
    const auto run = [&](std::vector<bool> in_span) {
        return step.run(
            3,
            [&](int32_t i) {
                DraftPosition p = position(target[i], draft, tokens[i]);
                p.in_span = in_span[i];
                return p;
            },
            target[3], rng);
    };
    StepOutcome outcome = run({true, true, true});
    EXPECT_EQ(outcome.accepted, 3);
    EXPECT_EQ(outcome.span_blocked, 0);
    // The span closes after d_1: d_2 (wrong) is rejected although the judge relaxes it, and the target's
    // own token follows; the refused relaxation is counted.
    outcome = run({true, false, false});
    EXPECT_EQ(outcome.accepted, 1);
    EXPECT_EQ(outcome.relaxed_accepted, 0);
    EXPECT_EQ(outcome.next_token, 0);
    EXPECT_EQ(outcome.span_blocked, 1);
    ASSERT_EQ(step.verdicts().size(), 2u);
    EXPECT_EQ(step.verdicts()[1].verdict, Verdict::Rejected);
    EXPECT_FALSE(step.verdicts()[1].in_span);
    EXPECT_TRUE(step.verdicts()[1].decision.relaxed);
    // A correct draft outside the span is kept by the exact test as always.
    outcome = run({false, true, true});
    EXPECT_EQ(outcome.accepted, 3);
    EXPECT_EQ(outcome.relaxed_accepted, 2);
    EXPECT_FALSE(step.verdicts()[0].in_span);
}

// Stochastic vanilla (γ = 1): d ~ q, then accept or replace. The first emitted token must follow p.
// 200k seeded steps; Pearson's χ² against p over p's support, and no token outside it.
void expect_first_token_follows_target(const std::vector<double>& p, const std::vector<double>& q) {
    const std::vector<float> target = logits_of(p), draft = logits_of(q);
    SamplingParams params;
    params.temperature = 1.0f;
    VanillaJudge vanilla;
    AcceptanceStep step(params, vanilla);
    Rng rng(2024);
    std::vector<float> draft_probs;
    softmax(draft, draft_probs);

    constexpr int kSteps = 200000;
    std::vector<int> counts(p.size());
    for (int n = 0; n < kSteps; ++n) {
        const int32_t d = sample_from_weights(draft_probs, rng);
        const StepOutcome outcome = step.run(
            1, [&](int32_t) { return position(target, draft, d); }, target, rng);
        ++counts[outcome.accepted == 1 ? d : outcome.next_token];
    }
    double chi_square = 0;
    int degrees = -1;
    for (size_t v = 0; v < p.size(); ++v) {
        if (p[v] == 0) {
            EXPECT_EQ(counts[v], 0) << "token " << v << " has p = 0";
            continue;
        }
        const double expected = kSteps * p[v];
        chi_square += (counts[v] - expected) * (counts[v] - expected) / expected;
        ++degrees;
    }
    // P(χ² > 40) is below 1e-6 for up to 5 degrees of freedom; the runs are seeded, so this is a fixed
    // check that fails by a wide margin on a wrong residual (e.g. q − p, or resampling from q).
    EXPECT_LT(chi_square, 40.0) << degrees << " degrees of freedom";
}

TEST(AcceptanceStep, StochasticVanillaPreservesTheTarget) {
    {
        SCOPED_TRACE("generic pair");
        expect_first_token_follows_target({0.1, 0.2, 0.3, 0.4, 0.0}, {0.4, 0.3, 0.2, 0.05, 0.05});
    }
    {
        SCOPED_TRACE("q = p");
        expect_first_token_follows_target({0.5, 0.25, 0.125, 0.125}, {0.5, 0.25, 0.125, 0.125});
    }
    {
        SCOPED_TRACE("disjoint supports");
        expect_first_token_follows_target({0.6, 0.4, 0.0, 0.0, 0.0}, {0.0, 0.0, 0.3, 0.7, 0.0});
    }
    {
        SCOPED_TRACE("draft sharper than target");
        expect_first_token_follows_target({0.2, 0.2, 0.2, 0.2, 0.2, 0.0}, {0.9, 0.02, 0.02, 0.02, 0.02, 0.02});
    }
    // Vocabularies of different sizes (llama.cpp pairs them up to 128 apart): a draft token the target lacks
    // is rejected and the residual is over the target's ids, with q = 0 where the draft has none.
    {
        SCOPED_TRACE("draft vocabulary 2 larger, 0.3 of q beyond the target's");
        expect_first_token_follows_target({0.1, 0.2, 0.3, 0.4}, {0.2, 0.2, 0.2, 0.1, 0.2, 0.1});
    }
    {
        SCOPED_TRACE("target vocabulary 2 larger");
        expect_first_token_follows_target({0.1, 0.2, 0.3, 0.2, 0.2}, {0.4, 0.3, 0.3});
    }
}

// A draft without a distribution (n-gram): q is a point mass at each drafted token. γ = 2 with fixed rows
// p1, p2 (and p3 for the bonus): the first two emitted tokens must follow p1 × p2 jointly, by the token test
// and by block verification. 200k seeded steps, Pearson's χ² over the support.
void expect_point_mass_drafts_follow_target(Verification verification, int32_t d1, int32_t d2) {
    const std::vector<double> p1 = {0.5, 0.3, 0.2, 0.0}, p2 = {0.1, 0.6, 0.0, 0.3}, p3 = {0.25, 0.25, 0.25, 0.25};
    const std::vector<float> t1 = logits_of(p1), t2 = logits_of(p2), t3 = logits_of(p3), none;
    SamplingParams params;
    params.temperature = 1.0f;
    VanillaJudge vanilla;
    AcceptanceStep step(params, vanilla, verification);
    Rng rng(7);
    constexpr int kSteps = 200000;
    std::vector<int> counts(16);
    for (int n = 0; n < kSteps; ++n) {
        const StepOutcome outcome = step.run(
            2, [&](int32_t i) { return position(i == 0 ? t1 : t2, none, i == 0 ? d1 : d2); }, t3, rng);
        int32_t first = outcome.accepted >= 1 ? d1 : outcome.next_token;
        int32_t second = outcome.accepted >= 2 ? d2 : outcome.accepted == 1 ? outcome.next_token : -1;
        if (second < 0) {  // rejected at the first position: the next step's token comes from p2 (fixed rows)
            std::vector<float> probs;
            softmax(t2, probs);
            second = sample_from_weights(probs, rng);
        }
        ++counts[static_cast<size_t>(4 * first + second)];
    }
    double chi_square = 0;
    for (size_t a = 0; a < 4; ++a)
        for (size_t b = 0; b < 4; ++b) {
            const double expected = kSteps * p1[a] * p2[b];
            if (expected == 0) {
                EXPECT_EQ(counts[4 * a + b], 0) << "pair " << a << "," << b << " has probability 0";
                continue;
            }
            chi_square += (counts[4 * a + b] - expected) * (counts[4 * a + b] - expected) / expected;
        }
    EXPECT_LT(chi_square, 40.0) << "8 degrees of freedom";  // P(χ² > 40) < 1e-5
}

TEST(AcceptanceStep, PointMassDraftsPreserveTheTarget) {
    for (const Verification verification : {Verification::Token, Verification::Block}) {
        SCOPED_TRACE(std::string(to_string(verification)));
        expect_point_mass_drafts_follow_target(verification, 0, 1);  // the likeliest tokens
        expect_point_mass_drafts_follow_target(verification, 2, 2);  // p2(d2) = 0: d2 never kept
    }
}

// Records what the judge was shown.
class Recording final : public Judge {
public:
    std::string_view name() const override { return "recording"; }
    JudgeDecision decide(const DraftPosition& position) const override {
        seen.push_back({position.target_logits.size(), position.draft_logits.size()});
        return {true, 0.0};
    }
    mutable std::vector<std::pair<size_t, size_t>> seen;
};

TEST(AcceptanceStep, DifferentVocabularySizes_JudgesSeeTheCommonIds_ATokenTheTargetLacksIsRejected) {
    // p over 4 ids; q over 6 (a padded draft) and over 3 (a padded target's draft).
    const std::vector<float> p = logits_of({0.5, 0.25, 0.125, 0.125});
    const std::vector<float> q6 = logits_of({0.2, 0.2, 0.2, 0.2, 0.1, 0.1});
    const std::vector<float> q3 = logits_of({0.5, 0.3, 0.2});
    for (const bool sampled : {false, true}) {
        SCOPED_TRACE(sampled ? "sampled" : "greedy");
        SamplingParams params;
        if (sampled) params.temperature = 1.0f;
        Recording judge;
        AcceptanceStep step(params, judge);
        Rng rng(7);
        std::vector<float> q6_probs;
        softmax(q6, q6_probs);
        const auto at = [&](const std::vector<float>& q, int32_t token) {
            DraftPosition d = test::position(p, q, token);
            if (sampled)
                d.draft_probabilities = q.size() == 6 ? std::span<const float>(q6_probs) : std::span<const float>();
            return d;
        };
        // d = 1 is not p's argmax: vanilla rejects it (greedy), the judge sees 4 ids of each and keeps it.
        // Sampled, p(1)/q(1) > 1 accepts it without the judge; then d = 5 (the target has no id 5) follows.
        StepOutcome outcome = step.run(
            2, [&](int32_t i) { return at(q6, i == 0 ? 1 : 5); }, {}, rng);
        EXPECT_EQ(outcome.accepted, 1);
        ASSERT_EQ(step.verdicts().size(), 2u);
        EXPECT_EQ(step.verdicts()[1].verdict, Verdict::Rejected);
        EXPECT_FALSE(step.verdicts()[1].judged) << "no rule may keep a token the target lacks";
        EXPECT_GE(outcome.next_token, 0);
        EXPECT_LT(outcome.next_token, 4);
        for (const auto& [target_ids, draft_ids] : judge.seen) {
            EXPECT_EQ(target_ids, 4u);
            EXPECT_EQ(draft_ids, 4u);
        }
        EXPECT_EQ(judge.seen.size(), sampled ? 0u : 1u);
        judge.seen.clear();
        outcome = step.run(
            1, [&](int32_t) { return at(q3, 2); }, p, rng);  // p(2)/q(2) < 1: may reach the judge
        for (const auto& [target_ids, draft_ids] : judge.seen) {
            EXPECT_EQ(target_ids, 3u);
            EXPECT_EQ(draft_ids, 3u);
        }
        EXPECT_EQ(outcome.accepted, 1);  // vanilla or the judge keeps it
    }
}

TEST(AcceptanceStep, DifferentVocabularySizes_StatisticsOfTheRenormalisedCommonDistributions) {
    // Hand-computed: p = (1/2, 1/4, 1/8, 1/8); the draft's 6 ids (0.2 x 4, 0.1 x 2) cut to the target's 4 and
    // renormalised: q~ = (1/4, 1/4, 1/4, 1/4). KL(p || q~) = 1/2 ln 2 - 2/8 ln 2 = ln(2)/4; H(q~) = ln 4;
    // H(p) = 1.75 ln 2.
    const std::vector<float> p = logits_of({0.5, 0.25, 0.125, 0.125});
    const std::vector<float> q = logits_of({0.2, 0.2, 0.2, 0.2, 0.1, 0.1});
    const DraftPosition full = test::position(p, q, 1);
    const DraftPosition common = over_common_ids(full);
    ASSERT_EQ(common.target_logits.size(), 4u);
    ASSERT_EQ(common.draft_logits.size(), 4u);
    const auto statistic = [&](const std::string& rule, std::optional<double> threshold) {
        JudgeOptions options;
        options.rule = rule;
        options.threshold = threshold;
        options.confidence_mask = 1.0;
        return make_judge(options)->decide(common).statistic;
    };
    EXPECT_NEAR(statistic("kl", 1.0), std::log(2.0) / 4, 1e-6);
    EXPECT_NEAR(statistic("draft-entropy", 1.0), std::log(4.0), 1e-6);
    EXPECT_NEAR(statistic("target-entropy", 1.0), 1.75 * std::log(2.0), 1e-6);
    const JudgedPosition described = describe_position(full);
    EXPECT_NEAR(described.kl, std::log(2.0) / 4, 1e-6);
    EXPECT_NEAR(described.draft_entropy, std::log(4.0), 1e-6);
    EXPECT_EQ(described.target_token, 0);
    EXPECT_EQ(described.draft_rank, 1);
    // A target 2 ids longer is cut to the draft's 4 the same way: p~ = (1/4, 1/4, 1/4, 1/4) against
    // q = (1/2, 1/4, 1/8, 1/8) gives KL(p~ || q) = ln(2)/4.
    const std::vector<float> p6 = logits_of({0.2, 0.2, 0.2, 0.2, 0.1, 0.1});
    const std::vector<float> q4 = logits_of({0.5, 0.25, 0.125, 0.125});
    EXPECT_NEAR(kl_stats(over_common_ids(test::position(p6, q4, 0)).target_logits, q4).kl,
                0.25 * std::log(0.25 / 0.5) + 0.25 * std::log(0.25 / 0.25) + 0.5 * std::log(0.25 / 0.125), 1e-6);
    // Equal sizes: untouched.
    EXPECT_EQ(over_common_ids(test::position(p, p, 0)).target_logits.data(), p.data());
}

}  // namespace
}  // namespace klspec
