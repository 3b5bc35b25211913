// Choosing how many tokens to draft. Speculative speed is about E(γ) / (t_verify(b) + Σ_depth t_draft(n)):
// E(γ) = (1 − α^{γ+1}) / (1 − α) tokens per step for per-position acceptance α, over the measured cost
// of the step's target batch of b tokens and its draft batches. γ = 0 is target-only. With many sequences
// in one step the batch is shared, so the lengths are chosen together (load-aware): on a compute-bound
// target a batch over all slots without drafts can beat speculation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <vector>

namespace klspec {

// How a sequence picks its draft length γ each step.
enum class DraftPolicy {
    Auto,      // the cost model: γ in 0..draft-max maximising expected tokens per second
    Fixed,     // always draft-max (capped by -n and the context)
    Adaptive,  // Hugging Face's heuristic: +2 after a fully accepted draft, −1 after a rejection
    Off,       // target-only, even with a draft model
};
inline constexpr DraftPolicy kDraftPolicies[] = {DraftPolicy::Auto, DraftPolicy::Fixed, DraftPolicy::Adaptive,
                                                 DraftPolicy::Off};
std::string_view draft_policy_name(DraftPolicy policy);
// The policy of that name (auto, fixed, adaptive, off), or none.
std::optional<DraftPolicy> parse_draft_policy(std::string_view name);

// The Adaptive policy's next γ after a step that drafted `drafted` (>= 1) tokens and kept `accepted` of them:
// `budget` + 2 when every draft was kept, − 1 otherwise, within max(1, draft_min)..draft_max.
int32_t next_adaptive_draft_budget(int32_t budget, int32_t drafted, int32_t accepted, int32_t draft_min,
                                   int32_t draft_max);

// Seconds of one llama_decode call against its batch size in tokens: a running average per measured size,
// piecewise linear between sizes and linear beyond the largest (through the two largest sizes).
// llama.cpp reuses its compute graph when a batch has the previous call's shape and builds a new one
// otherwise (~5 % of a small target's step), so a call of another size than the previous one is charged
// the rebuild on top: changing γ every step costs more than the sizes alone say.
class BatchCostCurve {
public:
    // A size's average not updated for this many calls is stale: the sizes steps send keep moving (a longer
    // context, another process on the cores) while it stays where one old timing put it.
    static constexpr int64_t kStaleCalls = 32;

    // Folds a measurement in: a call of the previous call's size into that size's running average (the
    // first one is taken as is). A call that rebuilt is held until the next call: if that one reuses the
    // graph, the rebuild cost takes the first's excess over it, two timings a call apart. Not the excess over
    // the size's average, which takes in whatever moved since that was timed (a longer context, a slow spell
    // on a shared core): on the real pair, drafting at a new γ every step, that pushed the rebuild price from
    // ~5 to ~40 ms and priced a target-only step at 80-108 ms against 51 measured (docs/cost-model.md).
    // A size first seen rebuilding is averaged without the rebuild until a reused call of it comes. A stale
    // size's average is replaced by the call's time instead (less the rebuild when it rebuilt): one fresh
    // timing says more than an old one.
    void record(int32_t batch_size, double seconds);
    // A call that was not timed (split into micro-batches): the next call is taken to rebuild.
    void record_untimed() {
        last_size_ = 0;
        previous_rebuilt_seconds_.reset();
        ++calls_;
    }
    // Calls recorded since the size's average last moved (all calls when it never had one).
    int64_t calls_since_measured(int32_t batch_size) const;
    bool stale(int32_t batch_size) const { return calls_since_measured(batch_size) >= kStaleCalls; }
    // Marks the sizes stale, so that their next timing replaces their averages (a re-timing step's call, which
    // rebuilds the graph, would otherwise move nothing).
    void expire(std::span<const int32_t> batch_sizes);
    // Estimated seconds for a batch of `batch_size` tokens (>= 1) with the graph reused; 0 when nothing
    // was recorded.
    double seconds(int32_t batch_size) const;
    // Seconds for calls of these sizes in turn, each rebuilding that differs from the call before it
    // (the first compared with the last recorded call).
    double seconds(std::span<const int32_t> batch_sizes) const;
    double rebuild_seconds() const { return std::max(rebuild_seconds_.value_or(0.0), 0.0); }
    int32_t last_size() const { return last_size_; }
    bool empty() const { return mean_.empty(); }
    const std::map<int32_t, double>& points() const { return mean_; }

private:
    std::map<int32_t, double> mean_;
    std::set<int32_t> provisional_;                   // sizes known only from a rebuilding call, less the rebuild
    std::optional<double> previous_rebuilt_seconds_;  // the previous call's time, when it rebuilt
    std::optional<double> rebuild_seconds_;
    int32_t last_size_ = 0;
    int64_t calls_ = 0;
    std::map<int32_t, int64_t> measured_at_;  // the call count when the size's average last moved
};

// A running per-position acceptance: the chance that a drafted token is kept given that the ones before
// it were. Each step is one Bernoulli trial per judged position (the accepted ones and the rejected one).
// Evidence fades by `decay` per step, drafting or not, so a sequence that stopped drafting drifts back to
// the prior and tries again. The prior is the decoder-wide rate for one sequence's estimate (one
// sequence's recent steps say little more than all sequences' do), and kDecoderPrior for the decoder-wide
// one: optimistic, so that a fresh decoder drafts and learns its pair's rate in its first steps.
class AcceptanceEstimate {
public:
    static constexpr double kSequenceDecay = 0.9;  // a topic change shows within a few steps
    static constexpr double kDecoderDecay = 0.99;
    static constexpr double kPriorWeight = 16.0;   // trials' worth of prior: one sequence's last steps
                                                   // predict its next little better than all sequences do
    static constexpr double kDecoderPrior = 0.75;  // a working pair's per-position acceptance, roughly

