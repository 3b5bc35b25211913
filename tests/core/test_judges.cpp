// The judge rules: decisions and statistics on hand-computed distributions, agreement with vanilla where
// a rule can never fire, and monotonicity of a whole acceptance step in the rule's knob.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "core/acceptance.h"
#include "core/error.h"
#include "core/judges/entropy_judges.h"
#include "core/judges/fsd_judge.h"
#include "core/judges/kl_judge.h"
#include "core/judges/topk_judge.h"
#include "draft_position.h"

namespace klspec {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
const float kLog2 = std::log(2.0f);

using test::position;

// p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4): KL(p ‖ q) = ln2/2 − ln2/4 = ln2/4, max p = 1/2,
// H(p) = H(q) = 1.5 ln2.
const std::vector<float> kTarget{kLog2, 0.0f, 0.0f};
const std::vector<float> kDraft{0.0f, kLog2, 0.0f};
const double kKl = std::log(2.0) / 4;
const double kEntropy = 1.5 * std::log(2.0);

TEST(KlJudge, HandComputed) {
    const KlJudge loose(kKl + 1e-6, 0.9);
    const JudgeDecision relaxed = loose.decide(position(kTarget, kDraft, 1));
    EXPECT_TRUE(relaxed.relaxed);
    EXPECT_NEAR(relaxed.statistic, kKl, 1e-7);

    const KlJudge tight(kKl - 1e-6, 0.9);
    const JudgeDecision kept = tight.decide(position(kTarget, kDraft, 1));
    EXPECT_FALSE(kept.relaxed);
    EXPECT_NEAR(kept.statistic, kKl, 1e-7);
}

// The paper's direction, KL(p ‖ q) with p the target's, on a pair where the two directions differ
// (p = (1/2, 1/2), q = (1/4, 3/4): KL(p ‖ q) = ½ ln(4/3) ≈ 0.144 > KL(q ‖ p) ≈ 0.131): a threshold between
// them keeps the token, which KL(q ‖ p) would relax.
TEST(KlJudge, ReadsTheTargetFirst) {
    const std::vector<float> target{0.0f, 0.0f};
    const std::vector<float> draft{0.0f, std::log(3.0f)};
    const double forward = 0.5 * std::log(4.0 / 3.0);
    const double reverse = 0.75 * std::log(1.5) - 0.25 * std::log(2.0);
    const JudgeDecision between = KlJudge((forward + reverse) / 2, 0.9).decide(position(target, draft, 0));
    EXPECT_NEAR(between.statistic, forward, 1e-7);
    EXPECT_FALSE(between.relaxed);
}

// FSD's three divergences on an asymmetric pair, p = (1/2, 1/2), q = (1/4, 3/4), where forward and reverse
// KL differ: KL(p ‖ q) = ½ ln(4/3), KL(q ‖ p) = ¾ ln(3/2) − ¼ ln 2, and with m = (3/8, 5/8)
// JS = ½ KL(p ‖ m) + ½ KL(q ‖ m) = ¼ ln(16/15) + ⅛ ln(2/3) + ⅜ ln(6/5).
TEST(FsdJudge, HandComputedDivergences) {
    const std::vector<float> target{0.0f, 0.0f};
    const std::vector<float> draft{0.0f, std::log(3.0f)};
    const double forward = 0.5 * std::log(4.0 / 3.0);
    const double reverse = 0.75 * std::log(1.5) - 0.25 * std::log(2.0);
    const double js = 0.25 * std::log(16.0 / 15.0) + 0.125 * std::log(2.0 / 3.0) + 0.375 * std::log(1.2);
    for (const auto& [divergence, expected] : std::vector<std::pair<Divergence, double>>{
             {Divergence::ForwardKl, forward}, {Divergence::ReverseKl, reverse}, {Divergence::JensenShannon, js}}) {
        const std::string name(divergence_name(divergence));
        const JudgeDecision loose = FsdJudge(expected + 1e-6, divergence).decide(position(target, draft, 0));
        EXPECT_NEAR(loose.statistic, expected, 1e-7) << name;
        EXPECT_TRUE(loose.relaxed) << name;
        EXPECT_FALSE(FsdJudge(expected - 1e-6, divergence).decide(position(target, draft, 0)).relaxed) << name;
    }
    // No confidence mask: a target sure of its token (max p ≈ 1) is still relaxed when the draft agrees.
    const std::vector<float> sure{20.0f, 0.0f};
    EXPECT_TRUE(FsdJudge(0.01, Divergence::ReverseKl).decide(position(sure, sure, 0)).relaxed);
}

TEST(FsdJudge, DisjointSupports) {
    // Where p = 0 and q > 0, KL(q ‖ p) is infinite; JS stays at its maximum ln 2.
    const std::vector<float> target{0.0f, kMinusInf};
    const std::vector<float> draft{kMinusInf, 0.0f};
    EXPECT_TRUE(std::isinf(FsdJudge(1e9, Divergence::ReverseKl).decide(position(target, draft, 1)).statistic));
    EXPECT_NEAR(FsdJudge(1.0, Divergence::JensenShannon).decide(position(target, draft, 1)).statistic, std::log(2.0),
                1e-9);
    EXPECT_EQ(parse_divergence("js"), Divergence::JensenShannon);
    EXPECT_THROW(parse_divergence("hellinger"), Error);
}

// Pure judges: the same position gives the same decision however often, and in any order.
TEST(Judges, AreDeterministicAndStateless) {
    const KlJudge kl(kKl + 1e-6, 0.9);
    const TopKJudge topk(1);
    const TargetEntropyJudge entropy(kEntropy);
    const std::vector<float> other_target{5.0f, 0.0f, 0.0f};
    for (const Judge* judge : std::initializer_list<const Judge*>{&kl, &topk, &entropy}) {
        const JudgeDecision first = judge->decide(position(kTarget, kDraft, 1));
        judge->decide(position(other_target, kDraft, 2));  // a different position in between
        const JudgeDecision again = judge->decide(position(kTarget, kDraft, 1));
        EXPECT_EQ(first.relaxed, again.relaxed) << judge->name();
        EXPECT_EQ(first.statistic, again.statistic) << judge->name();
    }
}

TEST(KlJudge, ConfidenceMask) {
    // max p = 1/2: a mask of 1/2 still allows relaxing, anything below does not.
    KlJudge at_mask(1.0, 0.5 + 1e-7);
    EXPECT_TRUE(at_mask.decide(position(kTarget, kDraft, 1)).relaxed);
    KlJudge below_mask(1.0, 0.49);
    EXPECT_FALSE(below_mask.decide(position(kTarget, kDraft, 1)).relaxed);
    // A confident target (p = 0.99 on token 0) is never relaxed with m = 0.9, even for tiny KL.
    const std::vector<float> confident{std::log(99.0f), 0.0f};
    const std::vector<float> close{std::log(98.0f), 0.0f};
    KlJudge masked(1.0, 0.9);
    EXPECT_FALSE(masked.decide(position(confident, close, 1)).relaxed);
    KlJudge unmasked(1.0, 1.0);
    EXPECT_TRUE(unmasked.decide(position(confident, close, 1)).relaxed);
    // m = 1 is off even for a one-hot target (max p exactly 1) against an identical draft (KL 0).
    const std::vector<float> one_hot{0.0f, kMinusInf, kMinusInf};
    EXPECT_TRUE(KlJudge(1e-3, 1.0).decide(position(one_hot, one_hot, 0)).relaxed);
    EXPECT_FALSE(KlJudge(1e-3, 0.999).decide(position(one_hot, one_hot, 0)).relaxed);
}

// The mask reads the target's confidence, not the draft's: each alone on its side of m = 0.9.
TEST(KlJudge, ConfidenceMaskReadsTheTarget) {
    const std::vector<float> unsure{0.0f, 0.0f};                // (1/2, 1/2)
    const std::vector<float> confident{std::log(99.0f), 0.0f};  // (0.99, 0.01)
    const KlJudge judge(1e9, 0.9);
    EXPECT_TRUE(judge.decide(position(unsure, confident, 0)).relaxed) << "an unsure target relaxes";
    EXPECT_FALSE(judge.decide(position(confident, unsure, 1)).relaxed) << "a confident target never does";
}

TEST(KlJudge, DraftMissingATargetTokenIsNeverRelaxed) {
    const std::vector<float> draft{0.0f, 0.0f, kMinusInf};
    KlJudge judge(1e9, 1.0);
    const JudgeDecision decision = judge.decide(position(kTarget, draft, 1));
    EXPECT_FALSE(decision.relaxed);
    EXPECT_EQ(decision.statistic, std::numeric_limits<double>::infinity());
}

TEST(TopKJudge, RankDecides) {
    const std::vector<float> target{1.0f, 3.0f, 2.0f, 3.0f, kMinusInf};
    const std::vector<float> draft(5, 0.0f);
    TopKJudge top1(1), top2(2), top5(5);
    EXPECT_TRUE(top1.decide(position(target, draft, 1)).relaxed);
    const JudgeDecision tied = top1.decide(position(target, draft, 3));
    EXPECT_FALSE(tied.relaxed);  // tied with 1, ranked after it
    EXPECT_EQ(tied.statistic, 1);
    const JudgeDecision second = top2.decide(position(target, draft, 3));
    EXPECT_TRUE(second.relaxed);
    EXPECT_FALSE(top2.decide(position(target, draft, 2)).relaxed);
    EXPECT_EQ(top2.decide(position(target, draft, 2)).statistic, 2);
    EXPECT_TRUE(top5.decide(position(target, draft, 0)).relaxed);
    // p(d) = 0 is never relaxed, even when K covers the whole vocabulary.
    const JudgeDecision impossible = top5.decide(position(target, draft, 4));
    EXPECT_FALSE(impossible.relaxed);
    EXPECT_EQ(impossible.statistic, 4);
}

TEST(EntropyJudges, HandComputed) {
    TargetEntropyJudge target_at(kEntropy - 1e-6), target_above(kEntropy + 1e-6);
    const JudgeDecision at = target_at.decide(position(kTarget, kDraft, 1));
    EXPECT_TRUE(at.relaxed);
    EXPECT_NEAR(at.statistic, kEntropy, 1e-7);
    EXPECT_FALSE(target_above.decide(position(kTarget, kDraft, 1)).relaxed);

    // The draft entropy of a uniform q over 4 tokens is ln 4; the target does not matter.
    const std::vector<float> uniform(4, 0.5f), peaked{9.0f, 0.0f, 0.0f, 0.0f};
    DraftEntropyJudge draft_at(std::log(4.0) + 1e-6), draft_below(std::log(4.0) - 1e-6);
    const JudgeDecision draft_decision = draft_at.decide(position(peaked, uniform, 1));
    EXPECT_TRUE(draft_decision.relaxed);
    EXPECT_NEAR(draft_decision.statistic, std::log(4.0), 1e-7);
    EXPECT_FALSE(draft_below.decide(position(peaked, uniform, 1)).relaxed);
}

// γ drafted positions over a small vocabulary, with draft tokens chosen as the engine would: greedy
// argmax of q, or a sample from q.
struct Step {
    static constexpr int32_t kVocab = 24;
    static constexpr int32_t kGamma = 6;

