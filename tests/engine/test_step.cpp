// SpeculativeDecoder::step over many sequences, and what the engine reports about each step: batched
// decoding equals decoding alone, sampling stays exact under batching and shaping, streaming, the
// context limit, the observer and the hidden states a head receives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "core/distribution_stats.h"
#include "core/error.h"
#include "core/judge_factory.h"
#include "core/judges/kl_judge.h"
#include "core/sampling.h"
#include "engine/speculative_decoder.h"
#include "test_support.h"

namespace klspec {
namespace {

ContextOptions test_context(int32_t n_sequences = 1, int32_t n_ctx = 256) {
    ContextOptions options;
    options.n_ctx = n_ctx;
    options.n_threads = 1;
    options.n_sequences = n_sequences;
    return options;
}

GenerationOptions greedy(int32_t max_tokens, int32_t gamma) {
    GenerationOptions options;
    options.max_tokens = max_tokens;
    options.draft_max = gamma;
    return options;
}

// Starts `tokens` on sequence id `id` and steps it alone to its end.
GenerationResult run_to_end(SpeculativeDecoder& decoder, int32_t id, const std::vector<int32_t>& tokens,
                            const GenerationOptions& options) {
    Sequence seq = decoder.start(id, tokens, options);
    Sequence* const batch[] = {&seq};
    while (!seq.finished()) decoder.step(batch);
    return seq.take_result();
}

// Runs every prompt to completion, `slots` at a time, starting a new one as soon as a slot frees up.
std::vector<GenerationResult> run_batched(SpeculativeDecoder& decoder, const std::vector<std::string>& prompts,
                                          const std::vector<GenerationOptions>& options, int32_t slots) {
    std::vector<GenerationResult> results(prompts.size());
    std::vector<std::optional<Sequence>> running(static_cast<size_t>(slots));
    std::vector<size_t> index_of(running.size());
    size_t next = 0, done = 0;
    std::vector<Sequence*> active;
    while (done < prompts.size()) {
        active.clear();
        for (size_t s = 0; s < running.size(); ++s) {
            if (!running[s] && next < prompts.size()) {
                index_of[s] = next;
                running[s] = decoder.start(static_cast<int32_t>(s), prompts[next], options[next]);
                ++next;
            }
            if (running[s]) active.push_back(&*running[s]);
        }
        decoder.step(active);
        for (size_t s = 0; s < running.size(); ++s) {
            if (running[s] && running[s]->finished()) {
                results[index_of[s]] = running[s]->take_result();
                running[s].reset();
                ++done;
            }
        }
    }
    return results;
}

TEST(Step, BatchedGreedyEqualsDecodingAlone) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    const std::vector<std::string> prompts = test::story_prompts(12);
    // Different lengths and γ per sequence, so that the target batch mixes sequences of every shape.
    std::vector<GenerationOptions> options;
    for (int32_t i = 0; i < static_cast<int32_t>(prompts.size()); ++i)
        options.push_back(greedy(24 + 8 * (i % 4), 1 + 3 * (i % 5)));