    explicit AcceptanceEstimate(double decay = kSequenceDecay) : decay_(decay) {}
    void record(int32_t drafted, int32_t accepted);
    double rate(double prior = 0.5) const { return (kept_ + prior * kPriorWeight) / (trials_ + kPriorWeight); }

private:
    double decay_;
    double kept_ = 0;
    double trials_ = 0;
};

// One sequence's share of a llama_decode batch, in batch order.
struct BatchShare {
    int32_t sequence_id = 0;
    int32_t tokens = 0;
};
// The micro-batches (their token counts) llama.cpp cuts a batch into when every sequence has a KV stream
// of its own (llama_batch_allocr::split_equal, sequential): each takes, in batch order, the sequences with
// tokens left whose ids follow one another (0, 1, 2, ...: a gap starts another micro-batch), and the same
// number of tokens from each, the fewest any of them has left. Each micro-batch is a pass over the weights.
std::vector<int32_t> sequential_equal_split(std::span<const BatchShare> shares);

// The decoder-wide acceptance by draft depth: at depth j, the chance that d_j is kept given d_1..d_{j-1}
// were. It is not one number: a draft that got the first tokens right tends to stay on track (on the
// default pair: 0.90 at depth 1, 0.77 at depth 2, 0.92-0.99 beyond), so long drafts yield more than an
// i.i.d. rate predicts. A depth without evidence takes the rate of the depth before it.
class DepthAcceptance {
public:
    static constexpr int32_t kMaxDepth = 64;

