#include "engine/speculative_decoder.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/acceptance.h"
#include "core/error.h"
#include "core/text_stream.h"

namespace klspec {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

void validate(const GenerationOptions& options) {
    if (options.max_tokens < 0) throw Error(fmt::format("max tokens must be >= 0, got {}", options.max_tokens));
    if (options.draft_max <= 0) throw Error(fmt::format("draft-max (gamma) must be >= 1, got {}", options.draft_max));
    const SamplingParams& s = options.sampling;
    if (!(s.temperature >= 0.0f)) throw Error(fmt::format("temperature must be >= 0, got {}", s.temperature));
    if (s.top_k < 0) throw Error(fmt::format("top-k must be >= 0, got {}", s.top_k));
    if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) throw Error(fmt::format("top-p must be in (0, 1], got {}", s.top_p));
}

}  // namespace

std::string_view to_string(StopReason reason) {
    switch (reason) {
        case StopReason::EndOfGeneration: return "eos";
        case StopReason::MaxTokens: return "max_tokens";
        case StopReason::StopString: return "stop_string";
        case StopReason::ContextFull: return "context_full";
    }
    return "unknown";
}

SpeculativeDecoder::SpeculativeDecoder(const Model& target, const Model* draft, const ContextOptions& options)
    : target_(target), target_ctx_(target, options), hidden_states_(options.hidden_states) {
    if (draft != nullptr) {
        require_same_vocabulary(target, *draft);
        draft_ctx_ = std::make_unique<ModelContext>(*draft, options);
    }
}

