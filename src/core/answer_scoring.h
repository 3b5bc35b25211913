// Scoring generated solutions of the project's arithmetic word problems ("... The answer is N.").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace klspec {

// The integer after the first "The answer is" in `text`, if there is one.
std::optional<int64_t> extract_final_answer(std::string_view text);

}  // namespace klspec
