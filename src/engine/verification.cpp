// Stages 2-6 of a step: verification (every sequence's `last` and drafts in ONE target batch), then per
// sequence the acceptance run (core/acceptance.h), the cost model's evidence and the statistics, the observer,
// emission with the stop rules, and the rollback of both caches to the accepted tokens.
#include <algorithm>
#include <utility>

#include "engine/decoder_helpers.h"
#include "engine/speculative_decoder.h"

namespace klspec {

using detail::Clock;
using detail::seconds_since;
using detail::step_logprobs;
using detail::to_int;

void SpeculativeDecoder::verify_all(std::span<Sequence* const> active, std::span<Sequence* const> prefilling) {
    const auto start = Clock::now();
    int32_t verify_rows = 0;
    for (const Sequence* seq : active) verify_rows += 1 + to_int(seq->drafted_.size());
    // Chunks keep running streams flowing; with none running, nothing waits on a prompt, so it takes whole
    // batches, as a prefill alone does (four cold prompts in 128-token chunks ran at 0.60-0.94x llama-server).
    const int32_t chunk = active.empty() ? target_ctx_.n_batch() : prefill_chunk_;
    const int32_t prompt_rows = plan_prompt_chunks(prefilling, std::min(chunk, target_ctx_.n_batch() - verify_rows));
    target_batch_.reserve(verify_rows + prompt_rows);
    target_batch_.clear();
    for (Sequence* seq : active) {
        int32_t pos = seq->target_cached_;
        seq->verify_row_ = target_batch_.add(seq->tokens_.back(), pos++, seq->id_, true);
        // A draft token outside the target's vocabulary ends the draft unverified (drafting.cpp).
        for (const int32_t token : seq->drafted_)
            if (token < n_target_vocab_) target_batch_.add(token, pos++, seq->id_, true);
    }
    for (Sequence* seq : prefilling) add_prompt_chunk(*seq);
    const double llama_start = target_ctx_.decode_seconds();
    target_ctx_.decode(target_batch_);
    const double seconds = seconds_since(start);
    const double llama_seconds = target_ctx_.decode_seconds() - llama_start;
    // The cost model prices verification batches; one carrying a prompt chunk would skew its curve.
    if (measure_costs_ && prompt_rows == 0) detail::record_cost(verify_costs_, target_batch_, llama_seconds);
    for (Sequence* seq : active) {
        ++seq->result_.stats.target_calls;
        seq->result_.stats.verify_seconds += seconds;
        seq->result_.stats.llama_decode_seconds += llama_seconds;
    }
}

int32_t SpeculativeDecoder::plan_prompt_chunks(std::span<Sequence* const> prefilling, int32_t room) {
    // In slot order, as llama-server fills its batch: an earlier prompt finishes first.
    int32_t planned = 0;
    for (Sequence* seq : prefilling) {
        seq->prompt_in_batch_ = std::clamp(room - planned, 0, seq->prompt_left_);
        planned += seq->prompt_in_batch_;
    }
    return planned;
}

void SpeculativeDecoder::add_prompt_chunk(Sequence& seq) {
    // The prompt's tokens not yet cached end at its last one with first_token_from_prompt (whose row is output,
    // the first token's logits), else before it (the first step's verification feeds it).
    const bool logits_wanted = seq.options_.first_token_from_prompt;
    const int32_t prompt_end = to_int(seq.tokens_.size()) - (logits_wanted ? 0 : 1);
    int32_t pos = seq.target_cached_;
    for (int32_t i = 0; i < seq.prompt_in_batch_; ++i, ++pos) {
        const bool last = pos + 1 == prompt_end;
        const int32_t row =
            target_batch_.add(seq.tokens_[static_cast<size_t>(pos)], pos, seq.id_, last && logits_wanted);
        if (last) seq.verify_row_ = row;
    }
}

void SpeculativeDecoder::complete_prompt_chunks(std::span<Sequence* const> prefilling,
                                                std::vector<Sequence*>& answered) {
    for (Sequence* seq : prefilling) {
        seq->target_cached_ += std::exchange(seq->prompt_in_batch_, 0);
        seq->prompt_left_ =
            to_int(seq->tokens_.size()) - (seq->options_.first_token_from_prompt ? 0 : 1) - seq->target_cached_;
        if (seq->prompt_left_ > 0) continue;
        // As after a whole prefill: every token but the last is cached (the last one's cell, when its row was
        // output, is the first step's verification cell).
        seq->target_cached_ = to_int(seq->tokens_.size()) - 1;
        seq->result_.stats.prompt_seconds = seconds_since(seq->prompt_start_);
        seq->generation_start_ = Clock::now();
        if (!seq->options_.first_token_from_prompt) continue;
        const std::span<const float> logits = target_ctx_.logits(seq->verify_row_);
        seq->prompt_logits_.assign(logits.begin(), logits.end());
        answered.push_back(seq);
    }
}

std::span<const float> SpeculativeDecoder::target_row(const Sequence& seq, int32_t i) const {
    if (!seq.prompt_logits_.empty()) return seq.prompt_logits_;  // a step without drafts reads row 0 only
    return target_ctx_.logits(seq.verify_row_ + i);
}

// What the acceptance step and the observer read at each judged position of one sequence's step. Lazy:
// target rows after the first rejection are never shaped.
class SpeculativeDecoder::StepPositions final : public PositionSource {
public:
    StepPositions(SpeculativeDecoder& decoder, Sequence& seq) : decoder_(decoder), seq_(seq) {
        if (seq.options_.sampling.greedy()) return;
        const size_t rows = seq.drafted_.size() + 1;
        seq.target_rows_.resize(rows * static_cast<size_t>(decoder.target_.n_vocab()));
        seq.target_row_shaped_.assign(rows, 0);
    }

