// AutoJudge mining (docs/design.md, "AutoJudge training"; after garipovroma/autojudge find_important_tokens.py):
// which draft/target mismatches change the final answer.
//
// For one problem: the target's greedy response R and its answer A. Then, repeatedly, the first position
// i after the last handled one where the draft's greedy token d differs from R[i]; the target continues
// greedily from R[0..i) + d; its answer A' is scored with the problem's scorer. A' != A: "important"
// (label 1), R stays. A' == A: "unimportant" (label 0), the continuation becomes R. Until no mismatch is
// left. Each mismatch carries the AutoJudge features: both models' last-layer hidden states at the position
// whose input token is d, and the judge statistics of p_i and q_i (for the paper's analyses).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/judge_span.h"
#include "engine/speculative_decoder.h"
#include "eval/dataset.h"

namespace klspec {

struct MiningOptions {
    int32_t max_tokens = 256;  // response length at most (the original and every continuation)
    // The (lossless, vanilla) speculative decoding that writes continuations: γ at most, and how it is chosen.
    int32_t draft_max = 8;
    DraftPolicy draft_policy = DraftPolicy::Fixed;
    // Continuations after a swap: greedy (temperature 0, the labels of docs/design.md) or sampled with this
    // seed (the paper's label-consistency analysis, Fig. 4). The original response is always greedy.
    float temperature = 0.0f;
    uint64_t seed = 0;
    // The benchmark's stop strings: the response and every continuation end where a decoded answer would (text
    // after them would add only mismatches that cannot change the answer).
    std::vector<std::string> stop_strings;
    // Only mismatches where a judge may relax are labelled: inside the span both before and after d, as the
    // decoder checks (SpanTracker::feed_and_check).
    JudgeSpan span;
};

struct MinedMismatch {
    std::string problem_id;
    int32_t position = 0;                          // index in the response (0 = first generated token)
    int32_t draft_token = -1;                      // d, the draft's greedy token
    int32_t target_token = -1;                     // R[i], the target's token there
    bool important = false;                        // label 1: swapping d in changes the final answer
    std::optional<std::string> answer;             // A, the response's answer before the swap
    std::optional<std::string> answer_after_swap;  // A'
    double kl = 0, target_entropy = 0, draft_entropy = 0, target_max_probability = 0;  // of p_i, q_i (T = 1)
    std::vector<float> draft_hidden;   // h_draft at the position whose input token is d
    std::vector<float> target_hidden;  // h_target there
};

struct ProblemMining {
    std::vector<MinedMismatch> mismatches;
    std::vector<int32_t> final_response;  // R after every adopted swap
    int32_t forward_passes = 0;           // teacher-forced passes (both models)
    int32_t continuations = 0;
};

// The final answer whose change makes a mismatch important, of a response cut at its first stop string as a
// decoded answer is (the tokens that completed one are in the response; left in, the closing fence of a chat
// code answer made its program empty): a text benchmark's extracted answer; a code benchmark's test outcome,
// "pass" or "fail" (its tests run in the sandbox): why a failing program fails is no answer, as the real-pair
// issue defines it for MBPP+.
std::optional<std::string> final_answer(const Problem& problem, std::string_view response,
                                        std::span<const std::string> stop_strings = {});

// Mines `parallel` problems at a time: each decodes its continuations on its own sequence id (0 to parallel - 1),
// and one step() verifies all their drafts in one target batch, as decode_problems batches a sweep's problems;
// the teacher-forced passes run in between, on the decoder's last id. `decoder` must have a draft, hidden states
// (ContextOptions::hidden_states) and more than `parallel` sequences. on_done gets each problem's mining and the
// wall time attributed to it (its passes and scoring, and its share of each step), in problem order.
using MinedProblemCallback = std::function<void(size_t index, ProblemMining&& mining, double seconds)>;
void mine_problems(SpeculativeDecoder& decoder, std::span<const Problem> problems, const MiningOptions& options,
                   int32_t parallel, const MinedProblemCallback& on_done);

// One problem (mine_problems with parallel 1): its continuations on id 0.
ProblemMining mine_problem(SpeculativeDecoder& decoder, const Problem& problem, const MiningOptions& options);

// A mismatch as the mining files keep it: where, and the draft's token there.
struct MinedPosition {
    int32_t position = 0;
    int32_t draft_token = -1;
};

// The features of mismatches mined earlier, computed again from their problem's final response (features.f32 stays
// on the machine that mined, the responses go with the labels). The mismatch at i saw the response's first i tokens
// (a swap changes only what follows it), then d: its row is [h_draft ; h_target] at d's position, rows in
// `mismatches`' order. One pass of each model over the response gives the rows of the swaps that were kept (d is
// the response's token there); a swap that was not kept takes its own pass. The rows equal the mined ones up to
// the rounding of other batches (mining computed them in passes that started after a shared prefix). Throws
// klspec::Error naming the problem on a position outside its response.
std::vector<float> recompute_features(SpeculativeDecoder& decoder, const Problem& problem,
                                      std::span<const int32_t> final_response,
                                      std::span<const MinedPosition> mismatches);

}  // namespace klspec
