#include "eval/problem_scoring.h"

#include <fmt/format.h>

#include "core/error.h"

namespace klspec {

Verdict score_output(const Problem& problem, std::string_view output) {
    if (!problem.gold) throw Error(fmt::format("problem {} has no gold answer", problem.id));
    return {extract_answer(problem.scorer, output), is_correct(problem.scorer, output, *problem.gold)};
}

}  // namespace klspec