    Step(uint64_t seed, bool greedy) {
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> logit(0.0f, 2.0f);
        std::normal_distribution<float> shift(0.0f, 1.0f);
        for (int32_t i = 0; i <= kGamma; ++i) {
            std::vector<float> p(kVocab), q(kVocab);
            for (int32_t v = 0; v < kVocab; ++v) {
                p[v] = logit(rng);
                q[v] = p[v] + shift(rng);  // related but different, so that some drafts are rejected
            }
            target.push_back(p);
            draft.push_back(q);
            if (greedy) {
                tokens.push_back(argmax(q));
            } else {
                std::vector<float> probs;
                softmax(q, probs);
                tokens.push_back(sample_from_weights(probs, rng));
            }
        }
    }

    StepOutcome run(const Judge& judge, const SamplingParams& params, uint64_t seed) const {
        AcceptanceStep step(params, judge);
        Rng rng(seed);
        return step.run(
            kGamma, [&](int32_t i) { return position(target[i], draft[i], tokens[i]); }, target[kGamma], rng);
    }

    std::vector<std::vector<float>> target, draft;
    std::vector<int32_t> tokens;
};

const SamplingParams kGreedy{};
const SamplingParams kStochastic{.temperature = 1.0f};

// A judge that cannot fire must give exactly the vanilla outcome, random draws included.
void expect_same_as_vanilla(const std::function<std::unique_ptr<Judge>()>& make, const SamplingParams& params) {
    int rejections = 0;
    for (uint64_t trial = 0; trial < 300; ++trial) {
        const Step step(trial, params.greedy());
        VanillaJudge vanilla;
        const StepOutcome expected = step.run(vanilla, params, trial + 1000);
        const auto judge = make();
        const StepOutcome actual = step.run(*judge, params, trial + 1000);
        EXPECT_EQ(actual.accepted, expected.accepted) << judge->name() << ", trial " << trial;
        EXPECT_EQ(actual.next_token, expected.next_token) << judge->name() << ", trial " << trial;
        EXPECT_EQ(actual.relaxed_accepted, 0);
        rejections += expected.accepted < Step::kGamma;
    }
    EXPECT_GT(rejections, 100);  // the judge was actually consulted
}

TEST(JudgesNeverFiring, MatchVanilla) {
    for (const SamplingParams& params : {kGreedy, kStochastic}) {
        SCOPED_TRACE(params.greedy() ? "greedy" : "stochastic");
        expect_same_as_vanilla([] { return std::make_unique<KlJudge>(0.0, 0.9); }, params);
        expect_same_as_vanilla([] { return std::make_unique<KlJudge>(0.0, 1.0); }, params);
        expect_same_as_vanilla([] { return std::make_unique<TargetEntropyJudge>(1e9); }, params);
        expect_same_as_vanilla([] { return std::make_unique<DraftEntropyJudge>(0.0); }, params);
    }
    // K = 1 relaxes only d = argmax p, which greedy vanilla accepts anyway.
    expect_same_as_vanilla([] { return std::make_unique<TopKJudge>(1); }, kGreedy);
}

// Accepted counts of one greedy step as the knob sweeps from strict to permissive.
void expect_monotone(const std::function<std::unique_ptr<Judge>(double)>& make, const std::vector<double>& knobs) {
    int increases = 0;
    for (uint64_t trial = 0; trial < 200; ++trial) {
        const Step step(trial, true);
        int32_t previous = -1;
        for (double knob : knobs) {
            const auto judge = make(knob);
            const int32_t accepted = step.run(*judge, kGreedy, 0).accepted;
            EXPECT_GE(accepted, previous) << judge->name() << " at " << knob << ", trial " << trial;
            increases += previous >= 0 && accepted > previous;
            previous = accepted;
        }
    }
    EXPECT_GT(increases, 50);
}

TEST(JudgesMonotone, AcceptedCountGrowsWithPermissiveness) {
    const std::vector<double> tau{0.0, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 1e9};
    expect_monotone([](double t) { return std::make_unique<KlJudge>(t, 1.0); }, tau);
    expect_monotone([](double t) { return std::make_unique<KlJudge>(t, 0.9); }, tau);
    expect_monotone([](double t) { return std::make_unique<DraftEntropyJudge>(t); }, tau);
    // target-entropy relaxes where H(p) >= τ: permissive means a smaller τ.
    expect_monotone([](double t) { return std::make_unique<TargetEntropyJudge>(t); },
                    std::vector<double>(tau.rbegin(), tau.rend()));
    expect_monotone([](double k) { return std::make_unique<TopKJudge>(static_cast<int32_t>(k)); },
                    {1, 2, 3, 5, 8, 13, 24});
}

}  // namespace
}  // namespace klspec
