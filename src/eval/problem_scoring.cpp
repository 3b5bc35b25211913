#include "eval/problem_scoring.h"

#include <regex>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace klspec {
namespace {

// MBPP+'s base and plus inputs, checked as EvalPlus checks them (evalplus/evaluate.py runs both through the same
// comparison; the row's `assertion` text is not its test): the canonical solution's result is the expected one;
// outputs compare exactly, floats within atol (1e-6 when atol is 0) and rtol 1e-7 as np.allclose does, EvalPlus's
// set-valued and not-None tasks by those rules, and Mbpp/164 and 295 by its special oracles. The JSON stores
// tuples, sets and complex numbers as lists and strings; the arguments of the tasks EvalPlus converts back
// (evalplus/data/mbpp.py) are converted the same way. The row arrives on stdin as JSON.
constexpr std::string_view kMbppPlusHarness = R"(

def _klspec_arguments(task, args):
    def deep_tuple(x):
        return tuple(deep_tuple(i) for i in x) if isinstance(x, list) else x
    n = int(task.split("/")[1])
    if n in {2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616, 630, 726, 740,
             744, 809}:
        return [tuple(a) for a in args]
    if n in {63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780}:
        return [[tuple(item) for item in a] for a in args]
    if n in {259, 401, 445}:
        return [tuple(tuple(item) for item in a) for a in args]
    if n in {75, 413, 444, 753}:
        return [[tuple(item) for item in args[0]], args[1]]
    if n in {106, 750}:
        return [args[0], tuple(args[1])]
    if n in {250, 405, 446, 617, 720, 763, 808}:
        return [tuple(args[0]), args[1]]
    if n == 307:
        return [tuple(args[0]), args[1], args[2]]
    if n == 115:  # sets; an empty one is stored as [] and comes back as {}, as EvalPlus has it
        return [[set(item) if isinstance(item, list) and item else {} for item in args[0]]]
    if n == 124:
        return [float(args[0]), complex(args[1])]
    if n == 252:
        return [complex(args[0])]
    if n == 278:
        return [tuple(tuple(item) if isinstance(item, list) else item for item in args[0])]
    if n == 722:
        return [{key: tuple(value) for key, value in args[0].items()}, *args[1:]]
    if n in {580, 615, 791}:
        return [deep_tuple(a) for a in args]
    return args

def _klspec_check_inputs():
    import copy, json, sys
    row = json.loads(sys.stdin.read())
    task, entry_point, atol = row["task_id"], row["entry_point"], row["atol"]
    reference_namespace = {}
    exec(row["canonical_solution"], reference_namespace)
    reference, candidate = reference_namespace[entry_point], globals()[entry_point]
    set_valued = {"similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly",
                  "larg_nnum", "intersection_array", "find_dissimilar", "Diff"}
    not_none = {"check_str", "text_match_three", "text_starta_endb"}

    def is_floats(x):
        return isinstance(x, float) or (isinstance(x, (list, tuple)) and len(x) > 0
                                        and all(isinstance(i, float) for i in x))

    def close(out, expected, tolerance):
        if isinstance(expected, (list, tuple)):
            return len(out) == len(expected) and all(close(o, e, tolerance) for o, e in zip(out, expected))
        return out == expected or abs(out - expected) <= tolerance + 1e-07 * abs(expected)

    def matches(out, expected):
        if entry_point in set_valued:
            return set(out) == set(expected)
        if entry_point in not_none:  # a match object or True, None or False
            return (out if isinstance(out, bool) else out is not None) == (
                expected if isinstance(expected, bool) else expected is not None)
        # EvalPlus's special oracles: Mbpp/164 takes any answer, Mbpp/295 also 0.
        if out == expected or entry_point == "are_equivalent" or (entry_point == "sum_div" and out == 0):
            return True
        tolerance = atol if atol != 0 or not is_floats(expected) else 1e-06
        return tolerance != 0 and type(out) == type(expected) and close(out, expected, tolerance)

    for kind in ("base", "plus"):
        for inputs in row[kind + "_input"]:  # Mbpp/793's plus_input is {}: none
            arguments = _klspec_arguments(task, inputs)
            expected = reference(*copy.deepcopy(arguments))
            out = candidate(*copy.deepcopy(arguments))
            assert matches(out, expected), f"{kind} input {inputs!r:.80}: expected {expected!r:.80}, got {out!r:.80}"

_klspec_check_inputs()
)";

