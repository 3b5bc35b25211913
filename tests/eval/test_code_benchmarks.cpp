// HumanEval, MBPP+ and LiveCodeBench: their loaders, their tests run in the sandbox, `klspec score` on them.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "build_paths.h"
#include "core/error.h"
#include "eval/problem_scoring.h"
#include "test_support.h"

namespace klspec {
namespace {

const std::string kDatasets = std::string(build_paths::shared_dir) + "/datasets";

bool have_datasets() { return std::filesystem::exists(kDatasets + "/humaneval/HumanEval.jsonl.gz"); }

const Problem& problem_with_id(const std::vector<Problem>& problems, const std::string& id) {
    return *std::find_if(problems.begin(), problems.end(), [&](const Problem& p) { return p.id == id; });
}

// "id: prediction" for every problem whose output (`output_of(problem)`) is not scored correct. The sandboxes
// run four at a time: most of a run is starting bubblewrap and Python, not computing.
template <typename OutputOf>
std::vector<std::string> failures(const std::vector<Problem>& problems, OutputOf output_of) {
    std::vector<std::string> failed;
    std::mutex mutex;
    std::atomic<size_t> next = 0;
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w) {
        workers.emplace_back([&] {
            for (size_t i; (i = next++) < problems.size();) {
                const ScoredOutput verdict = score_output(problems[i], output_of(problems[i]));
                if (verdict.correct) continue;
                std::lock_guard lock(mutex);
                failed.push_back(problems[i].id + ": " + verdict.prediction.value_or("no answer"));
            }
        });
    }
    for (std::thread& worker : workers) worker.join();
    std::sort(failed.begin(), failed.end());
    return failed;
}

TEST(CodeBenchmarks, ExtractsTheLastPythonBlockElseTheWholeOutput) {
    EXPECT_EQ(extract_program("x = 1\n"), "x = 1\n");
    EXPECT_EQ(extract_program("First:\n```python\na = 1\n```\nBetter:\n```python\nb = 2\n```\nDone."), "b = 2\n");
    EXPECT_EQ(extract_program("```\nc = 3\n```\n```text\nnot code\n```"), "c = 3\n");
    EXPECT_EQ(extract_program("```py\nd = 4\n"), "d = 4\n");  // cut off before its closing fence
}

// The canonical solutions, given as completions of the prompt, all pass; with a body that breaks the
// function, none does.
TEST(CodeBenchmarks, HumanEvalCanonicalSolutionsAllPass) {
    if (!have_datasets()) GTEST_SKIP() << test::kNoSharedDatasets;
    const std::vector<Problem> problems = load_dataset("humaneval", kDatasets);
    ASSERT_EQ(problems.size(), 164u);
    EXPECT_EQ(problems.front().id, "HumanEval/0");
    EXPECT_TRUE(problems.front().prompt.starts_with("from typing import List\n"));
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(failures(problems, [](const Problem& p) { return p.code->canonical_solution; }),
              std::vector<std::string>{});
    std::cout << fmt::format("HumanEval: 164 canonical solutions in {:.1f} s\n",
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    // The same solutions as whole functions in a fenced block (a chat model's answer) pass too.
    const Problem& first = problems.front();
    EXPECT_TRUE(score_output(first, "```python\n" + first.prompt + first.code->canonical_solution + "```").correct);
    EXPECT_EQ(score_output(first, "    return None\n").prediction, "fail: AssertionError");
}

// Every canonical solution passes, as in EvalPlus: the tuple, set and complex arguments the JSON stores as lists
// and strings are converted back (Mbpp/106, 124, 252, 580 and 720 failed without it), and the base inputs are
// checked against the canonical solution's outputs (Mbpp/164 and 295 failed their own base `assertion` text).
TEST(CodeBenchmarks, MbppPlusCanonicalSolutionsAllPass) {
    if (!have_datasets()) GTEST_SKIP() << test::kNoSharedDatasets;
    const std::vector<Problem> problems = load_dataset("mbpp-plus", kDatasets);
    ASSERT_EQ(problems.size(), 399u);
    EXPECT_EQ(problems.front().id, "Mbpp/2");
    EXPECT_NE(problems.front().prompt.find("similar_elements"), std::string::npos);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(failures(problems, [](const Problem& p) { return p.code->canonical_solution; }),
              std::vector<std::string>{});
    std::cout << fmt::format("MBPP+: 399 canonical solutions in {:.1f} s\n",
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// The base inputs are checked as the plus inputs are, not by the row's `assertion` text: Mbpp/2's prompt asks for
// the shared elements compared as sets, while its `assertion` compares tuples exactly, so Qwen2.5-Coder's answer
// (a set) failed there though EvalPlus passes it. A solution that passes the base inputs but not the plus inputs
// fails on the first plus input it gets wrong.
TEST(CodeBenchmarks, MbppPlusChecksBaseAndPlusInputsAsEvalPlus) {
    if (!have_datasets()) GTEST_SKIP() << test::kNoSharedDatasets;
    const std::vector<Problem> problems = load_dataset("mbpp-plus", kDatasets);
    const Problem& similar = problems.front();  // Mbpp/2: the shared elements of two tuples
    EXPECT_EQ(
        score_output(similar, "def similar_elements(list1, list2):\n    return set(list1) & set(list2)\n").prediction,
        "pass");
    const std::string base_only =
        "def similar_elements(a, b):\n    if not a or not b:\n        return (0,)\n"
        "    return tuple(set(a) & set(b))\n";
    const ScoredOutput verdict = score_output(similar, base_only);
    EXPECT_FALSE(verdict.correct);
    EXPECT_TRUE(verdict.prediction->starts_with("fail: AssertionError: plus input [[], []]")) << *verdict.prediction;
    const ScoredOutput wrong = score_output(similar, "def similar_elements(a, b):\n    return ()\n");
    EXPECT_TRUE(wrong.prediction->starts_with("fail: AssertionError: base input [[3, 4, 5, 6], [5, 7, 4, 10]]"))
        << *wrong.prediction;
    // EvalPlus's special oracles: Mbpp/164 (are_equivalent) takes any answer, Mbpp/295 (sum_div) also 0.
    const Problem& equivalent = problem_with_id(problems, "Mbpp/164");
    const Problem& sum_div = problem_with_id(problems, "Mbpp/295");
    EXPECT_EQ(score_output(equivalent, "def are_equivalent(*args):\n    return None\n").prediction, "pass");
    EXPECT_EQ(score_output(sum_div, "def sum_div(*args):\n    return 0\n").prediction, "pass");
    EXPECT_FALSE(score_output(sum_div, "def sum_div(*args):\n    return 1\n").correct);
}

TEST(CodeBenchmarks, LiveCodeBenchRunsStdinAndFunctionalTests) {
    if (!have_datasets()) GTEST_SKIP() << test::kNoSharedDatasets;
    const std::vector<Problem> problems = load_dataset("livecodebench", kDatasets);
    ASSERT_EQ(problems.size(), 279u);
    // abc365_b (stdin): print the 1-based position of the second largest element.
    const Problem& second_largest = problem_with_id(problems, "abc365_b");
    EXPECT_TRUE(second_largest.code->entry_point.empty());
    const std::string program =
        "n = int(input())\na = list(map(int, input().split()))\n"
        "print(a.index(sorted(a)[-2]) + 1)\n";
    EXPECT_EQ(score_output(second_largest, "```python\n" + program + "```").prediction, "pass");
    EXPECT_EQ(score_output(second_largest, "print(1)").prediction, "fail: test 1: wrong output");
    // 3517 (functional): shortest path from 0 to n-1 after each added road.
    const Problem& roads = problem_with_id(problems, "3517");
    EXPECT_EQ(roads.code->entry_point, "shortestDistanceAfterQueries");
    const std::string solution = R"(```python
class Solution:
    def shortestDistanceAfterQueries(self, n: int, queries: List[List[int]]) -> List[int]:
        roads = [[i + 1] for i in range(n - 1)] + [[]]
        answer = []
        for u, v in queries:
            roads[u].append(v)
            distance = [0] + [None] * (n - 1)
            frontier = deque([0])
            while frontier:
                city = frontier.popleft()
                for nxt in roads[city]:
                    if distance[nxt] is None:
                        distance[nxt] = distance[city] + 1
                        frontier.append(nxt)
            answer.append(distance[n - 1])
        return answer
```)";
    EXPECT_EQ(score_output(roads, solution).prediction, "pass");
    const ScoredOutput wrong = score_output(roads,
                                            "class Solution:\n    def shortestDistanceAfterQueries(self, n, queries):\n"
                                            "        return [n - 1] * len(queries)\n");
    EXPECT_FALSE(wrong.correct);
    EXPECT_EQ(wrong.prediction, "fail: AssertionError: test 1: expected [3, 2, 1], got [4, 4, 4]");
}

// A bad row of a code benchmark names the file and line, in one line.
TEST(CodeBenchmarks, MalformedRowsGiveOneLineErrors) {
    const std::filesystem::path dir = test::temp_path("bad-code-datasets");
    for (
        const auto& [folder, file, row, message] : std::vector<std::array<std::string, 4>>{
            {"mbpp_plus", "MbppPlus-v0.1.0.jsonl",
             R"({"task_id": "Mbpp/1", "prompt": "p", "entry_point": "f", "canonical_solution": "", "atol": 0, "plus_input": []})",
             "MbppPlus-v0.1.0.jsonl:1: [json.exception.out_of_range.403] key 'base_input' not found"},
            {"livecodebench_public_only", "lcb_2408_2502_279_merged_public_tests.jsonl",
             R"({"question_id": "q", "prompt": "p", "starter_code": "", "public_test_cases": [{"input": "1", "output": "1", "testtype": "interactive"}]})",
             "lcb_2408_2502_279_merged_public_tests.jsonl:1: unknown testtype 'interactive'"},
            {"humaneval", "HumanEval.jsonl.gz", "not json", "HumanEval.jsonl.gz:1: not a JSON object"}}) {
        std::filesystem::create_directories(dir / folder);
        std::ofstream(dir / folder / file) << row << "\n";  // zlib reads an uncompressed .gz as it is
        const std::string name = folder == "mbpp_plus"   ? "mbpp-plus"
                                 : folder == "humaneval" ? "humaneval"
                                                         : "livecodebench";
        try {
            load_dataset(name, dir.string());
            ADD_FAILURE() << name << " loaded a bad row";
        } catch (const Error& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(message), std::string::npos) << what;
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        }
    }
}

// `klspec score` runs the tests: a canonical solution passes, a wrong one fails, a blank output gives no answer.
TEST(CodeBenchmarks, ScoreCommandRunsTheTests) {
    if (!have_datasets()) GTEST_SKIP() << test::kNoSharedDatasets;
    const std::vector<Problem> problems = load_dataset("humaneval", kDatasets);
    const std::string predictions = test::temp_path("humaneval-predictions.jsonl");
    {
        std::ofstream out(predictions);
        out << nlohmann::json{{"id", problems[0].id}, {"output", problems[0].code->canonical_solution}}.dump() << "\n";
        out << nlohmann::json{{"id", problems[1].id}, {"output", "    return []\n"}}.dump() << "\n";
        out << nlohmann::json{{"id", problems[2].id}, {"output", ""}}.dump() << "\n";
    }
    const test::CommandResult r = test::run_command(test::kCli + " score --json --dataset humaneval --data-dir " +
                                                    kDatasets + " --predictions " + predictions);
    ASSERT_EQ(r.exit_code, 0) << r.errors;
    const nlohmann::json summary = nlohmann::json::parse(r.output);
    EXPECT_EQ(summary.at("scored"), 3);
    EXPECT_EQ(summary.at("correct"), 1);
    EXPECT_EQ(summary.at("no_answer"), 1);
    EXPECT_EQ(summary.at("dataset_size"), 164);

    const test::CommandResult unknown =
        test::run_command(test::kCli + " score --dataset humaneval-x --predictions " + predictions);
    EXPECT_EQ(unknown.exit_code, 1);
    EXPECT_NE(unknown.errors.find("humaneval, mbpp-plus, livecodebench"), std::string::npos) << unknown.errors;
}

}  // namespace
}  // namespace klspec
