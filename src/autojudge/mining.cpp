#include "autojudge/mining.h"

#include <map>
#include <utility>

#include <fmt/format.h>

#include "core/distribution_stats.h"
#include "core/error.h"
#include "core/judged_position.h"
#include "core/text_stream.h"
#include "eval/batch_decoding.h"
#include "eval/problem_scoring.h"

namespace klspec {

std::optional<std::string> final_answer(const Problem& problem, std::string_view response,
                                        std::span<const std::string> stop_strings) {
    TextStream answer(std::vector<std::string>(stop_strings.begin(), stop_strings.end()));
    answer.append(response);
    if (answer_kind(problem) == AnswerKind::kTestOutcome)
        return score_output(problem, answer.text()).correct ? "pass" : "fail";
    return extract_answer(problem.scorer, answer.text());
}

namespace {

// One problem's mining (the procedure in mining.h) as a job that mine_problems runs in a slot: it decodes each
// continuation as a Sequence on its own id, stepped together with other problems' continuations, and between
// them runs the teacher-forced passes, labels the swap and looks for the next mismatch.
class ProblemMiner final : public DecodingJob {
public:
    ProblemMiner(SpeculativeDecoder& decoder, const Problem& problem, const MiningOptions& options, int32_t id)
        : decoder_(decoder),
          problem_(problem),
          options_(options),
          target_(decoder.target()),
          id_(id),
          pass_id_(decoder.n_sequences() - 1),
          span_(options.span) {
        generation_.draft_max = options.draft_max;
        generation_.draft_policy = options.draft_policy;
        generation_.sampling.seed = options.seed;
        // Every continuation shares the prompt and part of the response with the one before: the miner's id
        // keeps its cells for the next, and the teacher-forced passes run on the last id (with one id they
        // overwrite them, and each continuation prefills the prompt again). The passes start from a copy of the
        // miner's cells, which hold the continuation just decoded: they compute only what follows the swap
        // (mining an MBPP+ problem took half its time recomputing the target's prompt and response for two rows).
        generation_.cache_prompt = true;
        generation_.stop_strings = options.stop_strings;
        sequence_ = target_.tokenize(problem.prompt, /*add_bos=*/true);
        P_ = static_cast<int32_t>(sequence_.size());
        start_continuation(sequence_, options.max_tokens, /*sampled=*/false);
    }

    // The continuation to step, or null once the problem is mined.
    Sequence* sequence() override { return continuation_ ? &*continuation_ : nullptr; }

    // After the step that finished the continuation: take in what it decoded, then go on to the next continuation.
    void advance() override {
        std::vector<int32_t> rest = continuation_->take_result().tokens;
        continuation_.reset();
        if (swapped_.empty()) {
            read_response(std::move(rest));
        } else {
            swapped_.insert(swapped_.end(), rest.begin(), rest.end());
            label_swap();
            ++i_;
        }
        find_next_swap();
    }

    ProblemMining take_result() {
        mining_.final_response.assign(sequence_.begin() + P_, sequence_.end());
        return std::move(mining_);
    }

private:
    // The target's continuation of `prefix` (prompt included): vanilla speculative decoding, which is lossless,
    // so greedy it is exactly the target's own greedy text, only faster.
    void start_continuation(std::vector<int32_t> prefix, int32_t budget, bool sampled) {
        generation_.max_tokens = budget;
        generation_.sampling.temperature = sampled ? options_.temperature : 0.0f;
        ++mining_.continuations;
        continuation_.emplace(decoder_.start(id_, std::move(prefix), generation_));
    }

    // The target's greedy response R, its answer A and the draft's pass over it.
    void read_response(std::vector<int32_t> response) {
        sequence_.insert(sequence_.end(), response.begin(), response.end());
        answer_ = final_answer(problem_, response_text(sequence_), options_.stop_strings);
        // Outputs from the prompt's last row on: the prompt's rows would only feed the 262,144-row head of a
        // large vocabulary.
        draft_pass_ = decoder_.forward(ModelRole::Draft, sequence_, /*with_hidden=*/false, pass_id_, P_ - 1, id_);
        ++mining_.forward_passes;
    }

