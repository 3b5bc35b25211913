// How run statistics are shown: one JSON object for machines, a short block for people.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/judged_position.h"
#include "core/stats.h"

namespace klspec {

nlohmann::json stats_to_json(const GenerationStats& stats);
std::string format_stats(const GenerationStats& stats);
// One --trace record.
nlohmann::json judged_position_to_json(const JudgedPosition& position);

}  // namespace klspec
