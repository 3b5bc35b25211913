// The draft / verify / judge / emit / roll-back loop of docs/design.md ("One speculative step") over many
// sequences at once, and target-only decoding as its special case without a draft.
//
// Shape (after CTranslate2's generator and llama.cpp's server): a Sequence holds everything one request
// owns; SpeculativeDecoder::step() advances every active sequence by one target call, drafting them in
// one batch per depth and verifying all their drafts in ONE target batch. generate() is a short loop
// over step() for one sequence; forward() is the teacher-forced verb (logits and hidden states of any
// token sequence) for mining and scoring. The step's stages live in drafting.cpp, draft_length_choice.cpp
// and verification.cpp (docs/architecture.md).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/acceptance.h"
#include "core/draft_length.h"
#include "core/judge.h"
#include "core/judge_span.h"
#include "core/judged_position.h"
#include "core/sampling.h"
#include "core/stats.h"
#include "core/text_stream.h"
#include "core/token_logprobs.h"
#include "engine/context.h"
#include "engine/model.h"
#include "engine/ngram_drafter.h"
#include "engine/prompt_cache.h"

namespace klspec {

// Who drafted a step: the draft model, or the n-gram drafter. Each has its own acceptance profile.
enum class DraftSource : uint8_t { Model, Ngram };
inline constexpr size_t kDraftSources = 2;

struct GenerationOptions {
    int32_t max_tokens = 128;  // -n: generated tokens at most
    int32_t draft_max = 16;    // γ: draft tokens proposed per target call at most
    // How γ is chosen each step. The CLI and server default to Auto (the cost model); Fixed here keeps
    // library callers' γ exactly as given.
    DraftPolicy draft_policy = DraftPolicy::Fixed;
    int32_t draft_min = 0;                  // a draft shorter than this is dropped (a target-only step), as llama.cpp
    float draft_p_min = 0.0f;               // stop drafting at a token whose draft probability is below this (0 = off)
    SamplingParams sampling;                // temperature, top-k, top-p, seed; the same for draft and target
    std::vector<std::string> stop_strings;  // stop when the text contains one (it is cut off)
    std::shared_ptr<const Judge> judge;     // the verification rule; null: vanilla
    // Token by token, or the block jointly (core/acceptance.h; sampling with the vanilla judge only).
    Verification verification = Verification::Token;
    // Where the judge may relax; outside, the exact test alone. A `think` span must have its markers
    // (resolve_judge_span in engine/chat_template.h reads them from the model's template).
    JudgeSpan judge_span;
    // Keep the sequence's cache cells when it finishes, and start a later sequence on the same id from the
    // longest prefix its prompt shares with them (llama-server's cache_prompt): only the rest is prefilled.
    bool cache_prompt = false;
    // The first token comes from the prompt's logits, as llama-server takes it: the prompt's last token is
    // prefilled with an output, and the first step emits that one token without a target call or a draft (a
    // server's time to first token is the prefill alone; docs/judges.md, "What MAT counts").
    bool first_token_from_prompt = false;
    // Set: every emitted token's log-probability under the target (core/token_logprobs.h), relaxed ones
    // included, with this many most likely alternatives (0..kMaxTopLogprobs).
    std::optional<int32_t> logprobs;
    // llama-server's /infill limits. n_indent: once the output has a new line, a line indented by fewer spaces
    // or tabs than this ends generation, cut after its indentation (core/text_stream.h); 0: off.
    int32_t min_line_indent = 0;
    // t_max_predict_ms: after this long generating, a token whose text holds a new line is the last one.
    std::optional<double> max_predict_seconds;
    // llama-server's --cache-reuse N: with cache_prompt, after the shared prefix, reuse every run of at least
    // this many kept tokens that the prompt holds further on, shifting their cache cells to the new positions
    // (an editor's moving window of context); 0: the shared prefix alone.
    int32_t cache_reuse_min_chunk = 0;
};

// Throws klspec::Error with a one-line reason for an unusable setting.
void validate(const GenerationOptions& options);

// Indentation and TimeLimit: GenerationOptions::min_line_indent and max_predict_seconds.
enum class StopReason { EndOfGeneration, MaxTokens, StopString, ContextFull, Cancelled, Indentation, TimeLimit };
std::string_view to_string(StopReason reason);

struct GenerationResult {
    std::string text;
    std::vector<int32_t> tokens;  // generated tokens, the stop token excluded
    // The end-of-generation token that ended it (stop_reason EndOfGeneration), else -1. llama-server's /infill and
    // /completion list it among their tokens and count it as predicted.
    int32_t end_of_generation_token = -1;
    std::vector<TokenLogprobs> logprobs;  // one per token when options.logprobs is set
    StopReason stop_reason = StopReason::MaxTokens;
    GenerationStats stats;
};

// What one step produced for one sequence (CTranslate2's GenerationStepResult).
struct StepResult {
    int32_t sequence_id = 0;
    std::span<const int32_t> tokens;  // emitted by this step (accepted drafts + the target's token)
    std::string_view text;            // text that became final in this step (never text a stop string removes)
    bool is_last = false;             // the sequence finished with this step
    // The step's judged draft positions (accepted, relaxed, then the rejected one if any): token i came
    // from the draft when verdict i is accepted or relaxed, else from the target.
    std::span<const PositionVerdict> verdicts;
    std::span<const TokenLogprobs> logprobs;  // one per token of `tokens` when options.logprobs is set
};
// Return true to stop the sequence after this step (stop_reason Cancelled).
using StepCallback = std::function<bool(const StepResult&)>;

// Called for every position the acceptance step examined, of every sequence (engine statistics added).
using JudgeObserver = std::function<void(const JudgedPosition&)>;

// Called after every step that decoded (`klspec bench --cost-trace`): the cost model's prediction and the measure.
using StepCostObserver = std::function<void(const StepCostRecord&)>;

// One request's whole state (llama.cpp server's slot, CTranslate2's batch entry). Created by
// SpeculativeDecoder::start, advanced by step(), read when finished().
class Sequence {
public:
    int32_t id() const { return id_; }
    bool finished() const { return finished_; }
    const GenerationResult& result() const { return result_; }
    GenerationResult take_result() { return std::move(result_); }
    const GenerationOptions& options() const { return options_; }

private:
    friend class SpeculativeDecoder;
    Sequence(int32_t id, GenerationOptions options);