    SpeculativeDecoder alone(target, &draft, test_context());
    SpeculativeDecoder batched(target, &draft, test_context(5));
    const std::vector<GenerationResult> together = run_batched(batched, prompts, options, 5);
    for (size_t i = 0; i < prompts.size(); ++i) {
        const GenerationResult reference = alone.generate(prompts[i], options[i]);
        EXPECT_EQ(together[i].tokens, reference.tokens) << prompts[i];
        EXPECT_EQ(together[i].text, reference.text);
        // On the CPU a sequence's rows compute alike in any batch. A GPU backend picks its kernels by batch
        // size (docs/gpu.md), so there the draft may propose otherwise at a near tie: same output, other counts.
        if (test::offloaded()) continue;
        EXPECT_EQ(together[i].stats.target_calls, reference.stats.target_calls);
        EXPECT_EQ(together[i].stats.accepted, reference.stats.accepted);
    }
}

// The target's shaped next-token distribution after `tokens` (teacher-forced).
std::vector<float> shaped_next_distribution(SpeculativeDecoder& decoder, const std::vector<int32_t>& tokens,
                                            const SamplingParams& sampling) {
    const ForwardResult forward = decoder.forward(ModelRole::Target, tokens, false);
    std::vector<float> shaped(static_cast<size_t>(forward.n_vocab));
    ShapingScratch order;
    shape_logits(std::span<const float>(forward.logits).last(shaped.size()), sampling, shaped, order);
    std::vector<float> p;
    softmax(shaped, p);
    return p;
}

// `samples` prompts decoded `kSlots` at a time with the target and the Q4_0 draft, each with its own seed.
std::vector<GenerationResult> sample_batched(const Model& target, const Model& draft, const std::string& prompt,
                                             GenerationOptions options, int samples) {
    constexpr int kSlots = 8;
    SpeculativeDecoder decoder(target, &draft, test_context(kSlots));
    std::vector<GenerationOptions> per_sample(static_cast<size_t>(samples), options);
    for (int s = 0; s < samples; ++s)
        per_sample[static_cast<size_t>(s)].sampling.seed = 5000 + static_cast<uint64_t>(s);
    return run_batched(decoder, std::vector<std::string>(static_cast<size_t>(samples), prompt), per_sample, kSlots);
}

// Pearson's chi-square of observed counts against expected probabilities (outcomes of probability 0 must not
// occur; those expected fewer than 5 times are pooled into one bin), below its 1 - 1e-4 quantile.
template <typename Outcome>
void expect_follows(const std::map<Outcome, int>& counts, const std::map<Outcome, double>& expected, int samples) {
    double chi2 = 0.0, pooled_expected = 0.0, pooled_observed = 0.0;
    int bins = 0;
    for (const auto& [outcome, probability] : expected) {
        const double observed = counts.count(outcome) ? counts.at(outcome) : 0;
        const double e = probability * samples;
        if (e < 5) {
            pooled_expected += e;
            pooled_observed += observed;
            continue;
        }
        chi2 += (observed - e) * (observed - e) / e;
        ++bins;
    }
    for (const auto& [outcome, observed] : counts)
        EXPECT_TRUE(expected.count(outcome) && expected.at(outcome) > 0) << "an outcome of probability 0 occurred";
    if (pooled_expected > 0) {
        chi2 += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
        ++bins;
    }
    const int dof = bins - 1;
    ASSERT_GE(dof, 3);
    // Wilson-Hilferty approximation of the chi-square quantile at 1 - 1e-4 (z = 3.719).
    const double h = 2.0 / (9.0 * dof);
    const double critical = dof * std::pow(1.0 - h + 3.719 * std::sqrt(h), 3.0);
    EXPECT_LT(chi2, critical) << "dof " << dof;
}

// Stochastic vanilla decoding under batching, with temperature, top-k and top-p: the first generated
// token of every sequence must follow the target's shaped distribution. At this prompt the shaped p and
// q overlap by Σ min(p, q) = 0.74 (7 tokens survive the shaping), so a quarter of the samples come from the
// residual draw: a wrong residual or acceptance test fails by far.
TEST(Step, SampledFirstTokenFollowsShapedTargetUnderBatching) {
    const std::string prompt = "The";
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    SamplingParams sampling;
    sampling.temperature = 0.7f;
    sampling.top_k = 12;
    sampling.top_p = 0.95f;
    SpeculativeDecoder target_only(target, nullptr, test_context());
    const std::vector<float> p = shaped_next_distribution(target_only, target.tokenize(prompt, true), sampling);

    constexpr int kSamples = 12000;
    GenerationOptions options = greedy(2, 1);
    options.sampling = sampling;
    const std::vector<GenerationResult> results = sample_batched(target, draft, prompt, options, kSamples);
    std::map<int32_t, int> counts;
    int64_t drafted = 0, accepted = 0;
    for (const GenerationResult& r : results) {
        ASSERT_FALSE(r.tokens.empty());
        ++counts[r.tokens[0]];
        drafted += r.stats.drafted;
        accepted += r.stats.accepted;
    }
    ASSERT_GT(drafted, kSamples / 2);
    // Both kept drafts and replacements must be common, or the test does not exercise the residual.
    ASSERT_GT(accepted, drafted / 2);
    ASSERT_LT(accepted, drafted * 9 / 10);
    std::map<int32_t, double> expected;
    for (size_t v = 0; v < p.size(); ++v)
        if (p[v] > 0) expected[static_cast<int32_t>(v)] = p[v];
    expect_follows(counts, expected, kSamples);
}

// Block verification (--verify block) under batching: the first two tokens, one block of γ = 2 (where a
// rejection at the first position need not end the step), follow the target's joint law p(x1) p(x2 | x1);
// and it keeps at least as many drafts as token-by-token verification on the same seeds.
TEST(Step, BlockVerifiedTokenPairsFollowTheTargetsJointLaw) {
    const std::string prompt = "The";
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    SamplingParams sampling;
    sampling.temperature = 1.0f;
    sampling.top_k = 8;
    SpeculativeDecoder target_only(target, nullptr, test_context());
    const std::vector<int32_t> prompt_tokens = target.tokenize(prompt, true);
    std::map<std::pair<int32_t, int32_t>, double> expected;
    const std::vector<float> first = shaped_next_distribution(target_only, prompt_tokens, sampling);
    for (size_t x1 = 0; x1 < first.size(); ++x1) {
        if (first[x1] <= 0) continue;
        std::vector<int32_t> tokens = prompt_tokens;
        tokens.push_back(static_cast<int32_t>(x1));
        const std::vector<float> second = shaped_next_distribution(target_only, tokens, sampling);
        for (size_t x2 = 0; x2 < second.size(); ++x2)
            if (second[x2] > 0)
                expected[{static_cast<int32_t>(x1), static_cast<int32_t>(x2)}] = double(first[x1]) * second[x2];
    }

    constexpr int kSamples = 12000;
    // Three tokens: the first step's draft is capped to leave room for its target token.
    GenerationOptions options = greedy(3, 2);
    options.sampling = sampling;
    int64_t accepted_by_mode[2] = {0, 0};
    for (const Verification verification : {Verification::Token, Verification::Block}) {
        options.verification = verification;
        std::map<std::pair<int32_t, int32_t>, int> counts;
        for (const GenerationResult& r : sample_batched(target, draft, prompt, options, kSamples)) {
            ASSERT_GE(r.tokens.size(), 2u);
            ++counts[{r.tokens[0], r.tokens[1]}];
            accepted_by_mode[static_cast<int>(verification)] += r.stats.accepted;
        }
        SCOPED_TRACE(std::string(to_string(verification)));
        expect_follows(counts, expected, kSamples);
    }
    std::cout << "[ accepted ] token by token " << accepted_by_mode[0] << ", block " << accepted_by_mode[1] << "\n";
    EXPECT_GE(accepted_by_mode[1], accepted_by_mode[0]);
}

// Each sequence owns its random stream: sampled target-only decoding gives the same tokens batched or
// alone. (With a draft only the distribution is the same: a quantized draft's batched kernels round
// differently from its single-token ones, so its samples differ in the last bits; see the chi-square test.)
TEST(Step, SampledBatchedEqualsSampledAloneWithoutDraft) {
    const Model target(test::kTargetModel, test::offload());
    const std::vector<std::string> prompts = test::story_prompts(6);
    std::vector<GenerationOptions> options(prompts.size(), greedy(40, 4));
    for (size_t i = 0; i < options.size(); ++i) {
        options[i].sampling.temperature = 0.8f;
        options[i].sampling.top_k = 40;
        options[i].sampling.top_p = 0.9f;
        options[i].sampling.seed = 17 + i;
    }
    SpeculativeDecoder alone(target, nullptr, test_context());
    SpeculativeDecoder batched(target, nullptr, test_context(3));
    const std::vector<GenerationResult> together = run_batched(batched, prompts, options, 3);
    for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_EQ(together[i].tokens, alone.generate(prompts[i], options[i]).tokens) << prompts[i];
}

TEST(Step, StreamedTextEqualsFinalText) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    SpeculativeDecoder decoder(target, &draft, test_context());
    for (const std::vector<std::string>& stops : {std::vector<std::string>{}, std::vector<std::string>{"park"}}) {
        GenerationOptions options = greedy(80, 6);
        options.stop_strings = stops;
        std::string streamed;
        int64_t streamed_tokens = 0;
        int last_steps = 0;
        const GenerationResult result =
            decoder.generate("Tom and his dog went to the park.", options, [&](const StepResult& step) {
                EXPECT_EQ(step.sequence_id, 0);
                streamed += step.text;
                streamed_tokens += static_cast<int64_t>(step.tokens.size());
                last_steps += step.is_last;
                return false;
            });
        EXPECT_EQ(streamed, result.text);
        EXPECT_EQ(streamed_tokens, static_cast<int64_t>(result.tokens.size()));
        EXPECT_EQ(last_steps, 1);
        if (!stops.empty()) {
            EXPECT_EQ(result.stop_reason, StopReason::StopString);
        }
    }
}