    void record(int32_t drafted, int32_t accepted);
    // Rates for depths 1..max_depth at a sequence's level: depth 1's rejection rate times
    // `rejection_scale` (the sequence's rejection rate against the decoder's), kept within [0, 0.999];
    // the deeper depths at the decoder's rates. Scaling rejections, not acceptances: a scaled acceptance
    // overflows (1.06 × 0.95 > 1). Depth 1 only: a deeper depth's rate is already conditioned on the draft
    // being on track, and its evidence comes from the long drafts the choice sends when a sequence's rate
    // is high, so scaling it too counted that level twice and overrated long drafts (docs/cost-model.md).
    std::vector<double> rates(int32_t max_depth, double rejection_scale = 1.0) const;

private:
    std::vector<double> kept_ = std::vector<double>(kMaxDepth, 0.0);
    std::vector<double> trials_ = std::vector<double>(kMaxDepth, 0.0);
};

// Expected tokens one step emits with γ drafts at per-position acceptance α: the accepted prefix plus
// the target's own token, (1 − α^{γ+1}) / (1 − α).
double expected_tokens(int32_t gamma, double acceptance);
// The same with a rate per depth (acceptance[j - 1] for depth j): 1 + Σ_{j ≤ γ} Π_{i ≤ j} a_i.
double expected_tokens(int32_t gamma, std::span<const double> acceptance_by_depth);

// One sequence of a step, as the choice sees it.
struct DraftCandidate {
    int32_t sequence_id = 0;         // its KV stream: which sequences share a micro-batch (sequential_equal_split)
    std::vector<double> acceptance;  // by depth 1..max_length (expected_tokens)
    int32_t min_length = 0;          // γ bounds; min = max fixes the length (a sequence not under Auto)
    int32_t max_length = 0;
    // Who drafts: the draft model (a batch per depth, costed by the draft curve), or a lookup drafter
    // (n-gram) whose proposal is already made: no draft batches, only its measured cost per step.
    bool model_drafts = true;
    double lookup_seconds = 0;
    // Tokens the draft model's first call (depth 0) reads: the last token, and after a step that kept every
    // draft also that step's last draft, never fed. On 2 cores a draft call of 2 tokens costs 1.7x one (75-80
    // against 45 ms on the real pair's 0.5B), so γ 1 at 93 % acceptance pays for 2 nearly every step.
    int32_t first_call_tokens = 1;
    // The draft model's one-time catch-up before it can draft: reading the tokens its cache lacks (the prompt,
    // whose prefill waits for the first drafted step; a target-only spell). An investment, spread over
    // `catch_up_horizon` tokens: a step expected to emit E tokens pays catch_up_seconds · E / horizon
    // (catch_up_horizon_tokens). 0.5B on the real pair: ~2.3 s for a HumanEval prompt, 20 target-only steps.
    double catch_up_seconds = 0;
    double catch_up_horizon = 1;
};

// The tokens a catch-up is spread over: those decoded so far, within what is left to decode. The ski-rental
// rule: drafting starts once the target-only tokens decoded so far, at what drafting would have saved on
// each, would have paid for the catch-up. Without knowing how long an answer runs, that never costs more
// than twice the better of the two choices in hindsight (and a catch-up early in a long answer is worth it).
double catch_up_horizon_tokens(int64_t decoded, int64_t left);

struct DraftChoice {
    std::vector<int32_t> lengths;  // γ per candidate
    double expected_tokens = 0;    // Σ E(γ_s, α_s)
    double expected_seconds = 0;   // Σ t_verify over the target batch's micro-batches + the same per draft
                                   // depth, graph rebuilds included
    double tokens_per_second() const { return expected_seconds > 0 ? expected_tokens / expected_seconds : 0.0; }
};

// One step as the Auto policy's cost model predicted it and as it ran, so that a run can show where the
// choice of γ loses (`klspec bench --cost-trace`): the predicted and measured cost of the chosen lengths,
// and the predicted cost of the same step without drafts.
struct StepCostRecord {
    std::vector<int32_t> lengths;    // γ each stepping sequence drafted, in step order (a probe's may
                                     // differ from the cost model's choice)
    bool predicted = false;          // a sequence under Auto took part: the cost model chose, fields below set
    double predicted_seconds = 0;    // the chosen lengths' target and draft calls, graph rebuilds included
    double predicted_tokens = 0;     // tokens they were expected to emit
    double target_only_seconds = 0;  // the same step with γ 0 everywhere (its expected tokens: one each)
    double verify_seconds = 0;       // measured: the step's target llama_decode calls
    double draft_seconds = 0;        // measured: its draft-model llama_decode calls
    int32_t emitted = 0;             // tokens the step emitted
};

// The target batch's micro-batches (their token counts) when each candidate sends its last token and
// `lengths` drafts: sequential_equal_split of γ + 1 tokens each.
std::vector<int32_t> verify_micro_batches(std::span<const DraftCandidate> candidates, std::span<const int32_t> lengths);

// The step's cost under `lengths`: one target batch of every sequence's last token and drafts, and one
// draft batch per depth over the sequences still drafting there, each cut as sequential_equal_split cuts
// it (so unequal lengths, which split a batch, cost what they cost).
DraftChoice evaluate_draft_lengths(const BatchCostCurve& verify, const BatchCostCurve& draft,
                                   std::span<const DraftCandidate> candidates, std::vector<int32_t> lengths);

// The lengths maximising expected tokens per second: the best of "the k most accepting sequences draft a
// common length, the rest none" first, then each sequence's length in turn while that improves the rate
// (so a sequence whose draft rarely hits stops drafting while the others go on).
DraftChoice choose_draft_lengths(const BatchCostCurve& verify, const BatchCostCurve& draft,
                                 std::span<const DraftCandidate> candidates);

// Whether candidate `s`, target-only in `chosen`, could lift the step's rate by drafting were every draft kept and
// the draft caught up: the most a probe could find. Where even that does not pay, a probe measures an acceptance
// that cannot change the choice (the real pair at -np 4 on 2 cores: a batch of 8 rows costs 1.9x one of 4, so one
// sequence drafting 4 kept tokens makes 8 tokens in 425 ms against 4 in 163). A tie counts as paying: the probe
// re-times the sizes at the break-even edge.
bool drafting_could_pay(const BatchCostCurve& verify, const BatchCostCurve& draft,
                        std::span<const DraftCandidate> candidates, const DraftChoice& chosen, size_t s);

// The price of a target-only step is the batch of one token per sequence, a size a speculating decoder never
// sends: while the choice drafts, that price stays what it was when drafting began. A high timing then keeps the
// choice drafting where speculation barely pays: a first timing at calibration (55-65 ms against 38 ms measured
// on the grown Q4_K_M target), or a slow spell of the machine just before (the real pair drafted 36-47 steps at
// break-even after target-only steps of 55-84 ms against 46-51: docs/cost-model.md). So while the choice promises
// less than kMargin times target-only's rate, a target-only step re-times it after kFirstInterval drafted steps,
// the interval doubling while the choice goes on drafting after it (up to kMaxInterval steps) and resetting when
// the choice steps aside by itself. Not only once the price is stale: waiting for that made every such spell last
// 48 steps.
class TargetOnlyRetime {
public:
    static constexpr int32_t kFirstInterval = 8;
    static constexpr int32_t kMaxInterval = 256;
    static constexpr double kMargin = 2.0;  // mispricings up to 1.7x were measured

