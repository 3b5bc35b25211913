// Choosing each step's draft length (γ) and the cost model's bookkeeping: the measured step costs, each
// drafter's acceptance evidence after a step, and the policy (Fixed, Adaptive, or Auto: core/draft_length.h).
#include <algorithm>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "engine/decoder_helpers.h"
#include "engine/speculative_decoder.h"

namespace klspec {
namespace detail {
namespace {

// Whether llama.cpp decodes the batch in one micro-batch: only those calls time a batch of its size.
bool is_one_micro_batch(const Batch& batch) {
    const llama_batch& b = batch.get();
    std::vector<BatchShare> shares;
    for (int32_t i = 0; i < b.n_tokens; ++i) {
        if (shares.empty() || shares.back().sequence_id != b.seq_id[i][0]) shares.push_back({b.seq_id[i][0], 0});
        ++shares.back().tokens;
    }
    return sequential_equal_split(shares).size() == 1;
}

}  // namespace

void record_cost(BatchCostCurve& curve, const Batch& batch, double seconds) {
    if (is_one_micro_batch(batch)) {
        curve.record(batch.size(), seconds);
    } else {
        curve.record_untimed();
    }
}

}  // namespace detail

using detail::common_prefix;
using detail::to_int;

void SpeculativeDecoder::set_step_costs(BatchCostCurve verify, BatchCostCurve draft,
                                        double draft_catch_up_seconds_per_token) {
    verify_costs_ = std::move(verify);
    draft_costs_ = std::move(draft);
    draft_catch_up_seconds_ = draft_catch_up_seconds_per_token;
    draft_catch_up_tokens_ = 1;
    costs_calibrated_ = true;
    measure_costs_ = false;
}

void SpeculativeDecoder::choose_draft_lengths_for(std::span<Sequence* const> active) {
    // Each sequence's cap: draft-max, -n and the context; Fixed / Adaptive take their budget within it.
    std::vector<int32_t>& caps = draft_caps_;
    caps.clear();
    for (Sequence* seq : active) {
        const GenerationOptions& options = seq->options_;
        const int32_t wanted = options.max_tokens - to_int(seq->result_.tokens.size());
        const bool can_draft = ngram_ || (draft_ctx_ && !seq->draft_unreadable_);
        const int32_t room = target_ctx_.n_ctx() - seq->target_cached_ - 1;
        const int32_t cap = can_draft ? std::max(0, std::min({options.draft_max, wanted - 1, room})) : 0;
        caps.push_back(options.draft_policy == DraftPolicy::Off ? 0 : cap);
        seq->gamma_ = std::min(seq->draft_budget_, caps.back());
    }
    // The n-gram drafts first (a lookup: microseconds), so that the choice knows which sequences have one and
    // how long it is; where none is found, the draft model drafts, or no one does.
    lookup_ngram_drafts(active);
    std::vector<int32_t>& model_caps = model_draft_caps_;  // what the draft model may draft, where it may
    model_caps.clear();
    bool any_auto = false;
    for (size_t s = 0; s < active.size(); ++s) {
        Sequence& seq = *active[s];
        model_caps.push_back(draft_ctx_ && !seq.draft_unreadable_ ? caps[s] : 0);
        caps[s] = seq.ngram_drafts_ ? std::min(caps[s], seq.ngram_found_) : model_caps[s];
        seq.gamma_ = std::min(seq.gamma_, caps[s]);
        any_auto = any_auto || (seq.options_.draft_policy == DraftPolicy::Auto && caps[s] > 0);
    }
    if (!any_auto) return;
    if (!costs_calibrated_) {
        // On a sequence that drafts: the draft can read its last token (docs/judges.md, padded targets).
        size_t drafting = 0;
        while (active[drafting]->options_.draft_policy != DraftPolicy::Auto || caps[drafting] == 0) ++drafting;
        const Sequence& seq = *active[drafting];
        time_step_costs(seq.tokens_.back(), seq.id_, seq.target_cached_, seq.draft_cached_, seq.options_.draft_max);
    }
    std::vector<DraftCandidate> candidates;
    for (size_t s = 0; s < active.size(); ++s) {
        Sequence& seq = *active[s];
        const bool automatic = seq.options_.draft_policy == DraftPolicy::Auto && caps[s] > 0;
        if (!automatic) {
            candidates.push_back(draft_candidate(seq, seq.draft_source(), seq.gamma_, seq.gamma_));
            continue;
        }
        DraftCandidate candidate = draft_candidate(seq, seq.draft_source(), 0, caps[s]);
        // Both drafters can draft: the one whose best length promises more tokens per second on its own (an
        // n-gram that rarely hits gives way to the draft model; a long, free, accepted n-gram draft wins).
        if (seq.ngram_drafts_ && model_caps[s] > 0) {
            DraftCandidate by_model = draft_candidate(seq, DraftSource::Model, 0, model_caps[s]);
            if (choose_draft_lengths(verify_costs_, draft_costs_, std::span(&by_model, 1)).tokens_per_second() >
                choose_draft_lengths(verify_costs_, draft_costs_, std::span(&candidate, 1)).tokens_per_second()) {
                candidate = std::move(by_model);
                caps[s] = model_caps[s];
                seq.ngram_drafts_ = false;
            }
        }
        candidates.push_back(std::move(candidate));
    }
    DraftChoice choice = choose_draft_lengths(verify_costs_, draft_costs_, candidates);
    const std::vector<int32_t> no_drafts(candidates.size(), 0);
    const DraftChoice target_only = evaluate_draft_lengths(verify_costs_, draft_costs_, candidates, no_drafts);
    // Re-timing the target-only batch takes a step in which every sequence may go without drafts.
    const bool all_may_skip =
        std::all_of(candidates.begin(), candidates.end(), [](const DraftCandidate& c) { return c.min_length == 0; });
    if (all_may_skip && target_only_retime_.due(choice, target_only)) {
        choice = target_only;
        verify_costs_.expire(verify_micro_batches(candidates, no_drafts));
    }
    if (step_cost_observer_) {
        step_cost_.predicted = true;
        step_cost_.predicted_seconds = choice.expected_seconds;
        step_cost_.predicted_tokens = choice.expected_tokens;
        step_cost_.target_only_seconds = target_only.expected_seconds;
    }
    bool new_step = true;  // the probe's intervals count this step once, whatever the number of sequences
    for (size_t s = 0; s < active.size(); ++s) {
        if (candidates[s].min_length == candidates[s].max_length) continue;
        const Sequence& seq = *active[s];
        const bool idle = choice.lengths[s] == 0;
        const double probe_cost = idle ? probe_cost_in_steps(candidates[s]) : 0.0;
        const bool could_pay = idle && drafting_could_pay(verify_costs_, draft_costs_, candidates, choice, s);
        const int64_t tokens_left = seq.options_.max_tokens - to_int(seq.result_.tokens.size());
        active[s]->gamma_ = probe_.adjust(choice.lengths[s], candidates[s].max_length, probe_cost, double(tokens_left),
                                          could_pay, new_step);
        new_step = false;
    }
}

double SpeculativeDecoder::probe_cost_in_steps(const DraftCandidate& candidate) const {
    // A probe is one step, not an investment: it pays the draft's whole catch-up (on the real pair a γ-4 probe's
    // catch-up of ~320 tokens took 2.6-3.6 s, 15-20 % of a HumanEval answer's decoding, where the probe itself
    // costs 4 target-only steps).
    DraftCandidate alone = candidate;
    alone.catch_up_horizon = 0;
    const std::span<const DraftCandidate> one(&alone, 1);
    const int32_t length = std::min(DraftProbe::kProbeLength, candidate.max_length);
    const double target_only = evaluate_draft_lengths(verify_costs_, draft_costs_, one, {0}).expected_seconds;
    const double probe = evaluate_draft_lengths(verify_costs_, draft_costs_, one, {length}).expected_seconds;
    return target_only > 0 ? std::max(probe / target_only - 1.0, 0.0) : 0.0;
}

double SpeculativeDecoder::draft_catch_up_seconds(int32_t gap) const {
    if (gap <= 1) return 0.0;  // a step's usual catch-up, in its draft batch
    if (draft_catch_up_tokens_ > 0) return gap * draft_catch_up_seconds_ / double(draft_catch_up_tokens_);
    // Never timed: one draft call, and for the tokens past the first the draft's prefill rate that
    // time_step_costs measured. Not the target's prompt rate scaled by the models' sizes, as before: on an AVX-512
    // EPYC that priced the repacked Q4_0 draft of the real pair at 10.3 ms a token against 3.1 measured
    // (docs/cost-model.md).
    return (draft_costs_.empty() ? 0.0 : draft_costs_.seconds(1)) + (gap - 1) * draft_prefill_seconds_per_token_;
}

DraftCandidate SpeculativeDecoder::draft_candidate(const Sequence& seq, DraftSource drafter, int32_t min_length,
                                                   int32_t max_length) const {
    // The drafter's profile over depths, depth 1 at the sequence's level: its running rejection rate for that
    // drafter (shrunk to the decoder's) against the decoder's (DepthAcceptance::rates scales depth 1 only).
    const size_t source = static_cast<size_t>(drafter);
    const double decoder_rate = decoder_acceptance_[source].rate(AcceptanceEstimate::kDecoderPrior);
    const double sequence_rate = seq.acceptance_estimates_[source].rate(decoder_rate);
    // decoder_rate < 1: its prior (kDecoderPrior, weight kPriorWeight) keeps it there.
    const double rejection_scale = (1.0 - sequence_rate) / (1.0 - decoder_rate);
    const bool lookup = drafter == DraftSource::Ngram;
    DraftCandidate candidate{seq.id_,    depth_acceptance_[source].rates(std::max(max_length, 1), rejection_scale),
                             min_length, max_length,
                             !lookup,    lookup ? ngram_lookup_seconds_ : 0.0};
    if (!lookup) {
        const int32_t gap = seq.draft_gap();
        const int64_t decoded = to_int(seq.result_.tokens.size());
        candidate.first_call_tokens = gap == 1 ? 2 : 1;
        candidate.catch_up_seconds = draft_catch_up_seconds(gap);
        candidate.catch_up_horizon = catch_up_horizon_tokens(decoded, seq.options_.max_tokens - decoded);
    }
    return candidate;
}

void SpeculativeDecoder::calibrate_step_costs(int32_t draft_max) {
    if ((!draft_ctx_ && !ngram_) || costs_calibrated_) return;
    if (draft_max < 1)
        throw Error(fmt::format("calibrate_step_costs: draft_max must be at least 1, got {}", draft_max));
    // Id 0 is a token of both vocabularies; what the rows compute does not matter, only how long they take.
    time_step_costs(/*token=*/0, /*id=*/0, /*target_pos=*/0, /*draft_pos=*/0, draft_max);
}

void SpeculativeDecoder::time_step_costs(int32_t token, int32_t id, int32_t target_pos, int32_t draft_pos,
                                         int32_t draft_max) {
    costs_calibrated_ = true;
    // Sizes 1, 2, 4, ... and the largest after an untimed warm-up call; every row outputs logits, as in a
    // step. Sizes up to kTimedTwice twice (the first call builds llama.cpp's graph, the second reuses it:
    // what a rebuild costs), larger ones once, less the rebuild: a batch of -np 8 × 17 tokens costs what a
    // prefill does, and timing the large sizes twice took 15 % of a short -np 8 run on the grown F16 target.
    // The running averages then follow the sizes steps really send.
    constexpr int32_t kTimedTwice = 16;
    const auto time_sizes = [token, id](ModelContext& ctx, Batch& batch, int32_t first_pos, int32_t largest,
                                        BatchCostCurve& curve) {
        // The warm-up: the largest size, so that llama.cpp grows its logits buffer to it before anything is timed
        // (any size but the first timed one, whose graph it would build). A size of 2, as before, left each larger
        // size's first call to grow it, and the rebuild price took that in: 3.4-4.2 ms against 0.13-0.16 once
        // warmed, on a tiny target with a 128K vocabulary, which priced every change of γ far too high.
        std::vector<int32_t> sizes = {largest};
        for (int32_t size = 1; size <= largest; size = size < largest && 2 * size > largest ? largest : 2 * size) {
            sizes.push_back(size);
            if (size <= kTimedTwice) sizes.push_back(size);
        }
        for (size_t i = 0; i < sizes.size() && first_pos + sizes[i] <= ctx.n_ctx(); ++i) {
            batch.reserve(sizes[i]);
            batch.clear();
            for (int32_t j = 0; j < sizes[i]; ++j) batch.add(token, first_pos + j, id, true);
            const double before = ctx.decode_seconds();
            ctx.decode(batch);
            if (i > 0) curve.record(sizes[i], ctx.decode_seconds() - before);
            ctx.truncate(id, first_pos);
        }
    };
    time_sizes(target_ctx_, target_batch_, target_pos, n_sequences() * (draft_max + 1), verify_costs_);
    // Up to two tokens a sequence: a step's first draft call reads two after a step that kept every draft.
    if (!draft_ctx_) return;
    time_sizes(*draft_ctx_, draft_batch_, draft_pos, 2 * n_sequences(), draft_costs_);
    // Prefill batches without outputs, of one token and of kTimedPrefill: each a call that builds its graph, then
    // the least of three timed ones (one call preempted on a busy machine would price every catch-up after it as
    // if the machine stayed busy). A token's price is the slope between the two: a call's fixed cost is paid once
    // per catch-up (draft_catch_up_seconds). Not the excess over a one-token call with logits, as before: where
    // the output layer is most of a call (a 40 MB draft with Llama 3's 128K vocabulary), 16 tokens without logits
    // cost less than one with them, every catch-up was priced at one call, and probes that caught up 280 tokens
    // for 8.6 ms were priced at 0.6 (docs/cost-model.md).
    if (draft_pos + kTimedPrefill > draft_ctx_->n_ctx()) return;
    const auto least_prefill_seconds = [&](int32_t tokens) {
        draft_batch_.reserve(tokens);
        draft_batch_.clear();
        for (int32_t j = 0; j < tokens; ++j) draft_batch_.add(token, draft_pos + j, id, false);
        double least = std::numeric_limits<double>::infinity();
        for (int pass = 0; pass < 4; ++pass) {
            const double before = draft_ctx_->decode_seconds();
            draft_ctx_->decode(draft_batch_);
            if (pass > 0) least = std::min(least, draft_ctx_->decode_seconds() - before);
            draft_ctx_->truncate(id, draft_pos);
        }
        return least;
    };
    const double one = least_prefill_seconds(1);
    draft_prefill_seconds_per_token_ = std::max(least_prefill_seconds(kTimedPrefill) - one, 0.0) / (kTimedPrefill - 1);
}

void SpeculativeDecoder::record_drafter_evidence(Sequence& seq, const StepOutcome& outcome) {
    // Each drafter's evidence fades by a step; the one that drafted gains some, and so does an n-gram
    // proposal the step did not use (the draft model drafted, or γ 0 was chosen), from what it would have
    // kept: a free measurement, so a drafter that lost the choice is still measured.
    const auto record = [&](DraftSource drafter, int32_t drafted, int32_t kept) {
        const size_t d = static_cast<size_t>(drafter);
        seq.acceptance_estimates_[d].record(drafted, kept);
        if (drafted > 0) decoder_acceptance_[d].record(drafted, kept);
        depth_acceptance_[d].record(drafted, kept);
    };
    const int32_t k = to_int(seq.drafted_.size());
    const bool ngram_used = seq.ngram_drafts_ && k > 0;
    record(DraftSource::Model, ngram_used ? 0 : k, ngram_used ? 0 : outcome.accepted);
    if (ngram_used) {
        record(DraftSource::Ngram, k, outcome.accepted);
        ngram_->accept(seq.id_, outcome.accepted);
        seq.result_.stats.ngram_drafted += k;
        seq.result_.stats.ngram_accepted += outcome.accepted;
    } else if (seq.ngram_found_ > 0) {
        const int32_t kept = common_prefix(ngram_->draft(seq.id_), seq.emitted_);
        record(DraftSource::Ngram, std::min(seq.ngram_found_, to_int(seq.emitted_.size())), kept);
        ngram_->accept(seq.id_, kept);
    } else {
        record(DraftSource::Ngram, 0, 0);
    }
}

double SpeculativeDecoder::acceptance_estimate(const Sequence& seq) const {
    const size_t source = static_cast<size_t>(seq.draft_source());
    return seq.acceptance_estimates_[source].rate(decoder_acceptance_[source].rate(AcceptanceEstimate::kDecoderPrior));
}

void SpeculativeDecoder::adapt_draft_budget(Sequence& seq, const StepOutcome& outcome) {
    // Adaptive γ (the heuristic of Hugging Face's assisted generation): longer after a fully accepted draft,
    // shorter after a rejection.
    const GenerationOptions& options = seq.options_;
    const int32_t k = to_int(seq.drafted_.size());
    if (options.draft_policy != DraftPolicy::Adaptive || k == 0) return;
    seq.draft_budget_ =
        next_adaptive_draft_budget(seq.draft_budget_, k, outcome.accepted, options.draft_min, options.draft_max);
}

}  // namespace klspec
