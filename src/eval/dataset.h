// Problems read from a JSONL file: one object a line with the prompt, and optionally the gold answer and
// the scorer that checks it (the testbed families name theirs; the v1 reasoning set uses gsm8k's).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/answer_scoring.h"

namespace klspec {

// What a code benchmark runs an output against (docs/datasets.md, "Code benchmarks").
enum class CodeBenchmark { HumanEval, MbppPlus, LiveCodeBench };

// One LiveCodeBench public test: stdin (the program's input and printed output) or functional (`input`
// holds the method's arguments, one JSON value a line; `output` the JSON of its result).
struct IoTest {
    std::string input;
    std::string output;
    bool functional = false;
};

struct CodeTests {
    CodeBenchmark benchmark = CodeBenchmark::HumanEval;
    std::string entry_point;         // the function the tests call (LiveCodeBench: the Solution method, "" for stdin)
    std::string test_code;           // HumanEval: `test` (defines check(candidate))
    std::string canonical_solution;  // HumanEval: the prompt's continuation; MBPP+: the oracle for the inputs
    std::string row_json;            // MBPP+: the row as in the file, for the harness's Python json (plus_input
                                     // has -Infinity and integers beyond 64 bits, which nlohmann cannot keep)
    std::vector<IoTest> io_tests;    // LiveCodeBench's public tests
    std::string program_head;        // HumanEval: its prompt, which the scored program starts with (a chat
                                     // prompt replaces Problem::prompt)
};

struct Problem {
    std::string id;                   // the row's "id" when it has one, else its 0-based line number
    std::string prompt;               // "question"
    std::optional<std::string> gold;  // "final" (an integer or a string); absent: not scored
    Scorer scorer = Scorer::Gsm8k;    // "scorer", gsm8k by default
    std::string family;               // "family" when given (testbed), else empty
    std::optional<CodeTests> code{};  // code benchmarks: scored by running the tests, not against `gold`
};

// Reads at most `limit` problems (0: all). Throws klspec::Error naming the file and line of a bad row.
std::vector<Problem> read_problems(const std::string& path, size_t limit = 0);

// A real benchmark from the workplace's datasets folder (shared/datasets/README.md), with its own ids and
// gold answers: "gsm8k" (id: the 0-based line number; gold: the number after the last "#### ") and
// "mmlu-pro" (id: question_id; gold: answer; prompt: the question with its options, mmlu_pro_question;
// family: its category), "math500" and "math500-hard" (its Level-5 rows; id: unique_id;
// gold: answer; scorer: math). `split` names the file (test, train, validation). Prompts are
// the raw question text. The code benchmarks (one file each, `split` unused) carry CodeTests instead of a
// gold answer: "humaneval" (id: task_id; prompt: the prompt itself, to be continued as code), "mbpp-plus"
// (id: task_id; prompt: EvalPlus's instruction asking for a self-contained Python script, around the task
// text) and "livecodebench" (id: question_id; prompt: its `prompt` field, else question_content and
// starter_code). Anything else is read as a JSONL file with read_problems.
std::vector<Problem> load_dataset(const std::string& name_or_path, const std::string& data_dir,
                                  const std::string& split = "test");

// An MMLU-Pro row's question with its options, as MMLU-Pro's own evaluation writes it:
// "QUESTION\nOptions:\nA. first\nB. second...".
std::string mmlu_pro_question(const nlohmann::json& row);

// The paper's evaluation subsets, fixed and seeded: of a benchmark's test split, the `size` problems whose
// fnv1a64("klspec-subset/1:" + id) is smallest, in file order. GSM8K 400 and MMLU-Pro 100 (the paper's
// sizes; it does not say which problems); every other benchmark is used whole (MATH-500-Hard 134,
// LiveCodeBench 279). 0: no subset.
size_t default_subset_size(std::string_view dataset_name);
std::vector<Problem> seeded_subset(std::vector<Problem> problems, size_t size);

// The --dataset / --data-dir / --split / --limit / --full flags of the commands that read problems.
struct DatasetChoice {
    std::string name_or_path;
    std::string data_dir = "../shared/datasets";
    std::string split = "test";
    size_t skip = 0;          // problems left out first, after the subset
    size_t limit = 0;         // 0: all; applied after the subset and the skip
    bool full_split = false;  // the whole split instead of the default subset (test split only)
    // The chosen problems: the split (its default subset unless full_split), less the first `skip`, then
    // the first `limit`.
    std::vector<Problem> load() const;
};

}  // namespace klspec