    // From position i_ on: the next mismatch a judge may relax. Its continuation is started, or, after an end token
    // or at the length limit (nothing to continue), it is labelled at once and the search goes on.
    void find_next_swap() {
        swapped_.clear();
        for (; P_ + i_ < static_cast<int32_t>(sequence_.size()); ++i_) {
            const int32_t d = argmax(draft_pass_.logits_row(P_ + i_ - 1));
            if (d == sequence_[static_cast<size_t>(P_ + i_)]) continue;
            // Tokens before i_ never change (a swap changes i_ and after).
            for (; fed_ < i_; ++fed_) span_.feed(target_.piece(sequence_[static_cast<size_t>(P_ + fed_)], true));
            if (!SpanTracker(span_).feed_and_check(target_.piece(d, true))) continue;  // no judge may relax d here

            swapped_.assign(sequence_.begin(), sequence_.begin() + P_ + i_);
            swapped_.push_back(d);
            const int32_t budget = options_.max_tokens - (i_ + 1);
            if (!target_.is_end_of_generation(d) && budget > 0) {
                start_continuation(swapped_, budget, /*sampled=*/true);
                return;
            }
            label_swap();
        }
        swapped_.clear();
    }

    // Labels the mismatch at i_ from swapped_ (R[0..i_) + d and the target's continuation).
    void label_swap() {
        const int32_t i = i_;
        // The target's two rows (p_i and the hidden state after d) need nothing after d; the draft's rows from
        // p_i on become the draft pass of the response if the swap is kept.
        const ForwardResult target_pass =
            decoder_.forward(ModelRole::Target, std::span(swapped_).first(size_t(P_ + i + 1)), /*with_hidden=*/true,
                             pass_id_, P_ + i - 1, id_);
        ForwardResult swapped_draft_pass =
            decoder_.forward(ModelRole::Draft, swapped_, /*with_hidden=*/true, pass_id_, P_ + i - 1, id_);
        mining_.forward_passes += 2;

        MinedMismatch m;
        m.problem_id = problem_.id;
        m.position = i;
        m.draft_token = swapped_[static_cast<size_t>(P_ + i)];
        m.target_token = sequence_[static_cast<size_t>(P_ + i)];
        m.answer = answer_;
        m.answer_after_swap = final_answer(problem_, response_text(swapped_), options_.stop_strings);
        m.important = m.answer_after_swap != answer_;
        const std::span<const float> target_hidden = target_pass.hidden_row(P_ + i);
        const std::span<const float> draft_hidden = swapped_draft_pass.hidden_row(P_ + i);
        m.target_hidden.assign(target_hidden.begin(), target_hidden.end());
        m.draft_hidden.assign(draft_hidden.begin(), draft_hidden.end());
        // p_i and q_i are the rows that predicted position i (unchanged by the swap, which comes after them).
        DraftPosition position;
        position.target_logits = target_pass.logits_row(P_ + i - 1);
        position.draft_logits = swapped_draft_pass.logits_row(P_ + i - 1);
        position.draft_token = m.draft_token;
        const JudgedPosition stats = describe_position(position);
        m.kl = stats.kl;
        m.target_entropy = stats.target_entropy;
        m.draft_entropy = stats.draft_entropy;
        m.target_max_probability = stats.target_max_probability;

        if (!m.important) {  // the swap is harmless: its continuation becomes the response
            sequence_ = std::move(swapped_);
            draft_pass_ = std::move(swapped_draft_pass);
        }
        mining_.mismatches.push_back(std::move(m));
    }

    std::string response_text(std::span<const int32_t> tokens) const {
        return target_.text(tokens.subspan(static_cast<size_t>(P_)));
    }

