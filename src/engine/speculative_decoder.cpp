#include "engine/speculative_decoder.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "core/distribution_stats.h"
#include "core/error.h"
#include "core/judge_factory.h"

namespace klspec {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Shared by every sequence that does not name a rule.
const std::shared_ptr<const Judge>& vanilla_judge() {
    static const std::shared_ptr<const Judge> judge = std::make_shared<VanillaJudge>();
    return judge;
}

int32_t to_int(size_t n) { return static_cast<int32_t>(n); }

// Whether llama.cpp decodes the batch in one micro-batch: only those calls time a batch of its size (the
// cost curves are per micro-batch; the cost model adds up a split batch's parts itself).
bool is_one_micro_batch(const Batch& batch) {
    const llama_batch& b = batch.get();
    std::vector<BatchShare> shares;
    for (int32_t i = 0; i < b.n_tokens; ++i) {
        if (shares.empty() || shares.back().sequence_id != b.seq_id[i][0]) shares.push_back({b.seq_id[i][0], 0});
        ++shares.back().tokens;
    }
    return sequential_equal_split(shares).size() == 1;
}

// A call's time belongs to its batch size only when llama.cpp ran it in one micro-batch.
void record_cost(BatchCostCurve& curve, const Batch& batch, double seconds) {
    if (is_one_micro_batch(batch)) {
        curve.record(batch.size(), seconds);
    } else {
        curve.record_untimed();
    }
}

// The length of the longest common prefix.
int32_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
    return static_cast<int32_t>(std::mismatch(a.begin(), a.begin() + std::ptrdiff_t(std::min(a.size(), b.size())), b.begin()).first - a.begin());
}

// The log-probabilities of a step's last `n_tokens` tokens (none when the sequence does not ask for them).
std::span<const TokenLogprobs> step_logprobs(const Sequence& seq, size_t n_tokens) {
    const std::vector<TokenLogprobs>& all = seq.result().logprobs;
    return all.empty() ? std::span<const TokenLogprobs>() : std::span(all).last(n_tokens);
}

// The rules an n-gram draft can feed (they read nothing of the draft but its token), comma-separated.
std::string target_only_rule_names() {
    std::string names;
    for (const JudgeRule& rule : judge_rules())
        if (!rule.needs_draft_model) names += fmt::format("{}{}", names.empty() ? "" : ", ", rule.name);
    return names;
}

}  // namespace

void validate(const GenerationOptions& options) {
    if (options.max_tokens < 0) throw Error(fmt::format("max tokens must be >= 0, got {}", options.max_tokens));
    if (options.draft_max <= 0) throw Error(fmt::format("draft-max (gamma) must be >= 1, got {}", options.draft_max));
    if (options.draft_min < 0 || options.draft_min > options.draft_max)
        throw Error(fmt::format("draft-min must be in 0..draft-max ({}), got {}", options.draft_max, options.draft_min));
    if (!(options.draft_p_min >= 0.0f && options.draft_p_min <= 1.0f))
        throw Error(fmt::format("draft-p-min must be in [0, 1], got {}", options.draft_p_min));
    const SamplingParams& s = options.sampling;
    if (!(s.temperature >= 0.0f)) throw Error(fmt::format("temperature must be >= 0, got {}", s.temperature));
    if (s.top_k < 0) throw Error(fmt::format("top-k must be >= 0, got {}", s.top_k));
    if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) throw Error(fmt::format("top-p must be in (0, 1], got {}", s.top_p));
    if (options.logprobs && (*options.logprobs < 0 || *options.logprobs > kMaxTopLogprobs))
        throw Error(fmt::format("top logprobs must be in 0..{}, got {}", kMaxTopLogprobs, *options.logprobs));
    if (options.verification == Verification::Block && options.judge && options.judge->name() != "vanilla")
        throw Error(fmt::format("block verification needs the vanilla judge, not {}: a judge relaxes position by "
                                "position, while block verification accepts the block jointly", options.judge->name()));
    if (options.judge_span.needs_markers())
        throw Error("judge span 'think' has no markers: give them (think:OPEN,CLOSE) or read them from the chat template");
    if (options.judge_span.kind == JudgeSpan::Kind::Until && (options.judge_span.close.size() != 1 || options.judge_span.close[0].empty()))
        throw Error("judge span 'until:' needs a string after the colon (until:The answer is)");
}