    int32_t id_;
    GenerationOptions options_;
    std::shared_ptr<const Judge> judge_;
    std::vector<int32_t> tokens_;  // prompt + accepted output
    int32_t target_cached_ = 0;    // positions cached in the target (all but the last token)
    // Chunked prefill (SpeculativeDecoder::set_prefill_chunk): prompt tokens still to prefill in later steps'
    // batches, target_cached_ counting those done; and how many this step's batch holds.
    int32_t prompt_left_ = 0;
    int32_t prompt_in_batch_ = 0;
    std::chrono::steady_clock::time_point prompt_start_;  // when start() began: a prompt's time runs to its last chunk
    int32_t draft_cached_ = 0;                            // positions cached in the draft
    // Tokens before the last one that the draft has not read (the prompt, deferred; a target-only spell): one is
    // a step's usual catch-up, read in its first draft call; more are prefilled first (prefill_draft_gaps).
    int32_t draft_gap() const { return static_cast<int32_t>(tokens_.size()) - 1 - draft_cached_; }
    // The sequence holds a token the draft's vocabulary lacks (a target larger than its draft: the draft
    // cannot read it), so it decodes target-only from there (docs/judges.md, "Pairs whose vocabularies differ").
    bool draft_unreadable_ = false;
    int32_t draft_budget_ = 0;  // γ for the next step under Fixed / Adaptive: draft_max, or the adaptive value
    int32_t gamma_ = 0;         // this step's γ: chosen by the policy, capped by -n and the context
    // This step's draft comes from the n-gram drafter (found before γ is chosen), not the draft model.
    bool ngram_drafts_ = false;
    int32_t ngram_found_ = 0;  // tokens the n-gram proposed this step (used or not)
    DraftSource draft_source() const { return ngram_drafts_ ? DraftSource::Ngram : DraftSource::Model; }
    // Running per-position acceptance (the cost model's α) of each drafter's drafts, whose prior is the
    // decoder-wide estimate of that drafter.
    std::array<AcceptanceEstimate, kDraftSources> acceptance_estimates_;
    Rng rng_;
    TextStream stream_;
    std::chrono::steady_clock::time_point generation_start_;  // when the prompt was cached (max_predict_seconds)
    SpanTracker span_;                    // the judge span over the prompt (think spans) and the output so far
    std::vector<uint8_t> draft_in_span_;  // per drafted token this step: the span is open before and after it
    AcceptanceStep acceptance_;
    bool finished_ = false;
    GenerationResult result_;
    // Per step: the drafted tokens, their shaped q rows (and softmax when sampling), hidden states.
    std::vector<int32_t> drafted_;
    std::vector<float> draft_rows_;
    std::vector<float> draft_probs_;
    std::vector<float> draft_hidden_;
    std::vector<float> target_rows_;
    // first_token_from_prompt: the target's logits after the whole prompt, until the first step reads them.
    std::vector<float> prompt_logits_;
    std::vector<uint8_t> target_row_shaped_;  // which target rows this step has shaped (sampling only)
    int32_t verify_row_ = 0;                  // batch row of `last` in the step's target batch
    std::vector<int32_t> emitted_;
};

// Logits (and hidden states) of a teacher-forced pass: row i is the model's output after token i, for the
// rows from first_row on (the earlier ones were not asked for).
struct ForwardResult {
    int32_t n_tokens = 0;
    int32_t n_vocab = 0;
    int32_t n_embd = 0;
    int32_t first_row = 0;
    std::vector<float> logits;  // (n_tokens − first_row) × n_vocab
    std::vector<float> hidden;  // (n_tokens − first_row) × n_embd, when asked for
    // Row i's outputs, first_row ≤ i < n_tokens (klspec::Error otherwise).
    std::span<const float> logits_row(int32_t i) const;
    std::span<const float> hidden_row(int32_t i) const;

private:
    std::span<const float> row_of(const std::vector<float>& rows, int32_t width, int32_t i, const char* what) const;
};

enum class ModelRole { Target, Draft };

class SpeculativeDecoder {
public:
    // `draft` may be null: no draft model. With n-gram drafters (`ngram.types`), they draft first and the
    // draft model where they find nothing; with neither, target-only decoding. Throws klspec::Error on an
    // unusable pair or options.
    SpeculativeDecoder(const Model& target, const Model* draft, const ContextOptions& options,
                       const NgramOptions& ngram = {});

