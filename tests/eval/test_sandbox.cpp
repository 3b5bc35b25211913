// The code sandbox: a solution that misbehaves scores as a failure and leaves the host as it was.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <fmt/format.h>

#include "build_paths.h"
#include "eval/problem_scoring.h"
#include "eval/sandbox.h"
#include "test_support.h"

namespace klspec {
namespace {

// A HumanEval-style problem: f(x) must return 2x.
Problem doubling_problem() {
    const std::string stub = "def f(x):\n    \"\"\"Twice x.\"\"\"\n";
    Problem problem{"double", stub, std::nullopt, Scorer::Gsm8k, "humaneval"};
    problem.code = CodeTests{
        CodeBenchmark::HumanEval, "f", "def check(candidate):\n    assert candidate(2) == 4\n", "", "", {}, stub};
    return problem;
}

// A model's answer defining f with `body` (indented by four spaces), in a fenced block.
std::string solution(const std::string& body) { return "Here it is:\n```python\ndef f(x):\n" + body + "```\n"; }

// A marker on the command line of every process a test's program starts, to find leftovers on the host.
std::string process_marker(const std::string& test) { return fmt::format("klspec-sandbox-test-{}-{}", test, getpid()); }

// Host processes whose command line contains `marker`.
size_t processes_with(const std::string& marker) {
    size_t count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        std::string cmdline;
        try {
            std::ifstream in(entry.path() / "cmdline", std::ios::binary);
            cmdline.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        } catch (const std::ios_base::failure&) {
            continue;  // it exited between the listing and the read (ESRCH): no longer alive
        }
        count += cmdline.find(marker) != std::string::npos;
    }
    return count;
}

// The body of an f that replaces its process with `python_code`, tagged with `marker`.
std::string exec_tagged(const std::string& python_code, const std::string& marker) {
    return fmt::format("    import os, sys\n    os.execv(sys.executable, [sys.executable, '-c', {:?}, {:?}])\n",
                       python_code, marker);
}

TEST(Sandbox, RunsPythonWithStdinAndCapturesBothStreams) {
    const SandboxResult run = run_python_sandboxed(
        "import sys\nprint(sys.stdin.read().upper(), end='')\nprint('note', file=sys.stderr)\n"
        "sys.exit(3)\n",
        "two\nlines\n");
    EXPECT_EQ(run.stdout_text, "TWO\nLINES\n");
    EXPECT_EQ(run.stderr_text, "note\n");
    EXPECT_EQ(run.exit_code, 3);
    EXPECT_FALSE(run.succeeded());
}

TEST(Sandbox, OutputBeyondTheCapIsDropped) {
    SandboxLimits limits;
    limits.output_bytes = 1000;
    const SandboxResult run = run_python_sandboxed("print('x' * 100000)", "", limits);
    EXPECT_TRUE(run.succeeded());  // read to the end: the program is never blocked on a full pipe
    EXPECT_EQ(run.stdout_text.size(), 1000u);
    EXPECT_TRUE(run.output_truncated);
}

TEST(Sandbox, CorrectAndWrongSolutionsScore) {
    const ScoredOutput right = score_output(doubling_problem(), solution("    return 2 * x\n"));
    EXPECT_TRUE(right.correct);
    EXPECT_EQ(right.prediction, "pass");
    const ScoredOutput wrong = score_output(doubling_problem(), solution("    return x + 1\n"));
    EXPECT_FALSE(wrong.correct);
    EXPECT_EQ(wrong.prediction, "fail: AssertionError");
    const ScoredOutput blank = score_output(doubling_problem(), " \n");
    EXPECT_FALSE(blank.correct);
    EXPECT_FALSE(blank.prediction.has_value());
}

// A whole-program answer is scored on its definitions, as EvalPlus sanitizes it: an instruct model's own
// wrong asserts and demo prints after the function do not fail it; a wrong function still does, and an
// import or helper it defines is kept.
TEST(Sandbox, AnswersKeepOnlyTheirDefinitions) {
    const std::string own_tests =
        "\nassert f(3) == 7, 'a wrong test of its own'\nprint(f(2))\nif __name__ == '__main__':\n    raise "
        "SystemExit(1)\n";
    const ScoredOutput right =
        score_output(doubling_problem(), "```python\ndef f(x):\n    return 2 * x\n" + own_tests + "```\n");
    EXPECT_TRUE(right.correct) << right.prediction.value_or("no answer");
    const ScoredOutput helper =
        score_output(doubling_problem(),
                     "```python\nimport operator\nFACTOR = 2\ndef twice(x):\n    return operator.mul(FACTOR, x)\n"
                     "def f(x):\n    return twice(x)\n" +
                         own_tests + "```\n");
    EXPECT_TRUE(helper.correct) << helper.prediction.value_or("no answer");
    const ScoredOutput wrong =
        score_output(doubling_problem(), "```python\ndef f(x):\n    return x + 1\n" + own_tests + "```\n");
    EXPECT_FALSE(wrong.correct);
    // Cut by -n in its own demo (no closing fence): the complete function is kept; cut inside the function, the
    // function is dropped, never kept in part.
    const ScoredOutput cut_in_demo = score_output(doubling_problem(), "def f(x):\n    return 2 * x\n\nprint(f([1, 2,");
    EXPECT_TRUE(cut_in_demo.correct) << cut_in_demo.prediction.value_or("no answer");
    const ScoredOutput cut_in_function =
        score_output(doubling_problem(), "def f(x):\n    if x > 100:\n        return [x,\n    return 2 * x\n");
    EXPECT_FALSE(cut_in_function.correct);
    EXPECT_NE(cut_in_function.prediction->find("SyntaxError"), std::string::npos) << *cut_in_function.prediction;
    // A blank line inside the function is no place to cut either: the part before it would pass the tests.
    const ScoredOutput cut_after_blank_line =
        score_output(doubling_problem(), "def f(x):\n    if x > 0:\n        return 2 * x\n\n    return [x,\n");
    EXPECT_FALSE(cut_after_blank_line.correct);
    EXPECT_NE(cut_after_blank_line.prediction->find("SyntaxError"), std::string::npos)
        << *cut_after_blank_line.prediction;
}

// The whole process tree (a forked child too, each exec'd into a busy loop) is killed at the wall time.
TEST(Sandbox, InfiniteLoopTimesOutAndLeavesNoProcess) {
    const std::string marker = process_marker("loop");
    const auto start = std::chrono::steady_clock::now();
    const ScoredOutput verdict = score_output(
        doubling_problem(), solution("    import os\n    os.fork()\n" + exec_tagged("while True: pass", marker)));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_FALSE(verdict.correct);
    EXPECT_EQ(verdict.prediction, "fail: timed out");
    const double wall = std::chrono::duration<double>(sandbox_limits(CodeBenchmark::HumanEval).wall_time).count();
    EXPECT_GE(seconds, wall);
    EXPECT_LT(seconds, wall + 2);
    EXPECT_EQ(processes_with(marker), 0u);
}

TEST(Sandbox, CpuLimitEndsABusyLoop) {
    SandboxLimits limits;
    limits.cpu_seconds = 1;
    const SandboxResult run = run_python_sandboxed("while True: pass", "", limits);
    EXPECT_FALSE(run.timed_out);
    EXPECT_EQ(run.signal, SIGXCPU);
}

// A fork bomb never has more than the process limit alive, nothing of it survives the run, and a sandbox
// started beside it while it runs still works (each sandbox counts its processes under its own uid).
TEST(Sandbox, ForkBombIsBoundedAndCleanedUp) {
    const std::string marker = process_marker("forkbomb");
    const std::string bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n";
    auto scoring = std::async(std::launch::async,
                              [&] { return score_output(doubling_problem(), solution(exec_tagged(bomb, marker))); });
    size_t most_alive = 0;
    std::vector<ScoredOutput> beside;
    while (scoring.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
        most_alive = std::max(most_alive, processes_with(marker));
        if (most_alive > 1 && beside.size() < 3)
            beside.push_back(score_output(doubling_problem(), solution("    return 2 * x\n")));
    }
    ASSERT_FALSE(beside.empty()) << "the bomb ended before a sandbox could run beside it";
    for (const ScoredOutput& other : beside) EXPECT_TRUE(other.correct) << other.prediction.value_or("no output");
    const ScoredOutput verdict = scoring.get();
    EXPECT_FALSE(verdict.correct);
    EXPECT_GT(most_alive, 1u);                         // it did fork ...
    EXPECT_LE(most_alive, SandboxLimits{}.processes);  // ... up to the limit
    EXPECT_EQ(processes_with(marker), 0u);
    EXPECT_TRUE(score_output(doubling_problem(), solution("    return 2 * x\n")).correct);  // the host can still fork
}

TEST(Sandbox, CannotWriteOutsideItsDirectory) {
    const std::string in_tmp = test::temp_path("sandbox-escape.txt");
    const std::string in_build = std::string(build_paths::model_dir) + "/sandbox-escape.txt";
    for (const std::string& target : {in_tmp, in_build}) {
        const ScoredOutput verdict =
            score_output(doubling_problem(),
                         solution(fmt::format("    open({:?}, 'w').write('escaped')\n    return 2 * x\n", target)));
        EXPECT_FALSE(verdict.correct) << target;
        EXPECT_FALSE(std::filesystem::exists(target)) << target;
    }
    // Its own directory is writable.
    EXPECT_TRUE(
        score_output(doubling_problem(), solution("    open('scratch.txt', 'w').write('ok')\n    return 2 * x\n"))
            .correct);
}

// Run as root, the program runs as a uid of its own, which cannot enter root's private directories: a TMPDIR in
// one (root's home, say) must not stop the scorer.
TEST(Sandbox, RunsWhenTmpdirIsPrivateToRoot) {
    if (getuid() != 0) GTEST_SKIP() << "only root runs the program as another uid";
    const std::string private_dir = test::temp_path("private-tmpdir");  // inside this test's 0700 directory
    std::filesystem::create_directory(private_dir);
    std::filesystem::permissions(private_dir, std::filesystem::perms::owner_all);
    const char* saved = std::getenv("TMPDIR");
    const std::string previous = saved ? saved : "";
    setenv("TMPDIR", private_dir.c_str(), 1);
    const SandboxResult run = run_python_sandboxed("print('ok')", "");
    if (saved)
        setenv("TMPDIR", previous.c_str(), 1);
    else
        unsetenv("TMPDIR");
    EXPECT_EQ(run.stdout_text, "ok\n") << run.stderr_text;
    EXPECT_TRUE(std::filesystem::is_empty(private_dir));
}

TEST(Sandbox, HasNoNetwork) {
    // A server on the host's loopback that the solution tries to reach.
    const int server = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(server, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    ASSERT_EQ(listen(server, 4), 0);
    socklen_t length = sizeof address;
    ASSERT_EQ(getsockname(server, reinterpret_cast<sockaddr*>(&address), &length), 0);
    const ScoredOutput verdict = score_output(
        doubling_problem(),
        solution(fmt::format(
            "    import socket\n    socket.create_connection(('127.0.0.1', {}), timeout=2)\n    return 2 * x\n",
            ntohs(address.sin_port))));
    EXPECT_FALSE(verdict.correct);
    EXPECT_NE(verdict.prediction->find("Connection refused"), std::string::npos) << *verdict.prediction;
    EXPECT_LT(accept(server, nullptr, nullptr), 0);  // nothing reached the host
    close(server);
}

TEST(Sandbox, HugeAllocationFails) {
    const ScoredOutput verdict =
        score_output(doubling_problem(), solution("    big = bytearray(8 << 30)\n    return 2 * x\n"));
    EXPECT_FALSE(verdict.correct);
    EXPECT_EQ(verdict.prediction, "fail: MemoryError");
}

TEST(Sandbox, HugeFileWriteIsCapped) {
    const ScoredOutput verdict =
        score_output(doubling_problem(), solution("    with open('big.bin', 'wb') as out:\n        for _ in "
                                                  "range(1024):\n            out.write(b'x' * (1 << 20))\n"
                                                  "    return 2 * x\n"));
    EXPECT_FALSE(verdict.correct);
    EXPECT_NE(verdict.prediction->find("File too large"), std::string::npos) << *verdict.prediction;
}

}  // namespace
}  // namespace klspec