    // Once per step the cost model chose lengths in: whether this step goes target-only to re-time.
    bool due(const DraftChoice& chosen, const DraftChoice& target_only);

private:
    int32_t steps_ = 0;
    int32_t interval_ = kFirstInterval;
};

// When a sequence has stopped drafting, its acceptance estimate no longer moves: it drafts a short probe
// after `interval` target-only steps, the interval doubling while probes fail (up to kMaxInterval) and
// resetting once the sequence drafts again for kFirstInterval steps in a row. Any drafted step refreshes the
// estimate, so a choice flipping between 0 and a break-even 1 never probes (it probed γ 4 every ~8 steps:
// 5 % of decode on the Gemma pair). Probes are also spaced by their price: a probe costing c target-only
// steps waits at least c / kMaxShare steps, so probes take at most kMaxShare of decoding on any CPU and
// pair (a draft as costly as its target made them a quarter of it). Except a young decoder's: it knows little of
// its pair, and waiting c / kMaxShare steps for a measurement left a short answer target-only to its end (the
// default pair at -t 1 on an AVX-512 EPYC, where a probe costs 2.4 steps: due ~80 steps into a ~110-token answer,
// and 1.5x faster once it drafts; and again after one early rejection). So a decoder's first probes follow the
// interval alone (8, 16, ... steps) while they cost at most kMaxShare of the tokens the answer may still decode
// (its -n) in all: the same share, spent up front, once in the decoder's life.
class DraftProbe {
public:
    static constexpr int32_t kFirstInterval = 8;
    static constexpr int32_t kMaxInterval = 128;
    static constexpr int32_t kProbeLength = 4;
    static constexpr double kMaxShare = 0.03;

    // Given the cost model's γ for this step, the γ to use (the probe's length when one is due).
    // `probe_cost`: a probe's extra time, in target-only steps (0: free); `tokens_left`: what the sequence may
    // still decode (the budget of the probes paid up front); `could_pay`: drafting_could_pay (no probe is sent
    // while it is false; the steps still count, so one comes as soon as it is due and could pay). A decoder
    // stepping several sequences asks once for each, `new_step` only for the first of a step: the intervals count
    // its steps, not its sequences' (at -np 4 counting each made the probes 4x as frequent as priced: 6 a pass of
    // the real pair on an AMX Xeon, 6-9 % of its serving speed).
    int32_t adjust(int32_t chosen, int32_t max_length, double probe_cost = 0.0, double tokens_left = 0.0,
                   bool could_pay = true, bool new_step = true);
    bool probing() const { return probing_; }

private:
    int32_t idle_steps_ = 0;
    int32_t drafting_steps_ = 0;
    int32_t interval_ = kFirstInterval;
    bool probing_ = false;
    double paid_up_front_ = 0;  // target-only steps' worth of probes the decoder paid up front
};

}  // namespace klspec