    // Tokenizes the prompt and caches it in both models under sequence id `id` (< n_sequences), which
    // must not be in use by an unfinished sequence.
    Sequence start(int32_t id, const std::string& prompt, GenerationOptions options);
    // The same from tokens (BOS included when the model wants one): continuing a token-level prefix.
    Sequence start(int32_t id, std::vector<int32_t> prompt_tokens, GenerationOptions options);
    // How many of `prompt_tokens` a sequence started on `id` with cache_prompt would reuse from what the id's
    // cache holds (all but the last prompt token at most).
    int32_t reusable_prompt(int32_t id, std::span<const int32_t> prompt_tokens) const;
    // The tokens the id's target cache holds for a next sequence to reuse (none while a sequence runs on it).
    int32_t cached_tokens(int32_t id) const;
    // Advances every unfinished sequence by one target call. Sequences may start and finish between steps.
    void step(std::span<Sequence* const> sequences, const StepCallback& on_step = {});

    GenerationResult generate(const std::string& prompt, GenerationOptions options, const StepCallback& on_step = {});

    // Teacher-forced logits (and hidden states when `with_hidden`; the context must have them) of `tokens`
    // from position 0, chunked by the batch size, using sequence id `id` (its cache is overwritten). Only the
    // rows from first_row on are output: the rows before it skip the output head, which on a large
    // vocabulary costs more than the layers (262,144 rows: a long prompt's logits would be gigabytes).
    // With `cells_from`, another id whose cells a finished cache_prompt sequence kept: the prefix those cells
    // share with tokens[0, first_row) is copied, not computed again (AutoJudge mining's passes over the
    // continuation just decoded). The rows then come from cells decoded in other batches, which on a CPU
    // can differ from a fresh pass in the last bits (as a decode step's rows do).
    ForwardResult forward(ModelRole role, std::span<const int32_t> tokens, bool with_hidden, int32_t id = 0,
                          int32_t first_row = 0, std::optional<int32_t> cells_from = std::nullopt);
    // The target's teacher-forced log-probability of each of tokens[1..] given the tokens before it, with
    // the n_top most likely alternatives (OpenAI's echoed prompt logprobs; tokens[0] has none): one pass
    // on sequence id `id`, holding one chunk's logits at a time. The id's cache then holds `tokens`, kept as a
    // finished sequence's prompt is (a start() with cache_prompt reuses them).
    std::vector<TokenLogprobs> prompt_logprobs(std::span<const int32_t> tokens, int32_t n_top, int32_t id);