std::string_view to_string(StopReason reason) {
    switch (reason) {
        case StopReason::EndOfGeneration: return "eos";
        case StopReason::MaxTokens: return "max_tokens";
        case StopReason::StopString: return "stop_string";
        case StopReason::ContextFull: return "context_full";
        case StopReason::Cancelled: return "cancelled";
    }
    return "unknown";
}

Sequence::Sequence(int32_t id, GenerationOptions options)
    : id_(id),
      options_(std::move(options)),
      judge_(options_.judge ? options_.judge : vanilla_judge()),
      draft_budget_(options_.draft_max),
      rng_(options_.sampling.seed),
      stream_(options_.stop_strings),
      span_(options_.judge_span),
      acceptance_(options_.sampling, *judge_, options_.verification) {}

SpeculativeDecoder::SpeculativeDecoder(const Model& target, const Model* draft, const ContextOptions& options,
                                       const NgramOptions& ngram)
    : target_(target), target_ctx_(target, options), n_target_vocab_(target.n_vocab()), target_batch_(64),
      draft_batch_(64), kept_(static_cast<size_t>(options.n_sequences)) {
    if (ngram.enabled()) ngram_ = std::make_unique<NgramDrafter>(ngram, options.n_sequences);
    if (draft != nullptr) {
        require_compatible_vocabularies(target, *draft);
        n_draft_vocab_ = draft->n_vocab();
        ContextOptions draft_options = options;
        if (options.n_threads_draft > 0) draft_options.n_threads = options.n_threads_draft;
        draft_ctx_ = std::make_unique<ModelContext>(*draft, draft_options);
    }
}

double SpeculativeDecoder::llama_decode_seconds() const {
    return target_ctx_.decode_seconds() + (draft_ctx_ ? draft_ctx_->decode_seconds() : 0.0);
}

Sequence SpeculativeDecoder::start(int32_t id, const std::string& prompt, GenerationOptions options) {
    // Special-token text in a prompt (a chat template's markers) is parsed, as llama.cpp's server does.
    return start(id, target_.tokenize(prompt, /*add_bos=*/true, /*parse_special=*/true), std::move(options));
}

Sequence SpeculativeDecoder::start(int32_t id, std::vector<int32_t> prompt_tokens, GenerationOptions options) {
    validate(options);
    if (id < 0 || id >= n_sequences())
        throw Error(fmt::format("sequence id {} is out of range (the decoder has {} sequences)", id, n_sequences()));
    Sequence seq(id, std::move(options));
    if (seq.judge_->needs_hidden_states() && !target_ctx_.has_hidden_states())
        throw Error(fmt::format("the {} rule needs hidden states: create the decoder with ContextOptions::hidden_states",
                                seq.judge_->name()));
    if (seq.judge_->needs_hidden_states() && !draft_ctx_)
        throw Error(fmt::format("the {} rule needs a draft model", seq.judge_->name()));
    if (seq.judge_->needs_draft_model() && ngram_)
        throw Error(fmt::format("the {} rule reads the draft model's {}, which n-gram drafts do not have: drop the "
                                "ngram types from --spec-type, or use a rule that reads the target alone ({})",
                                seq.judge_->name(), seq.judge_->needs_hidden_states() ? "hidden states" : "distribution q",
                                target_only_rule_names()));

    check_prompt(prompt_tokens);
    GenerationStats& stats = seq.result_.stats;
    stats.prompt_tokens = to_int(prompt_tokens.size());

    // Both caches hold every accepted token except the last one, which the next step feeds. What a finished
    // sequence kept on this id is reused as far as the prompt agrees with it.
    const auto start = Clock::now();
    const std::span<const int32_t> cached_prompt(prompt_tokens.data(), prompt_tokens.size() - 1);
    KeptCells kept = std::exchange(kept_[static_cast<size_t>(id)], {});
    const int32_t target_reused = seq.options_.cache_prompt ? common_prefix(kept.tokens, cached_prompt) : 0;
    const int32_t draft_reused = std::min(target_reused, kept.draft);
    // A prompt with a token the draft's vocabulary lacks is decoded target-only; the draft keeps what it has.
    seq.draft_unreadable_ = draft_ctx_ && std::any_of(prompt_tokens.begin(), prompt_tokens.end(),
                                                      [&](int32_t t) { return t >= n_draft_vocab_; });
    for (auto [ctx, reused] : {std::pair(&target_ctx_, target_reused), std::pair(draft_ctx_.get(), draft_reused)}) {
        if (ctx == nullptr) continue;
        ctx->truncate(id, reused);
        if (ctx == draft_ctx_.get() && seq.draft_unreadable_) continue;
        ctx->prefill(id, cached_prompt.subspan(static_cast<size_t>(reused)), reused);
    }
    stats.prompt_seconds = seconds_since(start);
    stats.prompt_cached_tokens = target_reused;
    seq.tokens_ = std::move(prompt_tokens);
    // A reasoning span may open in the prompt (templates that start the answer with <think>); an until
    // span counts the output alone (a prompt's exemplars hold the string too).
    if (seq.options_.judge_span.kind == JudgeSpan::Kind::Between)
        for (const int32_t token : seq.tokens_) seq.span_.feed(target_.piece(token, /*special=*/true));
    if (ngram_) ngram_->begin(id, seq.tokens_);
    seq.target_cached_ = seq.draft_cached_ = to_int(seq.tokens_.size()) - 1;
    if (seq.draft_unreadable_) seq.draft_cached_ = draft_reused;
    seq.finished_ = seq.options_.max_tokens == 0;
    return seq;
}

