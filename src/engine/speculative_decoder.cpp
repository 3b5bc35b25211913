#include "engine/speculative_decoder.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/distribution_stats.h"
#include "core/error.h"
#include "core/judge_factory.h"
#include "engine/decoder_helpers.h"
#include "engine/target_loading.h"

namespace klspec {

using detail::Clock;
using detail::common_prefix;
using detail::seconds_since;
using detail::step_logprobs;
using detail::to_int;

namespace {

// Shared by every sequence that does not name a rule.
const std::shared_ptr<const Judge>& vanilla_judge() {
    static const std::shared_ptr<const Judge> judge = std::make_shared<VanillaJudge>();
    return judge;
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
        throw Error(
            fmt::format("draft-min must be in 0..draft-max ({}), got {}", options.draft_max, options.draft_min));
    if (!(options.draft_p_min >= 0.0f && options.draft_p_min <= 1.0f))
        throw Error(fmt::format("draft-p-min must be in [0, 1], got {}", options.draft_p_min));
    const SamplingParams& s = options.sampling;
    if (!(s.temperature >= 0.0f)) throw Error(fmt::format("temperature must be >= 0, got {}", s.temperature));
    if (s.top_k < 0) throw Error(fmt::format("top-k must be >= 0, got {}", s.top_k));
    if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) throw Error(fmt::format("top-p must be in (0, 1], got {}", s.top_p));
    if (options.logprobs && (*options.logprobs < 0 || *options.logprobs > kMaxTopLogprobs))
        throw Error(fmt::format("top logprobs must be in 0..{}, got {}", kMaxTopLogprobs, *options.logprobs));
    if (options.min_line_indent < 0)
        throw Error(fmt::format("line indent must be >= 0, got {}", options.min_line_indent));
    if (options.cache_reuse_min_chunk < 0)
        throw Error(fmt::format("cache reuse chunk must be >= 0, got {}", options.cache_reuse_min_chunk));
    if (options.verification == Verification::Block && options.judge && options.judge->name() != "vanilla")
        throw Error(
            fmt::format("block verification needs the vanilla judge, not {}: a judge relaxes position by "
                        "position, while block verification accepts the block jointly",
                        options.judge->name()));
    if (options.judge_span.needs_markers())
        throw Error(
            "judge span 'think' has no markers: give them (think:OPEN,CLOSE) or read them from the chat template");
    if (options.judge_span.kind == JudgeSpan::Kind::Until &&
        (options.judge_span.close.size() != 1 || options.judge_span.close[0].empty()))
        throw Error("judge span 'until:' needs a string after the colon (until:The answer is)");
}

std::string_view to_string(StopReason reason) {
    switch (reason) {
        case StopReason::EndOfGeneration:
            return "eos";
        case StopReason::MaxTokens:
            return "max_tokens";
        case StopReason::StopString:
            return "stop_string";
        case StopReason::ContextFull:
            return "context_full";
        case StopReason::Cancelled:
            return "cancelled";
        case StopReason::Indentation:
            return "indentation";
        case StopReason::TimeLimit:
            return "time_limit";
    }
    return "unknown";
}

Sequence::Sequence(int32_t id, GenerationOptions options)
    : id_(id),
      options_(std::move(options)),
      judge_(options_.judge ? options_.judge : vanilla_judge()),
      draft_budget_(options_.draft_max),
      rng_(options_.sampling.seed),
      stream_(options_.stop_strings, options_.min_line_indent),
      span_(options_.judge_span),
      acceptance_(options_.sampling, *judge_, options_.verification) {}

SpeculativeDecoder::SpeculativeDecoder(const Model& target, const Model* draft, const ContextOptions& options,
                                       const NgramOptions& ngram)
    : target_(target),
      target_ctx_(target, options),
      context_options_(options),
      n_target_vocab_(target.n_vocab()),
      target_batch_(64),
      draft_batch_(64),
      kept_(static_cast<size_t>(options.n_sequences)) {
    if (ngram.enabled()) ngram_ = std::make_unique<NgramDrafter>(ngram, options.n_sequences);
    if (draft != nullptr) {
        require_compatible_vocabularies(target, *draft);
        n_draft_vocab_ = draft->n_vocab();
        ContextOptions draft_options = options;
        if (options.n_threads_draft > 0) draft_options.n_threads = options.n_threads_draft;
        draft_options.batch_invariant_attention = false;  // its kernels move acceptance, never the output
        draft_ctx_ = std::make_unique<ModelContext>(*draft, draft_options);
    }
}

double SpeculativeDecoder::llama_decode_seconds() const {
    return target_ctx_.decode_seconds() + (draft_ctx_ ? draft_ctx_->decode_seconds() : 0.0) +
           (prompt_ctx_ ? prompt_ctx_->decode_seconds() : 0.0);
}

namespace {

// use_repacked_prompts' check decodes kKernelProbeText (target_loading.h), some forty tokens: the fault it
// guards against showed from nine on.
// The repacked and plain kernels' logits differ by 0.6 (Qwen2.5-Coder-1.5B) to 2.1 (Gemma 3 270M); the fault on
// an AMX Xeon by 18.9 (docs/real-pair.md).
constexpr float kRepackedPromptTolerance = 5.0F;

// The last row's logits of `tokens` prefilled in sequence 0 of `ctx`, which is left empty.
std::vector<float> probe_logits(ModelContext& ctx, std::span<const int32_t> tokens) {
    std::vector<float> logits;
    ctx.prefill_last_logits(0, tokens, 0, logits);
    ctx.truncate(0, 0);
    return logits;
}

}  // namespace

std::optional<std::string> SpeculativeDecoder::use_repacked_prompts(const Model& repacked_target) {
    if (repacked_target.n_vocab() != target_.n_vocab() || repacked_target.n_embd() != target_.n_embd() ||
        repacked_target.n_params() != target_.n_params())
        throw Error(fmt::format("the prompt model {} is not the target {}", repacked_target.path(), target_.path()));
    ContextOptions options = context_options_;
    options.hidden_states = false;  // verification rows read hidden states; prompt rows do not
    auto prompt_ctx = std::make_unique<ModelContext>(repacked_target, options);
    const std::vector<int32_t> probe = target_.tokenize(kKernelProbeText, /*add_bos=*/true);
    const std::vector<float> repacked = probe_logits(*prompt_ctx, probe);
    const std::vector<float> plain = probe_logits(target_ctx_, probe);
    const float largest_difference = max_abs_difference(repacked, plain);
    if (argmax(repacked) != argmax(plain) || largest_difference > kRepackedPromptTolerance) {
        return fmt::format(
            "the repacked kernels disagree with the target's on a {}-token prompt on this CPU "
            "(logits up to {:.1f} apart, next token {} against {})",
            probe.size(), largest_difference, argmax(repacked), argmax(plain));
    }
    prompt_ctx_ = std::move(prompt_ctx);
    return std::nullopt;
}

void SpeculativeDecoder::prefill_prompt(int32_t id, std::span<const int32_t> tokens, int32_t first_pos,
                                        std::vector<float>* logits_out) {
    // The repacked kernels batch rows in fours (fewer run the one-token kernel), and the cells are copied twice.
    const bool repacked = prompt_ctx_ && to_int(tokens.size()) >= kRepackedPrefill;
    ModelContext& ctx = repacked ? *prompt_ctx_ : target_ctx_;
    if (repacked && first_pos > 0) {
        prompt_ctx_->load_sequence(id, target_ctx_.save_sequence(id));  // replaces what the copy held
    } else if (repacked) {
        prompt_ctx_->truncate(id, 0);
    }
    if (logits_out != nullptr) {
        ctx.prefill_last_logits(id, tokens, first_pos, *logits_out);
    } else {
        ctx.prefill(id, tokens, first_pos);
    }
    if (repacked) target_ctx_.load_sequence(id, prompt_ctx_->save_sequence(id));
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
        throw Error(
            fmt::format("the {} rule needs hidden states: create the decoder with ContextOptions::hidden_states",
                        seq.judge_->name()));
    if (seq.judge_->needs_hidden_states() && !draft_ctx_)
        throw Error(fmt::format("the {} rule needs a draft model", seq.judge_->name()));
    if (seq.judge_->needs_draft_model() && ngram_)
        throw Error(
            fmt::format("the {} rule reads the draft model's {}, which n-gram drafts do not have: drop the "
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
    const bool cache = seq.options_.cache_prompt;
    if (cache && prompt_cache_) swap_with_prompt_cache(id, kept, cached_prompt, seq.options_.cache_reuse_min_chunk);
    // A prompt with a token the draft's vocabulary lacks is decoded target-only; the draft keeps what it has.
    seq.draft_unreadable_ = draft_ctx_ && std::any_of(prompt_tokens.begin(), prompt_tokens.end(),
                                                      [&](int32_t t) { return t >= n_draft_vocab_; });
    const int32_t target_reused =
        cache ? reuse_kept_cells(target_ctx_, id, kept.tokens, cached_prompt, seq.options_.cache_reuse_min_chunk) : 0;
    int32_t draft_reused = 0;
    if (draft_ctx_ && cache)
        draft_reused = reuse_kept_cells(*draft_ctx_, id, std::span(kept.tokens).first(static_cast<size_t>(kept.draft)),
                                        cached_prompt, seq.options_.cache_reuse_min_chunk);
    target_ctx_.truncate(id, target_reused);
    // first_token_from_prompt: the prompt's last token is prefilled too, in the last chunk, with an output: the
    // first token's logits. Its cell is what the first step's verification would have added; the target's
    // kernels are batch-invariant (ContextOptions::batch_invariant_attention, unrepacked weights), so the row
    // equals a one-token decode's, without the one-token decode's cost (a target call: 73 ms on the real pair).
    const bool logits_from_prompt = seq.options_.first_token_from_prompt && seq.options_.max_tokens > 0;
    const std::span<const int32_t> to_prefill =
        std::span<const int32_t>(prompt_tokens)
            .subspan(static_cast<size_t>(target_reused))
            .first(cached_prompt.size() - static_cast<size_t>(target_reused) + (logits_from_prompt ? 1 : 0));
    // Chunked: the steps prefill it (a request that generates nothing is an editor's background one: whole, now).
    const bool in_chunks = prefill_chunk_ > 0 && !prompt_ctx_ && seq.options_.max_tokens > 0;
    if (in_chunks) {
        seq.prompt_left_ = to_int(to_prefill.size());
    } else if (!to_prefill.empty()) {
        prefill_prompt(id, to_prefill, target_reused, logits_from_prompt ? &seq.prompt_logits_ : nullptr);
    }
    // The draft's prefill waits for the sequence's first drafted step (prefill_draft_gaps): a prompt that the
    // automatic γ never drafts on costs the draft nothing (it cost 0.6x target-only's prompt rate).
    if (draft_ctx_) draft_ctx_->truncate(id, draft_reused);
    stats.prompt_seconds = seconds_since(start);
    stats.prompt_cached_tokens = target_reused;
    seq.prompt_start_ = start;
    seq.tokens_ = std::move(prompt_tokens);
    // A reasoning span may open in the prompt (templates that start the answer with <think>); an until
    // span counts the output alone (a prompt's exemplars hold the string too).
    if (seq.options_.judge_span.kind == JudgeSpan::Kind::Between)
        for (const int32_t token : seq.tokens_) seq.span_.feed(target_.piece(token, /*special=*/true));
    if (ngram_) ngram_->begin(id, seq.tokens_);
    seq.target_cached_ = seq.prompt_left_ > 0 ? target_reused : to_int(seq.tokens_.size()) - 1;
    seq.draft_cached_ = draft_reused;
    seq.generation_start_ = Clock::now();
    // Nothing to generate (llama.vim's background requests pre-evaluate a chunk so): finished now, and with
    // cache_prompt its prompt's cells stay as the id's kept prompt, as any finished sequence's. Such a request is
    // off the editor's critical path, so the draft catches up here too: the next request's first drafted step
    // would otherwise prefill the whole gap in the draft while the user waits.
    if (seq.options_.max_tokens == 0) {
        if (draft_ctx_ && cache && !seq.draft_unreadable_ && seq.options_.draft_policy != DraftPolicy::Off) {
            Sequence* const self[] = {&seq};
            prefill_draft_gaps(self);
        }
        finish(seq, StepCallback(), {});
    }
    return seq;
}

int32_t SpeculativeDecoder::reusable_kept_cells(std::span<const int32_t> kept, std::span<const int32_t> prompt,
                                                int32_t min_chunk, const ShiftRun& on_shift) {
    int32_t reused = common_prefix(kept, prompt);
    if (min_chunk <= 0) return reused;
    // llama-server's --cache-reuse: walk the kept tokens past the prefix; a run of at least min_chunk of them
    // that the prompt continues with moves left to where the prompt has it, and a shorter one is skipped.
    size_t kept_head = static_cast<size_t>(reused);
    while (kept_head < kept.size() && static_cast<size_t>(reused) < prompt.size()) {
        const size_t prompt_head = static_cast<size_t>(reused);
        size_t n = 0;
        while (kept_head + n < kept.size() && prompt_head + n < prompt.size() &&
               kept[kept_head + n] == prompt[prompt_head + n])
            ++n;
        if (n < static_cast<size_t>(min_chunk)) {
            ++kept_head;
            continue;
        }
        if (on_shift) on_shift(to_int(kept_head), to_int(n), reused);
        kept_head += n;
        reused += to_int(n);
    }
    return reused;
}

int32_t SpeculativeDecoder::reuse_kept_cells(ModelContext& ctx, int32_t id, std::span<const int32_t> kept,
                                             std::span<const int32_t> prompt, int32_t min_chunk) {
    return reusable_kept_cells(kept, prompt, ctx.can_shift() ? min_chunk : 0,
                               [&](int32_t from, int32_t n, int32_t to) { ctx.shift_left(id, from, n, to); });
}

void SpeculativeDecoder::set_prefill_chunk(int32_t tokens) {
    if (tokens < 0) throw Error(fmt::format("prefill chunk must be >= 0 tokens, got {}", tokens));
    prefill_chunk_ = tokens;
}

void SpeculativeDecoder::use_prompt_cache(int64_t max_bytes) {
    prompt_cache_ = max_bytes == 0 ? nullptr : std::make_unique<PromptCache>(max_bytes);
}

void SpeculativeDecoder::swap_with_prompt_cache(int32_t id, KeptCells& kept, std::span<const int32_t> prompt,
                                                int32_t min_chunk) {
    // llama-server's rule (server_context's slot choice): the id's cells are copied to the cache when the prompt
    // would keep less than half of them or the cache has better, and the cache's best entry comes in when it
    // shares more with the prompt than they do. Saved first: loading overwrites them.
    const int32_t here = reusable_kept_cells(kept.tokens, prompt, target_ctx_.can_shift() ? min_chunk : 0, {});
    const bool cache_has_better = prompt_cache_->best(prompt, here) != nullptr;
    if (!kept.tokens.empty() && (cache_has_better || 2 * static_cast<size_t>(here) < kept.tokens.size())) {
        std::vector<uint8_t> draft_cells =
            draft_ctx_ && kept.draft > 0 ? draft_ctx_->save_sequence(id) : std::vector<uint8_t>();
        prompt_cache_->save({kept.tokens, kept.draft, target_ctx_.save_sequence(id), std::move(draft_cells)});
    }
    // Found again: the save may have dropped it (a budget smaller than both entries).
    const PromptCache::Entry* best = cache_has_better ? prompt_cache_->best(prompt, here) : nullptr;
    if (best == nullptr) return;  // the id's own cells serve, as far as they go
    target_ctx_.load_sequence(id, best->target_cells);
    if (draft_ctx_ && best->draft_tokens > 0)
        draft_ctx_->load_sequence(id, best->draft_cells);
    else if (draft_ctx_)
        draft_ctx_->truncate(id, 0);
    kept = {best->tokens, best->draft_tokens};
}

int32_t SpeculativeDecoder::reusable_prompt(int32_t id, std::span<const int32_t> prompt_tokens) const {
    if (prompt_tokens.empty()) return 0;
    return common_prefix(kept_.at(static_cast<size_t>(id)).tokens, prompt_tokens.first(prompt_tokens.size() - 1));
}

int32_t SpeculativeDecoder::cached_tokens(int32_t id) const {
    return to_int(kept_.at(static_cast<size_t>(id)).tokens.size());
}

GenerationResult SpeculativeDecoder::generate(const std::string& prompt, GenerationOptions options,
                                              const StepCallback& on_step) {
    Sequence seq = start(0, prompt, std::move(options));
    Sequence* const batch[] = {&seq};
    while (!seq.finished()) step(batch, on_step);
    return seq.take_result();
}

void SpeculativeDecoder::step(std::span<Sequence* const> sequences, const StepCallback& on_step) {
    std::vector<Sequence*>& active = active_;
    std::vector<Sequence*>& answered = answered_by_prompt_;
    std::vector<Sequence*>& prefilling = prefilling_;
    active.clear();
    answered.clear();
    prefilling.clear();
    for (Sequence* seq : sequences) {
        if (seq->finished_) continue;
        // The step's target batch needs one free position at least.
        if (seq->target_cached_ + 1 > target_ctx_.n_ctx()) {
            seq->result_.stop_reason = StopReason::ContextFull;
            finish(*seq, on_step);
            continue;
        }
        if (seq->prompt_left_ > 0)
            prefilling.push_back(seq);
        else
            (seq->prompt_logits_.empty() ? active : answered).push_back(seq);
    }
    if (active.empty() && !prefilling.empty()) verify_all(active, prefilling);
    if (active.empty()) {
        complete_prompt_chunks(prefilling, answered);
        emit_prompt_answers(answered, on_step);
        return;
    }
    step_cost_ = {};
    choose_draft_lengths_for(active);
    const double verify_before = target_ctx_.decode_seconds();
    const double draft_before = draft_ctx_ ? draft_ctx_->decode_seconds() : 0.0;
    draft_all(active);
    verify_all(active, prefilling);
    complete_prompt_chunks(prefilling, answered);
    if (step_cost_observer_) {
        step_cost_.verify_seconds = target_ctx_.decode_seconds() - verify_before;
        step_cost_.draft_seconds = draft_ctx_ ? draft_ctx_->decode_seconds() - draft_before : 0.0;
        for (const Sequence* seq : active) {
            step_cost_.lengths.push_back(to_int(seq->drafted_.size()));
            step_cost_.emitted -= to_int(seq->result_.tokens.size());
        }
    }
    emit_prompt_answers(answered, on_step);
    for (Sequence* seq : active) judge_emit_roll_back(*seq, on_step);
    if (step_cost_observer_) {
        for (const Sequence* seq : active) step_cost_.emitted += to_int(seq->result_.tokens.size());
        step_cost_observer_(step_cost_);
    }
}

void SpeculativeDecoder::emit_prompt_answers(std::span<Sequence* const> answered, const StepCallback& on_step) {
    // A sequence with the prompt's logits emits its first token from them: no draft, no target row.
    for (Sequence* seq : answered) {
        seq->gamma_ = 0;
        seq->drafted_.clear();
        seq->ngram_drafts_ = false;
        seq->ngram_found_ = 0;
        judge_emit_roll_back(*seq, on_step);
    }
}

void SpeculativeDecoder::finish(Sequence& seq, const StepCallback& on_step, std::span<const int32_t> step_tokens) {
    seq.finished_ = true;
    seq.stream_.finish();
    // The text the callback gets is taken before result.text is filled, so both hold all of it.
    const std::string_view rest = seq.stream_.take_stable();
    const std::span<const PositionVerdict> verdicts =
        step_tokens.empty() ? std::span<const PositionVerdict>() : seq.acceptance_.verdicts();
    if (on_step)
        on_step(StepResult{seq.id_, step_tokens, rest, true, verdicts, step_logprobs(seq, step_tokens.size())});
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

std::span<const float> ForwardResult::logits_row(int32_t i) const { return row_of(logits, n_vocab, i, "logits"); }

std::span<const float> ForwardResult::hidden_row(int32_t i) const { return row_of(hidden, n_embd, i, "hidden states"); }

std::span<const float> ForwardResult::row_of(const std::vector<float>& rows, int32_t width, int32_t i,
                                             const char* what) const {
    if (i < first_row || i >= n_tokens || rows.empty())
        throw Error(fmt::format("ForwardResult: no {} for row {} (rows {}..{}{})", what, i, first_row, n_tokens - 1,
                                rows.empty() ? ", none asked for" : ""));
    return std::span(rows).subspan(static_cast<size_t>(i - first_row) * static_cast<size_t>(width),
                                   static_cast<size_t>(width));
}

ForwardResult SpeculativeDecoder::forward(ModelRole role, std::span<const int32_t> tokens, bool with_hidden, int32_t id,
                                          int32_t first_row, std::optional<int32_t> cells_from) {
    ModelContext* ctx = role == ModelRole::Target ? &target_ctx_ : draft_ctx_.get();
    if (ctx == nullptr) throw Error("forward: the decoder has no draft model");
    if (to_int(tokens.size()) > ctx->n_ctx())
        throw Error(fmt::format("forward: {} tokens do not fit the context of {}", tokens.size(), ctx->n_ctx()));
    if (with_hidden && !ctx->has_hidden_states())
        throw Error("hidden states were requested from a context created without them");
    if (first_row < 0 || first_row > to_int(tokens.size()))
        throw Error(fmt::format("forward: first_row {} is outside 0..{}", first_row, tokens.size()));
    ForwardResult result;
    result.n_tokens = to_int(tokens.size());
    result.first_row = first_row;
    result.n_vocab = ctx->model().n_vocab();
    result.n_embd = ctx->model().n_embd();
    teacher_forced(
        *ctx, id, tokens,
        [&](size_t, int32_t row) {
            const std::span<const float> logits = ctx->logits(row);
            result.logits.insert(result.logits.end(), logits.begin(), logits.end());
            if (with_hidden) {
                const std::span<const float> hidden = ctx->hidden_state(row);
                result.hidden.insert(result.hidden.end(), hidden.begin(), hidden.end());
            }
        },
        static_cast<size_t>(first_row), /*keep_cells=*/false, cells_from);
    return result;
}

void SpeculativeDecoder::teacher_forced(ModelContext& ctx, int32_t id, std::span<const int32_t> tokens,
                                        const std::function<void(size_t index, int32_t row)>& on_row,
                                        size_t first_output, bool keep_cells, std::optional<int32_t> cells_from) {
    ctx.truncate(id, 0);
    KeptCells& kept = kept_.at(static_cast<size_t>(id));
    kept = {};  // whatever the id kept is overwritten
    size_t shared = 0;
    if (cells_from && *cells_from != id) {
        const KeptCells& source = kept_.at(static_cast<size_t>(*cells_from));
        const size_t valid = &ctx == &target_ctx_ ? source.tokens.size() : static_cast<size_t>(source.draft);
        shared =
            std::min(static_cast<size_t>(common_prefix(std::span(source.tokens).first(valid), tokens)), first_output);
        if (shared > 0) ctx.copy_prefix(*cells_from, id, to_int(shared));
    }
    ctx.forward_rows(
        id, tokens.subspan(shared), to_int(shared), [&](size_t index, int32_t row) { on_row(shared + index, row); },
        first_output - shared);
    if (keep_cells)
        kept.tokens.assign(tokens.begin(), tokens.end());
    else
        ctx.truncate(id, 0);
}

void SpeculativeDecoder::check_prompt(std::span<const int32_t> prompt_tokens) const {
    if (prompt_tokens.empty()) throw PromptError("the prompt is empty and the model adds no BOS token");
    if (to_int(prompt_tokens.size()) >= target_ctx_.n_ctx()) {
        throw PromptError(fmt::format("the prompt has {} tokens but the context holds {} (raise -c)",
                                      prompt_tokens.size(), target_ctx_.n_ctx()),
                          /*exceeds_context=*/true);
    }
}

std::vector<TokenLogprobs> SpeculativeDecoder::prompt_logprobs(std::span<const int32_t> tokens, int32_t n_top,
                                                               int32_t id) {
    check_prompt(tokens);
    std::vector<TokenLogprobs> logprobs;
    if (tokens.size() < 2) return logprobs;
    // Every token in the batch, the last one's output unused: the same batches as forward(), so the same
    // logits to the last bit (a batch's composition can change a CPU kernel's summation order). The cells stay
    // as the id's kept prompt: the echoed request's start() reuses them instead of decoding the prompt again.
    teacher_forced(
        target_ctx_, id, tokens,
        [&](size_t i, int32_t row) {
            if (i + 1 < tokens.size())
                logprobs.push_back(token_logprobs(target_ctx_.logits(row), tokens[i + 1], n_top));
        },
        0, /*keep_cells=*/true);
    return logprobs;
}

}  // namespace klspec