    // Prefills prompts with `repacked_target`: the target's file loaded again with llama.cpp's repacked kernels
    // (ModelOptions::repack), whose prompt processing is up to twice as fast on a CPU, in a context of its own; the
    // cells then move into the target's context (the cells a prompt reuses move there first), where decoding and
    // verification keep the batch-invariant kernels. Target-only and speculative decoding prefill alike, so
    // speculative output stays target-only output; the prompt's cells, and so the output, differ from a prompt
    // prefilled unrepacked at near ties. Costs a second KV cache of the target's size (llama.cpp moves a sequence's
    // cells only between contexts with as many sequences). Before any sequence starts: it first prefills a short
    // prompt both ways in sequence 0 and returns why the repacked prompts are not used where the kernels disagree
    // (as llama.cpp's repacked Q4_K kernels after flash attention do on an AMX Xeon), nullopt where they are.
    std::optional<std::string> use_repacked_prompts(const Model& repacked_target);
    // Keeps the cells a slot loses to another prompt in host memory, up to max_bytes (< 0: no limit, 0: off), and
    // loads them back for a later prompt that shares more with them than with its slot's cells: llama-server's
    // prompt cache (--cache-ram). Sequences with cache_prompt only. The cells come back bit for bit, so the output
    // is a cold prompt's.
    void use_prompt_cache(int64_t max_bytes);
    // Chunked prefill (vLLM's, llama-server's mixed batches): a sequence's prompt is no longer prefilled whole in
    // start() but `tokens` at most a step, in the same target batch as the running sequences' verification rows,
    // so their streams keep flowing while a long prompt arrives. 0 (the default): whole, in start(). Batch-invariant
    // kernels make a prompt's cells the same either way. Not with use_repacked_prompts, whose prompts stay whole.
    void set_prefill_chunk(int32_t tokens);
    const PromptCache* prompt_cache() const { return prompt_cache_.get(); }
    void set_observer(JudgeObserver observer) { observer_ = std::move(observer); }
    void set_step_cost_observer(StepCostObserver observer) { step_cost_observer_ = std::move(observer); }
    bool has_draft() const { return draft_ctx_ != nullptr; }
    bool has_ngram_drafter() const { return ngram_ != nullptr; }
    int32_t n_sequences() const { return target_ctx_.n_sequences(); }
    const Model& target() const { return target_; }
    // Wall time inside llama_decode, every context (target, draft, prompt), since construction (the rest of a step
    // is the engine's).
    double llama_decode_seconds() const;
    // The target's llama_decode calls since construction (prompt chunks included).
    int64_t target_decode_calls() const { return target_ctx_.decode_calls(); }
    // The measured step costs the Auto draft policy decides on: seconds of a target (verify) and a draft
    // llama_decode against batch size. Empty until a sequence under Auto has stepped.
    const BatchCostCurve& verify_costs() const { return verify_costs_; }
    const BatchCostCurve& draft_costs() const { return draft_costs_; }
    // The draft's catch-up prefill of `gap` tokens (the step's last one included): at the rate timed so far,
    // else at time_step_costs' prefill rate.
    double draft_catch_up_seconds(int32_t gap) const;
    // The n-gram drafter's measured seconds per sequence lookup (0 before the first).
    double ngram_lookup_seconds() const { return ngram_lookup_seconds_; }
    // Replaces the measured costs and stops measuring (tests with fake costs; a caller with a cost model
    // of its own): the Auto policy then decides on these curves and this catch-up price alone (the draft's
    // prefill of what its cache lacks, seconds per token).
    void set_step_costs(BatchCostCurve verify, BatchCostCurve draft, double draft_catch_up_seconds_per_token);
    // Times the Auto policy's starting curves now, for steps of up to `draft_max` drafts on every sequence,
    // instead of inside the first step that needs them (a few target calls of up to n_sequences ×
    // (draft_max + 1) tokens: seconds on a big CPU target). A server calls it before it listens, so its first
    // request does not wait for it, on the thread that will decode (server::Scheduler::run_on_decoder_thread:
    // decoding from two threads slows every later call). Uses sequence id 0, which must hold no cells; a no-op without
    // a draft model or n-gram drafter, or once the curves exist.
    void calibrate_step_costs(int32_t draft_max);

private:
    // A teacher-forced pass over `tokens` from position 0 on sequence id `id` of `ctx` (what the id kept is
    // dropped; its cells are freed afterwards), on_row as ModelContext::forward_rows.
    // keep_cells (the target's context only): the tokens' cells stay, as the id's kept prompt.
    // cells_from: start from the cells that id kept in `ctx`, for the prefix they share with the tokens
    // before first_output (forward()).
    void teacher_forced(ModelContext& ctx, int32_t id, std::span<const int32_t> tokens,
                        const std::function<void(size_t index, int32_t row)>& on_row, size_t first_output = 0,
                        bool keep_cells = false, std::optional<int32_t> cells_from = std::nullopt);
    // How many leading tokens of `prompt` the id's cells in `ctx` hold after reusing what it kept (`kept`):
    // the shared prefix, then with min_chunk > 0 the runs shifted into place (cache_reuse_min_chunk). The
    // cells past that are stale: the caller truncates them.
    static int32_t reuse_kept_cells(ModelContext& ctx, int32_t id, std::span<const int32_t> kept,
                                    std::span<const int32_t> prompt, int32_t min_chunk);
    // The same count without touching a context; on_shift(from, n, to) is told each run moved left.
    using ShiftRun = std::function<void(int32_t from, int32_t n, int32_t to)>;
    static int32_t reusable_kept_cells(std::span<const int32_t> kept, std::span<const int32_t> prompt,
                                       int32_t min_chunk, const ShiftRun& on_shift);
    // Throws PromptError for a prompt that is empty or leaves no room to generate in the context.
    void check_prompt(std::span<const int32_t> prompt_tokens) const;
    // Prefills `tokens` at positions first_pos.. of sequence `id` in the target's cache, in the prompt context when
    // there is one (use_repacked_prompts); with `logits_out`, the last token outputs and its logits are copied there.
    void prefill_prompt(int32_t id, std::span<const int32_t> tokens, int32_t first_pos, std::vector<float>* logits_out);
    // The step's stages, in order (docs/design.md "One speculative step"). 0. The draft length
    // (draft_length_choice.cpp): every active sequence's γ from its policy, the Auto ones chosen together.
    void choose_draft_lengths_for(std::span<Sequence* const> active);
    // The sequence as the cost model sees it, drafting with `drafter`.
    DraftCandidate draft_candidate(const Sequence& seq, DraftSource drafter, int32_t min_length,
                                   int32_t max_length) const;
    // What a DraftProbe of the candidate would add to a target-only step, in target-only steps: its draft and
    // verification, and for the draft model its whole catch-up.
    double probe_cost_in_steps(const DraftCandidate& candidate) const;
    // Times target batches up to the largest a step can send (every sequence drafting `draft_max`) and
    // draft batches up to two tokens per sequence, all of `token` on sequence `id` from the given positions
    // (the cells are removed afterwards): the cost model's starting curves; and draft prefill batches of one and
    // of kTimedPrefill tokens, whose slope prices a catch-up until one is timed.
    void time_step_costs(int32_t token, int32_t id, int32_t target_pos, int32_t draft_pos, int32_t draft_max);