TEST(Step, CallbackCanStopASequence) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    SpeculativeDecoder decoder(target, &draft, test_context());
    int steps = 0;
    const GenerationResult result =
        decoder.generate("Once upon a time", greedy(100, 4), [&](const StepResult&) { return ++steps == 3; });
    EXPECT_EQ(result.stop_reason, StopReason::Cancelled);
    EXPECT_EQ(result.stats.target_calls, 3);
}

TEST(Step, StopsWhenTheContextIsFull) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ8, test::offload());
    constexpr int32_t kCtx = 48;
    for (const Model* d : {static_cast<const Model*>(nullptr), &draft}) {
        SpeculativeDecoder decoder(target, d, test_context(1, kCtx));
        const GenerationResult result = decoder.generate("Once upon a time", greedy(1000, 8));
        EXPECT_EQ(result.stop_reason, StopReason::ContextFull);
        // Every position of the context is used, and the last token, predicted from the last position,
        // needs none: prompt + output = n_ctx + 1.
        EXPECT_EQ(result.stats.prompt_tokens + static_cast<int64_t>(result.tokens.size()), kCtx + 1);
    }
}

TEST(Step, TopKAndTopPEndToEnd) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ8, test::offload());
    SpeculativeDecoder decoder(target, &draft, test_context());
    // top-k 1 is greedy whatever the temperature: same tokens as greedy decoding.
    GenerationOptions top1 = greedy(48, 4);
    top1.sampling.temperature = 1.5f;
    top1.sampling.top_k = 1;
    top1.sampling.seed = 3;
    EXPECT_EQ(decoder.generate("Once upon a time", top1).tokens,
              decoder.generate("Once upon a time", greedy(48, 4)).tokens);
    // A tiny top-p keeps only the top token too.
    GenerationOptions tiny_p = top1;
    tiny_p.sampling.top_k = 0;
    tiny_p.sampling.top_p = 1e-6f;
    EXPECT_EQ(decoder.generate("Once upon a time", tiny_p).tokens,
              decoder.generate("Once upon a time", greedy(48, 4)).tokens);
}

// A judge that relaxes nothing and remembers the hidden states it was shown.
class RecordingJudge final : public Judge {
public:
    std::string_view name() const override { return "recording"; }
    bool needs_hidden_states() const override { return true; }
    JudgeDecision decide(const DraftPosition& position) const override {
        const std::lock_guard lock(mutex_);
        seen.push_back({position.draft_token,
                        {position.draft_hidden.begin(), position.draft_hidden.end()},
                        {position.target_hidden.begin(), position.target_hidden.end()}});
        return {};
    }
    struct Seen {
        int32_t draft_token;
        std::vector<float> draft_hidden, target_hidden;
    };
    mutable std::vector<Seen> seen;

private:
    mutable std::mutex mutex_;
};

// The observer sees every examined position once, in order, and the hidden states a head receives at a
// judged position are those of the pass whose INPUT token is d_i (docs/design.md), for both models.
TEST(Step, ObserverAndHiddenStatesLineUpWithPositions) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    ContextOptions context = test_context();
    context.hidden_states = true;
    SpeculativeDecoder decoder(target, &draft, context);
    std::vector<JudgedPosition> observed;
    decoder.set_observer([&](const JudgedPosition& p) { observed.push_back(p); });
    auto judge = std::make_shared<RecordingJudge>();
    GenerationOptions options = greedy(64, 6);
    options.judge = judge;
    const std::string prompt = "Once upon a time";
    const GenerationResult result = decoder.generate(prompt, options);

    // Every drafted position up to each step's first rejection, once: accepted + one per rejecting step.
    const int64_t rejected = std::count_if(observed.begin(), observed.end(), [](const JudgedPosition& p) {
        return p.verdict.verdict == Verdict::Rejected;
    });
    EXPECT_EQ(static_cast<int64_t>(observed.size()), result.stats.accepted + rejected);
    EXPECT_GT(rejected, 3);
    std::vector<int32_t> sequence = target.tokenize(prompt, true);
    sequence.insert(sequence.end(), result.tokens.begin(), result.tokens.end());
    size_t judged = 0;
    for (size_t i = 0; i < observed.size(); ++i) {
        const JudgedPosition& p = observed[i];
        if (i > 0) {
            EXPECT_GT(p.position, observed[i - 1].position);  // each position once, in order
        }
        ASSERT_LT(static_cast<size_t>(p.position), sequence.size() + 1);
        if (p.verdict.verdict == Verdict::Accepted) {
            EXPECT_EQ(sequence[static_cast<size_t>(p.position)], p.draft_token);  // kept drafts are the output
            EXPECT_EQ(p.draft_token, p.target_token);                             // greedy: agreement
        } else {
            EXPECT_NE(p.draft_token, p.target_token);
            EXPECT_GT(p.draft_rank, 0);
        }
        EXPECT_GE(p.kl, 0.0);
        EXPECT_GT(p.target_max_probability, 0.0);
        if (!p.verdict.judged) continue;
        // Teacher-forced: the prefix before d_i, then d_i; the last row is the pass whose input is d_i.
        ASSERT_LT(judged, judge->seen.size());
        const RecordingJudge::Seen& seen = judge->seen[judged++];
        ASSERT_EQ(seen.draft_token, p.draft_token);
        std::vector<int32_t> prefix(sequence.begin(), sequence.begin() + p.position);
        prefix.push_back(p.draft_token);
        for (const ModelRole role : {ModelRole::Draft, ModelRole::Target}) {
            const ForwardResult forward = decoder.forward(role, prefix, /*with_hidden=*/true);
            const std::vector<float>& got = role == ModelRole::Draft ? seen.draft_hidden : seen.target_hidden;
            const size_t n_embd = static_cast<size_t>(forward.n_embd);
            ASSERT_EQ(got.size(), n_embd);
            // The state before d_i (input: the previous token) must differ: this is what pins the position.
            const float* expected = forward.hidden.data() + (prefix.size() - 1) * n_embd;
            const float* previous = forward.hidden.data() + (prefix.size() - 2) * n_embd;
            double max_diff = 0, max_diff_previous = 0;
            for (size_t j = 0; j < n_embd; ++j) {
                max_diff = std::max(max_diff, std::abs(double(got[j]) - expected[j]));
                max_diff_previous = std::max(max_diff_previous, std::abs(double(got[j]) - previous[j]));
            }
            // Not bit-exact: the decoding run computed those cells in other batches (F16 KV cache, Q4_0's
            // batched kernels), which moves hidden states by up to ~0.1 on the CPU and ~0.3 on CUDA (half
            // precision, docs/gpu.md); neighbouring positions differ by ~7.
            const char* model = role == ModelRole::Draft ? "draft" : "target";
            EXPECT_LT(max_diff, test::offloaded() ? 0.4 : 0.15) << model << " at " << p.position;
            EXPECT_GT(max_diff_previous, 20 * max_diff) << model << " at " << p.position;
        }
    }
    EXPECT_EQ(judged, judge->seen.size());
    EXPECT_GT(judged, 3u);
}

