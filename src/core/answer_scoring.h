// Scoring generated solutions the way each benchmark scores them (shared/datasets/README.md).
// One scorer per benchmark family; the testbed's families name theirs in a "scorer" field
// (tools/testbed/scorers.py is the Python twin, and the two must agree).
//
//   gsm8k       the number after the FIRST "The answer is " (case-sensitive), else the first number in the
//               LAST \boxed{...} (what instruct models write), "$" and thousands commas dropped, compared
//               as a number
//   mmlu-pro    MMLU-Pro's cascade: `answer is \(?([A-J])\)?`, else the letter after the LAST
//               `[aA]nswer:`, else the last standalone letter A-J; compared with the gold letter
//   lcb-output  the text after the LAST "Output:" up to the end of its line, stripped, equal to the
//               stripped gold output (LiveCodeBench's output-prediction comparison)
//   math        the content of the LAST \boxed{...} (or \fbox{...}), normalised as openai/prm800k's
//               grading/math_normalize.py does, equal to the normalised gold answer (MATH-500)
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace klspec {

enum class Scorer { Gsm8k, MmluPro, LcbOutput, Math };

// "gsm8k", "mmlu-pro", "lcb-output", "math"; throws klspec::Error naming the known ones for anything else.
Scorer parse_scorer(std::string_view name);
std::string_view to_string(Scorer scorer);

// The answer a solution gives, normalised so that two answers are equal iff the scorer counts them equal
// (gsm8k: the number printed in shortest form, "1,200.0" -> "1200"). nullopt when the text gives none.
std::optional<std::string> extract_answer(Scorer scorer, std::string_view text);

// prm800k's normalize_answer: drops an enclosing \text{}, spaces, \left/\right, degrees, dollars, units
// after "\text{ ", percent signs; "x = 5" -> "5"; \tfrac/\dfrac -> \frac; \frac12 -> \frac{1}{2};
// \sqrt3 -> \sqrt{3}; "0.5" and "1/2" -> \frac{1}{2}.
std::string normalize_math_answer(std::string_view answer);

// The content of the last \boxed{...} or \fbox{...} (braces balanced), if any.
std::optional<std::string> last_boxed(std::string_view text);

// `s` without spaces, tabs, CRs and LFs at either end.
std::string_view strip(std::string_view s);

// Whether `text` answers `gold` (the dataset's final answer, as text) correctly.
bool is_correct(Scorer scorer, std::string_view text, std::string_view gold);

}  // namespace klspec