int32_t SpeculativeDecoder::reusable_prompt(int32_t id, std::span<const int32_t> prompt_tokens) const {
    if (prompt_tokens.empty()) return 0;
    return common_prefix(kept_.at(static_cast<size_t>(id)).tokens, prompt_tokens.first(prompt_tokens.size() - 1));
}

int32_t SpeculativeDecoder::cached_tokens(int32_t id) const { return to_int(kept_.at(static_cast<size_t>(id)).tokens.size()); }

GenerationResult SpeculativeDecoder::generate(const std::string& prompt, GenerationOptions options,
                                              const StepCallback& on_step) {
    Sequence seq = start(0, prompt, std::move(options));
    Sequence* const batch[] = {&seq};
    while (!seq.finished()) step(batch, on_step);
    return seq.take_result();
}

void SpeculativeDecoder::step(std::span<Sequence* const> sequences, const StepCallback& on_step) {
    std::vector<Sequence*>& active = active_;
    active.clear();
    for (Sequence* seq : sequences) {
        if (seq->finished_) continue;
        // The step's target batch needs one free position at least.
        if (seq->target_cached_ + 1 > target_ctx_.n_ctx()) {
            seq->result_.stop_reason = StopReason::ContextFull;
            finish(*seq, on_step);
            continue;
        }
        active.push_back(seq);
    }
    if (active.empty()) return;
    choose_draft_lengths_for(active);
    draft_all(active);
    verify_all(active);
    for (Sequence* seq : active) judge_emit_roll_back(*seq, on_step);
}

void SpeculativeDecoder::set_step_costs(BatchCostCurve verify, BatchCostCurve draft) {
    verify_costs_ = std::move(verify);
    draft_costs_ = std::move(draft);
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
        const bool first_alone = options.first_token_alone && seq->result_.tokens.empty();
        const bool can_draft = ngram_ || (draft_ctx_ && !seq->draft_unreadable_);
        const int32_t cap = can_draft && !first_alone ? std::max(0, std::min({options.draft_max, wanted - 1,
                                                                              target_ctx_.n_ctx() - seq->target_cached_ - 1}))
                                                      : 0;
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
    const DraftChoice choice = choose_draft_lengths(verify_costs_, draft_costs_, candidates);
    for (size_t s = 0; s < active.size(); ++s) {
        if (candidates[s].min_length == candidates[s].max_length) continue;
        active[s]->gamma_ = active[s]->probe_.adjust(choice.lengths[s], candidates[s].max_length);
    }
}

