// Mining on real models: labels against an independent target-only replay, known-label cases, resuming,
// and a head that reads one coordinate of h_draft (features line up with positions).
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include <fmt/format.h>

#include "autojudge/mining.h"
#include "autojudge/mining_store.h"
#include "core/distribution_stats.h"
#include "core/judges/autojudge.h"
#include "test_support.h"

namespace klspec {
namespace {

ContextOptions mining_context() {
    ContextOptions context;
    context.n_ctx = 512;
    context.n_threads = 1;
    context.hidden_states = true;
    context.n_sequences = 2;  // mine_problem: continuations keep their cells on one id, passes run on the other
    return context;
}

// The target's own greedy continuation of `prefix`, decoded without a draft.
std::vector<int32_t> target_only_greedy(SpeculativeDecoder& target_only, std::vector<int32_t> prefix, int32_t n) {
    if (n <= 0) return {};
    GenerationOptions options;
    options.max_tokens = n;
    Sequence seq = target_only.start(0, std::move(prefix), options);
    Sequence* const batch[] = {&seq};
    while (!seq.finished()) target_only.step(batch);
    return seq.take_result().tokens;
}

// Replays the mining procedure of docs/design.md ("AutoJudge training") step by step with a target-only decoder
// and checks every mined row, of `n_problems` problems mined `parallel` at a time.
void expect_labels_match_a_target_only_replay(size_t n_problems, int32_t parallel) {
    const Model target(test::kDefaultTarget);
    const Model draft(test::kDefaultDraft);
    ContextOptions context = mining_context();
    context.n_sequences = parallel + 1;
    SpeculativeDecoder decoder(target, &draft, context);
    ContextOptions plain = mining_context();
    plain.hidden_states = false;
    SpeculativeDecoder target_only(target, nullptr, plain);
    SpeculativeDecoder draft_only(draft, nullptr, mining_context());
    // In reverse: the first problems have the fewest mismatches, so mined together they finish first, out of order.
    std::vector<Problem> problems = read_problems(test::kWordTestSet, n_problems);
    std::reverse(problems.begin(), problems.end());
    MiningOptions options;
    options.max_tokens = 120;
    std::vector<ProblemMining> mined_problems;
    mine_problems(decoder, problems, options, parallel, [&](size_t index, ProblemMining&& mined, double) {
        ASSERT_EQ(index, mined_problems.size());  // in problem order
        mined_problems.push_back(std::move(mined));
    });
    ASSERT_EQ(mined_problems.size(), problems.size());
    size_t important = 0, unimportant = 0, near_ties = 0;
    for (size_t k = 0; k < problems.size(); ++k) {
        const Problem& problem = problems[k];
        const ProblemMining& mined = mined_problems[k];
        const std::vector<int32_t> prompt = target.tokenize(problem.prompt, true);
        const size_t P = prompt.size();
        std::vector<int32_t> response = target_only_greedy(target_only, prompt, options.max_tokens);
        const std::optional<std::string> answer = extract_answer(problem.scorer, target.text(response));
        size_t next = 0;  // the first position not handled yet
        for (const MinedMismatch& m : mined.mismatches) {
            std::vector<int32_t> sequence = prompt;
            sequence.insert(sequence.end(), response.begin(), response.end());
            const ForwardResult pass = draft_only.forward(ModelRole::Target, sequence, false);
            // The draft's greedy choice at a position, up to a near tie: mining's passes start from the cells of
            // the continuation it just decoded, whose rows differ from this fresh pass's in the last bits.
            const auto draft_chooses = [&](size_t i, int32_t token) {
                const std::span<const float> row = pass.logits_row(int32_t(P + i) - 1);
                const float gap = row[size_t(argmax(row))] - row[size_t(token)];
                near_ties += gap > 0;
                return gap < test::near_tie_gap();
            };
            // No mismatch between the last handled position and this one; a mismatch here.
            for (size_t i = next; i < size_t(m.position); ++i)
                ASSERT_TRUE(draft_chooses(i, response[i])) << problem.id << " @" << i;
            const int32_t d = m.draft_token;
            ASSERT_TRUE(draft_chooses(size_t(m.position), d)) << problem.id << " @" << m.position;
            ASSERT_EQ(response[size_t(m.position)], m.target_token);
            ASSERT_NE(m.draft_token, m.target_token);
            std::vector<int32_t> swapped(response.begin(), response.begin() + m.position);
            swapped.push_back(d);
            std::vector<int32_t> prefix = prompt;
            prefix.insert(prefix.end(), swapped.begin(), swapped.end());
            // The feature is the draft's hidden state of the pass whose input token is d. The pair is F16, and
            // ggml rounds activations to F16 before each matmul, so a one-token pass and this batched one differ
            // in the last F16 bits (measured: relative L2 error up to 5e-4). A neighbouring pass differs by ~1.
            const ForwardResult at_d = draft_only.forward(ModelRole::Target, prefix, true);
            ASSERT_EQ(m.draft_hidden.size(), size_t(at_d.n_embd));
            const float* const expected = at_d.hidden.data() + (prefix.size() - 1) * size_t(at_d.n_embd);
            double error = 0, norm = 0;
            for (size_t j = 0; j < m.draft_hidden.size(); ++j) {
                error += std::pow(double(m.draft_hidden[j]) - expected[j], 2);
                norm += std::pow(double(expected[j]), 2);
            }
            ASSERT_LT(std::sqrt(error / norm), 5e-3) << problem.id << " @" << m.position;
            const std::vector<int32_t> rest =
                target_only_greedy(target_only, prefix, options.max_tokens - m.position - 1);
            swapped.insert(swapped.end(), rest.begin(), rest.end());
            const std::optional<std::string> answer_after = extract_answer(problem.scorer, target.text(swapped));
            EXPECT_EQ(m.answer, answer);
            EXPECT_EQ(m.answer_after_swap, answer_after);
            EXPECT_EQ(m.important, answer_after != answer);
            EXPECT_GE(m.kl, 0.0);
            EXPECT_EQ(m.draft_hidden.size(), size_t(draft.n_embd()));
            EXPECT_EQ(m.target_hidden.size(), size_t(target.n_embd()));
            (m.important ? important : unimportant)++;
            if (!m.important) response = swapped;
            next = size_t(m.position) + 1;
        }
        EXPECT_EQ(mined.final_response, response) << problem.id;
    }
    // These problems hold both kinds: a swapped digit that changes the answer, a rephrasing that does not.
    EXPECT_GT(important, 0u);
    EXPECT_GT(unimportant, 0u);
    std::cout << near_ties << " positions where mining and the fresh pass chose differently, all near ties\n";
}

TEST(Mining, LabelsMatchAnIndependentTargetOnlyReplay) { expect_labels_match_a_target_only_replay(2, 1); }

// Problems mined together (each continuing on its own id, their continuations verified in one batch, the passes
// on the shared last id) label as each alone does: here three at a time, so that ids 1 and 2 are used too.
TEST(Mining, ProblemsMinedTogetherMatchTheReplayToo) { expect_labels_match_a_target_only_replay(3, 3); }

// Stories have no "The answer is": no swap can change the (absent) answer, so every swap is harmless and
// adopted, and the final response is no longer the target's original greedy text.
// On a code benchmark the answer is the test outcome: two programs failing for different reasons give the
// same answer, so swapping one for the other is no important mismatch.
TEST(Mining, ACodeProblemsAnswerIsItsTestOutcome) {
    const std::string stub = "def f(x):\n    \"\"\"Twice x.\"\"\"\n";  // HumanEval's prompt: the program's head
    Problem problem{"HumanEval/0", stub, std::nullopt, Scorer::Gsm8k, ""};
    problem.code = CodeTests{
        CodeBenchmark::HumanEval, "f", "def check(candidate):\n    assert candidate(2) == 4\n", "", "", {}, stub};
    EXPECT_EQ(final_answer(problem, "def f(x):\n    return 2 * x\n"), "pass");
    EXPECT_EQ(final_answer(problem, "def f(x):\n    return 3 * x\n"), "fail");  // AssertionError
    EXPECT_EQ(final_answer(problem, "def f(x):\n    return y\n"), "fail");      // NameError
    EXPECT_EQ(final_answer(problem, ""), "fail");
    // A response holds the tokens that completed its stop string: the answer is read before it.
    const std::vector<std::string> fence = {"\n```"};
    EXPECT_EQ(final_answer(problem, "def f(x):\n    return 2 * x\n```\nprint(f(3))", fence), "pass");
    EXPECT_EQ(final_answer(problem, "def f(x):\n    return 2 * x\n```", {}), "fail");  // uncut: an empty program
    const Problem word{"0", "q", "18", Scorer::Gsm8k, ""};
    EXPECT_EQ(final_answer(word, "So 18. The answer is 18."), "18");
}

TEST(Mining, SwapsThatCannotChangeTheAnswerAreUnimportantAndAdopted) {
    const Model target(test::kTargetModel);
    const Model draft(test::kDraftQ4);
    SpeculativeDecoder decoder(target, &draft, mining_context());
    Problem problem;
    problem.id = "story";
    problem.prompt = test::story_prompts(1).front();
    MiningOptions options;
    options.max_tokens = 48;
    const ProblemMining mined = mine_problem(decoder, problem, options);
    ASSERT_GT(mined.mismatches.size(), 2u);
    for (const MinedMismatch& m : mined.mismatches) {
        EXPECT_FALSE(m.important);
        EXPECT_EQ(m.answer, std::nullopt);
        EXPECT_EQ(m.answer_after_swap, std::nullopt);
    }
    for (size_t k = 1; k < mined.mismatches.size(); ++k)
        EXPECT_GT(mined.mismatches[k].position, mined.mismatches[k - 1].position);
    // The last adopted swap put its draft token in the final response.
    const MinedMismatch& last = mined.mismatches.back();
    ASSERT_LT(size_t(last.position), mined.final_response.size());
    EXPECT_EQ(mined.final_response[size_t(last.position)], last.draft_token);
}

// What `klspec mine` gives a benchmark (issue 62): its stop strings end the response where a decoded answer
// ends, and only positions a judge may relax (inside the span, until the answer marker) are labelled. Here the
// stop is "." and the marker " = ", which the testbed's working passes early: without them the response runs
// on past the stop and the tokens after the marker are mined too.
TEST(Mining, ResponsesEndAtTheStopAndOnlyTheJudgeSpanIsLabelled) {
    const Model target(test::kDefaultTarget);
    const Model draft(test::kDefaultDraft);
    SpeculativeDecoder decoder(target, &draft, mining_context());
    const std::vector<Problem> problems = read_problems(test::kWordTestSet, 2);
    const std::string stop = ".", marker = " = ";
    MiningOptions everywhere;
    everywhere.max_tokens = 100;
    MiningOptions stopped = everywhere, spanned = everywhere;
    stopped.stop_strings = {stop};
    spanned.span = JudgeSpan::parse("until:" + marker);
    const auto text_before = [&](const ProblemMining& mined, const MinedMismatch& m) {
        return target.text(std::span(mined.final_response).first(size_t(m.position)));
    };
    size_t ran_on = 0, labelled_after_marker = 0;
    for (const Problem& problem : problems) {
        const ProblemMining all = mine_problem(decoder, problem, everywhere);
        const std::string all_text = target.text(all.final_response);
        const size_t stop_at = all_text.find(stop);
        ran_on += stop_at != std::string::npos && stop_at + stop.size() < all_text.size();
        for (const MinedMismatch& m : all.mismatches)
            labelled_after_marker += text_before(all, m).find(marker) != std::string::npos;

        // A stop, if reached, ends the response: no text before its last token holds one (a swapped-in
        // continuation may also run to -n without one).
        const std::vector<int32_t> response = mine_problem(decoder, problem, stopped).final_response;
        ASSERT_FALSE(response.empty());
        EXPECT_EQ(target.text(std::span(response).first(response.size() - 1)).find(stop), std::string::npos)
            << problem.id;
        const ProblemMining in_span = mine_problem(decoder, problem, spanned);
        for (const MinedMismatch& m : in_span.mismatches)
            EXPECT_EQ(text_before(in_span, m).find(marker), std::string::npos) << problem.id << " @" << m.position;
    }
    ASSERT_GT(ran_on, 0u);                 // the stop string has something to stop
    ASSERT_GT(labelled_after_marker, 0u);  // and the span something to leave out
}

// An interrupted run (rows of a half-mined problem on disk) resumes to exactly what one run writes.
TEST(Mining, ResumesAfterAnInterruptToTheSameRows) {
    const auto read_file = [](const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string dataset = test::temp_path("problems.jsonl");
    {
        std::ofstream out(dataset);
        for (int i = 0; i < 4; ++i)  // the stories with the most mismatches first (mined together, they finish last)
            out << nlohmann::json{{"id", "s" + std::to_string(i)}, {"question", test::story_prompts(4)[size_t(3 - i)]}}
                       .dump()
                << "\n";
    }
    const std::string once = test::temp_path("once"), resumed = test::temp_path("resumed");
    const std::string common =
        test::kCli + " mine -m " + test::kTargetModel + " -md " + test::kDraftQ4 + " -t 1 -n 32 --dataset " + dataset;
    ASSERT_EQ(test::run_command(common + " --out " + once).exit_code, 0);
    const test::CommandResult first = test::run_command(common + " --limit 2 --out " + resumed);
    ASSERT_EQ(first.exit_code, 0) << first.errors;
    // A kill mid-problem leaves rows that problems.jsonl does not account for.
    std::ofstream(resumed + "/labels.jsonl", std::ios::app) << R"({"problem_id": "s2", "position": 1})"
                                                            << "\n";
    std::ofstream(resumed + "/features.f32", std::ios::app | std::ios::binary) << "partial row";
    const test::CommandResult second = test::run_command(common + " --out " + resumed);
    ASSERT_EQ(second.exit_code, 0) << second.errors;
    EXPECT_NE(second.errors.find("2 problems already mined"), std::string::npos) << second.errors;
    EXPECT_EQ(read_file(resumed + "/labels.jsonl"), read_file(once + "/labels.jsonl"));
    EXPECT_EQ(read_file(resumed + "/features.f32"), read_file(once + "/features.f32"));
    EXPECT_GT(read_file(once + "/labels.jsonl").size(), 0u);
    // Mined three at a time (problems then finish out of order): the rows of one run, in problem order. Which
    // tokens, positions and labels, compared: the rows' statistics come from cells decoded in other batches and
    // may differ in the last bits.
    const std::string together = test::temp_path("together");
    const test::CommandResult parallel = test::run_command(common + " -np 3 --out " + together);
    ASSERT_EQ(parallel.exit_code, 0) << parallel.errors;
    const auto labelled = [&](const std::string& dir) {
        std::ifstream in(dir + "/labels.jsonl");
        std::vector<std::string> rows;
        for (std::string line; std::getline(in, line);) {
            const nlohmann::json row = nlohmann::json::parse(line);
            rows.push_back(fmt::format("{} {} {} {} {}", row["problem_id"].get<std::string>(),
                                       row["position"].get<int>(), row["draft_token"].get<int>(),
                                       row["target_token"].get<int>(), row["label"].get<int>()));
        }
        return rows;
    };
    EXPECT_EQ(labelled(together), labelled(once));
    // Another model pair into the same directory is refused, in one line.
    const test::CommandResult other =
        test::run_command(test::kCli + " mine -m " + test::kTargetModel + " -md " + test::kDraftQ8 +
                          " -t 1 -n 32 --dataset " + dataset + " --out " + resumed);
    EXPECT_EQ(other.exit_code, 1);
    EXPECT_NE(other.errors.find("klspec: error: "), std::string::npos) << other.errors;
    EXPECT_NE(other.errors.find("use another --out"), std::string::npos) << other.errors;
}

// features.f32 stays out of git (results/real-pair): a machine that resumes from the committed labels and
// problems.jsonl computes the rows again from the kept responses, both the swaps that were kept (one pass over the
// response) and those that were not (a pass of their own).
TEST(Mining, FeaturesLostWithTheMachineAreComputedAgainFromTheKeptResponses) {
    const auto read_file = [](const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string dir = test::temp_path("mined-elsewhere");
    const std::string command = test::kCli + " mine -m " + test::kDefaultTarget + " -md " + test::kDefaultDraft +
                                " -t 1 -n 96 --dataset " + test::kWordTestSet + " --limit 3 --out " + dir;
    const test::CommandResult mined = test::run_command(command);
    ASSERT_EQ(mined.exit_code, 0) << mined.errors;
    const MinedData data = read_mined(dir);
    const auto important = std::count_if(data.labels.begin(), data.labels.end(), [](auto& l) { return l.important; });
    ASSERT_GT(important, 0) << "no swap that was not kept: its own pass goes unchecked";
    ASSERT_LT(static_cast<size_t>(important), data.labels.size()) << "no kept swap: the response's pass goes unchecked";
    std::filesystem::rename(dir + "/features.f32", dir + "/mined.f32");
    const test::CommandResult untrained =
        test::run_command(test::kCli + " train-judge " + dir + " --out " + dir + "/h.json");
    EXPECT_EQ(untrained.exit_code, 1);
    EXPECT_NE(untrained.errors.find("the same klspec mine command computes them again"), std::string::npos)
        << untrained.errors;

    const test::CommandResult again = test::run_command(command);
    ASSERT_EQ(again.exit_code, 0) << again.errors;
    EXPECT_NE(again.errors.find("computing the features of"), std::string::npos) << again.errors;
    // Each row is its own mismatch's: nearest to the mined row among all rows, and equal to it up to rounding
    // (the testbed's F32 batches go through llamafile's sgemm, whose sums depend on the batch: 0.0099 seen).
    const MinedData recomputed = read_mined(dir);
    ASSERT_EQ(recomputed.features.size(), data.features.size());
    const auto distance = [&](size_t a, size_t b) {
        double sum = 0;
        for (size_t k = 0; k < data.n_features(); ++k) {
            const double d = recomputed.feature_row(a)[k] - data.feature_row(b)[k];
            sum += d * d;
        }
        return std::sqrt(sum);
    };
    double largest = 0;
    for (size_t r = 0; r < data.labels.size(); ++r) {
        for (size_t other = 0; other < data.labels.size(); ++other)
            if (other != r) ASSERT_LT(distance(r, r), distance(r, other)) << "row " << r << " is nearer row " << other;
        for (size_t k = 0; k < data.n_features(); ++k)
            largest = std::max(largest, double(std::fabs(recomputed.feature_row(r)[k] - data.feature_row(r)[k])));
    }
    std::cout << "[ mining   ] recomputed features: largest difference " << largest << "\n";
    EXPECT_LT(largest, 0.05);

    // A response that was never kept (problems.jsonl written before it was) is refused in one line.
    std::filesystem::remove(dir + "/features.f32");
    std::string problems = read_file(dir + "/problems.jsonl");
    std::ofstream(dir + "/problems.jsonl", std::ios::trunc)
        << std::regex_replace(problems, std::regex(R"(,"response":\[[0-9,]*\])"), "");
    const test::CommandResult refused = test::run_command(command);
    EXPECT_EQ(refused.exit_code, 1);
    EXPECT_NE(refused.errors.find("keeps no response for"), std::string::npos) << refused.errors;
}

// Found by fuzz_mined: a meta.json that is valid JSON but no object ("0") was an internal error.
TEST(AutoJudgeCommands, AMetaFileThatIsNoObjectIsRefusedInOneLine) {
    const std::string dir = test::temp_path("mined-not-an-object");
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/meta.json") << " 0";
    const test::CommandResult r = test::run_command(test::kCli + " train-judge " + dir + " --out " + dir + "/h.json");
    EXPECT_EQ(r.exit_code, 1) << r.errors;
    EXPECT_EQ(r.errors.rfind("klspec: error: ", 0), 0u) << r.errors;
    EXPECT_NE(r.errors.find("not a klspec mining run"), std::string::npos) << r.errors;
}

// Found by fuzz_mined under UBSan: a count written as a huge float (1.66667e+50) was cast to an integer
// (undefined behaviour); every integer field is now range-checked and refused in one line.
TEST(AutoJudgeCommands, AnIntegerFieldOutOfRangeIsRefusedInOneLine) {
    const auto refused = [](const std::string& name, const std::string& meta, const std::string& problems) {
        const std::string dir = test::temp_path(name);
        std::filesystem::create_directories(dir);
        std::ofstream(dir + "/meta.json") << meta;
        std::ofstream(dir + "/problems.jsonl") << problems;
        const test::CommandResult r =
            test::run_command(test::kCli + " train-judge " + dir + " --out " + dir + "/h.json");
        EXPECT_EQ(r.exit_code, 1) << r.errors;
        EXPECT_EQ(r.errors.rfind("klspec: error: ", 0), 0u) << r.errors;
        EXPECT_EQ(std::count(r.errors.begin(), r.errors.end(), '\n'), 1) << r.errors;
        return r.errors;
    };
    const std::string format = R"("format": "klspec-autojudge-mining/1")";
    EXPECT_NE(
        refused("mined-huge-size", "{" + format + R"(, "draft_hidden_size": 1.66667e+50, "target_hidden_size": 4})", "")
            .find("'draft_hidden_size' must be an integer"),
        std::string::npos);
    EXPECT_NE(
        refused("mined-negative-size", "{" + format + R"(, "draft_hidden_size": -3, "target_hidden_size": 4})", "")
            .find("'draft_hidden_size' must be an integer"),
        std::string::npos);
    EXPECT_NE(refused("mined-float-count", "{" + format + R"(, "draft_hidden_size": 4, "target_hidden_size": 4})",
                      R"({"id": "a", "mismatches": 2.5})"
                      "\n")
                  .find("'mismatches' must be an integer"),
              std::string::npos);
}

TEST(AutoJudgeCommands, BadInputGivesOneLineErrors) {
    for (const std::string& args :
         {std::string(" train-judge /nonexistent/dir --out /tmp/h.json"),
          " mine -m " + test::kTargetModel + " --dataset " + test::kWordTestSet + " --out " + test::temp_path("m"),
          std::string(" analyze /nonexistent/dir")}) {
        const test::CommandResult r = test::run_command(test::kCli + args);
        EXPECT_EQ(r.exit_code, 1) << args << ": " << r.errors;
        EXPECT_EQ(r.errors.rfind("klspec: error: ", 0), 0u) << r.errors;
        EXPECT_EQ(std::count(r.errors.begin(), r.errors.end(), '\n'), 1) << r.errors;
    }
}

// A head that reads one coordinate of h_draft sees, at each judged position, that coordinate of the pass
// whose INPUT token is d_i (the feature mining stores), not its neighbour's.
TEST(AutoJudgeHeadFeatures, OneDraftCoordinateLinesUpWithTheDraftTokensPass) {
    const Model target(test::kTargetModel);
    const Model draft(test::kDraftQ4);
    SpeculativeDecoder decoder(target, &draft, mining_context());
    constexpr size_t kCoordinate = 5;
    AutoJudgeHead head;
    head.draft_hidden_size = size_t(draft.n_embd());
    head.target_hidden_size = size_t(target.n_embd());
    const size_t n = head.draft_hidden_size + head.target_hidden_size;
    head.mean.assign(n, 0.0);
    head.scale.assign(n, 1.0);
    head.weights.assign(n, 0.0);
    head.weights[kCoordinate] = 1.0;  // s = σ(h_draft[5])
    head.threshold = 0.0;             // never relaxes: the output stays the target's
    std::vector<JudgedPosition> judged;
    decoder.set_observer([&](const JudgedPosition& p) {
        if (p.verdict.judged) judged.push_back(p);
    });
    GenerationOptions options;
    options.max_tokens = 48;
    options.draft_max = 6;
    options.judge = std::make_shared<AutoJudge>(head, 0.0);
    const std::string prompt = test::story_prompts(1).front();
    const GenerationResult result = decoder.generate(prompt, options);
    ASSERT_GT(judged.size(), 2u);
    std::vector<int32_t> sequence = target.tokenize(prompt, true);
    sequence.insert(sequence.end(), result.tokens.begin(), result.tokens.end());
    for (const JudgedPosition& p : judged) {
        std::vector<int32_t> prefix(sequence.begin(), sequence.begin() + p.position);
        prefix.push_back(p.draft_token);
        const ForwardResult pass = decoder.forward(ModelRole::Draft, prefix, true);
        const double at_d = pass.hidden[(prefix.size() - 1) * size_t(pass.n_embd) + kCoordinate];
        const double before = pass.hidden[(prefix.size() - 2) * size_t(pass.n_embd) + kCoordinate];
        const double seen = std::log(p.verdict.decision.statistic / (1 - p.verdict.decision.statistic));  // logit of s
        EXPECT_NEAR(seen, at_d, 0.15) << "position " << p.position;
        if (std::abs(at_d - before) > 0.5) {
            EXPECT_GT(std::abs(seen - before), 0.3) << "position " << p.position;
        }
    }
}

}  // namespace
}  // namespace klspec