// One decoder serves sequences with different rules at once; each gets its own rule's decisions.
TEST(Step, JudgeIsAPerSequenceSetting) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    JudgeOptions loose;
    loose.rule = "kl";
    loose.threshold = 1e9;
    loose.confidence_mask = 1.0;
    GenerationOptions vanilla = greedy(48, 8);
    GenerationOptions relaxed = vanilla;
    relaxed.judge = make_judge(loose);
    SpeculativeDecoder decoder(target, &draft, test_context(2));
    const std::vector<GenerationResult> results =
        run_batched(decoder, {"Once upon a time", "Once upon a time"}, {vanilla, relaxed}, 2);
    SpeculativeDecoder alone(target, &draft, test_context());
    EXPECT_EQ(results[0].tokens, alone.generate("Once upon a time", vanilla).tokens);
    EXPECT_EQ(results[1].tokens, alone.generate("Once upon a time", relaxed).tokens);
    EXPECT_EQ(results[0].stats.relaxed_accepted, 0);
    EXPECT_GT(results[1].stats.relaxed_accepted, 0);
    EXPECT_EQ(results[1].stats.accepted, results[1].stats.drafted);
}

TEST(Step, DraftConfidenceCutAndAdaptiveGamma) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    SpeculativeDecoder decoder(target, &draft, test_context());
    const GenerationResult plain = decoder.generate("Once upon a time", greedy(64, 8));
    GenerationOptions cut = greedy(64, 8);
    cut.draft_p_min = 0.9f;
    const GenerationResult with_cut = decoder.generate("Once upon a time", cut);
    GenerationOptions adaptive = greedy(64, 8);
    adaptive.draft_policy = DraftPolicy::Adaptive;
    const GenerationResult with_adaptive = decoder.generate("Once upon a time", adaptive);
    // Both stay lossless and propose fewer tokens per call.
    EXPECT_EQ(with_cut.tokens, plain.tokens);
    EXPECT_EQ(with_adaptive.tokens, plain.tokens);
    EXPECT_LT(double(with_cut.stats.drafted) / double(with_cut.stats.target_calls),
              double(plain.stats.drafted) / double(plain.stats.target_calls));
    EXPECT_GT(with_cut.stats.acceptance_rate(), plain.stats.acceptance_rate());
    EXPECT_NE(with_adaptive.stats.drafted, plain.stats.drafted);
}

// logprobs: each emitted token's log-probability under the target's own logits, as target-only decoding
// computes them, and its top alternatives; relaxed tokens carry theirs too, and the steps' spans add up to
// the result's list.
TEST(Step, LogprobsAreTheTargetsLogSoftmaxAtEveryEmittedToken) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    const std::string prompt = "Once upon a time";
    GenerationOptions vanilla = greedy(40, 6);
    vanilla.logprobs = 3;
    SpeculativeDecoder decoder(target, &draft, test_context());
    std::vector<TokenLogprobs> streamed;
    const GenerationResult result = decoder.generate(prompt, vanilla, [&](const StepResult& step) {
        EXPECT_EQ(step.logprobs.size(), step.tokens.size());
        streamed.insert(streamed.end(), step.logprobs.begin(), step.logprobs.end());
        return false;
    });
    ASSERT_EQ(result.logprobs.size(), result.tokens.size());
    ASSERT_EQ(streamed.size(), result.tokens.size());

    const test::GreedyReference reference = test::greedy_reference(target, prompt, 40, test_context());
    int64_t divergences = 0;
    const int64_t diverged = test::check_equal_up_to_near_tie(reference, result.tokens, "logprobs", divergences);
    const size_t compared = diverged < 0 ? result.tokens.size() : size_t(diverged);
    ASSERT_GT(compared, 10u);
    const size_t n_vocab = size_t(target.n_vocab());
    for (size_t i = 0; i < compared; ++i) {
        const TokenLogprobs& got = result.logprobs[i];
        EXPECT_EQ(got.chosen.token, result.tokens[i]);
        EXPECT_EQ(streamed[i].chosen.token, got.chosen.token);
        EXPECT_EQ(streamed[i].chosen.logprob, got.chosen.logprob);
        const std::span<const float> row(reference.logits.data() + i * n_vocab, n_vocab);
        double norm = 0;
        for (const float logit : row) norm += std::exp(double(logit));
        // Batched and single-token logits differ in their last bits (kNearTieGap's bound): log-softmax by
        // at most twice the logit difference.
        EXPECT_NEAR(got.chosen.logprob, row[size_t(got.chosen.token)] - std::log(norm), test::near_tie_gap()) << i;
        ASSERT_EQ(got.top.size(), 3u);
        EXPECT_EQ(got.top[0].token, got.chosen.token) << "greedy vanilla emits the target's argmax";
        EXPECT_LE(got.chosen.logprob, 0.0f);
        EXPECT_GE(got.top[0].logprob, got.top[1].logprob);
        EXPECT_GE(got.top[1].logprob, got.top[2].logprob);
    }

    // Relaxed tokens are the draft's, where the target may prefer another: their logprobs say so.
    JudgeOptions loose;
    loose.rule = "kl";
    loose.threshold = 1e9;
    loose.confidence_mask = 1.0;
    GenerationOptions relaxed = vanilla;
    relaxed.judge = make_judge(loose);
    const GenerationResult judged = decoder.generate(prompt, relaxed);
    ASSERT_GT(judged.stats.relaxed_accepted, 0);
    ASSERT_EQ(judged.logprobs.size(), judged.tokens.size());
    size_t not_argmax = 0;
    for (size_t i = 0; i < judged.tokens.size(); ++i) {
        EXPECT_EQ(judged.logprobs[i].chosen.token, judged.tokens[i]);
        not_argmax += judged.logprobs[i].top[0].token != judged.tokens[i];
    }
    EXPECT_GT(not_argmax, 0u);

    GenerationOptions none = greedy(8, 6);
    EXPECT_TRUE(decoder.generate(prompt, none).logprobs.empty());
    none.logprobs = kMaxTopLogprobs + 1;
    EXPECT_THROW(decoder.generate(prompt, none), Error);
}

