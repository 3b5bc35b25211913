// The production engines' relaxed-acceptance rules on hand-computed distributions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/acceptance.h"
#include "core/error.h"
#include "core/judge_factory.h"
#include "core/judges/fly_judge.h"
#include "core/judges/probability_judges.h"
#include "draft_position.h"

namespace klspec {
namespace {

using test::position;

// p = (1/2, 1/4, 1/4): H(p) = 1.5 ln 2, exp(-H) = 2^-1.5 = 0.35355. Thresholds sit 1e-4 either side of
// the exact values: p(d) = 1/4 is computed as exp(-log 4) in floating point.
const float kLog2 = std::log(2.0f);
const std::vector<float> kTarget{kLog2, 0.0f, 0.0f};
const std::vector<float> kDraft{0.0f, 0.0f, 0.0f};

TEST(ProbabilityThresholdJudge, HandComputed) {
    const JudgeDecision at = ProbabilityThresholdJudge(0.2499).decide(position(kTarget, kDraft, 1));
    EXPECT_TRUE(at.relaxed);
    EXPECT_NEAR(at.statistic, 0.25, 1e-7);
    EXPECT_FALSE(ProbabilityThresholdJudge(0.2501).decide(position(kTarget, kDraft, 1)).relaxed);
    // A token truncated away (p = 0) is never relaxed, even at threshold 0.
    const std::vector<float> truncated{kLog2, 0.0f, -std::numeric_limits<float>::infinity()};
    EXPECT_FALSE(ProbabilityThresholdJudge(0.0).decide(position(truncated, kDraft, 2)).relaxed);
}

TEST(TopNDeltaJudge, HandComputed) {
    // d = 1: rank 1 (ties go to the lower id), gap 1/2 - 1/4 = 1/4.
    const JudgeDecision d1 = TopNDeltaJudge(2, 0.2501).decide(position(kTarget, kDraft, 1));
    EXPECT_TRUE(d1.relaxed);
    EXPECT_NEAR(d1.statistic, 0.25, 1e-7);
    EXPECT_FALSE(TopNDeltaJudge(2, 0.2499).decide(position(kTarget, kDraft, 1)).relaxed);  // gap too large
    EXPECT_FALSE(TopNDeltaJudge(1, 0.5).decide(position(kTarget, kDraft, 1)).relaxed);     // not in the top-1
    // d = 2 has the same gap but rank 2: outside the top-2.
    EXPECT_FALSE(TopNDeltaJudge(2, 0.5).decide(position(kTarget, kDraft, 2)).relaxed);
    EXPECT_TRUE(TopNDeltaJudge(3, 0.2501).decide(position(kTarget, kDraft, 2)).relaxed);
}

TEST(TypicalJudge, HandComputed) {
    // ε = 0.09, α = 0.3: min(0.09, 0.3 · 0.35355 = 0.106) = 0.09 < 1/4.
    const JudgeDecision small = TypicalJudge(0.09).decide(position(kTarget, kDraft, 1));
    EXPECT_TRUE(small.relaxed);
    EXPECT_NEAR(small.statistic, 0.25, 1e-7);
    // ε = 0.3, α = 0.5477: min(0.3, 0.1936) < 1/4.
    EXPECT_TRUE(TypicalJudge(0.3).decide(position(kTarget, kDraft, 1)).relaxed);
    // ε = 0.64, α = 0.8: min(0.64, 0.2828) > 1/4.
    EXPECT_FALSE(TypicalJudge(0.64).decide(position(kTarget, kDraft, 1)).relaxed);
}

TEST(ProbabilityJudges, FactoryKnobsAndRanges) {
    JudgeOptions o;
    o.rule = "topn-delta";
    o.threshold = 0.1;
    EXPECT_THROW(make_judge(o), Error);  // needs N
    o.topk = 3;
    EXPECT_EQ(make_judge(o)->name(), "topn-delta");
    o.rule = "typical";
    EXPECT_THROW(make_judge(o), Error);  // does not take K
    o.topk.reset();
    EXPECT_EQ(make_judge(o)->name(), "typical");
    o.rule = "prob-threshold";
    o.threshold = 1.5;
    EXPECT_THROW(make_judge(o), Error);  // a probability
    o.threshold.reset();
    EXPECT_THROW(make_judge(o), Error);  // needs it
}

}  // namespace
}  // namespace klspec