    std::span<const float> target_logits(int32_t i) {
        const std::span<const float> raw = decoder_.target_row(seq_, i);
        if (seq_.options_.sampling.greedy()) return raw;
        const size_t n = raw.size();
        const std::span<float> row(seq_.target_rows_.data() + static_cast<size_t>(i) * n, n);
        // Shaped once per step: the observer asks for the rows the acceptance step already used.
        if (!seq_.target_row_shaped_[static_cast<size_t>(i)]) {
            shape_logits(raw, seq_.options_.sampling, row, decoder_.shaping_);
            seq_.target_row_shaped_[static_cast<size_t>(i)] = 1;
        }
        return row;
    }

    DraftPosition position(int32_t i) override {
        const size_t n = static_cast<size_t>(decoder_.n_draft_vocab_);
        const size_t at = static_cast<size_t>(i);
        DraftPosition p;
        p.target_logits = target_logits(i);
        // Rows are kept only where someone reads them (drafting.cpp); an n-gram draft has none.
        if (!seq_.ngram_drafts_ && seq_.draft_rows_.size() >= (at + 1) * n)
            p.draft_logits = std::span<const float>(seq_.draft_rows_.data() + at * n, n);
        if (!seq_.ngram_drafts_ && !seq_.options_.sampling.greedy())
            p.draft_probabilities = std::span<const float>(seq_.draft_probs_.data() + at * n, n);
        p.draft_token = seq_.drafted_[at];
        if (!seq_.draft_in_span_.empty()) p.in_span = seq_.draft_in_span_[at] != 0;
        // A draft token outside the target's vocabulary has no verification row (and no judge reads it).
        if (seq_.judge_->needs_hidden_states() && p.draft_token < decoder_.n_target_vocab_) {
            const size_t n_embd = static_cast<size_t>(decoder_.draft_ctx_->model().n_embd());
            p.draft_hidden = std::span<const float>(seq_.draft_hidden_.data() + at * n_embd, n_embd);
            p.target_hidden = decoder_.target_ctx_.hidden_state(seq_.verify_row_ + 1 + i);  // row of input d_i
        }
        return p;
    }

private:
    SpeculativeDecoder& decoder_;
    Sequence& seq_;
};

void SpeculativeDecoder::judge_emit_roll_back(Sequence& seq, const StepCallback& on_step) {
    const auto start = Clock::now();
    StepPositions positions(*this, seq);
    // What this step's γ was chosen on (approximately: other sequences' steps may have moved the prior since).
    const double chosen_on = acceptance_estimate(seq);
    const StepOutcome outcome = judge(seq, positions);
    record_drafter_evidence(seq, outcome);
    record_step_stats(seq, outcome);
    if (observer_) observe(seq, positions, chosen_on);
    if (!emit(seq, on_step)) {
        roll_back(seq, outcome);
        adapt_draft_budget(seq, outcome);
    }
    seq.prompt_logits_.clear();
    seq.result_.stats.other_seconds += seconds_since(start) - outcome.judge_seconds;
}

StepOutcome SpeculativeDecoder::judge(Sequence& seq, StepPositions& positions) {
    // Where the span is open for each draft, as if every draft before it were kept (a draft is judged only
    // then): the tracker runs ahead on a copy. A token the target lacks has no text there (it is rejected).
    seq.draft_in_span_.clear();
    if (!seq.options_.judge_span.is_all()) {
        SpanTracker ahead = seq.span_;
        for (const int32_t token : seq.drafted_)
            seq.draft_in_span_.push_back(
                ahead.feed_and_check(token < n_target_vocab_ ? target_.piece(token, true) : ""));
    }
    const int32_t k = to_int(seq.drafted_.size());
    // The bonus row exists unless the last draft was outside the target's vocabulary (then never needed: it is
    // rejected).
    const bool bonus_row = k == 0 || seq.drafted_.back() < n_target_vocab_;
    const StepOutcome outcome =
        seq.acceptance_.run(k, positions, bonus_row ? positions.target_logits(k) : std::span<const float>(), seq.rng_);
    // The step's tokens: the accepted drafts, then the target's.
    seq.emitted_.assign(seq.drafted_.begin(), seq.drafted_.begin() + outcome.accepted);
    seq.emitted_.push_back(outcome.next_token);
    return outcome;
}

void SpeculativeDecoder::record_step_stats(Sequence& seq, const StepOutcome& outcome) {
    GenerationStats& stats = seq.result_.stats;
    const int32_t k = to_int(seq.drafted_.size());
    stats.drafted += k;
    stats.draft_length_sum += seq.gamma_;
    stats.target_only_steps += k == 0;
    stats.accepted += outcome.accepted;
    stats.relaxed_accepted += outcome.relaxed_accepted;
    stats.judge_seconds += outcome.judge_seconds;
    stats.span_blocked += outcome.span_blocked;
}

void SpeculativeDecoder::observe(const Sequence& seq, StepPositions& positions, double chosen_on) {
    const std::span<const PositionVerdict> verdicts = seq.acceptance_.verdicts();
    for (size_t i = 0; i < verdicts.size(); ++i) {
        JudgedPosition judged = describe_position(positions.position(static_cast<int32_t>(i)));
        judged.sequence_id = seq.id_;
        judged.position = seq.target_cached_ + 1 + static_cast<int64_t>(i);
        judged.verdict = verdicts[i];
        judged.draft_length = seq.gamma_;
        judged.acceptance_estimate = chosen_on;
        observer_(judged);
    }
}

bool SpeculativeDecoder::emit(Sequence& seq, const StepCallback& on_step) {
    const size_t n_emitted = append_until_stop(seq);
    const std::span<const int32_t> step_tokens(seq.emitted_.data(), n_emitted);
    if (seq.finished_) {
        finish(seq, on_step, step_tokens);
    } else if (on_step && on_step(StepResult{seq.id_, step_tokens, seq.stream_.take_stable(), false,
                                             seq.acceptance_.verdicts(), step_logprobs(seq, step_tokens.size())})) {
        seq.result_.stop_reason = StopReason::Cancelled;
        finish(seq, {});
    }
    return seq.finished_;
}

size_t SpeculativeDecoder::append_until_stop(Sequence& seq) {
    // The step's tokens in order; the sequence stops at EOG (not emitted), a stop string or -n.
    const GenerationOptions& options = seq.options_;
    GenerationResult& result = seq.result_;
    size_t n_emitted = 0;
    for (const int32_t token : seq.emitted_) {
        if (target_.is_end_of_generation(token)) {
            result.stop_reason = StopReason::EndOfGeneration;
            result.end_of_generation_token = token;
            seq.finished_ = true;
            break;
        }
        if (options.logprobs)  // token n_emitted was predicted by the step's target row n_emitted
            result.logprobs.push_back(token_logprobs(target_row(seq, to_int(n_emitted)), token, *options.logprobs));
        ++result.stats.emitted;
        ++n_emitted;
        if (!options.judge_span.is_all() && !seq.span_.feed_and_check(target_.piece(token, true)))
            ++result.stats.outside_span;
        result.tokens.push_back(token);
        seq.tokens_.push_back(token);
        seq.draft_unreadable_ = seq.draft_unreadable_ || (draft_ctx_ && token >= n_draft_vocab_);
        const std::string piece = target_.piece(token);
        if (seq.stream_.append(piece)) {
            result.stop_reason =
                seq.stream_.stopped_by_indentation() ? StopReason::Indentation : StopReason::StopString;
            seq.finished_ = true;
            break;
        }
        // llama-server checks its time limit only at a token that holds a new line.
        if (options.max_predict_seconds && piece.find('\n') != std::string::npos &&
            seconds_since(seq.generation_start_) > *options.max_predict_seconds) {
            result.stop_reason = StopReason::TimeLimit;
            seq.finished_ = true;
            break;
        }
        if (to_int(result.tokens.size()) >= options.max_tokens) {
            result.stop_reason = StopReason::MaxTokens;
            seq.finished_ = true;
            break;
        }
    }
    return n_emitted;
}

void SpeculativeDecoder::roll_back(Sequence& seq, const StepOutcome& outcome) {
    // Keep `last` and the accepted drafts in both caches (nothing to drop when every draft was kept).
    seq.target_cached_ += 1 + outcome.accepted;
    if (outcome.accepted < to_int(seq.drafted_.size())) target_ctx_.truncate(seq.id_, seq.target_cached_);
    if (draft_ctx_ && seq.draft_cached_ > seq.target_cached_) {
        seq.draft_cached_ = seq.target_cached_;
        draft_ctx_->truncate(seq.id_, seq.draft_cached_);
    }
}

}  // namespace klspec
