// How run statistics are shown: one JSON object for machines, a short block for people.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/draft_length.h"
#include "core/judge.h"
#include "core/judged_position.h"
#include "core/stats.h"

namespace klspec {

nlohmann::json stats_to_json(const GenerationStats& stats);
std::string format_stats(const GenerationStats& stats);

// The judge's per-token quality guarantee (Judge::total_variation_bound), if it has one: a line for
// the summary ("" when none) and a JSON field added to `out`.
std::string format_quality_bound(const Judge& judge, const GenerationStats& stats);
void add_quality_bound(nlohmann::json& out, const Judge& judge);
// --json fields: the draft policy, and under Auto the step costs it decided on (milliseconds by batch size).
void add_draft_policy(nlohmann::json& out, DraftPolicy policy, const BatchCostCurve& verify,
                      const BatchCostCurve& draft);
// One --trace record.
nlohmann::json judged_position_to_json(const JudgedPosition& position);
// One --cost-trace line: lengths, emitted, verify_ms, draft_ms, and predicted_ms, predicted_tokens and
// target_only_ms (null when no sequence was under Auto).
nlohmann::json step_cost_to_json(const StepCostRecord& step);

}  // namespace klspec
