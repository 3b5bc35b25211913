#include "autojudge/mining.h"

#include <fmt/format.h>

#include "core/distribution_stats.h"
#include "core/error.h"
#include "core/judged_position.h"
#include "core/text_stream.h"
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

ProblemMining mine_problem(SpeculativeDecoder& decoder, const Problem& problem, const MiningOptions& options) {
    if (!decoder.has_draft()) throw Error("mining needs a draft model (-md)");
    const Model& target = decoder.target();
    GenerationOptions generation;
    generation.draft_max = options.draft_max;
    generation.draft_policy = options.draft_policy;
    generation.sampling.seed = options.seed;
    // Every continuation shares the prompt and part of the response with the one before: sequence id 0
    // keeps its cells for the next, and the teacher-forced passes run on the last id (with one id they
    // overwrite them, and each continuation prefills the prompt again). The passes start from a copy of id
    // 0's cells, which hold the continuation just decoded: they compute only what follows the swap (mining
    // an MBPP+ problem took half its time recomputing the target's prompt and response for two rows).
    generation.cache_prompt = true;
    generation.stop_strings = options.stop_strings;
    const int32_t pass_id = decoder.n_sequences() - 1;

    // The target's continuation of `prefix` (prompt included): vanilla speculative decoding, which is
    // lossless, so greedy it is exactly the target's own greedy text, only faster.
    ProblemMining mining;
    const auto continuation = [&](std::vector<int32_t> prefix, int32_t budget, bool sampled) {
        generation.max_tokens = budget;
        generation.sampling.temperature = sampled ? options.temperature : 0.0f;
        if (budget <= 0) return std::vector<int32_t>{};
        ++mining.continuations;
        Sequence seq = decoder.start(0, std::move(prefix), generation);
        Sequence* const batch[] = {&seq};
        while (!seq.finished()) decoder.step(batch);
        return seq.take_result().tokens;
    };

    const std::vector<int32_t> prompt = target.tokenize(problem.prompt, /*add_bos=*/true);
    const auto P = static_cast<int32_t>(prompt.size());
    std::vector<int32_t> sequence = prompt;  // prompt + the current response R
    {
        const std::vector<int32_t> response = continuation(prompt, options.max_tokens, /*sampled=*/false);
        sequence.insert(sequence.end(), response.begin(), response.end());
    }
    const std::optional<std::string> answer =
        final_answer(problem, target.text(std::span(sequence).subspan(static_cast<size_t>(P))), options.stop_strings);
    // Outputs from the prompt's last row on: the prompt's rows would only feed the 262,144-row head of a
    // large vocabulary.
    ForwardResult draft_pass = decoder.forward(ModelRole::Draft, sequence, /*with_hidden=*/false, pass_id, P - 1, 0);
    ++mining.forward_passes;

    SpanTracker span(options.span);
    int32_t fed = 0;  // response tokens fed to `span`; those before i never change (a swap changes i and after)
    for (int32_t i = 0; P + i < static_cast<int32_t>(sequence.size()); ++i) {
        const int32_t d = argmax(draft_pass.logits_row(P + i - 1));
        if (d == sequence[static_cast<size_t>(P + i)]) continue;
        for (; fed < i; ++fed) span.feed(target.piece(sequence[static_cast<size_t>(P + fed)], true));
        if (!SpanTracker(span).feed_and_check(target.piece(d, true))) continue;  // no judge may relax d here

        // Swap d in and let the target go on from there (nothing to continue after an end token).
        std::vector<int32_t> swapped(sequence.begin(), sequence.begin() + P + i);
        swapped.push_back(d);
        if (!target.is_end_of_generation(d)) {
            const std::vector<int32_t> rest = continuation(swapped, options.max_tokens - (i + 1), /*sampled=*/true);
            swapped.insert(swapped.end(), rest.begin(), rest.end());
        }
        // The target's two rows (p_i and the hidden state after d) need nothing after d; the draft's rows
        // from p_i on become the draft pass of the response if the swap is kept.
        const ForwardResult target_pass = decoder.forward(ModelRole::Target, std::span(swapped).first(size_t(P + i + 1)),
                                                          /*with_hidden=*/true, pass_id, P + i - 1, 0);
        ForwardResult swapped_draft_pass =
            decoder.forward(ModelRole::Draft, swapped, /*with_hidden=*/true, pass_id, P + i - 1, 0);
        mining.forward_passes += 2;

        MinedMismatch m;
        m.problem_id = problem.id;
        m.position = i;
        m.draft_token = d;
        m.target_token = sequence[static_cast<size_t>(P + i)];
        m.answer = answer;
        m.answer_after_swap =
            final_answer(problem, target.text(std::span(swapped).subspan(static_cast<size_t>(P))), options.stop_strings);
        m.important = m.answer_after_swap != answer;
        const std::span<const float> target_hidden = target_pass.hidden_row(P + i);
        const std::span<const float> draft_hidden = swapped_draft_pass.hidden_row(P + i);
        m.target_hidden.assign(target_hidden.begin(), target_hidden.end());
        m.draft_hidden.assign(draft_hidden.begin(), draft_hidden.end());
        // p_i and q_i are the rows that predicted position i (unchanged by the swap, which comes after them).
        DraftPosition position;
        position.target_logits = target_pass.logits_row(P + i - 1);
        position.draft_logits = swapped_draft_pass.logits_row(P + i - 1);
        position.draft_token = d;
        const JudgedPosition stats = describe_position(position);
        m.kl = stats.kl;
        m.target_entropy = stats.target_entropy;
        m.draft_entropy = stats.draft_entropy;
        m.target_max_probability = stats.target_max_probability;

        if (!m.important) {  // the swap is harmless: its continuation becomes the response
            sequence = std::move(swapped);
            draft_pass = std::move(swapped_draft_pass);
        }
        mining.mismatches.push_back(std::move(m));
    }
    mining.final_response.assign(sequence.begin() + P, sequence.end());
    return mining;
}

}  // namespace klspec
