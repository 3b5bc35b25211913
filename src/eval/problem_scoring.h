// Scoring one output of a problem the way its benchmark does: the text scorers of core/answer_scoring
// (GSM8K, MMLU-Pro, MATH, LiveCodeBench output prediction) and, for code benchmarks, running the code.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "eval/dataset.h"

namespace klspec {

struct Verdict {
    std::optional<std::string> prediction;  // the answer the output gives (normalised), if any
    bool correct = false;
};

// Throws klspec::Error when the problem has no gold answer to score against.
Verdict score_output(const Problem& problem, std::string_view output);

}  // namespace klspec