    // 1. Drafting (drafting.cpp), the n-gram drafters and the draft model behind one seam. The n-gram
    // drafter's proposals, up to each sequence's cap, for the sequences that may draft (before γ is chosen).
    void lookup_ngram_drafts(std::span<Sequence* const> active);
    void draft_all(std::span<Sequence* const> active);
    // Takes the n-gram drafts cut to γ; returns the sequences the draft model drafts for.
    std::vector<Sequence*>& take_ngram_drafts(std::span<Sequence* const> active);
    // What the draft lacks beyond a step's usual catch-up (the prompt, deferred from start(); tokens emitted
    // while the sequence did not draft), prefilled in chunks outside the step's batches and cost records.
    void prefill_draft_gaps(std::span<Sequence* const> drafting);
    // The draft model's depth 0: the tokens its cache lacks, up to `last`.
    void add_draft_catch_up(std::span<Sequence* const> drafting);
    // Reads one draft row of the sequence (its hidden state, its next draft token); true when that token
    // must be fed at the next depth.
    bool draft_from_row(Sequence& seq, int32_t row);
    struct DraftPick {
        int32_t token;
        float probability;  // under the draft's shaped distribution (1 when nobody reads it)
    };
    DraftPick pick_draft_token(Sequence& seq, int32_t row);

