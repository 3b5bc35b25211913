// The draft-length cost model with fake step costs: hand-computed expectations, and the switches it
// exists for (long drafts on a memory-bound target, none on a compute-bound one, target-only batching
// under load, a draft that never hits stepping aside and being probed again).
#include "core/draft_length.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace klspec {
namespace {

// t(b) = fixed + per_token·b at sizes 1..max_size, in milliseconds.
BatchCostCurve linear_curve(double fixed, double per_token, int32_t max_size = 160) {
    BatchCostCurve curve;
    for (int32_t b = 1; b <= max_size; ++b) curve.record(b, (fixed + per_token * b) * 1e-3);
    return curve;
}

// Sequences 0, 1, 2, ... (one micro-batch when their lengths are equal), each with one rate at every depth.
std::vector<DraftCandidate> candidates(std::vector<double> acceptances, int32_t max_length = 16) {
    std::vector<DraftCandidate> out;
    for (const double a : acceptances)
        out.push_back(
            {static_cast<int32_t>(out.size()), std::vector<double>(static_cast<size_t>(max_length), a), 0, max_length});
    return out;
}

// The Adaptive policy, step by step: +2 after a fully kept draft, −1 after a rejection, never above draft-max
// nor below max(1, draft-min). "Full" means every drafted token was kept, however many that was.
TEST(DraftLength, AdaptiveBudgetFollowsEachOutcome) {
    struct Step {
        int32_t drafted, accepted, expected;
    };
    const std::vector<Step> steps = {
        {4, 4, 6},  {6, 6, 8}, {8, 8, 10}, {10, 10, 10},  // up by 2, capped at draft-max 10
        {10, 9, 9}, {9, 0, 8},                            // down by 1, a near miss as much as a total one
        {3, 3, 10},                                       // a draft cut short (context, -n) but all kept
        {10, 0, 9}, {9, 0, 8}, {8, 0, 7},  {7, 0, 6},    {6, 0, 5},
        {5, 0, 4},  {4, 0, 3}, {3, 0, 2},  {2, 0, 1},    {1, 0, 1},  // never below 1
        {1, 1, 3}};
    int32_t budget = 4;
    for (size_t i = 0; i < steps.size(); ++i) {
        budget = next_adaptive_draft_budget(budget, steps[i].drafted, steps[i].accepted, 0, 10);
        EXPECT_EQ(budget, steps[i].expected) << "step " << i;
    }
    EXPECT_EQ(next_adaptive_draft_budget(4, 4, 1, 3, 10), 3);  // draft-min is the floor when above 1
    EXPECT_EQ(next_adaptive_draft_budget(3, 3, 2, 3, 10), 3);
}

TEST(DraftLength, ExpectedTokensByDepthByHand) {
    const std::vector<double> rates = {0.5, 0.8, 1.0};
    EXPECT_DOUBLE_EQ(expected_tokens(0, rates), 1.0);
    EXPECT_DOUBLE_EQ(expected_tokens(2, rates), 1.0 + 0.5 + 0.4);
    EXPECT_DOUBLE_EQ(expected_tokens(3, rates), 1.0 + 0.5 + 0.4 + 0.4);
    EXPECT_DOUBLE_EQ(expected_tokens(8, std::vector<double>(8, 0.5)), expected_tokens(8, 0.5));
}

TEST(DraftLength, DepthAcceptanceByHand) {
    DepthAcceptance depth;
    // No evidence: the decoder prior at every depth (prior weight 4 trials).
    EXPECT_DOUBLE_EQ(depth.rates(3)[2], AcceptanceEstimate::kDecoderPrior);
    depth.record(4, 2);  // depths 1, 2 kept, depth 3 rejected, depth 4 never judged
    const std::vector<double> r = depth.rates(5);
    EXPECT_DOUBLE_EQ(r[0], (1.0 + AcceptanceEstimate::kDecoderPrior * 4) / (1.0 + 4));
    EXPECT_DOUBLE_EQ(r[1], (1.0 + r[0] * 4) / (1.0 + 4));
    EXPECT_DOUBLE_EQ(r[2], (0.0 + r[1] * 4) / (1.0 + 4));
    EXPECT_DOUBLE_EQ(r[3], r[2]);  // no evidence: the depth before
    // A sequence that is rejected half as often as the decoder: depth 1's rejection halved, not its
    // acceptance doubled; the deeper depths keep the decoder's rates, which are already conditioned on
    // the draft having got that far (scaling them too counted the sequence's level twice).
    EXPECT_DOUBLE_EQ(depth.rates(5, 0.5)[0], 1.0 - (1.0 - r[0]) * 0.5);
    EXPECT_DOUBLE_EQ(depth.rates(5, 0.5)[1], r[1]);
    EXPECT_DOUBLE_EQ(depth.rates(5, 0.5)[2], r[2]);
    EXPECT_DOUBLE_EQ(depth.rates(5, 3.0)[0], 1.0 - (1.0 - r[0]) * 3.0);
    EXPECT_DOUBLE_EQ(depth.rates(5, 3.0)[2], r[2]);
    EXPECT_DOUBLE_EQ(depth.rates(5, 0.0)[0], 0.999);  // kept below 1
    EXPECT_DOUBLE_EQ(depth.rates(5, 100.0)[0], 0.0);  // and above 0
    depth.record(0, 0);                               // a target-only step is no evidence
    EXPECT_DOUBLE_EQ(depth.rates(1)[0], r[0]);
}

TEST(DraftLength, SequentialEqualSplitAsLlamaCpp) {
    using Split = std::vector<int32_t>;
    const auto split = [](std::vector<BatchShare> shares) { return sequential_equal_split(shares); };
    EXPECT_EQ(split({{0, 9}, {1, 9}, {2, 9}}), Split{27});         // equal lengths: one micro-batch
    EXPECT_EQ(split({{0, 1}, {1, 5}, {2, 5}}), Split({3, 8}));     // then the longer two together
    EXPECT_EQ(split({{0, 5}, {1, 1}, {2, 5}}), Split({3, 4, 4}));  // 0 and 2 are not consecutive
    EXPECT_EQ(split({{0, 2}, {2, 2}}), Split({2, 2}));             // a gap in the ids splits
    EXPECT_EQ(split({{3, 1}, {4, 0}, {5, 1}}), Split({1, 1}));     // an empty share is a gap too
    EXPECT_TRUE(split({}).empty());
}

TEST(DraftLength, UnequalLengthsPayForTheirMicroBatches) {
    // A memory-bound target (every micro-batch costs 10 ms): two sequences, one with a far better draft.
    // Unequal lengths would cost two passes, so both draft the same length.
    const BatchCostCurve verify = linear_curve(10.0, 0.0), draft = linear_curve(0.1, 0.0);
    const DraftChoice choice = choose_draft_lengths(verify, draft, candidates({0.9, 0.3}));
    EXPECT_EQ(choice.lengths[0], choice.lengths[1]);
    EXPECT_GT(choice.lengths[0], 0);
    EXPECT_NEAR(evaluate_draft_lengths(verify, draft, candidates({0.9, 0.3}), {4, 0}).expected_seconds,
                2 * 10e-3 + 4 * 0.1e-3, 1e-12);
}

TEST(DraftLength, TheFirstDraftCallReadsTheLastStepsUnfedDraftToo) {
    // After a step that kept every draft, the first draft call reads two tokens, and is priced as a call of two
    // (on the real pair's 0.5B, 2 cores: 75-80 ms against 45 for one). Here 150 against 45 ms, a target call
    // 80 + 20 b ms: γ 1 costs verify(2) + draft(2), and no γ pays for the two-token call.
    BatchCostCurve draft;
    draft.record(1, 45e-3);
    draft.record(2, 150e-3);
    const BatchCostCurve verify = linear_curve(80.0, 20.0);
    std::vector<DraftCandidate> after_full_step = candidates({0.93});
    after_full_step[0].first_call_tokens = 2;
    EXPECT_NEAR(evaluate_draft_lengths(verify, draft, candidates({0.93}), {1}).expected_seconds, 120e-3 + 45e-3, 1e-12);
    EXPECT_NEAR(evaluate_draft_lengths(verify, draft, after_full_step, {1}).expected_seconds, 120e-3 + 150e-3, 1e-12);
    EXPECT_NEAR(evaluate_draft_lengths(verify, draft, after_full_step, {3}).expected_seconds,
                160e-3 + 150e-3 + 2 * 45e-3, 1e-12);
    // 1.93 tokens in 165 ms beat one in 100 (11.7 against 10 a second); at 150 ms a first call, no length does.
    EXPECT_GT(choose_draft_lengths(verify, draft, candidates({0.93})).lengths[0], 0);
    EXPECT_EQ(choose_draft_lengths(verify, draft, after_full_step).lengths[0], 0);
}

TEST(DraftLength, LookupDraftsCostTheirLookupNotDraftBatches) {
    // A lookup drafter (n-gram) costs its measured lookup once per step, whatever the length, and no draft
    // batch; beside a model-drafting sequence, only the latter's depths are draft calls.
    const BatchCostCurve verify = linear_curve(10.0, 0.0), draft = linear_curve(1.0, 0.0);
    std::vector<DraftCandidate> mixed = candidates({0.9, 0.9});
    mixed[1].model_drafts = false;
    mixed[1].lookup_seconds = 0.05e-3;
    EXPECT_NEAR(evaluate_draft_lengths(verify, draft, mixed, {2, 6}).expected_seconds, 2 * 10e-3 + 2 * 1e-3 + 0.05e-3,
                1e-12);  // micro-batches of 3+3 and 4: two passes
    EXPECT_NEAR(evaluate_draft_lengths(verify, draft, mixed, {0, 0}).expected_seconds, 10e-3 + 0.05e-3, 1e-12);
}

TEST(DraftLength, AFreeDraftIsLongerThanAPaidOne) {
    // A target whose batch grows slowly: a draft model at 2 ms a depth stops early, a lookup that costs
    // nothing per token drafts as far as acceptance pays for the verify batch.
    const BatchCostCurve verify = linear_curve(10.0, 0.5), draft = linear_curve(2.0, 0.0);
    std::vector<DraftCandidate> model = candidates({0.8}), lookup = candidates({0.8});
    lookup[0].model_drafts = false;
    const int32_t model_length = choose_draft_lengths(verify, draft, model).lengths[0];
    const int32_t lookup_length = choose_draft_lengths(verify, draft, lookup).lengths[0];
    EXPECT_GT(model_length, 0);
    EXPECT_GT(lookup_length, model_length);
}

TEST(DraftLength, ExpectedTokensByHand) {
    EXPECT_DOUBLE_EQ(expected_tokens(0, 0.7), 1.0);
    EXPECT_DOUBLE_EQ(expected_tokens(2, 0.5), 1.75);  // 1 + 0.5 + 0.25
    EXPECT_DOUBLE_EQ(expected_tokens(8, 1.0), 9.0);
    EXPECT_DOUBLE_EQ(expected_tokens(5, 0.0), 1.0);
}

TEST(DraftLength, CurveInterpolatesExtrapolatesAndAverages) {
    BatchCostCurve curve;
    const auto record_twice = [&curve](int32_t size, double seconds) {  // built, then reused: no rebuild cost
        curve.record(size, seconds);
        curve.record(size, seconds);
    };
    EXPECT_EQ(curve.seconds(4), 0.0);
    record_twice(2, 1.0);
    EXPECT_DOUBLE_EQ(curve.seconds(4), 2.0);  // one size known: proportional
    record_twice(10, 2.0);
    EXPECT_DOUBLE_EQ(curve.rebuild_seconds(), 0.0);
    EXPECT_DOUBLE_EQ(curve.seconds(6), 1.5);
    EXPECT_DOUBLE_EQ(curve.seconds(18), 3.0);  // through the two largest sizes
    EXPECT_DOUBLE_EQ(curve.seconds(1), 1.0);   // never below the smallest size
    record_twice(2, 2.0);  // the first call rebuilds, but the reused one costs as much: no rebuild cost
    EXPECT_DOUBLE_EQ(curve.rebuild_seconds(), 0.0);
    EXPECT_DOUBLE_EQ(curve.seconds(2), 1.2);  // 1.0 + 0.2 (2.0 − 1.0)
    record_twice(6, 1.0);                     // a noisy size below a smaller one's cost reads as that cost
    EXPECT_DOUBLE_EQ(curve.seconds(6), 1.2);
    EXPECT_DOUBLE_EQ(curve.seconds(4), 1.2);
    curve.record(0, 5.0);  // nonsense is ignored
    curve.record(3, -1.0);
    EXPECT_EQ(curve.points().size(), 3u);
}

TEST(DraftLength, ANoisyRebuildPriceNeverMakesANewSizeFree) {
    BatchCostCurve curve;
    curve.record(2, 0.010);
    curve.record(2, 0.002);  // the rebuild priced at 0.008
    curve.record(1, 0.005);  // a new size, rebuilding, faster than that price: half of it stays the size's
    EXPECT_DOUBLE_EQ(curve.seconds(1), 0.0025);
    curve.record(1, 0.0015);  // reusing the graph: the size's own time replaces the provisional one
    EXPECT_DOUBLE_EQ(curve.seconds(1), 0.0015);
}

TEST(DraftLength, CurveChargesAGraphRebuildWhenTheSizeChanges) {
    BatchCostCurve curve;
    curve.record(4, 3.0);  // builds the graph: provisional
    curve.record(4, 2.0);  // reuses it: the size costs 2.0, the rebuild 1.0
    EXPECT_DOUBLE_EQ(curve.seconds(4), 2.0);
    EXPECT_DOUBLE_EQ(curve.rebuild_seconds(), 1.0);
    curve.record(8, 4.5);  // a new size, rebuilding: its own cost is the rest
    EXPECT_DOUBLE_EQ(curve.seconds(8), 3.5);
    curve.record(8, 3.0);  // reused: rebuild 1.0 + 0.2 ((4.5 − 3.0) − 1.0)
    EXPECT_DOUBLE_EQ(curve.seconds(8), 3.0);
    EXPECT_DOUBLE_EQ(curve.rebuild_seconds(), 1.1);
    curve.record(4, 3.5);  // a known size rebuilding: held until the next call
    EXPECT_DOUBLE_EQ(curve.seconds(4), 2.0);
    EXPECT_DOUBLE_EQ(curve.rebuild_seconds(), 1.1);
    curve.record(4, 2.2);  // reused: rebuild 1.1 + 0.2 ((3.5 − 2.2) − 1.1), the size 2.0 + 0.2 (2.2 − 2.0)
    EXPECT_DOUBLE_EQ(curve.seconds(4), 2.04);
    EXPECT_DOUBLE_EQ(curve.rebuild_seconds(), 1.14);
    EXPECT_EQ(curve.last_size(), 4);
    const std::vector<int32_t> calls = {4, 4, 8};
    EXPECT_DOUBLE_EQ(curve.seconds(calls), 2.04 + 2.04 + 3.0 + 1.14);
    // A slow spell while the size changes every call (a new γ each step): its calls' excess over the sizes'
    // averages is no rebuild cost (before, these three calls raised it to 3.5: a step of another size looked dear).
    curve.record(8, 9.0);
    curve.record(4, 8.0);
    curve.record(8, 9.0);
    EXPECT_DOUBLE_EQ(curve.rebuild_seconds(), 1.14);
    curve.record_untimed();  // a split call: whatever comes next rebuilds
    const std::vector<int32_t> one = {4};
    EXPECT_DOUBLE_EQ(curve.seconds(one), 2.04 + 1.14);
}

TEST(DraftLength, AStaleAverageIsReplacedByTheNextTiming) {
    BatchCostCurve curve;
    curve.record(1, 1.0);
    curve.record(1, 1.0);  // size 1 costs 1.0, rebuilds cost 0
    curve.record(4, 2.5);
    curve.record(4, 2.0);  // size 4 costs 2.0, rebuild 0.2 (2.5 − 2.0) = 0.1
    EXPECT_DOUBLE_EQ(curve.rebuild_seconds(), 0.1);
    EXPECT_EQ(curve.calls_since_measured(1), 2);
    EXPECT_FALSE(curve.stale(1));
    EXPECT_EQ(curve.calls_since_measured(7), 4) << "never measured: every call";
    while (curve.calls_since_measured(1) < BatchCostCurve::kStaleCalls) curve.record(4, 2.0);
    EXPECT_TRUE(curve.stale(1));
    EXPECT_FALSE(curve.stale(4));
    curve.record(1, 0.7);  // rebuilding after size 4: the fresh timing less the rebuild replaces 1.0
    EXPECT_DOUBLE_EQ(curve.seconds(1), 0.6);
    EXPECT_DOUBLE_EQ(curve.rebuild_seconds(), 0.1);
    EXPECT_EQ(curve.calls_since_measured(1), 0);
    curve.record(4, 2.1);  // a fresh size rebuilding: held for the next call, its average unmoved
    EXPECT_DOUBLE_EQ(curve.seconds(4), 2.0);
    EXPECT_NEAR(curve.rebuild_seconds(), 0.1, 1e-12);
    EXPECT_EQ(curve.calls_since_measured(4), 2);
    curve.record_untimed();
    EXPECT_EQ(curve.calls_since_measured(1), 2) << "an untimed call ages every size";
    const std::vector<int32_t> four = {4};
    curve.expire(four);  // a re-timing step: its call rebuilds, and still replaces the average
    EXPECT_TRUE(curve.stale(4));
    curve.record(4, 2.6);
    EXPECT_NEAR(curve.seconds(4), 2.5, 1e-12);
    EXPECT_EQ(curve.calls_since_measured(4), 0);
}

// Re-timed after kFirstInterval drafted steps, however fresh the price was when drafting began (a slow spell
// just before makes a fresh price a wrong one), then at doubling intervals; never when speculation gains a lot.
TEST(DraftLength, TargetOnlyIsRetimedWhileSpeculationGainsLittle) {
    const DraftChoice target_only{{0}, 1.0, 1.0};  // 1 token a second
    const DraftChoice small_gain{{3}, 3.0, 2.0};   // 1.5
    const DraftChoice large_gain{{3}, 3.0, 1.0};   // 3: beyond kMargin
    TargetOnlyRetime retime;
    for (int i = 0; i < 100; ++i) EXPECT_FALSE(retime.due(large_gain, target_only));
    for (int i = 1; i < TargetOnlyRetime::kFirstInterval; ++i) EXPECT_FALSE(retime.due(small_gain, target_only)) << i;
    EXPECT_TRUE(retime.due(small_gain, target_only));
    for (int i = 1; i < 2 * TargetOnlyRetime::kFirstInterval; ++i)
        EXPECT_FALSE(retime.due(small_gain, target_only)) << i;
    EXPECT_TRUE(retime.due(small_gain, target_only)) << "the interval doubles while the choice drafts";
    EXPECT_FALSE(retime.due(target_only, target_only));  // the choice steps aside: the interval resets
    for (int i = 1; i < TargetOnlyRetime::kFirstInterval; ++i) EXPECT_FALSE(retime.due(small_gain, target_only)) << i;
    EXPECT_TRUE(retime.due(small_gain, target_only));
}

TEST(DraftLength, AGraphRebuildKeepsTheLastLengthWhenOthersGainLess) {
    // Constant 10 ms verify, 0.1 ms a draft token, α = 0.5: E(γ) / t(γ) peaks at γ 5 (1.96875 / 10.5);
    // γ 3 (the last step's, batch 4) gives 1.875 / 10.3, ahead of γ 5 once a rebuild adds 1 ms to it.
    BatchCostCurve verify = linear_curve(10.0, 0.0, 17);  // 17 sizes: none stale (BatchCostCurve::kStaleCalls)
    const BatchCostCurve draft = linear_curve(0.1, 0.0);
    EXPECT_EQ(choose_draft_lengths(verify, draft, candidates({0.5})).lengths, std::vector<int32_t>({5}));
    verify.record(4, 11e-3);  // the last two calls had 4 tokens, the first rebuilding: 1 ms over the second
    verify.record(4, 10e-3);
    EXPECT_DOUBLE_EQ(verify.rebuild_seconds(), 1e-3);
    const DraftChoice stay = choose_draft_lengths(verify, draft, candidates({0.5}));
    EXPECT_EQ(stay.lengths, std::vector<int32_t>({3}));
    EXPECT_NEAR(stay.expected_seconds, 10.3e-3, 1e-12);
}

TEST(DraftLength, AcceptanceEstimateByHand) {
    AcceptanceEstimate estimate;  // decay 0.9, prior weight 16
    EXPECT_DOUBLE_EQ(estimate.rate(), 0.5);
    EXPECT_DOUBLE_EQ(estimate.rate(0.8), 0.8);  // no evidence: the prior
    estimate.record(4, 4);                      // 4 kept of 4 trials
    EXPECT_DOUBLE_EQ(estimate.rate(0.5), (4.0 + 8.0) / (4.0 + 16.0));
    estimate.record(4, 1);  // kept 0.9·4 + 1, trials 0.9·4 + 1 + 1 (the rejection)
    EXPECT_DOUBLE_EQ(estimate.rate(0.5), (4.6 + 8.0) / (5.6 + 16.0));
    estimate.record(0, 0);  // a target-only step: the evidence fades toward the prior
    EXPECT_DOUBLE_EQ(estimate.rate(0.5), (0.9 * 4.6 + 8.0) / (0.9 * 5.6 + 16.0));
    AcceptanceEstimate slow(AcceptanceEstimate::kDecoderDecay);
    slow.record(2, 0);
    slow.record(2, 0);
    EXPECT_DOUBLE_EQ(slow.rate(), 8.0 / (1.99 + 16.0));
}

TEST(DraftLength, MemoryBoundTargetDraftsLong) {
    // A batch costs what one token costs; a draft token 1 % of it.
    const BatchCostCurve verify = linear_curve(10.0, 0.0);
    const BatchCostCurve draft = linear_curve(0.1, 0.0);
    const DraftChoice choice = choose_draft_lengths(verify, draft, candidates({0.9}));
    EXPECT_EQ(choice.lengths, std::vector<int32_t>{16});
    // E(16) = (1 − 0.9^17) / 0.1 tokens in 10 + 16·0.1 ms.
    EXPECT_NEAR(choice.expected_tokens, 8.3323, 1e-4);
    EXPECT_NEAR(choice.expected_seconds, 11.6e-3, 1e-12);
    // At α 0.8 the 15th and 16th drafts no longer pay: 0.8^15 = 0.035 tokens for 0.1 of the step's
    // ~11.4 ms, which would earn 0.042 tokens at its rate.
    EXPECT_EQ(choose_draft_lengths(verify, draft, candidates({0.8})).lengths, std::vector<int32_t>{14});
}

TEST(DraftLength, ComputeBoundTargetDecodesAlone) {
    // Each token of a batch costs as much as a single one: no draft can pay.
    const DraftChoice choice = choose_draft_lengths(linear_curve(0.0, 1.0), linear_curve(0.1, 0.0), candidates({0.8}));
    EXPECT_EQ(choice.lengths, std::vector<int32_t>{0});
}

TEST(DraftLength, BestLengthIsInBetweenWhenBatchesGrowSlowly) {
    // t(b) = 10 + 0.5 b, draft 0.2 ms, α 0.7: E(γ)/t(γ) peaks at a middle γ; check it is the argmax.
    const BatchCostCurve verify = linear_curve(10.0, 0.5), draft = linear_curve(0.2, 0.0);
    const DraftChoice choice = choose_draft_lengths(verify, draft, candidates({0.7}));
    double best = 0;
    int32_t best_gamma = -1;
    for (int32_t g = 0; g <= 16; ++g) {
        const double rate = expected_tokens(g, 0.7) / ((10.0 + 0.5 * (g + 1)) + 0.2 * g);
        if (rate > best) best = rate, best_gamma = g;
    }
    ASSERT_GT(best_gamma, 0);
    ASSERT_LT(best_gamma, 16);
    EXPECT_EQ(choice.lengths, std::vector<int32_t>{best_gamma});
}

TEST(DraftLength, UnderLoadTargetOnlyBatchBeatsSpeculation) {
    // t(b) = 10 + 2b ms, draft 0.5 ms a depth, α 0.6. One sequence: γ 1 gives 1.6 tokens in 14.5 ms
    // against 1 in 12. Eight: target-only gives 8 tokens in 26 ms, γ 1 12.8 in 42.5.
    const BatchCostCurve verify = linear_curve(10.0, 2.0), draft = linear_curve(0.5, 0.0);
    EXPECT_GT(choose_draft_lengths(verify, draft, candidates({0.6})).lengths[0], 0);
    const DraftChoice loaded = choose_draft_lengths(verify, draft, candidates(std::vector<double>(8, 0.6)));
    EXPECT_EQ(loaded.lengths, std::vector<int32_t>(8, 0));
    EXPECT_NEAR(loaded.tokens_per_second(), 8.0 / 26e-3, 1e-6);
}

TEST(DraftLength, ASequenceWhoseDraftNeverHitsStepsAside) {
    // Two sequences share a batch whose tokens cost more than a second micro-batch's fixed part: the one
    // with acceptance 0 stops drafting, the other goes on.
    const BatchCostCurve verify = linear_curve(2.0, 0.5), draft = linear_curve(0.1, 0.0);
    const DraftChoice choice = choose_draft_lengths(verify, draft, candidates({0.9, 0.0}));
    EXPECT_GT(choice.lengths[0], 4);
    EXPECT_EQ(choice.lengths[1], 0);
}

TEST(DraftLength, FixedSequencesKeepTheirLengthAndTheOthersRespondBest) {
    const BatchCostCurve verify = linear_curve(5.0, 1.0), draft = linear_curve(0.1, 0.0);
    const std::vector<DraftCandidate> mixed = {{0, std::vector<double>(16, 0.3), 8, 8},
                                               {1, std::vector<double>(16, 0.8), 0, 16}};
    const DraftChoice choice = choose_draft_lengths(verify, draft, mixed);
    EXPECT_EQ(choice.lengths[0], 8);
    // The free sequence's length is its best response to the fixed one's (brute force).
    double best = 0;
    int32_t best_gamma = -1;
    for (int32_t g = 0; g <= 16; ++g) {
        const double rate = evaluate_draft_lengths(verify, draft, mixed, {8, g}).tokens_per_second();
        if (rate > best) best = rate, best_gamma = g;
    }
    EXPECT_EQ(choice.lengths[1], best_gamma);
    EXPECT_DOUBLE_EQ(choice.tokens_per_second(), best);
}

TEST(DraftLength, ProbeAfterIdleStepsWithDoublingInterval) {
    DraftProbe probe;
    for (int i = 1; i < DraftProbe::kFirstInterval; ++i) EXPECT_EQ(probe.adjust(0, 16), 0) << i;
    EXPECT_EQ(probe.adjust(0, 16), DraftProbe::kProbeLength);
    EXPECT_TRUE(probe.probing());
    for (int i = 1; i < 2 * DraftProbe::kFirstInterval; ++i) EXPECT_EQ(probe.adjust(0, 16), 0) << i;
    EXPECT_EQ(probe.adjust(0, 2), 2);  // the probe respects the step's cap
    // Drafting again for kFirstInterval steps in a row resets the interval.
    for (int i = 0; i < DraftProbe::kFirstInterval; ++i) EXPECT_EQ(probe.adjust(6, 16), 6) << i;
    EXPECT_FALSE(probe.probing());
    for (int i = 1; i < DraftProbe::kFirstInterval; ++i) EXPECT_EQ(probe.adjust(0, 16), 0) << i;
    EXPECT_EQ(probe.adjust(0, 16), DraftProbe::kProbeLength);
}

// A choice flipping between no draft and a break-even γ 1 keeps its estimate fresh by itself: its short
// drafting spells neither reset the doubled interval nor leave room for another probe (before, each spell
// reset the interval to 8, and a pattern of 12 idle steps and one γ 1 probed γ 4 once a period).
TEST(DraftProbe, AChoiceFlippingBetweenZeroAndOneProbesOnce) {
    DraftProbe probe;
    int probes = 0;
    for (int period = 0; period < 30; ++period) {
        for (int idle = 0; idle < 12; ++idle) probes += probe.adjust(0, 16) > 0;
        EXPECT_EQ(probe.adjust(1, 16), 1);
    }
    EXPECT_EQ(probes, 1);  // the first idle spell, after kFirstInterval steps
    for (int i = 1; i < 2 * DraftProbe::kFirstInterval; ++i) EXPECT_EQ(probe.adjust(0, 16), 0) << i;
    EXPECT_EQ(probe.adjust(0, 16), DraftProbe::kProbeLength);  // a real idle spell still probes
}

// The real pair on an AVX2 EPYC (2 cores, -t 2; llama-bench pp at each size, ms): at -np 4 a batch of 8 rows
// costs 1.9x one of 4, so no sequence gains by drafting even were every draft kept (4 kept drafts: 8 tokens in
// 317 + 4 x 27.5 ms against 4 in 163); one sequence alone could (5 tokens in 312 ms against one in 65).
TEST(DraftLength, DraftingCouldPayOnlyWhereEveryDraftKeptBeatsTargetOnly) {
    BatchCostCurve verify, draft;
    for (const auto& [size, ms] : std::vector<std::pair<int32_t, double>>{
             {1, 65}, {2, 106}, {4, 163}, {5, 202}, {8, 317}, {12, 451}, {16, 502}, {20, 601}})
        verify.record(size, ms * 1e-3);
    draft.record(1, 27.5e-3);
    draft.record(4, 61.2e-3);
    const std::vector<DraftCandidate> four = candidates({0.7, 0.7, 0.7, 0.7});
    const DraftChoice four_chosen = choose_draft_lengths(verify, draft, four);
    ASSERT_EQ(four_chosen.lengths, std::vector<int32_t>(4, 0));
    for (size_t s = 0; s < four.size(); ++s) EXPECT_FALSE(drafting_could_pay(verify, draft, four, four_chosen, s)) << s;

    const std::vector<DraftCandidate> one = candidates({0.5});
    const DraftChoice one_chosen = choose_draft_lengths(verify, draft, one);
    ASSERT_EQ(one_chosen.lengths[0], 0) << "at acceptance 0.5 no length pays";
    EXPECT_TRUE(drafting_could_pay(verify, draft, one, one_chosen, 0));
    // A catch-up is an investment the choice spreads over the answer: it does not bound what a probe may find.
    std::vector<DraftCandidate> behind = one;
    behind[0].catch_up_seconds = 10.0;
    EXPECT_TRUE(drafting_could_pay(verify, draft, behind, one_chosen, 0));
}

// A probe that could not pay is not sent, however long it has been due; it comes at the first step it could.
TEST(DraftProbe, NoProbeWhileDraftingCouldNotPay) {
    DraftProbe probe;
    for (int i = 0; i < 10 * DraftProbe::kMaxInterval; ++i)
        ASSERT_EQ(probe.adjust(0, 16, 0.0, 0.0, /*could_pay=*/false), 0) << i;
    EXPECT_EQ(probe.adjust(0, 16, 0.0, 0.0, /*could_pay=*/true), DraftProbe::kProbeLength);
}

// A decoder stepping four idle sequences asks once for each, only the first as a new step: its probes are spaced
// by its steps, as one sequence's are (counting every ask, the real pair at -np 4 probed 4x as often as priced).
TEST(DraftProbe, FourSequencesAStepProbeAsOftenAsOne) {
    const double cost = 7.0;
    const auto probes_in = [&](int sequences, int steps) {
        DraftProbe probe;
        int probes = 0;
        for (int step = 0; step < steps; ++step)
            for (int s = 0; s < sequences; ++s)
                probes += probe.adjust(0, 16, cost, 0.0, /*could_pay=*/true, /*new_step=*/s == 0) > 0;
        return probes;
    };
    const int steps = 10 * static_cast<int>(std::ceil(cost / DraftProbe::kMaxShare));
    EXPECT_EQ(probes_in(4, steps), probes_in(1, steps));
    EXPECT_LE(probes_in(4, steps) * cost / steps, DraftProbe::kMaxShare + 1e-9);
}

// A probe costing c target-only steps waits c / kMaxShare steps: with a draft as costly as its target
// (a probe of 4 ≈ 7 steps: 4 drafts and a verify of 5 at 3.1x), probes take 3 % of decoding, not a quarter.
TEST(DraftProbe, ProbesAreSpacedByTheirPrice) {
    DraftProbe probe;
    const double cost = 7.0;
    const int expected_interval = static_cast<int>(std::ceil(cost / DraftProbe::kMaxShare));  // 234
    int probes = 0, steps = 0;
    for (; steps < 10 * expected_interval; ++steps) probes += probe.adjust(0, 16, cost) > 0;
    EXPECT_EQ(probes, 10);
    EXPECT_LE(probes * cost / steps, DraftProbe::kMaxShare + 1e-9);
    DraftProbe free_probe;
    for (int i = 1; i < DraftProbe::kFirstInterval; ++i) EXPECT_EQ(free_probe.adjust(0, 16, 0.01), 0) << i;
    EXPECT_EQ(free_probe.adjust(0, 16, 0.01), DraftProbe::kProbeLength);  // a cheap probe keeps the schedule
}

// A young decoder's probes follow the interval alone (8, then 16 steps) while they cost at most 3 % of the
// answer's tokens left in all; after that, or with too few tokens left, they are spaced by their price.
TEST(DraftProbe, AYoungDecodersProbesArePaidFromTheTokensLeft) {
    const double cost = 2.4;  // 80 steps' spacing; 3 % of 200 tokens pays for two
    const auto steps_to_next_probe = [cost](DraftProbe& probe, double tokens_left) {
        int steps = 1;
        while (probe.adjust(0, 16, cost, tokens_left) == 0) ++steps;
        return steps;
    };
    DraftProbe probe;
    EXPECT_EQ(steps_to_next_probe(probe, 200.0), DraftProbe::kFirstInterval);
    EXPECT_EQ(steps_to_next_probe(probe, 200.0), 2 * DraftProbe::kFirstInterval);
    EXPECT_EQ(steps_to_next_probe(probe, 200.0), 80) << "the budget is spent: spaced by the price";
    EXPECT_EQ(steps_to_next_probe(probe, 200.0), 80) << "once in the decoder's life, not once an answer";

    DraftProbe short_answer;  // 3 % of 60 tokens is 1.8 steps: less than one probe
    EXPECT_EQ(steps_to_next_probe(short_answer, 60.0), 80);
}

}  // namespace
}  // namespace klspec