// LiveCodeBench's functional tests: Solution().<method>(*args), the arguments one JSON value a line, the
// result (a tuple read as a list, as LiveCodeBench does) equal to the JSON output. The tests arrive on stdin.
constexpr std::string_view kFunctionalHarness = R"(

def _klspec_check_functional():
    import json, sys
    spec = json.loads(sys.stdin.read())
    for number, test in enumerate(spec["tests"], 1):
        args = [json.loads(line) for line in test["input"].strip().split("\n")]
        expected = json.loads(test["output"])
        out = getattr(Solution(), spec["method"])(*args)
        if isinstance(out, tuple):
            out = list(out)
        assert out == expected, f"test {number}: expected {expected!r:.80}, got {out!r:.80}"

_klspec_check_functional()
)";

// The imports LiveCodeBench puts before every program (a subset of its import_string), so that starter
// code's List and solutions that assume the usual modules run.
constexpr std::string_view kLiveCodeBenchHeader =
    "from typing import *\nfrom collections import *\nfrom functools import *\nfrom itertools import *\n"
    "from heapq import *\nfrom bisect import *\nimport math, re, string, sys\nsys.setrecursionlimit(50000)\n\n";

// A whole-program answer keeps only its definitions, as EvalPlus's sanitizer does before its tests run
// (evalplus/sanitize.py): imports, functions, classes and assignments at the top level; an instruct model's own
// asserts, prints and `if __name__` demos are dropped (Qwen2.5-Coder appends wrong asserts of its own). An answer
// that does not parse keeps the top-level statements before its error, as EvalPlus's tree-sitter parse keeps the
// whole definitions (never part of one: the cut falls before a line that starts at column 0, never before a
// blank one): an answer cut by -n in its own demo prints keeps its function (the 0.5B draft's HumanEval pass@1
// went from 87 to 92 of 164 so).
std::string definitions_only(const std::string& code) {
    return "\nimport ast as _klspec_ast\n"
           "def _klspec_parse(source):\n"
           "    lines = source.split('\\n')\n"
           "    try:\n"
           "        return _klspec_ast.parse(source)\n"
           "    except SyntaxError as error:\n"
           "        for end in range(len(lines) - 1, 0, -1):\n"
           "            if not lines[end][:1] or lines[end][:1].isspace():\n"
           "                continue\n"
           "            try:\n"
           "                return _klspec_ast.parse('\\n'.join(lines[:end]))\n"
           "            except SyntaxError:\n"
           "                pass\n"
           "        raise error\n"
           "def _klspec_definitions(source):\n"
           "    tree = _klspec_parse(source)\n"
           "    kept = (_klspec_ast.Import, _klspec_ast.ImportFrom, _klspec_ast.FunctionDef, "
           "_klspec_ast.AsyncFunctionDef,\n"
           "            _klspec_ast.ClassDef, _klspec_ast.Assign, _klspec_ast.AnnAssign)\n"
           "    tree.body = [node for node in tree.body if isinstance(node, kept)]\n"
           "    return compile(tree, '<answer>', 'exec')\n"
           "exec(_klspec_definitions(" +
           nlohmann::json(code).dump() + "))\n";
}

std::vector<std::string_view> stripped_lines(std::string_view text) {
    std::vector<std::string_view> lines;
    text = strip(text);
    while (!text.empty()) {
        const size_t end = std::min(text.find('\n'), text.size());
        lines.push_back(strip(text.substr(0, end)));
        text = text.substr(std::min(end + 1, text.size()));
    }
    return lines;
}

// "fail: " and the reason a run did not pass: its exception's last line, else how it ended.
std::string failure(const SandboxResult& run) {
    if (run.timed_out) return "fail: timed out";
    if (run.signal != 0) return fmt::format("fail: killed by signal {}", run.signal);
    const std::vector<std::string_view> lines = stripped_lines(run.stderr_text);
    if (lines.empty()) return fmt::format("fail: exit status {}", run.exit_code);
    return fmt::format("fail: {:.200}", lines.back());
}

ScoredOutput verdict(const SandboxResult& run) {
    return run.succeeded() ? ScoredOutput{"pass", true} : ScoredOutput{failure(run), false};
}

