// One judged position as an observer sees it: the statistics every rule could decide on, and what the
// acceptance step did. The base of --trace, AutoJudge mining, the paper's analyses and server metrics.
#pragma once

#include <cstdint>

#include "core/acceptance.h"
#include "core/judge.h"

namespace klspec {

struct JudgedPosition {
    int32_t sequence_id = 0;
    int64_t position = 0;       // index of d_i in the sequence (prompt tokens included)
    int32_t draft_token = -1;   // d_i
    int32_t target_token = -1;  // argmax p_i
    // False for a drafter without a distribution (n-gram): kl and draft_entropy are then undefined (0).
    bool has_draft_distribution = true;
    double kl = 0;              // D_KL(p_i ‖ q_i)
    double target_entropy = 0;  // H(p_i)
    double draft_entropy = 0;   // H(q_i)
    double target_max_probability = 0;
    int64_t draft_rank = 0;          // rank of d_i in p_i; 0 is the target's argmax
    PositionVerdict verdict;         // accepted / relaxed / rejected, and the judge's statistic if consulted
    int32_t draft_length = 0;        // γ the draft policy chose for this step
    double acceptance_estimate = 0;  // the sequence's running acceptance the choice used
};

// The statistics part of a JudgedPosition (sequence id, position and verdict are left to the caller).
JudgedPosition describe_position(const DraftPosition& position);

}  // namespace klspec
