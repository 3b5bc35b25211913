// Stage 1 of a step, drafting: the drafters behind one seam. llama.cpp's n-gram drafters
// (engine/ngram_drafter.h) propose tokens only; klspec's draft-model loop also keeps each position's
// distribution q and the draft's hidden states for the rules that read them. The n-gram drafters look up
// first (before γ is chosen); the draft model drafts where they found nothing.
#include <algorithm>
#include <utility>

#include "core/distribution_stats.h"
#include "engine/decoder_helpers.h"
#include "engine/speculative_decoder.h"

namespace klspec {

using detail::Clock;
using detail::seconds_since;
using detail::to_int;

void SpeculativeDecoder::lookup_ngram_drafts(std::span<Sequence* const> active) {
    for (Sequence* seq : active) {
        seq->ngram_drafts_ = false;
        seq->ngram_found_ = 0;
    }
    if (!ngram_) return;
    const auto start = Clock::now();
    int32_t requested = 0;
    for (size_t s = 0; s < active.size(); ++s) {
        if (draft_caps_[s] == 0) continue;
        ngram_->request(active[s]->id_, active[s]->tokens_, draft_caps_[s]);
        ++requested;
    }
    if (requested == 0) return;
    ngram_->draft_requested();
    const double seconds = seconds_since(start);
    // A running mean per sequence looked up: what a step pays for the lookup whatever γ comes of it.
    ngram_lookup_seconds_ =
        ngram_lookup_seconds_ == 0 ? seconds / requested : 0.9 * ngram_lookup_seconds_ + 0.1 * seconds / requested;
    for (size_t s = 0; s < active.size(); ++s) {
        if (draft_caps_[s] == 0) continue;
        Sequence& seq = *active[s];
        seq.ngram_found_ = to_int(ngram_->draft(seq.id_).size());
        seq.ngram_drafts_ = seq.ngram_found_ > 0;
        seq.result_.stats.draft_seconds += seconds / requested;
    }
}

// Every sequence's draft for this step: the n-gram's proposal cut to γ, or up to γ tokens of the draft model
// (one draft batch per depth across all sequences still drafting).
void SpeculativeDecoder::draft_all(std::span<Sequence* const> active) {
    const auto start = Clock::now();
    std::vector<Sequence*>& drafting = take_ngram_drafts(active);
    if (drafting.empty()) return;
    const double llama_start = draft_ctx_->decode_seconds();
    prefill_draft_gaps(drafting);
    add_draft_catch_up(drafting);
    while (draft_batch_.size() > 0) {
        const double decode_start = draft_ctx_->decode_seconds();
        draft_ctx_->decode(draft_batch_);
        if (measure_costs_)
            detail::record_cost(draft_costs_, draft_batch_, draft_ctx_->decode_seconds() - decode_start);
        draft_batch_.clear();
        for (size_t s = 0; s < drafting.size(); ++s) {
            if (draft_rows_of_[s] < 0) continue;
            Sequence& seq = *drafting[s];
            if (draft_from_row(seq, std::exchange(draft_rows_of_[s], -1)))
                draft_rows_of_[s] = draft_batch_.add(seq.drafted_.back(), seq.draft_cached_++, seq.id_, true);
        }
    }
    const double seconds = seconds_since(start);
    const double llama_seconds = draft_ctx_->decode_seconds() - llama_start;
    for (Sequence* seq : drafting) {
        seq->result_.stats.draft_seconds += seconds;
        seq->result_.stats.llama_decode_seconds += llama_seconds;
        // llama.cpp's n_min: a draft too short to be worth a verification slot is dropped.
        if (to_int(seq->drafted_.size()) < seq->options_.draft_min) seq->drafted_.clear();
    }
}

std::vector<Sequence*>& SpeculativeDecoder::take_ngram_drafts(std::span<Sequence* const> active) {
    std::vector<Sequence*>& drafting = drafting_;
    drafting.clear();
    for (Sequence* seq : active) {
        seq->drafted_.clear();
        seq->draft_hidden_.clear();
        if (seq->gamma_ == 0) continue;
        if (!seq->ngram_drafts_) {
            drafting.push_back(seq);
            continue;
        }
        // The n-gram's proposal, cut to γ: token ids without q rows (a point mass each).
        const std::span<const int32_t> found = ngram_->draft(seq->id_).first(static_cast<size_t>(seq->gamma_));
        seq->drafted_.assign(found.begin(), found.end());
        if (to_int(seq->drafted_.size()) < seq->options_.draft_min) seq->drafted_.clear();
    }
    return drafting;
}

void SpeculativeDecoder::prefill_draft_gaps(std::span<Sequence* const> drafting) {
    for (Sequence* seq : drafting) {
        // All but the last token, which the catch-up batch feeds with an output.
        const int32_t gap = seq->draft_gap();
        if (gap <= 1) continue;  // a step's usual catch-up: kept in the draft batch, as the cost model prices it
        const std::span<const int32_t> tokens(seq->tokens_);
        const double llama_start = draft_ctx_->decode_seconds();
        draft_ctx_->prefill(seq->id_, tokens.subspan(static_cast<size_t>(seq->draft_cached_), static_cast<size_t>(gap)),
                            seq->draft_cached_);
        if (measure_costs_) {
            draft_catch_up_seconds_ += draft_ctx_->decode_seconds() - llama_start;
            draft_catch_up_tokens_ += gap;
        }
        seq->draft_cached_ += gap;
        seq->result_.stats.draft_prefilled_tokens += gap;
    }
}

void SpeculativeDecoder::add_draft_catch_up(std::span<Sequence* const> drafting) {
    // Depth 0: the catch-up tokens (normally `last`, two after a fully accepted step).
    int32_t needed = 0;
    for (Sequence* seq : drafting) needed += to_int(seq->tokens_.size()) - seq->draft_cached_;
    draft_batch_.reserve(std::max(needed, to_int(drafting.size())));
    draft_batch_.clear();
    draft_rows_of_.assign(drafting.size(), -1);
    for (size_t s = 0; s < drafting.size(); ++s) {
        Sequence& seq = *drafting[s];
        for (int32_t pos = seq.draft_cached_; pos < to_int(seq.tokens_.size()); ++pos)
            draft_rows_of_[s] = draft_batch_.add(seq.tokens_[pos], pos, seq.id_, pos + 1 == to_int(seq.tokens_.size()));
        seq.draft_cached_ = to_int(seq.tokens_.size());
    }
}

bool SpeculativeDecoder::draft_from_row(Sequence& seq, int32_t row) {
    ++seq.result_.stats.draft_calls;
    const bool wants_hidden = seq.judge_->needs_hidden_states();
    // The row's hidden state belongs to the token fed at this depth, d_i (depth 0 feeds `last`).
    if (wants_hidden && !seq.drafted_.empty()) {
        const std::span<const float> h = draft_ctx_->hidden_state(row);
        seq.draft_hidden_.insert(seq.draft_hidden_.end(), h.begin(), h.end());
    }
    const bool drafts_done = to_int(seq.drafted_.size()) == seq.gamma_ ||
                             (!seq.drafted_.empty() && target_.is_end_of_generation(seq.drafted_.back()));
    if (drafts_done) return false;
    const auto [token, probability] = pick_draft_token(seq, row);
    // Draft-confidence cut (llama.cpp's p_min): an unsure draft token is not proposed.
    if (probability < seq.options_.draft_p_min) {
        seq.gamma_ = to_int(seq.drafted_.size());
        return false;
    }
    seq.drafted_.push_back(token);
    // A token the target's vocabulary lacks (a draft larger than its target) ends the draft: the target
    // cannot verify it, and the acceptance step rejects it.
    if (token >= n_target_vocab_) return false;
    const bool last_draft = to_int(seq.drafted_.size()) == seq.gamma_ || target_.is_end_of_generation(token);
    // d_k needs a forward pass only for its hidden state (judges that read them).
    return !last_draft || wants_hidden;
}

SpeculativeDecoder::DraftPick SpeculativeDecoder::pick_draft_token(Sequence& seq, int32_t row) {
    // q_i: the shaped draft row, kept for the judge and the observer (llama.cpp reuses its buffer at the next
    // depth). Greedy vanilla decoding needs only its argmax: no copy of V floats.
    const size_t n_vocab = static_cast<size_t>(n_draft_vocab_);
    const size_t i = seq.drafted_.size();
    const GenerationOptions& options = seq.options_;
    const bool keep_row =
        !options.sampling.greedy() || seq.judge_->needs_distributions() || observer_ || options.draft_p_min > 0.0f;
    std::span<const float> q = draft_ctx_->logits(row);
    if (keep_row) {
        seq.draft_rows_.resize((i + 1) * n_vocab);
        const std::span<float> shaped(seq.draft_rows_.data() + i * n_vocab, n_vocab);
        shape_logits(q, options.sampling, shaped, shaping_);
        q = shaped;
    }
    if (options.sampling.greedy()) {
        const int32_t token = argmax(q);
        return {token, options.draft_p_min > 0.0f ? static_cast<float>(distribution_stats(q).max_probability) : 1.0f};
    }
    seq.draft_probs_.resize((i + 1) * n_vocab);
    const std::span<float> probs(seq.draft_probs_.data() + i * n_vocab, n_vocab);
    softmax_into(q, probs);
    const int32_t token = sample_from_weights(probs, seq.rng_);
    return {token, probs[static_cast<size_t>(token)]};
}

}  // namespace klspec
