// Scoring one output of a problem the way its benchmark does: the text scorers of core/answer_scoring
// (GSM8K, MMLU-Pro, MATH, LiveCodeBench output prediction) and, for code benchmarks, running the code.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "eval/dataset.h"
#include "eval/sandbox.h"

namespace klspec {

struct ScoredOutput {
    // Text benchmarks: the answer the output gives (normalised). Code benchmarks: "pass", or "fail: " and
    // why (the exception's last line, a wrong test's output, a timeout or signal). nullopt: no answer
    // (code: the output is blank).
    std::optional<std::string> prediction;
    bool correct = false;
};

// What "the same answer" compares for a problem: a text problem's scored answer, or a code problem's test
// outcome (pass or fail), since a failing program's prediction also says why it failed, which a rule may change
// without changing the outcome. Sweeps, calibration and mining all ask here.
enum class AnswerKind { kScoredAnswer, kTestOutcome };
AnswerKind answer_kind(const Problem& problem);

// Text problems are scored against their gold answer; code problems run their tests in the sandbox
// (docs/datasets.md, "Code benchmarks"). Throws klspec::Error when a text problem has no gold answer.
ScoredOutput score_output(const Problem& problem, std::string_view output);

// The program in a model's output: the last fenced block tagged python, py, python3 or untagged (an
// unclosed last fence runs to the end), else the whole output.
std::string extract_program(std::string_view output);

// The limits a benchmark's tests run under: MBPP+ runs the reference solution too, on inputs that take
// its canonical solutions up to 15 s.
SandboxLimits sandbox_limits(CodeBenchmark benchmark);

}  // namespace klspec