DraftCandidate SpeculativeDecoder::draft_candidate(const Sequence& seq, DraftSource drafter, int32_t min_length,
                                                   int32_t max_length) const {
    // The drafter's profile over depths, at the sequence's level: its running rate for that drafter (shrunk to
    // the decoder's) against the decoder's.
    const size_t source = static_cast<size_t>(drafter);
    const double decoder_rate = decoder_acceptance_[source].rate(AcceptanceEstimate::kDecoderPrior);
    const double scale = seq.acceptance_estimates_[source].rate(decoder_rate) / decoder_rate;
    const bool lookup = drafter == DraftSource::Ngram;
    return {seq.id_, depth_acceptance_[source].rates(std::max(max_length, 1), scale), min_length, max_length,
            !lookup, lookup ? ngram_lookup_seconds_ : 0.0};
}

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
    ngram_lookup_seconds_ = ngram_lookup_seconds_ == 0 ? seconds / requested
                                                       : 0.9 * ngram_lookup_seconds_ + 0.1 * seconds / requested;
    for (size_t s = 0; s < active.size(); ++s) {
        if (draft_caps_[s] == 0) continue;
        Sequence& seq = *active[s];
        seq.ngram_found_ = to_int(ngram_->draft(seq.id_).size());
        seq.ngram_drafts_ = seq.ngram_found_ > 0;
        seq.result_.stats.draft_seconds += seconds / requested;
    }
}

void SpeculativeDecoder::calibrate_step_costs(int32_t draft_max) {
    if ((!draft_ctx_ && !ngram_) || costs_calibrated_) return;
    if (draft_max < 1) throw Error(fmt::format("calibrate_step_costs: draft_max must be at least 1, got {}", draft_max));
    // Id 0 is a token of both vocabularies; what the rows compute does not matter, only how long they take.
    time_step_costs(/*token=*/0, /*id=*/0, /*target_pos=*/0, /*draft_pos=*/0, draft_max);
}