namespace klspec {
namespace {

JudgeOptions rule_options(std::string rule, std::optional<double> threshold, std::optional<int32_t> topk,
                          std::optional<double> max_tv) {
    JudgeOptions o;
    o.rule = std::move(rule);
    o.threshold = threshold;
    o.topk = topk;
    o.max_tv = max_tv;
    return o;
}

// --max-tv ε: τ = 2ε², and every position the kl rule relaxes has TV(p, q) < ε (Pinsker).
TEST(MaxTv, SetsTheThresholdAndBoundsTotalVariation) {
    // p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4): KL = ln2 / 4 = 0.1733, TV = 1/4.
    const std::vector<float> p{kLog2, 0.0f, 0.0f}, q{0.0f, kLog2, 0.0f};
    JudgeOptions o;
    o.rule = "kl";
    o.confidence_mask = 1.0;
    o.max_tv = 0.295;  // τ = 0.17405 > KL
    const auto loose = make_judge(o);
    EXPECT_TRUE(loose->decide(position(p, q, 1)).relaxed);
    EXPECT_NEAR(*loose->total_variation_bound(), 0.295, 1e-12);
    o.max_tv = 0.29;  // τ = 0.1682 < KL
    EXPECT_FALSE(make_judge(o)->decide(position(p, q, 1)).relaxed);
    EXPECT_FALSE(make_judge(rule_options("topk", std::nullopt, 2, std::nullopt))->total_variation_bound().has_value());

    // On random distributions: relaxed implies TV < ε.
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    size_t relaxed = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        const size_t v = 2 + size_t(trial % 40);
        std::vector<float> target(v), draft(v);
        const float spread = 0.2f + float(trial % 7);
        for (size_t j = 0; j < v; ++j) {
            target[j] = spread * normal(rng);
            draft[j] = target[j] + 0.5f * normal(rng);
        }
        o.max_tv = 0.05 + 0.3 * double(trial % 10) / 10;
        const int32_t token = int32_t(size_t(trial) % v);
        if (!make_judge(o)->decide(position(target, draft, token)).relaxed) continue;
        ++relaxed;
        const auto softmax = [](const std::vector<float>& logits) {
            std::vector<double> out(logits.size());
            const double m = *std::max_element(logits.begin(), logits.end());
            double sum = 0;
            for (size_t j = 0; j < logits.size(); ++j) sum += out[j] = std::exp(double(logits[j]) - m);
            for (double& x : out) x /= sum;
            return out;
        };
        const std::vector<double> pp = softmax(target), qq = softmax(draft);
        double tv = 0;
        for (size_t j = 0; j < v; ++j) tv += 0.5 * std::abs(pp[j] - qq[j]);
        EXPECT_LT(tv, *o.max_tv) << "trial " << trial;
    }
    EXPECT_GT(relaxed, 300u);
}

TEST(MaxTv, RefusedOutsideKlAndWithAThreshold) {
    EXPECT_THROW(make_judge(rule_options("topk", std::nullopt, 2, 0.1)), Error);
    EXPECT_THROW(make_judge(rule_options("kl", 0.1, std::nullopt, 0.1)), Error);
    EXPECT_THROW(make_judge(rule_options("kl", std::nullopt, std::nullopt, 0.0)), Error);
    EXPECT_THROW(make_judge(rule_options("kl", std::nullopt, std::nullopt, 1.5)), Error);
}

}  // namespace
}  // namespace klspec

namespace klspec {
namespace {

// p = (1/3, 1/3, 1/3, 0+): top-3 entropy ln 3; p = (0.98, 0.01, 0.01): about 0.112.
TEST(FlyJudge, TopThreeEntropyDecides) {
    const std::vector<float> flat{0.0f, 0.0f, 0.0f, -30.0f}, peaked{std::log(0.98f), std::log(0.01f), std::log(0.01f)};
    const std::vector<float> draft(4, 0.0f);
    const JudgeDecision f = FlyJudge(1.0, 2).decide(position(flat, draft, 1));
    EXPECT_TRUE(f.relaxed);
    EXPECT_NEAR(f.statistic, std::log(3.0), 1e-6);
    const double h = -(0.98 * std::log(0.98) + 2 * 0.01 * std::log(0.01));
    const JudgeDecision p = FlyJudge(1.0, 2).decide(position(peaked, draft, 1));
    EXPECT_FALSE(p.relaxed);
    EXPECT_NEAR(p.statistic, h, 1e-6);
    // Two finite logits only: the entropy of those two.
    const std::vector<float> two{0.0f, 0.0f, -std::numeric_limits<float>::infinity()};
    EXPECT_NEAR(FlyJudge(0.0, 1).decide(position(two, draft, 0)).statistic, std::log(2.0), 1e-6);
}

// The acceptance step overrides a rejection only when the next W drafts match the target natively.
TEST(FlyJudge, RelaxesOnlyWhenTheNextWDraftsMatch) {
    // Position 0 is uncertain (argmax 0, d = 1); positions 1..3 have argmax 2; the bonus argmax is 3.
    const std::vector<std::vector<float>> target{
        {0.1f, 0.0f, 0.0f, -9.0f}, {0, 0, 5, 0}, {0, 0, 5, 0}, {0, 0, 5, 0}, {0, 0, 0, 9}};
    const std::vector<float> draft(4, 0.0f);
    const FlyJudge fly(1.0, 2);
    Rng rng(0);
    const auto run = [&](std::vector<int32_t> tokens) {
        AcceptanceStep step(SamplingParams{}, fly);
        return step.run(
            static_cast<int32_t>(tokens.size()),
            [&](int32_t i) { return position(target[size_t(i)], draft, tokens[size_t(i)]); }, target[tokens.size()],
            rng);
    };
    StepOutcome o = run({1, 2, 2, 2});  // the next 2 match: relaxed, then all accepted
    EXPECT_EQ(o.accepted, 4);
    EXPECT_EQ(o.relaxed_accepted, 1);
    o = run({1, 2, 0, 2});  // d_2 mismatches within the window
    EXPECT_EQ(o.accepted, 0);
    EXPECT_EQ(o.next_token, 0);
    o = run({1, 2});  // only one draft follows: fewer than W
    EXPECT_EQ(o.accepted, 0);
}

TEST(FlyJudge, FactoryTakesAWindowOnlyForFly) {
    JudgeOptions o;
    o.rule = "fly";
    o.threshold = 0.5;
    EXPECT_EQ(make_judge(o)->lookahead(), FlyJudge::kDefaultWindow);
    o.window = 3;
    EXPECT_EQ(make_judge(o)->lookahead(), 3);
    o.window = 0;
    EXPECT_THROW(make_judge(o), Error);
    o.rule = "kl";
    o.window = 3;
    EXPECT_THROW(make_judge(o), Error);
}

}  // namespace
}  // namespace klspec
