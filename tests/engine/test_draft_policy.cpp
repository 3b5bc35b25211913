// The draft policies on real models with fake step costs (SpeculativeDecoder::set_step_costs): Auto drafts
// long where a batch costs what one token costs, steps aside where every token costs the same, batches
// target-only under load, probes again, and stays lossless; Off never drafts; the measured costs appear.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/speculative_decoder.h"
#include "test_support.h"

namespace klspec {
namespace {

constexpr int32_t kTokens = 64;

ContextOptions test_context(int32_t n_sequences = 1) {
    ContextOptions options;
    options.n_ctx = 256;
    options.n_threads = 1;
    options.n_sequences = n_sequences;
    return options;
}

GenerationOptions automatic(int32_t draft_max = 16) {
    GenerationOptions options;
    options.max_tokens = kTokens;
    options.draft_max = draft_max;
    options.draft_policy = DraftPolicy::Auto;
    return options;
}

// t(b) = fixed + per_token·b milliseconds for b = 1..largest, each timed once (so with more than
// BatchCostCurve::kStaleCalls sizes, the small ones are stale).
BatchCostCurve linear_curve(double fixed, double per_token, int32_t largest = 200) {
    BatchCostCurve curve;
    for (int32_t b = 1; b <= largest; ++b) curve.record(b, (fixed + per_token * b) * 1e-3);
    return curve;
}

class DraftPolicyTest : public ::testing::Test {
protected:
    const Model target{test::kTargetModel};
    const Model draft{test::kDraftQ8};

    // "Once upon a time" under Auto with these fake costs; fails unless it is target-only output up to a
    // near tie.
    GenerationResult decode_with_costs(BatchCostCurve verify, BatchCostCurve draft_costs, const std::string& label) {
        SpeculativeDecoder decoder(target, &draft, test_context());
        decoder.set_step_costs(std::move(verify), std::move(draft_costs), /*draft_catch_up_seconds_per_token=*/0.0);
        const test::GreedyReference reference =
            test::greedy_reference(target, "Once upon a time", kTokens, test_context());
        GenerationResult result = decoder.generate("Once upon a time", automatic());
        int64_t divergences = 0;
        test::check_equal_up_to_near_tie(reference, result.tokens, label, divergences);
        return result;
    }