// cache_prompt: a sequence started on an id whose last sequence kept its cells prefills only what its prompt
// does not share with them, in both models, and decodes what a fresh decoder decodes.
TEST(Step, PromptCacheReusesTheSharedPrefixAndDecodesTheSame) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    GenerationOptions options = greedy(48, 8);
    options.cache_prompt = true;
    SpeculativeDecoder cached(target, &draft, test_context(2));
    SpeculativeDecoder fresh(target, &draft, test_context(2));

    // A conversation: each turn's prompt is the last prompt, its answer and a new line of text.
    std::string prompt = "Once upon a time";
    int64_t last_prompt_tokens = 0;
    for (int turn = 0; turn < 4; ++turn) {
        const std::vector<int32_t> tokens = target.tokenize(prompt, true, true);
        const int32_t reusable = cached.reusable_prompt(1, tokens);
        const GenerationResult with_cache = run_to_end(cached, 1, tokens, options);
        const GenerationResult without = fresh.generate(prompt, greedy(48, 8));

        EXPECT_EQ(with_cache.tokens, without.tokens) << "turn " << turn;
        EXPECT_EQ(with_cache.stats.prompt_cached_tokens, reusable);
        EXPECT_EQ(without.stats.prompt_cached_tokens, 0);
        // The last prompt at least (but a token where the answer's text may merge with its end) is reused.
        EXPECT_GE(reusable, turn == 0 ? 0 : last_prompt_tokens - 2) << "turn " << turn;
        EXPECT_LT(reusable, with_cache.stats.prompt_tokens);
        EXPECT_GE(cached.cached_tokens(1), with_cache.stats.prompt_tokens - 1);
        last_prompt_tokens = with_cache.stats.prompt_tokens;
        prompt += with_cache.text + "\nThe next day,";
    }
    EXPECT_EQ(cached.cached_tokens(0), 0);  // the other id kept nothing

    // Off: nothing is reused and nothing kept.
    GenerationOptions off = greedy(8, 8);
    Sequence seq = cached.start(1, target.tokenize(prompt, true, true), off);
    EXPECT_EQ(seq.result().stats.prompt_cached_tokens, 0);
    Sequence* const batch[] = {&seq};
    while (!seq.finished()) cached.step(batch);
    EXPECT_EQ(cached.cached_tokens(1), 0);
}

// A request that generates nothing (llama.vim's background /infill, n_predict 0, sent to pre-evaluate the
// context of the next one) leaves its prompt's cells kept for the id's next prompt, in both models.
TEST(Step, APromptWithNothingToGenerateKeepsItsCells) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    SpeculativeDecoder decoder(target, &draft, test_context(2));
    GenerationOptions nothing = greedy(0, 8);
    nothing.cache_prompt = true;
    const std::vector<int32_t> context =
        target.tokenize("Once upon a time, there was a little girl named Lily.", true, true);
    Sequence seq = decoder.start(1, context, nothing);
    EXPECT_TRUE(seq.finished());
    EXPECT_EQ(seq.result().stats.draft_prefilled_tokens, int64_t(context.size()) - 1);  // the draft caught up too
    EXPECT_TRUE(seq.take_result().tokens.empty());
    EXPECT_EQ(decoder.cached_tokens(1), int32_t(context.size()) - 1);

    std::vector<int32_t> next = context;
    for (const int32_t token : target.tokenize(" She liked to play.", false, true)) next.push_back(token);
    GenerationOptions options = greedy(16, 8);
    options.cache_prompt = true;
    const GenerationResult answer = run_to_end(decoder, 1, next, options);
    EXPECT_EQ(answer.stats.prompt_cached_tokens, int64_t(context.size()) - 1);
    EXPECT_LT(answer.stats.draft_prefilled_tokens, int64_t(next.size() - context.size()) + 1);  // its own part only
}

// A prompt that shares only the start of what an id keeps and then departs from it: exactly the shared prefix
// is reused, never the first cell that differs, and the output is what a fresh decoder gives.
TEST(Step, PromptCacheStopsAtTheFirstDifferingToken) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    GenerationOptions options = greedy(32, 8);
    options.cache_prompt = true;
    SpeculativeDecoder cached(target, &draft, test_context(2));
    SpeculativeDecoder fresh(target, &draft, test_context(2));
    const std::vector<int32_t> first =
        target.tokenize("Once upon a time, there was a little girl named Lily.", true, true);
    run_to_end(cached, 1, first, options);
    constexpr size_t kShared = 6;
    std::vector<int32_t> departing(first.begin(), first.begin() + kShared);
    for (const int32_t token : target.tokenize(" a big red dog ran home.", false, true)) departing.push_back(token);
    ASSERT_NE(departing[kShared], first[kShared]);

    EXPECT_EQ(cached.reusable_prompt(1, departing), int32_t(kShared));
    const GenerationResult with_cache = run_to_end(cached, 1, departing, options);
    EXPECT_EQ(with_cache.stats.prompt_cached_tokens, int64_t(kShared));
    EXPECT_EQ(with_cache.tokens, run_to_end(fresh, 0, departing, greedy(32, 8)).tokens);
}

// ModelContext::shift_left (llama-server's --cache-reuse moves kept cells so). Attention under RoPE depends on
// relative positions only, so ten tokens' cells moved from positions 4-13 to 0-9 predict the next token, at 10, as
// the unmoved cells do at 14, up to the keys' re-rotation; and a move that drops the cells between keeps exactly
// the moved ones (the saved sequence is the size of six prefilled tokens). Seen failing with the shift one position
// off (llama_decode refuses the next position) and with the cells between kept.
TEST(Step, ShiftLeftMovesTheCellsAndDropsThoseBetween) {
    for (const std::string& model_path : {test::kTargetModel, test::kDefaultTarget}) {
        const Model target(model_path, test::offload());
        const std::vector<int32_t> tokens =
            target.tokenize("Once upon a time, there was a little girl named Lily who loved to play", true, true);
        ASSERT_GE(tokens.size(), 11u);
        const std::span<const int32_t> ten = std::span(tokens).first(10), next = std::span(tokens).subspan(10, 1);
        std::vector<float> unmoved, moved;
        ModelContext reference(target, test_context());
        reference.prefill(0, ten, 4);
        reference.prefill_last_logits(0, next, 14, unmoved);
        ModelContext shifted(target, test_context());
        ASSERT_TRUE(shifted.can_shift());
        shifted.prefill(0, ten, 4);
        shifted.shift_left(0, /*from=*/4, /*n=*/10, /*to=*/0);
        shifted.prefill_last_logits(0, next, 10, moved);
        double largest = 0;
        for (size_t v = 0; v < unmoved.size(); ++v)
            largest = std::max(largest, std::abs(double(moved.at(v)) - double(unmoved[v])));
        EXPECT_LT(largest, 0.05) << model_path << ": the moved cells do not stand 4 positions earlier";

        ModelContext dropped(target, test_context());
        dropped.prefill(0, ten, 0);
        dropped.shift_left(0, /*from=*/6, /*n=*/4, /*to=*/2);
        ModelContext six(target, test_context());
        six.prefill(0, std::span(tokens).first(6), 0);
        EXPECT_EQ(dropped.save_sequence(0).size(), six.save_sequence(0).size()) << model_path << ": cells 2-5 stayed";
    }
}