    // 2. Verification (verification.cpp): every sequence's `last` and drafts in ONE target batch, and the
    // prefilling sequences' next prompt chunks in the room the batch has left (set_prefill_chunk).
    void verify_all(std::span<Sequence* const> active, std::span<Sequence* const> prefilling);
    // Each prefilling sequence's share of this step's prompt rows, in order, `room` rows in all; returns the sum.
    int32_t plan_prompt_chunks(std::span<Sequence* const> prefilling, int32_t room);
    void add_prompt_chunk(Sequence& seq);
    // After the batch: advances each chunk's sequence; those whose prompt is complete get its timing, and with
    // first_token_from_prompt the logits of its last token, and join `answered`.
    void complete_prompt_chunks(std::span<Sequence* const> prefilling, std::vector<Sequence*>& answered);
    // The target's row i of the sequence's step: of the verification batch, or the prompt's logits.
    std::span<const float> target_row(const Sequence& seq, int32_t i) const;
    // The first token of each sequence that holds its prompt's logits (first_token_from_prompt), stages 3-6 alone.
    void emit_prompt_answers(std::span<Sequence* const> answered, const StepCallback& on_step);
    // 3-6 for one sequence: the acceptance run, the evidence and statistics, emission, rollback.
    void judge_emit_roll_back(Sequence& seq, const StepCallback& on_step);
    class StepPositions;  // what the acceptance step reads at each draft position
    // 3. Acceptance: judges in order up to the first rejection; sets the sequence's emitted tokens.
    StepOutcome judge(Sequence& seq, StepPositions& positions);
    // 4. The cost model's evidence (draft_length_choice.cpp): each drafter's acceptance, llama.cpp's
    // drafters told what was kept; the acceptance rate this step's γ was chosen on; Adaptive's next budget.
    void record_drafter_evidence(Sequence& seq, const StepOutcome& outcome);
    double acceptance_estimate(const Sequence& seq) const;
    void adapt_draft_budget(Sequence& seq, const StepOutcome& outcome);
    // The step's statistics, and every judged position to the observer.
    void record_step_stats(Sequence& seq, const StepOutcome& outcome);
    void observe(const Sequence& seq, StepPositions& positions, double chosen_on);
    // 5. Emission with the stop rules, the callback told; true when the sequence finished.
    bool emit(Sequence& seq, const StepCallback& on_step);
    // Appends the step's tokens to the output until a stop rule ends it; returns how many were emitted.
    size_t append_until_stop(Sequence& seq);
    // 6. Rollback: both caches keep `last` and the accepted drafts.
    void roll_back(Sequence& seq, const StepOutcome& outcome);
    // Marks the sequence finished (its stop reason already set), tells the callback, frees its cache cells.
    void finish(Sequence& seq, const StepCallback& on_step, std::span<const int32_t> step_tokens = {});

