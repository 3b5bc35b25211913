// Problems read from a JSONL file: one object a line with the prompt, and optionally the gold answer and
// the scorer that checks it (the testbed families name theirs; the v1 reasoning set uses gsm8k's).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/answer_scoring.h"

namespace klspec {

struct Problem {
    std::string id;                    // the row's "id" when it has one, else its 0-based line number
    std::string prompt;                // "question"
    std::optional<std::string> gold;   // "final" (an integer or a string); absent: not scored
    Scorer scorer = Scorer::Gsm8k;     // "scorer", gsm8k by default
    std::string family;                // "family" when given (testbed), else empty
};

// Reads at most `limit` problems (0: all). Throws klspec::Error naming the file and line of a bad row.
std::vector<Problem> read_problems(const std::string& path, size_t limit = 0);

// A real benchmark from the workplace's datasets folder (shared/datasets/README.md), with its own ids and
// gold answers: "gsm8k" (id: the 0-based line number; gold: the number after the last "#### ") and
// "mmlu-pro" (id: question_id; gold: answer), "math500" and "math500-hard" (its Level-5 rows; id: unique_id;
// gold: answer; scorer: math). `split` names the file (test, train, validation). Prompts are
// the raw question text. Anything else is read as a JSONL file with read_problems.
std::vector<Problem> load_dataset(const std::string& name_or_path, const std::string& data_dir,
                                  const std::string& split = "test");

// The --dataset / --data-dir / --split / --limit flags of the commands that read problems.
struct DatasetChoice {
    std::string name_or_path;
    std::string data_dir = "../shared/datasets";
    std::string split = "test";
    size_t limit = 0;  // 0: all
    std::vector<Problem> load() const;
};

}  // namespace klspec