// cache_reuse_min_chunk: a prompt that drops a span of what its slot kept reuses the shared prefix, then the kept
// run after the span that it continues with, shifted into place, when the run is at least min_chunk long; a run
// one token shorter than min_chunk is prefilled again. Counted by hand: prefix 8 + run 8.
TEST(Step, CacheReuseCountsThePrefixAndTheRunsOfAtLeastMinChunk) {
    const Model target(test::kTargetModel, test::offload());
    const std::vector<int32_t> text = target.tokenize(
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her dog.",
        true, true);
    ASSERT_GE(text.size(), 22u);
    const std::span<const int32_t> prefix = std::span(text).first(8), span = std::span(text).subspan(8, 5),
                                   run = std::span(text).subspan(13, 8);
    std::vector<int32_t> first(prefix.begin(), prefix.end());
    first.insert(first.end(), span.begin(), span.end());
    first.insert(first.end(), run.begin(), run.end());
    std::vector<int32_t> second(prefix.begin(), prefix.end());
    second.insert(second.end(), run.begin(), run.end());
    second.push_back(text[21]);  // the last prompt token is the first step's to feed, never reused
    for (const int32_t min_chunk : {8, 9}) {
        SpeculativeDecoder decoder(target, nullptr, test_context());
        GenerationOptions options = greedy(4, 4);
        options.cache_prompt = true;
        options.cache_reuse_min_chunk = min_chunk;
        run_to_end(decoder, 0, first, options);
        const GenerationResult reused = run_to_end(decoder, 0, second, options);
        EXPECT_EQ(reused.stats.prompt_cached_tokens, min_chunk <= 8 ? 16 : 8) << "min_chunk " << min_chunk;
        EXPECT_EQ(reused.tokens.size(), 4u);
    }
}

// use_prompt_cache (llama-server's --cache-ram): a prompt whose slot lost its cells to another prompt gets them
// back from host memory, in both models, and decodes what a fresh decoder decodes; without the cache the same
// sequence of prompts prefills it again.
TEST(Step, PromptCacheInHostMemoryBringsBackAPromptItsSlotLost) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    GenerationOptions options = greedy(32, 8);
    options.cache_prompt = true;
    SpeculativeDecoder cached(target, &draft, test_context());
    cached.use_prompt_cache(-1);
    SpeculativeDecoder fresh(target, &draft, test_context());
    const std::vector<int32_t> first =
        target.tokenize("Once upon a time, there was a little girl named Lily.", true, true);
    const std::vector<int32_t> other = target.tokenize("Tom and his dog went to the park to play ball.", true, true);
    ASSERT_NE(first[1], other[1]);

    const GenerationResult cold = run_to_end(cached, 0, first, options);
    const int32_t kept = cached.cached_tokens(0);
    const GenerationResult second = run_to_end(cached, 0, other, options);  // takes the slot: its cells are copied
    EXPECT_EQ(second.stats.prompt_cached_tokens, 1) << "the slot's own cells still give what they share (BOS)";
    ASSERT_NE(cached.prompt_cache(), nullptr);
    EXPECT_EQ(cached.prompt_cache()->entries(), 1u);
    EXPECT_EQ(cached.reusable_prompt(0, first), 1);  // the slot itself shares only BOS with it now

    const GenerationResult again = run_to_end(cached, 0, first, options);
    EXPECT_EQ(again.stats.prompt_cached_tokens, int64_t(first.size()) - 1);  // all the cache may give
    EXPECT_GE(kept, int32_t(first.size()) - 1);
    EXPECT_EQ(again.stats.draft_prefilled_tokens, 0) << "the draft's cells came back too";
    EXPECT_GT(cold.stats.draft_prefilled_tokens, 0);
    // ... bit for bit: the draft proposes what it proposed after its own prefill.
    EXPECT_EQ(again.stats.drafted, cold.stats.drafted);
    EXPECT_EQ(again.stats.accepted, cold.stats.accepted);
    EXPECT_EQ(again.tokens, cold.tokens);
    EXPECT_EQ(again.tokens, run_to_end(fresh, 0, first, greedy(32, 8)).tokens);
    EXPECT_EQ(cached.prompt_cache()->entries(), 2u) << "the other prompt went to the cache in its turn";

    // Off (the same prompts on a decoder without the cache): the prompt is prefilled again.
    run_to_end(fresh, 0, first, options);
    run_to_end(fresh, 0, other, options);
    EXPECT_EQ(run_to_end(fresh, 0, first, options).stats.prompt_cached_tokens, 1);
}

// first_token_from_prompt: the first token comes from the prompt's logits (as llama-server takes it), so the
// first step emits exactly that one token without a target call; its logprob is the target's after the
// prompt, and the output is unchanged.
TEST(Step, FirstTokenFromThePromptCostsNoTargetCallAndDecodesTheSame) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    SpeculativeDecoder decoder(target, &draft, test_context());
    const std::string prompt = "Once upon a time";
    GenerationOptions options = greedy(32, 8);
    options.logprobs = 0;
    const GenerationResult plain = decoder.generate(prompt, options);
    options.first_token_from_prompt = true;
    std::vector<size_t> step_sizes;
    const int64_t calls_before = decoder.target_decode_calls();
    const GenerationResult first = decoder.generate(prompt, options, [&](const StepResult& step) {
        step_sizes.push_back(step.tokens.size());
        return false;
    });
    EXPECT_EQ(first.tokens, plain.tokens);
    // The prompt's last token rides in the prefill's one chunk: no one-token call of its own.
    EXPECT_EQ(decoder.target_decode_calls() - calls_before, 1 + first.stats.target_calls);
    ASSERT_GE(step_sizes.size(), 2u);
    EXPECT_EQ(step_sizes[0], 1u);
    EXPECT_EQ(first.stats.target_calls + 1, int64_t(step_sizes.size())) << "the first step made a target call";
    EXPECT_GT(*std::max_element(step_sizes.begin() + 1, step_sizes.end()), 1u) << "later steps draft again";
    const std::vector<int32_t> prompt_tokens = target.tokenize(prompt, /*add_bos=*/true, /*parse_special=*/true);
    const ForwardResult forward = decoder.forward(ModelRole::Target, prompt_tokens, /*with_hidden=*/false);
    const std::span<const float> after_prompt(
        forward.logits.data() + (prompt_tokens.size() - 1) * size_t(forward.n_vocab), size_t(forward.n_vocab));
    ASSERT_FALSE(first.logprobs.empty());
    EXPECT_NEAR(first.logprobs[0].chosen.logprob, token_logprobs(after_prompt, first.tokens[0], 0).chosen.logprob,
                1e-4);
    // A sequence that ends at its first token (max_tokens 1) makes no target call at all.
    options.max_tokens = 1;
    const GenerationResult one = decoder.generate(prompt, options);
    EXPECT_EQ(one.tokens, std::vector<int32_t>{plain.tokens[0]});
    EXPECT_EQ(one.stats.target_calls, 0);
}