    SpeculativeDecoder& decoder_;
    const Problem& problem_;
    const MiningOptions& options_;
    const Model& target_;
    const int32_t id_;       // this problem's continuations
    const int32_t pass_id_;  // the teacher-forced passes (shared by every problem: each pass is over when it returns)
    GenerationOptions generation_;
    int32_t P_ = 0;                  // prompt tokens
    std::vector<int32_t> sequence_;  // prompt + the current response R
    std::optional<std::string> answer_;
    ForwardResult draft_pass_;  // the draft's rows over sequence_, from the prompt's last on
    SpanTracker span_;
    int32_t fed_ = 0;               // response tokens fed to span_
    int32_t i_ = 0;                 // the position being labelled or searched
    std::vector<int32_t> swapped_;  // R[0..i_) + d (+ its continuation), while a swap is labelled
    std::optional<Sequence> continuation_;
    ProblemMining mining_;
};

}  // namespace

void mine_problems(SpeculativeDecoder& decoder, std::span<const Problem> problems, const MiningOptions& options,
                   int32_t parallel, const MinedProblemCallback& on_done) {
    if (!decoder.has_draft()) throw Error("mining needs a draft model (-md)");
    if (parallel < 1 || parallel >= decoder.n_sequences())
        throw Error("mine_problems: parallel must be in [1, the decoder's sequences - 1] (the last runs the passes)");
    std::vector<std::optional<ProblemMiner>> miners(static_cast<size_t>(parallel));
    std::map<size_t, std::pair<ProblemMining, double>> finished;  // waiting for an earlier problem to finish
    size_t emitted = 0;
    run_jobs(
        decoder, problems.size(), parallel,
        [&](size_t index, int32_t slot) -> DecodingJob& {
            return miners[static_cast<size_t>(slot)].emplace(decoder, problems[index], options, slot);
        },
        [&](size_t index, int32_t slot, double seconds) {
            std::optional<ProblemMiner>& miner = miners[static_cast<size_t>(slot)];
            finished.emplace(index, std::pair(miner->take_result(), seconds));
            miner.reset();
            for (auto it = finished.find(emitted); it != finished.end(); it = finished.find(++emitted)) {
                on_done(emitted, std::move(it->second.first), it->second.second);
                finished.erase(it);
            }
        });
}

std::vector<float> recompute_features(SpeculativeDecoder& decoder, const Problem& problem,
                                      std::span<const int32_t> final_response,
                                      std::span<const MinedPosition> mismatches) {
    std::vector<int32_t> sequence = decoder.target().tokenize(problem.prompt, /*add_bos=*/true);
    const int32_t P = static_cast<int32_t>(sequence.size());
    sequence.insert(sequence.end(), final_response.begin(), final_response.end());
    const int32_t pass_id = decoder.n_sequences() - 1;
    std::optional<ForwardResult> whole[2];  // each model's pass over the response, once a kept swap needs it
    std::vector<float> rows;
    for (const MinedPosition& m : mismatches) {
        if (m.position < 0 || static_cast<size_t>(m.position) >= final_response.size())
            throw Error(fmt::format("{}: a mismatch at {} is outside its response of {} tokens", problem.id, m.position,
                                    final_response.size()));
        const bool kept = final_response[static_cast<size_t>(m.position)] == m.draft_token;
        std::vector<int32_t> swapped;
        if (!kept) {
            swapped.assign(sequence.begin(), sequence.begin() + P + m.position);
            swapped.push_back(m.draft_token);
        }
        for (const ModelRole role : {ModelRole::Draft, ModelRole::Target}) {
            std::optional<ForwardResult>& pass = whole[role == ModelRole::Target];
            if (kept && !pass) pass = decoder.forward(role, sequence, /*with_hidden=*/true, pass_id, P);
            const ForwardResult own =
                kept ? ForwardResult{} : decoder.forward(role, swapped, /*with_hidden=*/true, pass_id, P + m.position);
            const std::span<const float> hidden = (kept ? *pass : own).hidden_row(P + m.position);
            rows.insert(rows.end(), hidden.begin(), hidden.end());
        }
    }
    return rows;
}

ProblemMining mine_problem(SpeculativeDecoder& decoder, const Problem& problem, const MiningOptions& options) {
    ProblemMining mined;
    mine_problems(decoder, std::span(&problem, 1), options, 1,
                  [&](size_t, ProblemMining&& mining, double) { mined = std::move(mining); });
    return mined;
}

}  // namespace klspec