GenerationResult SpeculativeDecoder::generate(const std::string& prompt, const GenerationOptions& options,
                                              Judge& judge, const TextCallback& on_text) {
    validate(options);
    GenerationResult result;
    GenerationStats& stats = result.stats;
    const int32_t n_vocab = target_.n_vocab();
    const int32_t n_ctx = target_ctx_.n_ctx();

    std::vector<int32_t> prompt_tokens = target_.tokenize(prompt, /*add_bos=*/true);
    if (prompt_tokens.empty()) throw Error("the prompt is empty and the model adds no BOS token");
    if (static_cast<int32_t>(prompt_tokens.size()) >= n_ctx) {
        throw Error(fmt::format("the prompt has {} tokens but the context holds {} (raise -c)", prompt_tokens.size(),
                                n_ctx));
    }
    stats.prompt_tokens = static_cast<int64_t>(prompt_tokens.size());

    // Both caches hold every accepted token except the last one, which the next step feeds.
    auto start = Clock::now();
    const std::span<const int32_t> cached_prompt(prompt_tokens.data(), prompt_tokens.size() - 1);
    target_ctx_.clear();
    target_ctx_.decode(cached_prompt, 0, Outputs::None);
    if (draft_ctx_) {
        draft_ctx_->clear();
        draft_ctx_->decode(cached_prompt, 0, Outputs::None);
    }
    stats.prompt_seconds = seconds_since(start);

    Rng rng(options.sampling.seed);
    AcceptanceStep acceptance(options.sampling, judge);
    TextStream stream(options.stop_strings);
    std::vector<int32_t> sequence = prompt_tokens;  // prompt + accepted output
    int32_t n_past = static_cast<int32_t>(cached_prompt.size());  // positions cached in the target
    int32_t draft_n_past = n_past;                                 // positions cached in the draft
    int32_t last = prompt_tokens.back();

    const size_t gamma = static_cast<size_t>(draft_ctx_ ? options.draft_max : 0);
    std::vector<int32_t> drafted;             // d_1..d_k
    std::vector<float> draft_rows;            // shaped q_1..q_k, row-major
    const bool shape_target = !options.sampling.greedy();
    std::vector<float> target_rows(shape_target ? (gamma + 1) * n_vocab : 0);  // shaped p_i, filled lazily
    std::vector<float> draft_probs;
    const bool want_hidden = judge.needs_hidden_states();
    if (want_hidden && !hidden_states_) {
        throw Error(fmt::format("the {} rule needs hidden states: create the decoder with "
                                "ContextOptions::hidden_states", judge.name()));
    }
    std::vector<float> draft_hidden;  // h_draft for d_1..d_k, row-major
    std::vector<int32_t> verify_batch;
    drafted.reserve(gamma);
    draft_rows.reserve(gamma * n_vocab);
    verify_batch.reserve(gamma + 1);

    result.stop_reason = StopReason::MaxTokens;
    bool done = options.max_tokens == 0;
    while (!done) {
        if (n_past + 1 > n_ctx) {
            result.stop_reason = StopReason::ContextFull;
            break;
        }
        const int32_t wanted = options.max_tokens - static_cast<int32_t>(stats.emitted);
        const int32_t n_draft = std::min({static_cast<int32_t>(gamma), wanted - 1, n_ctx - n_past - 1});

        // 1. Draft: the draft first catches up with the accepted sequence, then proposes n_draft tokens.
        start = Clock::now();
        drafted.clear();
        draft_rows.clear();
        draft_hidden.clear();
        if (n_draft > 0) {
            draft_ctx_->decode(std::span<const int32_t>(sequence).subspan(draft_n_past), draft_n_past, Outputs::Last);
            ++stats.draft_calls;
            int32_t pos = static_cast<int32_t>(sequence.size());
            while (true) {
                const size_t row = draft_rows.size();
                draft_rows.resize(row + n_vocab);
                std::span<float> q(draft_rows.data() + row, n_vocab);
                const std::span<const float> raw = draft_ctx_->logits(-1);
                int32_t token;
                if (options.sampling.greedy()) {
                    std::copy(raw.begin(), raw.end(), q.begin());
                    token = argmax(q);
                } else {
                    shape_logits(raw, options.sampling, q);
                    softmax(q, draft_probs);
                    token = sample_from_weights(draft_probs, rng);
                }
                drafted.push_back(token);
                const bool last_draft =
                    static_cast<int32_t>(drafted.size()) == n_draft || target_.is_end_of_generation(token);
                // The draft's hidden state for d_i comes from its forward over d_i: for d_k that is one
                // decode more, needed only by judges that read hidden states.
                if (last_draft && !want_hidden) break;
                draft_ctx_->decode(std::span<const int32_t>(&token, 1), pos++, Outputs::Last);
                ++stats.draft_calls;
                if (want_hidden) {
                    const std::span<const float> h = draft_ctx_->hidden_state(-1);
                    draft_hidden.insert(draft_hidden.end(), h.begin(), h.end());
                }
                if (last_draft) break;
            }
            draft_n_past = pos;
        }
        stats.draft_seconds += seconds_since(start);

        // 2. Verify: last, d_1..d_k in one target batch.
        start = Clock::now();
        verify_batch.assign(1, last);
        verify_batch.insert(verify_batch.end(), drafted.begin(), drafted.end());
        target_ctx_.decode(verify_batch, n_past, Outputs::All);
        ++stats.target_calls;
        stats.verify_seconds += seconds_since(start);

        // 3 + 4. Judge in order, stop at the first rejection, take the replacement or bonus token.
        start = Clock::now();
        const int32_t k = static_cast<int32_t>(drafted.size());
        auto target_logits = [&](int32_t i) -> std::span<const float> {
            if (!shape_target) return target_ctx_.logits(i);
            const std::span<float> row(target_rows.data() + static_cast<size_t>(i) * n_vocab, n_vocab);
            shape_logits(target_ctx_.logits(i), options.sampling, row);
            return row;
        };
        const PositionSource position = [&](int32_t i) {
            DraftPosition p;
            p.target_logits = target_logits(i);
            p.draft_logits = std::span<const float>(draft_rows.data() + static_cast<size_t>(i) * n_vocab, n_vocab);
            p.draft_token = drafted[i];
            if (want_hidden) {
                const size_t n_embd = static_cast<size_t>(draft_ctx_->model().n_embd());
                p.draft_hidden = std::span<const float>(draft_hidden.data() + static_cast<size_t>(i) * n_embd, n_embd);
                p.target_hidden = target_ctx_.hidden_state(i + 1);  // batch index 0 holds `last`
            }
            return p;
        };
        const StepOutcome outcome = acceptance.run(k, position, target_logits(k), rng);
        stats.drafted += k;
        stats.accepted += outcome.accepted;
        stats.relaxed_accepted += outcome.relaxed_accepted;
        stats.judge_seconds += seconds_since(start);

        // Emit: accepted drafts, then the target's token; stop at EOG, a stop string or -n.
        start = Clock::now();
        std::vector<int32_t> emitted(drafted.begin(), drafted.begin() + outcome.accepted);
        emitted.push_back(outcome.next_token);
        for (const int32_t token : emitted) {
            ++stats.emitted;
            if (target_.is_end_of_generation(token)) {
                result.stop_reason = StopReason::EndOfGeneration;
                done = true;
                break;
            }
            result.tokens.push_back(token);
            sequence.push_back(token);
            if (stream.append(target_.piece(token))) {
                result.stop_reason = StopReason::StopString;
                done = true;
                break;
            }
            if (static_cast<int32_t>(result.tokens.size()) >= options.max_tokens) {
                done = true;
                break;
            }
        }
        if (on_text) {
            if (done) stream.finish();
            if (const std::string_view text = stream.take_stable(); !text.empty()) on_text(text);
        }

        // 5. Roll back: keep `last` and the accepted drafts in both caches (nothing to drop when every
        // draft was kept).
        n_past += 1 + outcome.accepted;
        last = outcome.next_token;
        if (outcome.accepted < k) target_ctx_.truncate(n_past);
        if (draft_ctx_ && draft_n_past > n_past) {
            draft_n_past = n_past;
            draft_ctx_->truncate(draft_n_past);
        }
        stats.other_seconds += seconds_since(start);
    }
    result.text = stream.text();
    return result;
}

}  // namespace klspec