// HumanEval: the prompt, then the completion. A completion that defines the entry point itself (a chat
// answer) still gets the prompt first, for the imports and helpers it defines (the prompt's stub, a
// docstring, is replaced), and keeps only its definitions.
std::string humaneval_program(const CodeTests& tests, const std::string& code) {
    const bool defines_entry_point = std::regex_search(code, std::regex("def\\s+" + tests.entry_point + "\\s*\\("));
    std::string program = tests.program_head;
    program += defines_entry_point ? definitions_only(code) : code;
    return program + "\n\n" + tests.test_code + "\n\ncheck(" + tests.entry_point + ")\n";
}

ScoredOutput run_livecodebench(const CodeTests& tests, const std::string& code) {
    const SandboxLimits limits = sandbox_limits(CodeBenchmark::LiveCodeBench);
    const std::string program = std::string(kLiveCodeBenchHeader) + code;
    if (!tests.entry_point.empty()) {
        nlohmann::json spec{{"method", tests.entry_point}, {"tests", nlohmann::json::array()}};
        for (const IoTest& test : tests.io_tests)
            spec["tests"].push_back({{"input", test.input}, {"output", test.output}});
        return verdict(run_python_sandboxed(program + std::string(kFunctionalHarness), spec.dump(), limits));
    }
    for (size_t i = 0; i < tests.io_tests.size(); ++i) {
        const SandboxResult run = run_python_sandboxed(program, tests.io_tests[i].input, limits);
        if (!run.succeeded()) return {failure(run), false};
        if (stripped_lines(run.stdout_text) != stripped_lines(tests.io_tests[i].output))
            return {fmt::format("fail: test {}: wrong output", i + 1), false};
    }
    return {"pass", true};
}

ScoredOutput run_code_tests(const Problem& problem, std::string_view output) {
    if (strip(output).empty()) return {std::nullopt, false};
    const std::string code = extract_program(output);
    const CodeTests& tests = *problem.code;
    switch (tests.benchmark) {
        case CodeBenchmark::HumanEval:
            return verdict(run_python_sandboxed(humaneval_program(tests, code), "", sandbox_limits(tests.benchmark)));
        case CodeBenchmark::MbppPlus:
            return verdict(run_python_sandboxed(definitions_only(code) + std::string(kMbppPlusHarness), tests.row_json,
                                                sandbox_limits(tests.benchmark)));
        case CodeBenchmark::LiveCodeBench:
            return run_livecodebench(tests, code);
    }
    throw Error("unknown code benchmark");
}

}  // namespace

SandboxLimits sandbox_limits(CodeBenchmark benchmark) {
    SandboxLimits limits;
    if (benchmark == CodeBenchmark::MbppPlus) {
        // Mbpp/599's reference sums up to 10**8 21 times: 15 s of CPU on one machine, 33 s on another. The wall
        // limit leaves room for sandboxes sharing the cores (at 60 s it timed out in a busy ctest -j2 run).
        limits.cpu_seconds = 120;
        limits.wall_time = std::chrono::seconds(300);
        limits.memory_bytes = 4UL << 30;  // Mbpp/255's reference builds lists of millions of tuples
    }
    return limits;
}

std::string extract_program(std::string_view output) {
    std::optional<std::string_view> last_block;
    for (size_t open = output.find("```"); open != std::string_view::npos;) {
        const size_t line_end = std::min(output.find('\n', open), output.size());
        const std::string_view tag = strip(output.substr(open + 3, line_end - open - 3));
        const size_t body = std::min(line_end + 1, output.size());
        const size_t close = output.find("```", body);
        if (tag.empty() || tag == "python" || tag == "py" || tag == "python3" || tag == "Python")
            last_block = output.substr(body, (close == std::string_view::npos ? output.size() : close) - body);
        open = close == std::string_view::npos ? close : output.find("```", close + 3);
    }
    return std::string(last_block.value_or(output));
}

AnswerKind answer_kind(const Problem& problem) {
    return problem.code ? AnswerKind::kTestOutcome : AnswerKind::kScoredAnswer;
}

ScoredOutput score_output(const Problem& problem, std::string_view output) {
    if (problem.code) return run_code_tests(problem, output);
    if (!problem.gold) throw Error(fmt::format("problem {} has no gold answer", problem.id));
    return {extract_answer(problem.scorer, output), is_correct(problem.scorer, output, *problem.gold)};
}

}  // namespace klspec