    // 240 tokens of "Once upon a time" under Auto with t(b) = b ms and these draft costs; `drafted_steps` gets
    // the index and γ of each step that drafted.
    GenerationResult compute_bound_decode(BatchCostCurve draft_costs, double catch_up_ms_per_token,
                                          std::vector<std::pair<int32_t, int32_t>>* drafted_steps = nullptr) {
        SpeculativeDecoder decoder(target, &draft, test_context());
        decoder.set_step_costs(linear_curve(0.0, 1.0), std::move(draft_costs), catch_up_ms_per_token * 1e-3);
        int32_t step_index = 0;
        decoder.set_step_cost_observer([&](const StepCostRecord& step) {
            if (drafted_steps && step.lengths[0] > 0) drafted_steps->emplace_back(step_index, step.lengths[0]);
            ++step_index;
        });
        GenerationOptions options = automatic();
        options.max_tokens = 240;
        return decoder.generate("Once upon a time", options);
    }
};

TEST_F(DraftPolicyTest, MemoryBoundCostsDraftLongAndStayLossless) {
    const GenerationResult result = decode_with_costs(linear_curve(10.0, 0.0), linear_curve(0.1, 0.0), "memory-bound");
    EXPECT_GE(result.stats.mean_draft_length(), 8.0) << "the Q8_0 draft agrees often: long drafts pay";
    EXPECT_EQ(result.stats.draft_length_sum, result.stats.drafted);  // greedy, no p-min cut: γ drafts each step
    EXPECT_GT(result.stats.mat(), 3.0);
}

TEST_F(DraftPolicyTest, AFreshDecodersFirstProbeIsPaidFromTheAnswersBudget) {
    // The default pair's step costs at -t 1 on an AVX-512 EPYC, where a batch of 2 costs 2.6 times one token:
    // at the decoder's prior acceptance no γ pays, and a γ-4 probe costs 2.4 target-only steps.
    BatchCostCurve verify;
    for (const auto& [size, ms] : std::vector<std::pair<int32_t, double>>{
             {1, 4.6}, {2, 12.0}, {4, 13.2}, {5, 14.7}, {8, 17.5}, {9, 18.6}, {16, 25.0}, {17, 26.0}}) {
        verify.record(size, ms * 1e-3);
        verify.record(size, ms * 1e-3);
    }
    const auto first_drafted_step = [&](int32_t max_tokens, GenerationResult& result) {
        SpeculativeDecoder decoder(target, &draft, test_context());
        decoder.set_step_costs(verify, linear_curve(0.06, 0.0), 0.0);
        int32_t step = 0, first = -1;
        decoder.set_step_cost_observer([&](const StepCostRecord& record) {
            if (first < 0 && record.lengths[0] > 0) first = step;
            ++step;
        });
        GenerationOptions options = automatic();
        options.max_tokens = max_tokens;
        result = decoder.generate("Once upon a time", options);
        return first;
    };
    // 240 tokens: 3 % of them pay for the probe, so it comes after kFirstInterval steps (not ~80), and the
    // draft, kept nearly always, is used from there on.
    GenerationResult result;
    EXPECT_EQ(first_drafted_step(240, result), DraftProbe::kFirstInterval - 1);
    EXPECT_GT(result.stats.mat(), 2.0);
    // 64 tokens: 3 % is 1.9 steps, less than the probe; it waits for its price's spacing, past the answer's end
    // (only its last step may draft: γ 2 with 3 tokens left ends the answer in one call).
    const int32_t first = first_drafted_step(64, result);
    EXPECT_TRUE(first < 0 || first >= 60) << "drafted at step " << first;
}

TEST_F(DraftPolicyTest, ComputeBoundCostsDecodeTargetOnlyAndProbeAtTheirPrice) {
    // t(b) = b ms, a free draft and a free catch-up: a probe of γ (a verify of γ + 1) costs γ target-only steps.
    // The fresh decoder's first one is paid from the answer's 240 tokens (4 <= 3 % of 233 left), so it comes after
    // 8 steps; the next ones after γ / DraftProbe::kMaxShare steps each (134 for γ 4), not after 8, 16, ... (3 % of
    // decoding, not 40 %).
    std::vector<std::pair<int32_t, int32_t>> probes;
    const GenerationResult result = compute_bound_decode(linear_curve(0.0, 0.0), 0.0, &probes);
    std::cout << "[ probes   ] " << result.stats.target_calls << " target calls, " << result.stats.drafted
              << " drafted, " << result.stats.draft_prefilled_tokens << " prefilled by the draft\n";
    ASSERT_FALSE(probes.empty()) << "a sequence that stopped drafting is probed again";
    EXPECT_EQ(probes.front(), std::make_pair(DraftProbe::kFirstInterval - 1, DraftProbe::kProbeLength));
    ASSERT_GE(probes.size(), 2u);
    EXPECT_EQ(probes[1].first, probes[0].first + 134) << "the next after 134 target-only steps";
    int64_t drafted = 0;
    for (size_t i = 0; i < probes.size(); ++i) {
        const auto [step, length] = probes[i];
        drafted += length;
        EXPECT_LE(length, DraftProbe::kProbeLength);
        if (i > 0) {
            EXPECT_GE(step - probes[i - 1].first, std::ceil(length / DraftProbe::kMaxShare)) << "probe " << i;
        }
    }
    EXPECT_EQ(result.stats.target_only_steps, result.stats.target_calls - static_cast<int64_t>(probes.size()));
    EXPECT_EQ(result.stats.drafted, drafted);
    EXPECT_GT(result.stats.draft_prefilled_tokens, 0) << "the probe's draft caught up first";
}

TEST_F(DraftPolicyTest, TheProbeBudgetIsTheDecodersAcrossSequences) {
    // The costs above, and answers that end at a stop string after a few dozen tokens: each too short for a probe
    // (due at a sequence's 134th target-only step), but the decoder's budget is every sequence's target-only
    // steps, so a later answer probes (a bench over many short answers, or a server, learns whether the draft
    // pays; a budget per sequence never would).
    SpeculativeDecoder decoder(target, &draft, test_context());
    decoder.set_step_costs(linear_curve(0.0, 1.0), linear_curve(0.0, 0.0), 0.0);
    int32_t steps = 0;
    decoder.set_step_cost_observer([&](const StepCostRecord&) { ++steps; });
    GenerationOptions options = automatic();
    options.max_tokens = 240;
    options.stop_strings = {"Lily"};
    int64_t drafted = 0;
    for (int answer = 0; answer < 20; ++answer) {
        const int32_t steps_before = steps;
        const GenerationResult result = decoder.generate("Once upon a time", options);
        ASSERT_EQ(result.stop_reason, StopReason::StopString);
        ASSERT_LT(steps - steps_before, 133) << "an answer long enough to probe on its own";
        drafted += result.stats.drafted;
    }
    EXPECT_GE(steps, 134);
    EXPECT_GE(drafted, DraftProbe::kProbeLength) << "no probe in " << steps << " target-only steps";
}

TEST_F(DraftPolicyTest, AProbeThatMustCatchTheDraftUpOnEveryTokenIsNotWorthIt) {
    // The same with a 0.5 ms draft: the probe also pays the draft's catch-up over every token since the draft
    // last read (the prompt, the target-only steps), 0.5 ms each: half a target-only step per token, more than the
    // 3 % budget, so no probe ever comes (the real pair's 0.5B lost 15-20 % of a HumanEval answer's decoding to one
    // γ-4 probe's catch-up).
    const GenerationResult result = compute_bound_decode(linear_curve(0.5, 0.0), 0.5);
    EXPECT_GT(result.stats.target_calls, 200);
    EXPECT_EQ(result.stats.target_only_steps, result.stats.target_calls);
    EXPECT_EQ(result.stats.drafted, 0);
    EXPECT_EQ(result.stats.draft_prefilled_tokens, 0) << "a draft that never drafts reads nothing";
}

TEST_F(DraftPolicyTest, NoProbeWhereEveryDraftKeptCouldNotPay) {
    // t(b) = b ms and 0.2 ms a draft depth, the catch-up free: even with every draft kept, γ drafts make γ + 1
    // tokens in 1.2 γ + 1 ms, fewer a second than target-only's one in 1 ms. A probe cannot find anything that would
    // change the choice, so none is sent (before, the fresh decoder's first came after 8 steps and the next every
    // 160; the real pair at -np 4 on 2 cores spent 2-3 % of a pass on such probes' catch-ups).
    const GenerationResult result = compute_bound_decode(linear_curve(0.2, 0.0), 0.0);
    EXPECT_GT(result.stats.target_calls, 200);
    EXPECT_EQ(result.stats.drafted, 0);
    EXPECT_EQ(result.stats.target_only_steps, result.stats.target_calls);
}

TEST_F(DraftPolicyTest, TheDraftCatchesUpOnTheLongPromptOnlyOnceTheTargetOnlyTokensWouldHavePaidForIt) {
    // A memory-bound target (10 ms a call), a free draft that agrees often, and a catch-up of 2 ms per token the
    // draft lacks: drafting saves at most 10 ms a token, so the first drafted step comes only after k tokens
    // with 10 k >= 2 (prompt + k - 1) ms, not at the first step (the real pair's first drafted step prefilled
    // ~400 tokens for 1-10 drafted ones, 0.88x target-only); the long answer is still worth it.
    std::string prompt;
    for (int i = 0; i < 10; ++i) prompt += "Once upon a time there was a little girl. ";
    const auto first_drafted = [&](int32_t max_tokens, GenerationResult& result) {
        SpeculativeDecoder decoder(target, &draft, test_context());
        decoder.set_step_costs(linear_curve(10.0, 0.0), linear_curve(0.0, 0.0), 2e-3);
        int64_t decoded = 0, first = -1;
        decoder.set_step_cost_observer([&](const StepCostRecord& step) {
            if (first < 0 && step.lengths[0] > 0) first = decoded;
            decoded += step.emitted;
        });
        GenerationOptions options = automatic();
        options.max_tokens = max_tokens;
        result = decoder.generate(prompt, options);
        return first;
    };
    GenerationResult result;
    const int64_t first = first_drafted(120, result);
    const int64_t prompt_gap = result.stats.prompt_tokens - 1;
    ASSERT_GT(prompt_gap, 60);
    std::cout << "[ ski rent ] first drafted after " << first << " tokens; prompt " << result.stats.prompt_tokens
              << ", MAT " << result.stats.mat() << "\n";
    EXPECT_GE(first, (2 * prompt_gap + 7) / 8) << "10 k >= 2 (gap + k) only from k = gap / 4";
    EXPECT_GT(result.stats.drafted, 0) << "a long answer repays the catch-up";
    EXPECT_EQ(result.stats.draft_prefilled_tokens > 0, result.stats.drafted > 0);
    // An answer of 24 tokens never repays a catch-up of 2 (prompt + k) ms at 10 ms a token saved.
    EXPECT_EQ(first_drafted(24, result), -1);
    EXPECT_EQ(result.stats.draft_prefilled_tokens, 0) << "a draft that never drafts reads nothing";
}

TEST_F(DraftPolicyTest, UnderLoadATargetOnlyBatchBeatsSpeculation) {
    // t(b) = 4 + 5b ms, draft 0.5 ms a depth, acceptance at the decoder's prior 0.75: one sequence gets
    // 1.75 tokens in 14.5 ms with γ 1 against 1 in 9; four get 4 in 24 ms target-only against 7 in 44.5.
    const std::vector<std::string> prompts = test::story_prompts(4);
    for (const int32_t slots : {1, 4}) {
        SpeculativeDecoder decoder(target, &draft, test_context(slots));
        decoder.set_step_costs(linear_curve(4.0, 5.0), linear_curve(0.5, 0.0), 0.0);
        std::vector<Sequence> sequences;
        for (int32_t id = 0; id < slots; ++id)
            sequences.push_back(decoder.start(id, prompts[static_cast<size_t>(id)], automatic()));
        std::vector<Sequence*> batch;
        for (Sequence& seq : sequences) batch.push_back(&seq);
        // Decode only while all are running, so the load stays `slots`: the first steps decide.
        for (int step = 0; step < 6; ++step) decoder.step(batch);
        int64_t target_only = 0, calls = 0;
        for (const Sequence* seq : batch) {
            target_only += seq->result().stats.target_only_steps;
            calls += seq->result().stats.target_calls;
        }
        if (slots == 1) {
            EXPECT_EQ(target_only, 0) << "one sequence: speculation pays";
        } else {
            EXPECT_EQ(target_only, calls) << slots << " sequences: a target-only batch pays more";
        }
    }
}

TEST_F(DraftPolicyTest, OffNeverDraftsAndAutoMeasuresCosts) {
    SpeculativeDecoder decoder(target, &draft, test_context());
    GenerationOptions off = automatic();
    off.draft_policy = DraftPolicy::Off;
    const GenerationResult plain = decoder.generate("Once upon a time", off);
    EXPECT_EQ(plain.stats.drafted, 0);
    EXPECT_EQ(plain.stats.draft_calls, 0);
    EXPECT_EQ(plain.stats.draft_prefilled_tokens, 0) << "a draft that never drafts never prefills the prompt";
    EXPECT_EQ(plain.stats.target_only_steps, plain.stats.target_calls);
    // Every target call is timed; only an Auto sequence's first step calibrates other sizes.
    EXPECT_EQ(decoder.verify_costs().points().size(), 1u);
    EXPECT_TRUE(decoder.draft_costs().empty());

    const GenerationResult result = decoder.generate("Once upon a time", automatic(8));
    // Calibration timed batch sizes 1, 2, 4, 8 and 9 (one slot at draft-max 8) and the draft's size 1.
    for (const int32_t size : {1, 2, 4, 8, 9}) EXPECT_EQ(decoder.verify_costs().points().count(size), 1u) << size;
    EXPECT_EQ(decoder.draft_costs().points().count(1), 1u);
    EXPECT_GT(decoder.verify_costs().seconds(1), 0.0);
    int64_t divergences = 0;
    test::check_equal_up_to_near_tie(test::greedy_reference(target, "Once upon a time", kTokens, test_context()),
                                     result.tokens, "auto, measured costs", divergences);
}

TEST_F(DraftPolicyTest, CostsTimedBeforeTheFirstStepLeaveNoCellsAndAreNotTimedAgain) {
    SpeculativeDecoder decoder(target, &draft, test_context(2));
    decoder.calibrate_step_costs(4);
    // Two sequences at draft-max 4: target batches 1, 2, 4, 8 and 10; draft batches 1 and 2 (and a prefill batch
    // of 16, the catch-up price, outside the curve).
    for (const int32_t size : {1, 2, 4, 8, 10}) EXPECT_EQ(decoder.verify_costs().points().count(size), 1u) << size;
    for (const int32_t size : {1, 2}) EXPECT_EQ(decoder.draft_costs().points().count(size), 1u) << size;
    const size_t timed_sizes = decoder.verify_costs().points().size();
    // A step under Auto then decides on these curves: no second calibration at a larger draft-max (it would
    // time 2 x 17 = 34 tokens), and the output is target-only output up to a near tie (cells the timing
    // calls left on sequence 0 would change it, or fail its prefill).
    const GenerationResult result = decoder.generate("Once upon a time", automatic(16));
    EXPECT_EQ(decoder.verify_costs().points().count(34), 0u);
    EXPECT_LE(decoder.verify_costs().points().size(), timed_sizes + 16u) << "only sizes steps really sent";
    int64_t divergences = 0;
    test::check_equal_up_to_near_tie(test::greedy_reference(target, "Once upon a time", kTokens, test_context()),
                                     result.tokens, "auto after calibrate_step_costs", divergences);
    EXPECT_THROW(SpeculativeDecoder(target, &draft, test_context()).calibrate_step_costs(0), Error);
    SpeculativeDecoder target_only(target, nullptr, test_context());
    target_only.calibrate_step_costs(4);
    EXPECT_TRUE(target_only.verify_costs().empty()) << "no draft model: nothing to choose, nothing timed";
}

TEST_F(DraftPolicyTest, StepCostObserverGetsThePredictionAndTheMeasureOfEveryStep) {
    // Fake costs: a target call 10 ms whatever its size, a draft call 0.1 ms. So the cost model predicts
    // 10 + 0.1·γ ms for a step drafting γ, and 10 ms without drafts.
    SpeculativeDecoder decoder(target, &draft, test_context());
    decoder.set_step_costs(linear_curve(10.0, 0.0), linear_curve(0.1, 0.0), 0.0);
    std::vector<StepCostRecord> steps;
    decoder.set_step_cost_observer([&steps](const StepCostRecord& step) { steps.push_back(step); });
    const GenerationResult result = decoder.generate("Once upon a time", automatic());
    ASSERT_EQ(static_cast<int64_t>(steps.size()), result.stats.target_calls);
    int64_t emitted = 0, drafted = 0, unpredicted = 0;
    for (const StepCostRecord& step : steps) {
        ASSERT_EQ(step.lengths.size(), 1u);
        emitted += step.emitted;
        drafted += step.lengths[0];
        if (!step.predicted) {  // one token left: nothing to draft, so nothing to choose
            EXPECT_EQ(step.lengths[0], 0);
            ++unpredicted;
            continue;
        }
        EXPECT_NEAR(step.predicted_seconds, 10e-3 + 0.1e-3 * step.lengths[0], 1e-9) << "γ " << step.lengths[0];
        EXPECT_NEAR(step.target_only_seconds, 10e-3, 1e-9);
        EXPECT_GE(step.predicted_tokens, 1.0);
        EXPECT_LE(step.predicted_tokens, step.lengths[0] + 1.0);
        EXPECT_GT(step.verify_seconds, 0.0) << "measured, not the fake curve";
        EXPECT_EQ(step.draft_seconds > 0.0, step.lengths[0] > 0);
        EXPECT_GE(step.emitted, 1);
        EXPECT_LE(step.emitted, step.lengths[0] + 1);
    }
    EXPECT_LE(unpredicted, 1);
    EXPECT_EQ(emitted, static_cast<int64_t>(result.tokens.size()));
    EXPECT_EQ(drafted, result.stats.drafted);

    // Not under Auto: the step is measured, nothing predicted.
    steps.clear();
    GenerationOptions fixed = automatic(4);
    fixed.draft_policy = DraftPolicy::Fixed;
    decoder.generate("Once upon a time", fixed);
    ASSERT_FALSE(steps.empty());
    for (const StepCostRecord& step : steps) EXPECT_FALSE(step.predicted);
}

TEST_F(DraftPolicyTest, TheTargetOnlyPriceIsRetimedWhileSpeculationGainsLittle) {
    // t(b) = 10 + 10b ms, draft 0.5 ms a depth, γ ≤ 3: speculation promises at most 1.55x target-only's
    // rate (under TargetOnlyRetime::kMargin), so Auto drafts every step; whether the one-token price is stale
    // or fresh, its 8th step goes target-only to re-time it. The fake curve never updates: again 16, 32, 64 …
    // drafted steps later.
    constexpr int32_t kLongerTokens = 230;
    for (const bool stale : {true, false}) {
        SpeculativeDecoder decoder(target, &draft, test_context());
        decoder.set_step_costs(linear_curve(10.0, 10.0, stale ? 200 : 20), linear_curve(0.5, 0.0), 0.0);
        ASSERT_EQ(decoder.verify_costs().stale(1), stale);
        std::vector<StepCostRecord> steps;
        decoder.set_step_cost_observer([&steps](const StepCostRecord& step) { steps.push_back(step); });
        GenerationOptions options = automatic(3);
        options.max_tokens = kLongerTokens;
        const GenerationResult result = decoder.generate("Once upon a time", options);
        const test::GreedyReference reference =
            test::greedy_reference(target, "Once upon a time", kLongerTokens, test_context());
        int64_t divergences = 0;
        test::check_equal_up_to_near_tie(reference, result.tokens, "retimed", divergences);
        ASSERT_GT(steps.size(), 20u);
        std::vector<size_t> target_only_steps;
        for (size_t i = 0; i < steps.size(); ++i) {
            if (!steps[i].predicted || steps[i].lengths[0] > 0) continue;
            target_only_steps.push_back(i);
            EXPECT_DOUBLE_EQ(steps[i].predicted_seconds, steps[i].target_only_seconds)
                << "the step predicted is the one sent";
            EXPECT_DOUBLE_EQ(steps[i].predicted_tokens, 1.0);
        }
        std::vector<size_t> expected;
        for (size_t step = TargetOnlyRetime::kFirstInterval - 1, interval = 2 * TargetOnlyRetime::kFirstInterval;
             step < steps.size(); step += interval, interval *= 2) {
            expected.push_back(step);
        }
        ASSERT_GE(expected.size(), 3u) << steps.size() << " steps";
        EXPECT_EQ(target_only_steps, expected) << (stale ? "stale" : "fresh") << ", " << steps.size() << " steps";
        // The fake curve takes no timings, so the price a re-timing step expired stays stale (else its time would
        // replace it: BatchCostCurve::expire).
        EXPECT_TRUE(decoder.verify_costs().stale(1));
    }
}

}  // namespace
}  // namespace klspec