    // The tokens whose cells an id no sequence runs on keeps (cache_prompt): all of them in the target's
    // cache, the first `draft` in the draft's (which may lag behind).
    struct KeptCells {
        std::vector<int32_t> tokens;
        int32_t draft = 0;
    };
    // use_prompt_cache: before a sequence starts on `id`, trades what the id kept (`kept`) with the cache.
    void swap_with_prompt_cache(int32_t id, KeptCells& kept, std::span<const int32_t> prompt, int32_t min_chunk);

    const Model& target_;
    ModelContext target_ctx_;
    ContextOptions context_options_;
    std::unique_ptr<ModelContext> prompt_ctx_;  // use_repacked_prompts' context: the repacked target's
    // The two vocabulary sizes (llama.cpp lets them differ by up to 128): the target verifies ids below
    // n_target_vocab_ only, the draft reads ids below n_draft_vocab_ only.
    int32_t n_target_vocab_ = 0;
    int32_t n_draft_vocab_ = 0;
    std::unique_ptr<ModelContext> draft_ctx_;
    std::unique_ptr<NgramDrafter> ngram_;
    double ngram_lookup_seconds_ = 0;  // running mean per sequence lookup
    Batch target_batch_;
    Batch draft_batch_;
    // Per step, kept to reuse their memory: the unfinished sequences, those drafting, and each drafting
    // sequence's row in the current draft batch.
    std::vector<Sequence*> active_;
    std::vector<Sequence*> answered_by_prompt_;  // sequences whose step reads the prompt's logits
    std::vector<Sequence*> prefilling_;          // sequences whose prompt is still coming in chunks
    int32_t prefill_chunk_ = 0;                  // set_prefill_chunk's
    std::vector<Sequence*> drafting_;
    std::vector<int32_t> draft_rows_of_;
    std::vector<int32_t> draft_caps_;        // each active sequence's largest γ this step
    std::vector<int32_t> model_draft_caps_;  // the same for the draft model
    ShapingScratch shaping_;                 // scratch for top-k / top-p
    BatchCostCurve verify_costs_;            // measured at every target / draft llama_decode of a step
    BatchCostCurve draft_costs_;
    double draft_catch_up_seconds_ = 0;  // prefill_draft_gaps' llama_decode time and tokens, all sequences
    int64_t draft_catch_up_tokens_ = 0;
    // The draft's prefill seconds a token, the slope between prefill batches of one and kTimedPrefill tokens
    // timed with the step costs: a catch-up's price until one is timed (time_step_costs).
    static constexpr int32_t kTimedPrefill = 16;
    static constexpr int32_t kRepackedPrefill = 4;  // prompts of fewer new tokens prefill in the target's context
    double draft_prefill_seconds_per_token_ = 0;
    bool costs_calibrated_ = false;
    TargetOnlyRetime target_only_retime_;
    // Auto: drafts again now and then after choosing target-only. One for the decoder, not one a sequence: its
    // budget is a share of all sequences' target-only steps, so a process (a bench over many problems, a server)
    // probes once their work has paid for it, even where each answer alone is too short to (a HumanEval answer of
    // the real pair: ~235 steps against a probe priced at ~430, its draft's catch-up of the prompt included).
    DraftProbe probe_;
    // All sequences' drafting steps, per drafter, and the same by draft depth.
    std::array<AcceptanceEstimate, kDraftSources> decoder_acceptance_{
        AcceptanceEstimate(AcceptanceEstimate::kDecoderDecay), AcceptanceEstimate(AcceptanceEstimate::kDecoderDecay)};
    std::array<DepthAcceptance, kDraftSources> depth_acceptance_;
    bool measure_costs_ = true;
    JudgeObserver observer_;
    StepCostObserver step_cost_observer_;
    StepCostRecord step_cost_;                   // the current step's, filled while step_cost_observer_ is set
    std::vector<KeptCells> kept_;                // per sequence id
    std::unique_ptr<PromptCache> prompt_cache_;  // use_prompt_cache's
};

}  // namespace klspec
