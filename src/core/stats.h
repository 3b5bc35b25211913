// Counters and timings of one generation (docs/design.md, "Metrics").
#pragma once

#include <cstdint>

namespace klspec {

struct GenerationStats {
    int64_t prompt_tokens = 0;
    int64_t prompt_cached_tokens = 0;    // of prompt_tokens: reused from the target's cache, not prefilled
    int64_t emitted = 0;                 // generated tokens, the stop token excluded
    int64_t target_calls = 0;            // target forward passes after the prompt (verification calls)
    int64_t draft_calls = 0;             // draft forward passes after the prompt
    int64_t draft_prefilled_tokens = 0;  // tokens the draft caught up on outside its steps: the prompt (deferred
                                         // to the first drafted step) and spells without drafts
    int64_t drafted = 0;                 // draft tokens proposed to the judge
    int64_t accepted = 0;                // draft tokens kept
    int64_t relaxed_accepted = 0;        // draft tokens kept only because the judge relaxed them
    int64_t draft_length_sum = 0;        // Σ over target calls of the γ the draft policy chose
    int64_t target_only_steps = 0;  // target calls that verified no draft (γ 0, a draft cut short, no draft model)
    int64_t ngram_drafted = 0;      // of drafted and accepted: the n-gram drafter's (--spec-type ngram-*)
    int64_t ngram_accepted = 0;
    // With a judge span (core/judge_span.h): emitted tokens outside it (each the target's own choice), and
    // the positions there that the judge would have relaxed had the span been the whole output.
    int64_t outside_span = 0;
    int64_t span_blocked = 0;

    // Seconds. decode = draft + verify + judge + other; prompt processing is separate.
    double prompt_seconds = 0;
    double draft_seconds = 0;
    double verify_seconds = 0;
    double judge_seconds = 0;
    double other_seconds = 0;
    // Of draft + verify: the time inside llama_decode (the rest of decode time is the engine's own work).
    double llama_decode_seconds = 0;

    // Sums the counters and times of another run into this one (totals over a dataset).
    GenerationStats& operator+=(const GenerationStats& other) {
        prompt_tokens += other.prompt_tokens;
        prompt_cached_tokens += other.prompt_cached_tokens;
        emitted += other.emitted;
        target_calls += other.target_calls;
        draft_calls += other.draft_calls;
        draft_prefilled_tokens += other.draft_prefilled_tokens;
        drafted += other.drafted;
        accepted += other.accepted;
        relaxed_accepted += other.relaxed_accepted;
        draft_length_sum += other.draft_length_sum;
        target_only_steps += other.target_only_steps;
        ngram_drafted += other.ngram_drafted;
        ngram_accepted += other.ngram_accepted;
        outside_span += other.outside_span;
        span_blocked += other.span_blocked;
        prompt_seconds += other.prompt_seconds;
        draft_seconds += other.draft_seconds;
        verify_seconds += other.verify_seconds;
        judge_seconds += other.judge_seconds;
        other_seconds += other.other_seconds;
        llama_decode_seconds += other.llama_decode_seconds;
        return *this;
    }

    double decode_seconds() const { return draft_seconds + verify_seconds + judge_seconds + other_seconds; }
    // Mean accepted tokens: tokens per target call, the replacement/bonus token included.
    double mat() const { return target_calls ? double(emitted) / double(target_calls) : 0.0; }
    double acceptance_rate() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
    double mean_draft_length() const { return target_calls ? double(draft_length_sum) / double(target_calls) : 0.0; }
    double engine_seconds() const { return decode_seconds() - llama_decode_seconds; }
    double tokens_per_second() const { return decode_seconds() > 0 ? double(emitted) / decode_seconds() : 0.0; }
    double prompt_tokens_per_second() const {
        return prompt_seconds > 0 ? double(prompt_tokens) / prompt_seconds : 0.0;
    }
};

}  // namespace klspec