void SpeculativeDecoder::time_step_costs(int32_t token, int32_t id, int32_t target_pos, int32_t draft_pos,
                                         int32_t draft_max) {
    costs_calibrated_ = true;
    // Sizes 1, 2, 4, ... and the largest, each timed twice (the first call builds llama.cpp's graph, the
    // second reuses it) after an untimed warm-up call; every row outputs logits, as in a step. The running
    // averages then follow the sizes steps really send.
    const auto time_sizes = [token, id](ModelContext& ctx, Batch& batch, int32_t first_pos, int32_t largest,
                                        BatchCostCurve& curve) {
        std::vector<int32_t> sizes = {largest};
        for (int32_t size = 1; size < largest; size *= 2) sizes.insert(sizes.end(), {size, size});
        sizes.insert(sizes.end(), {largest, largest});
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
    if (draft_ctx_) time_sizes(*draft_ctx_, draft_batch_, draft_pos, n_sequences(), draft_costs_);
}

// Step 1: every sequence's draft catches up with its accepted tokens, then proposes up to γ tokens; one
// draft batch per depth across all sequences still drafting.
void SpeculativeDecoder::draft_all(std::span<Sequence* const> active) {
    const auto start = Clock::now();
    const double llama_start = draft_ctx_ ? draft_ctx_->decode_seconds() : 0.0;
    const int32_t n_vocab = n_draft_vocab_;  // the draft's rows
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
    if (drafting.empty()) return;

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
    while (draft_batch_.size() > 0) {
        const double decode_start = draft_ctx_->decode_seconds();
        draft_ctx_->decode(draft_batch_);
        if (measure_costs_) record_cost(draft_costs_, draft_batch_, draft_ctx_->decode_seconds() - decode_start);
        draft_batch_.clear();
        for (size_t s = 0; s < drafting.size(); ++s) {
            if (draft_rows_of_[s] < 0) continue;
            Sequence& seq = *drafting[s];
            ++seq.result_.stats.draft_calls;
            const int32_t row = std::exchange(draft_rows_of_[s], -1);
            const bool wants_hidden = seq.judge_->needs_hidden_states();
            // The row's hidden state belongs to the token fed at this depth, d_i (depth 0 feeds `last`).
            if (wants_hidden && !seq.drafted_.empty()) {
                const std::span<const float> h = draft_ctx_->hidden_state(row);
                seq.draft_hidden_.insert(seq.draft_hidden_.end(), h.begin(), h.end());
            }
            const bool drafts_done = to_int(seq.drafted_.size()) == seq.gamma_ ||
                                     (!seq.drafted_.empty() && target_.is_end_of_generation(seq.drafted_.back()));
            if (drafts_done) continue;

            // q_i: the shaped draft row, kept for the judge and the observer (llama.cpp reuses its buffer at
            // the next depth). Greedy vanilla decoding needs only its argmax: no copy of V floats.
            const size_t i = seq.drafted_.size();
            const bool keep_row = !seq.options_.sampling.greedy() || seq.judge_->needs_distributions() ||
                                  observer_ || seq.options_.draft_p_min > 0.0f;
            std::span<const float> q = draft_ctx_->logits(row);
            if (keep_row) {
                seq.draft_rows_.resize((i + 1) * static_cast<size_t>(n_vocab));
                const std::span<float> shaped(seq.draft_rows_.data() + i * n_vocab, static_cast<size_t>(n_vocab));
                shape_logits(q, seq.options_.sampling, shaped, shaping_);
                q = shaped;
            }
            int32_t token;
            float token_probability = 1.0f;
            if (seq.options_.sampling.greedy()) {
                token = argmax(q);
                if (seq.options_.draft_p_min > 0.0f)
                    token_probability = static_cast<float>(distribution_stats(q).max_probability);
            } else {
                seq.draft_probs_.resize((i + 1) * static_cast<size_t>(n_vocab));
                const std::span<float> probs(seq.draft_probs_.data() + i * n_vocab, static_cast<size_t>(n_vocab));
                softmax_into(q, probs);
                token = sample_from_weights(probs, seq.rng_);
                token_probability = probs[static_cast<size_t>(token)];
            }
            // Draft-confidence cut (llama.cpp's p_min): an unsure draft token is not proposed.
            if (token_probability < seq.options_.draft_p_min) {
                seq.gamma_ = to_int(seq.drafted_.size());
                continue;
            }
            seq.drafted_.push_back(token);
            // A token the target's vocabulary lacks (a draft larger than its target) ends the draft: the target
            // cannot verify it, and the acceptance step rejects it.
            if (token >= n_target_vocab_) continue;
            const bool last_draft = to_int(seq.drafted_.size()) == seq.gamma_ || target_.is_end_of_generation(token);
            // d_k needs a forward pass only for its hidden state (judges that read them).
            if (last_draft && !wants_hidden) continue;
            draft_rows_of_[s] = draft_batch_.add(token, seq.draft_cached_++, seq.id_, true);
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

// Step 2: every sequence's `last`, d_1..d_k in ONE target batch, distinct sequence ids.
void SpeculativeDecoder::verify_all(std::span<Sequence* const> active) {
    const auto start = Clock::now();
    int32_t needed = 0;
    for (const Sequence* seq : active) needed += 1 + to_int(seq->drafted_.size());
    target_batch_.reserve(needed);
    target_batch_.clear();
    for (Sequence* seq : active) {
        int32_t pos = seq->target_cached_;
        seq->verify_row_ = target_batch_.add(seq->tokens_.back(), pos++, seq->id_, true);
        for (const int32_t token : seq->drafted_)
            if (token < n_target_vocab_) target_batch_.add(token, pos++, seq->id_, true);  // see draft_all
    }
    const double llama_start = target_ctx_.decode_seconds();
    target_ctx_.decode(target_batch_);
    const double seconds = seconds_since(start);
    const double llama_seconds = target_ctx_.decode_seconds() - llama_start;
    if (measure_costs_) record_cost(verify_costs_, target_batch_, llama_seconds);
    for (Sequence* seq : active) {
        ++seq->result_.stats.target_calls;
        seq->result_.stats.verify_seconds += seconds;
        seq->result_.stats.llama_decode_seconds += llama_seconds;
    }
}

// Steps 3-5 for one sequence: judge in order and stop at the first rejection, emit the accepted drafts and
// the target's token, roll both caches back to the accepted sequence.
void SpeculativeDecoder::judge_emit_roll_back(Sequence& seq, const StepCallback& on_step) {
    auto start = Clock::now();
    GenerationStats& stats = seq.result_.stats;
    const GenerationOptions& options = seq.options_;
    const size_t n_vocab = static_cast<size_t>(target_.n_vocab());
    const int32_t k = to_int(seq.drafted_.size());
    const bool shape_target = !options.sampling.greedy();
    if (shape_target) {
        seq.target_rows_.resize((static_cast<size_t>(k) + 1) * n_vocab);
        seq.target_row_shaped_.assign(static_cast<size_t>(k) + 1, 0);
    }

    // Position sources are lazy: target rows after the first rejection are never shaped.
    struct Positions final : PositionSource {
        SpeculativeDecoder& decoder;
        Sequence& seq;
        Positions(SpeculativeDecoder& d, Sequence& s) : decoder(d), seq(s) {}
        std::span<const float> target_logits(int32_t i) {
            const std::span<const float> raw = decoder.target_ctx_.logits(seq.verify_row_ + i);
            if (seq.options_.sampling.greedy()) return raw;
            const size_t n = raw.size();
            const std::span<float> row(seq.target_rows_.data() + static_cast<size_t>(i) * n, n);
            // Shaped once per step: the observer asks for the rows the acceptance step already used.
            if (!seq.target_row_shaped_[static_cast<size_t>(i)]) {
                shape_logits(raw, seq.options_.sampling, row, decoder.shaping_);
                seq.target_row_shaped_[static_cast<size_t>(i)] = 1;
            }
            return row;
        }
        DraftPosition position(int32_t i) override {
            const size_t n = static_cast<size_t>(decoder.n_draft_vocab_);
            DraftPosition p;
            p.target_logits = target_logits(i);
            // Rows are kept only where someone reads them (see draft_all); an n-gram draft has none.
            if (!seq.ngram_drafts_ && seq.draft_rows_.size() >= (static_cast<size_t>(i) + 1) * n)
                p.draft_logits = std::span<const float>(seq.draft_rows_.data() + static_cast<size_t>(i) * n, n);
            if (!seq.ngram_drafts_ && !seq.options_.sampling.greedy())
                p.draft_probabilities = std::span<const float>(seq.draft_probs_.data() + static_cast<size_t>(i) * n, n);
            p.draft_token = seq.drafted_[static_cast<size_t>(i)];
            if (!seq.draft_in_span_.empty()) p.in_span = seq.draft_in_span_[static_cast<size_t>(i)] != 0;
            // A draft token outside the target's vocabulary has no verification row (and no judge reads it).
            if (seq.judge_->needs_hidden_states() && p.draft_token < decoder.n_target_vocab_) {
                const size_t n_embd = static_cast<size_t>(decoder.draft_ctx_->model().n_embd());
                p.draft_hidden = std::span<const float>(seq.draft_hidden_.data() + static_cast<size_t>(i) * n_embd, n_embd);
                p.target_hidden = decoder.target_ctx_.hidden_state(seq.verify_row_ + 1 + i);  // row of input d_i
            }
            return p;
        }
    } positions(*this, seq);

    // Where the span is open for each draft, as if every draft before it were kept (a draft is judged only
    // then): the tracker runs ahead on a copy. A token the target lacks has no text there (it is rejected).
    seq.draft_in_span_.clear();
    if (!options.judge_span.is_all()) {
        SpanTracker ahead = seq.span_;
        for (const int32_t token : seq.drafted_)
            seq.draft_in_span_.push_back(ahead.feed_and_check(token < n_target_vocab_ ? target_.piece(token, true) : ""));
    }
    // The bonus row exists unless the last draft was outside the target's vocabulary (then never needed: it is
    // rejected).
    const bool bonus_row = k == 0 || seq.drafted_.back() < n_target_vocab_;
    const StepOutcome outcome = seq.acceptance_.run(k, positions, bonus_row ? positions.target_logits(k) : std::span<const float>(),
                                                    seq.rng_);
    // What this step's γ was chosen on (approximately: other sequences' steps may have moved the prior since).
    const size_t source = static_cast<size_t>(seq.draft_source());
    const double acceptance_estimate =
        seq.acceptance_estimates_[source].rate(decoder_acceptance_[source].rate(AcceptanceEstimate::kDecoderPrior));
    // Each drafter's evidence fades by a step; the one that drafted gains some, and so does an n-gram
    // proposal the step did not use (the draft model drafted, or γ 0 was chosen), from what it would have
    // kept: a free measurement, so a drafter that lost the choice is still measured.
    seq.emitted_.assign(seq.drafted_.begin(), seq.drafted_.begin() + outcome.accepted);
    seq.emitted_.push_back(outcome.next_token);
    const auto record = [&](DraftSource drafter, int32_t drafted, int32_t kept) {
        const size_t d = static_cast<size_t>(drafter);
        seq.acceptance_estimates_[d].record(drafted, kept);
        if (drafted > 0) decoder_acceptance_[d].record(drafted, kept);
        depth_acceptance_[d].record(drafted, kept);
    };
    const bool ngram_used = seq.ngram_drafts_ && k > 0;
    record(DraftSource::Model, ngram_used ? 0 : k, ngram_used ? 0 : outcome.accepted);
    if (ngram_used) {
        record(DraftSource::Ngram, k, outcome.accepted);
        ngram_->accept(seq.id_, outcome.accepted);
        stats.ngram_drafted += k;
        stats.ngram_accepted += outcome.accepted;
    } else if (seq.ngram_found_ > 0) {
        const int32_t kept = common_prefix(ngram_->draft(seq.id_), seq.emitted_);
        record(DraftSource::Ngram, std::min(seq.ngram_found_, to_int(seq.emitted_.size())), kept);
        ngram_->accept(seq.id_, kept);
    } else {
        record(DraftSource::Ngram, 0, 0);
    }
    stats.drafted += k;
    stats.draft_length_sum += seq.gamma_;
    stats.target_only_steps += k == 0;
    stats.accepted += outcome.accepted;
    stats.relaxed_accepted += outcome.relaxed_accepted;
    stats.judge_seconds += outcome.judge_seconds;
    stats.span_blocked += outcome.span_blocked;
    if (observer_) {
        const std::span<const PositionVerdict> verdicts = seq.acceptance_.verdicts();
        for (size_t i = 0; i < verdicts.size(); ++i) {
            JudgedPosition record = describe_position(positions.position(static_cast<int32_t>(i)));
            record.sequence_id = seq.id_;
            record.position = seq.target_cached_ + 1 + static_cast<int64_t>(i);
            record.verdict = verdicts[i];
            record.draft_length = seq.gamma_;
            record.acceptance_estimate = acceptance_estimate;
            observer_(record);
        }
    }

    // Emit: accepted drafts, then the target's token (seq.emitted_); stop at EOG, a stop string or -n.
    GenerationResult& result = seq.result_;
    size_t n_emitted = 0;
    for (const int32_t token : seq.emitted_) {
        if (target_.is_end_of_generation(token)) {
            result.stop_reason = StopReason::EndOfGeneration;
            seq.finished_ = true;
            break;
        }
        if (options.logprobs)  // token n_emitted was predicted by the step's target row n_emitted
            result.logprobs.push_back(
                token_logprobs(target_ctx_.logits(seq.verify_row_ + to_int(n_emitted)), token, *options.logprobs));
        ++stats.emitted;
        ++n_emitted;
        if (!options.judge_span.is_all() && !seq.span_.feed_and_check(target_.piece(token, true))) ++stats.outside_span;
        result.tokens.push_back(token);
        seq.tokens_.push_back(token);
        seq.draft_unreadable_ = seq.draft_unreadable_ || (draft_ctx_ && token >= n_draft_vocab_);
        if (seq.stream_.append(target_.piece(token))) {
            result.stop_reason = StopReason::StopString;
            seq.finished_ = true;
            break;
        }
        if (to_int(result.tokens.size()) >= options.max_tokens) {
            result.stop_reason = StopReason::MaxTokens;
            seq.finished_ = true;
            break;
        }
    }
    const std::span<const int32_t> step_tokens(seq.emitted_.data(), n_emitted);
    if (seq.finished_) {
        finish(seq, on_step, step_tokens);
    } else {
        if (on_step && on_step(StepResult{seq.id_, step_tokens, seq.stream_.take_stable(), false, seq.acceptance_.verdicts(),
                                          step_logprobs(seq, step_tokens.size())})) {
            result.stop_reason = StopReason::Cancelled;
            finish(seq, {});
        }
    }
    if (seq.finished_) {
        stats.other_seconds += seconds_since(start) - outcome.judge_seconds;
        return;
    }

    // Roll back: keep `last` and the accepted drafts in both caches (nothing to drop when every draft
    // was kept).
    seq.target_cached_ += 1 + outcome.accepted;
    if (outcome.accepted < k) target_ctx_.truncate(seq.id_, seq.target_cached_);
    if (draft_ctx_ && seq.draft_cached_ > seq.target_cached_) {
        seq.draft_cached_ = seq.target_cached_;
        draft_ctx_->truncate(seq.id_, seq.draft_cached_);
    }
    // Adaptive γ (the heuristic of Hugging Face's assisted generation): longer after a fully accepted
    // draft, shorter after a rejection.
    if (options.draft_policy == DraftPolicy::Adaptive && k > 0) {
        const int32_t budget = outcome.accepted == k ? seq.draft_budget_ + 2 : seq.draft_budget_ - 1;
        seq.draft_budget_ = std::clamp(budget, std::max(1, options.draft_min), options.draft_max);
    }
    stats.other_seconds += seconds_since(start) - outcome.judge_seconds;
}

void SpeculativeDecoder::finish(Sequence& seq, const StepCallback& on_step, std::span<const int32_t> step_tokens) {
    seq.finished_ = true;
    seq.stream_.finish();
    // The text the callback gets is taken before result.text is filled, so both hold all of it.
    const std::string_view rest = seq.stream_.take_stable();
    const std::span<const PositionVerdict> verdicts =
        step_tokens.empty() ? std::span<const PositionVerdict>() : seq.acceptance_.verdicts();
    if (on_step) on_step(StepResult{seq.id_, step_tokens, rest, true, verdicts, step_logprobs(seq, step_tokens.size())});
    seq.result_.text = seq.stream_.text();
    // A finished sequence frees its cells, or with cache_prompt keeps those each cache holds for certain: the
    // tokens before this step's batches (later cells may be rejected drafts; the draft may lag behind).
    const bool keep = seq.options_.cache_prompt;
    const int32_t target_kept = keep ? seq.target_cached_ : 0;
    const int32_t draft_kept = keep && draft_ctx_ ? std::min(seq.draft_cached_, seq.target_cached_) : 0;
    target_ctx_.truncate(seq.id_, target_kept);
    if (draft_ctx_) draft_ctx_->truncate(seq.id_, draft_kept);
    kept_[static_cast<size_t>(seq.id_)] = {{seq.tokens_.begin(), seq.tokens_.begin() + target_kept}, draft_kept};
}

ForwardResult SpeculativeDecoder::forward(ModelRole role, std::span<const int32_t> tokens, bool with_hidden,
                                          int32_t id) {
    ModelContext* ctx = role == ModelRole::Target ? &target_ctx_ : draft_ctx_.get();
    if (ctx == nullptr) throw Error("forward: the decoder has no draft model");
    if (to_int(tokens.size()) > ctx->n_ctx())
        throw Error(fmt::format("forward: {} tokens do not fit the context of {}", tokens.size(), ctx->n_ctx()));
    if (with_hidden && !ctx->has_hidden_states())
        throw Error("hidden states were requested from a context created without them");
    ForwardResult result;
    result.n_tokens = to_int(tokens.size());
    result.n_vocab = ctx->model().n_vocab();
    result.n_embd = ctx->model().n_embd();
    teacher_forced(*ctx, id, tokens, [&](size_t, int32_t row) {
        const std::span<const float> logits = ctx->logits(row);
        result.logits.insert(result.logits.end(), logits.begin(), logits.end());
        if (with_hidden) {
            const std::span<const float> hidden = ctx->hidden_state(row);
            result.hidden.insert(result.hidden.end(), hidden.begin(), hidden.end());
        }
    });
    return result;
}

void SpeculativeDecoder::teacher_forced(ModelContext& ctx, int32_t id, std::span<const int32_t> tokens,
                                        const std::function<void(size_t index, int32_t row)>& on_row) {
    ctx.truncate(id, 0);
    kept_.at(static_cast<size_t>(id)) = {};  // whatever the id kept is overwritten
    ctx.forward_rows(id, tokens, 0, on_row);
    ctx.truncate(id, 0);
}

void SpeculativeDecoder::check_prompt(std::span<const int32_t> prompt_tokens) const {
    if (prompt_tokens.empty()) throw PromptError("the prompt is empty and the model adds no BOS token");
    if (to_int(prompt_tokens.size()) >= target_ctx_.n_ctx()) {
        throw PromptError(fmt::format("the prompt has {} tokens but the context holds {} (raise -c)", prompt_tokens.size(),
                                      target_ctx_.n_ctx()),
                          /*exceeds_context=*/true);
    }
}

std::vector<TokenLogprobs> SpeculativeDecoder::prompt_logprobs(std::span<const int32_t> tokens, int32_t n_top,
                                                               int32_t id) {
    check_prompt(tokens);
    std::vector<TokenLogprobs> logprobs;
    if (tokens.size() < 2) return logprobs;
    // Every token in the batch, the last one's output unused: the same batches as forward(), so the same
    // logits to the last bit (a batch's composition can change a CPU kernel's summation order).
    teacher_forced(target_ctx_, id, tokens, [&](size_t i, int32_t row) {
        if (i + 1 < tokens.size()) logprobs.push_back(token_logprobs(target_ctx_.logits(row), tokens[i + 1], n_top));
    });
    return logprobs;
}

}  // namespace klspec