// Chunked prefill (set_prefill_chunk): prompts come in chunks inside the running sequences' batches. The output
// is decoding alone's, for prompts with and without first_token_from_prompt and with reused prompt cells; and a
// long prompt arriving beside a running sequence takes one chunk a step, in the same target call as that
// sequence's verification, which emits at every one of those steps.
TEST(Step, ChunkedPrefillDecodesTheSameAndKeepsOtherStreamsFlowing) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    std::vector<std::string> prompts = test::story_prompts(8);
    prompts.push_back(prompts[1] + " and then");  // the slot's kept cells serve its prefix
    std::vector<GenerationOptions> options;
    for (size_t i = 0; i < prompts.size(); ++i) {
        options.push_back(greedy(16 + 8 * static_cast<int32_t>(i % 3), 1 + 3 * static_cast<int32_t>(i % 4)));
        options.back().first_token_from_prompt = i % 2 == 0;
        options.back().cache_prompt = true;
    }
    SpeculativeDecoder alone(target, &draft, test_context());
    SpeculativeDecoder chunked(target, &draft, test_context(3));
    chunked.set_prefill_chunk(3);
    const std::vector<GenerationResult> together = run_batched(chunked, prompts, options, 3);
    for (size_t i = 0; i < prompts.size(); ++i) {
        const GenerationResult reference = alone.generate(prompts[i], options[i]);
        EXPECT_EQ(together[i].tokens, reference.tokens) << prompts[i];
        EXPECT_EQ(together[i].stats.prompt_tokens, reference.stats.prompt_tokens);
        if (!test::offloaded()) {
            EXPECT_EQ(together[i].stats.target_calls, reference.stats.target_calls) << prompts[i];
        }
    }

    std::string long_prompt;
    for (const std::string& p : test::story_prompts(4)) long_prompt += p + " ";
    const std::vector<int32_t> long_tokens = target.tokenize(long_prompt, /*add_bos=*/true, /*parse_special=*/true);
    SpeculativeDecoder decoder(target, &draft, test_context(2));
    constexpr int32_t kChunk = 4;
    decoder.set_prefill_chunk(kChunk);
    GenerationOptions running_options = greedy(200, 4);
    Sequence running = decoder.start(0, test::story_prompts(1)[0], running_options);
    std::vector<Sequence*> batch = {&running};
    decoder.step(batch);
    GenerationOptions arriving_options = greedy(8, 4);
    arriving_options.first_token_from_prompt = true;
    Sequence arriving = decoder.start(1, long_tokens, arriving_options);
    batch.push_back(&arriving);
    const int32_t chunks = (static_cast<int32_t>(long_tokens.size()) + kChunk - 1) / kChunk;
    ASSERT_GT(chunks, 4);
    for (int32_t step = 0; step < chunks; ++step) {
        ASSERT_FALSE(running.finished());
        const size_t emitted = running.result().tokens.size();
        const int64_t calls = decoder.target_decode_calls();
        decoder.step(batch);
        EXPECT_GT(running.result().tokens.size(), emitted) << "the running stream stalled at chunk " << step;
        EXPECT_EQ(decoder.target_decode_calls() - calls, 1) << "chunk " << step << " took a target call of its own";
        EXPECT_EQ(arriving.result().tokens.size(), step + 1 < chunks ? 0u : 1u) << "chunk " << step;
    }
    while (!arriving.finished()) decoder.step(batch);
    const GenerationResult reference = alone.generate(long_prompt, arriving_options);
    EXPECT_EQ(arriving.result().tokens, reference.tokens);

    // With no stream running, nothing waits on a prompt: it goes in whole batches, one call here, not chunks.
    SpeculativeDecoder idle(target, &draft, test_context(2));
    idle.set_prefill_chunk(kChunk);
    Sequence solo = idle.start(0, long_tokens, arriving_options);
    Sequence* const only[] = {&solo};
    ASSERT_LE(long_tokens.size(), size_t(test_context(2).n_ctx));  // within one batch (n_batch: the context's)
    const int64_t calls_before = idle.target_decode_calls();
    idle.step(only);
    EXPECT_EQ(idle.target_decode_calls() - calls_before, 1);
    EXPECT_EQ(solo.result().tokens.size(), 1u) << "the prompt's first token came at its first step";
    while (!solo.finished()) idle.step(only);
    EXPECT_EQ(solo.result().tokens, reference.tokens);
}

// A pass asked for the rows from k on outputs exactly those rows (the prompt's rows skip the output head,
// which on a 262,144-token vocabulary costs more than the layers), equal to the whole pass's rows, across
// chunk boundaries; asking for a row it did not output is an error, not another row's numbers.
TEST(Step, ForwardFromARowGivesThoseRowsOfTheWholePass) {
    const Model target(test::kDefaultTarget);
    ContextOptions options = test_context();
    options.hidden_states = true;
    options.n_batch = 8;  // chunks of 8: the first output row falls inside the third one
    SpeculativeDecoder decoder(target, nullptr, options);
    std::string text;
    for (const std::string& prompt : test::story_prompts(4)) text += prompt + " ";
    const std::vector<int32_t> tokens = target.tokenize(text, true);
    ASSERT_GT(tokens.size(), 24u);
    const ForwardResult whole = decoder.forward(ModelRole::Target, tokens, /*with_hidden=*/true);
    const int32_t first = 19;
    const ForwardResult part = decoder.forward(ModelRole::Target, tokens, /*with_hidden=*/true, 0, first);
    const auto rows = static_cast<size_t>(int32_t(tokens.size()) - first);
    ASSERT_EQ(part.logits.size(), rows * size_t(part.n_vocab));
    ASSERT_EQ(part.hidden.size(), rows * size_t(part.n_embd));
    for (int32_t i = first; i < int32_t(tokens.size()); ++i) {
        const std::span<const float> a = whole.logits_row(i), b = part.logits_row(i);
        const std::span<const float> ha = whole.hidden_row(i), hb = part.hidden_row(i);
        double logit_diff = 0, hidden_diff = 0;
        for (size_t v = 0; v < a.size(); ++v) logit_diff = std::max(logit_diff, std::abs(double(a[v]) - b[v]));
        for (size_t j = 0; j < ha.size(); ++j) hidden_diff = std::max(hidden_diff, std::abs(double(ha[j]) - hb[j]));
        EXPECT_LT(logit_diff, 1e-3) << "row " << i;
        EXPECT_LT(hidden_diff, 1e-3) << "row " << i;
        EXPECT_EQ(argmax(a), argmax(b)) << "row " << i;
    }
    EXPECT_THROW(part.logits_row(first - 1), Error);
    EXPECT_THROW(part.hidden_row(int32_t(tokens.size())), Error);
    EXPECT_THROW(decoder.forward(ModelRole::Target, tokens, false).hidden_row(first), Error);
    EXPECT_THROW(decoder.forward(ModelRole::Target, tokens, false, 0, int32_t(tokens.size()) + 1), Error);
}

// forward(..., cells_from): AutoJudge mining's passes over a continuation just decoded start from a copy of the
// cells its id kept, for the prefix they share with the pass's tokens before first_row, in either model. The rows
// are a fresh pass's up to the last bits (cells decoded in other batches, as verification's rows are: below half
// the near-tie bound), including after a token the kept cells do not hold; the id that kept them keeps them.
TEST(Step, ForwardFromAnotherIdsCellsGivesTheRowsOfAFreshPass) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    ContextOptions context = test_context(2);
    context.hidden_states = true;
    SpeculativeDecoder decoder(target, &draft, context);
    const std::vector<int32_t> prompt = target.tokenize("Once upon a time", true, true);
    // Drafting, the draft's cells follow the target's; target-only (policy off), the draft keeps none.
    GenerationOptions drafting = greedy(32, 4), target_only = greedy(32, 4);
    target_only.draft_policy = DraftPolicy::Off;
    for (GenerationOptions options : {drafting, target_only}) {
        options.cache_prompt = true;
        const GenerationResult decoded = run_to_end(decoder, 0, prompt, options);
        const int32_t kept = decoder.cached_tokens(0);
        ASSERT_GT(kept, int32_t(prompt.size()) + 20);

        // The decoded text with one token changed 10 tokens into the answer; rows from before it and after it.
        std::vector<int32_t> tokens = prompt;
        tokens.insert(tokens.end(), decoded.tokens.begin(), decoded.tokens.end());
        const size_t changed = prompt.size() + 10;
        tokens[changed] = tokens[changed] == 13 ? 14 : 13;
        for (const int32_t first_row : {int32_t(changed) - 4, int32_t(changed) + 6}) {
            for (const ModelRole role : {ModelRole::Target, ModelRole::Draft}) {
                const ForwardResult fresh = decoder.forward(role, tokens, /*with_hidden=*/true, 1, first_row);
                const ForwardResult reused = decoder.forward(role, tokens, /*with_hidden=*/true, 1, first_row, 0);
                ASSERT_EQ(reused.logits.size(), fresh.logits.size());
                for (int32_t i = first_row; i < int32_t(tokens.size()); ++i) {
                    const std::span<const float> a = fresh.logits_row(i), b = reused.logits_row(i);
                    const std::span<const float> ha = fresh.hidden_row(i), hb = reused.hidden_row(i);
                    double logit_diff = 0, hidden_diff = 0;
                    for (size_t v = 0; v < a.size(); ++v)
                        logit_diff = std::max(logit_diff, std::abs(double(a[v]) - b[v]));
                    for (size_t j = 0; j < ha.size(); ++j)
                        hidden_diff = std::max(hidden_diff, std::abs(double(ha[j]) - hb[j]));
                    const std::string where = "row " + std::to_string(i) + " from " + std::to_string(first_row) + ", " +
                                              std::string(draft_policy_name(options.draft_policy)) +
                                              (role == ModelRole::Draft ? ", draft" : ", target");
                    EXPECT_LT(logit_diff, test::kNearTieGap / 2) << where;
                    EXPECT_LT(hidden_diff, test::kNearTieGap / 2) << where;
                }
            }
        }
        EXPECT_EQ(decoder.cached_tokens(0), kept);
        EXPECT_EQ(run_to_end(decoder, 0, prompt, options).tokens, decoded.tokens);
    }
}

// use_repacked_prompts moves each prompt's cells from the prompt context into the target's, and first the cells a
// prompt reuses the other way. With a copy that llama.cpp cannot repack (F32) the kernels are the target's, so
// every token and the first token's logits must be those of a decoder without a prompt context, on two ids, with
// the prompt cache reused and a prompt short enough to stay in the target's context.
TEST(Step, RepackedPromptsMoveTheCellsIntoTheTargetsContext) {
    const Model target(test::kTargetModel, test::offload());
    const Model copy(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    SpeculativeDecoder plain(target, &draft, test_context(2));
    SpeculativeDecoder moved(target, &draft, test_context(2));
    ASSERT_EQ(moved.use_repacked_prompts(copy), std::nullopt);
    GenerationOptions options = greedy(24, 4);
    options.cache_prompt = true;
    options.first_token_from_prompt = true;
    options.logprobs = 0;
    const std::vector<int32_t> first =
        target.tokenize("Once upon a time, there was a little girl named Lily.", true, true);
    std::vector<int32_t> longer = first;
    for (const int32_t token : target.tokenize(" She liked to play in the park with her dog.", false, true))
        longer.push_back(token);
    std::vector<int32_t> one_more = longer;
    one_more.push_back(target.tokenize(" The", false, true).front());
    const std::vector<int32_t>* const prompts[] = {&first, &longer, &one_more};
    for (const int32_t id : {1, 0}) {
        for (const std::vector<int32_t>* prompt : prompts) {
            const GenerationResult a = run_to_end(plain, id, *prompt, options);
            const GenerationResult b = run_to_end(moved, id, *prompt, options);
            EXPECT_EQ(b.tokens, a.tokens) << "id " << id << ", prompt of " << prompt->size();
            EXPECT_EQ(b.stats.prompt_cached_tokens, a.stats.prompt_cached_tokens);
            ASSERT_FALSE(b.logprobs.empty());
            EXPECT_EQ(b.logprobs[0].chosen.logprob, a.logprobs[0].chosen.logprob);
        }
    }
    EXPECT_GT(run_to_end(moved, 1, longer, options).stats.prompt_cached_tokens, int64_t(first.size()));
}

}  // namespace
}  // namespace klspec
