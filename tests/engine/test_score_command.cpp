// `klspec score`: the benchmark's own ids and scorers on outputs made elsewhere.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "build_paths.h"
#include "test_support.h"

namespace klspec {
namespace {

const std::string kDatasets = std::string(build_paths::shared_dir) + "/datasets";

// Every testbed family's gold solutions score 100 % by line-number id; a wrong one does not count.
TEST(ScoreCommand, TestbedGoldSolutionsAreCorrect) {
    for (const std::string family : {"word", "choice", "trace"}) {
        const std::string dataset = std::string(build_paths::source_dir) + "/data/testbed_" + family + "_test.jsonl";
        const std::string predictions = test::temp_path("predictions-" + family + ".jsonl");
        std::ifstream in(dataset);
        std::ofstream out(predictions);
        std::string line;
        size_t rows = 0;
        for (; std::getline(in, line); ++rows) {
            const nlohmann::json row = nlohmann::json::parse(line);
            // The first row gets an output without an answer (no capital letter: MMLU-Pro's last resort
            // takes any standalone A-J).
            const std::string output = rows == 0 ? std::string("no idea.") : row.at("answer").get<std::string>();
            out << nlohmann::json{{"id", rows}, {"output", output}}.dump() << "\n";
        }
        out.close();
        const test::CommandResult r =
            test::run_command(test::kCli + " score --json --dataset " + dataset + " --predictions " + predictions);
        ASSERT_EQ(r.exit_code, 0) << r.errors;
        const nlohmann::json summary = nlohmann::json::parse(r.output);
        EXPECT_EQ(summary.at("scored").get<size_t>(), rows) << family;
        EXPECT_EQ(summary.at("correct").get<size_t>(), rows - 1) << family;
    }
}

TEST(ScoreCommand, Gsm8kAndMmluProUseTheirOwnIdsAndGolds) {
    if (!std::filesystem::exists(kDatasets + "/gsm8k/test.jsonl")) GTEST_SKIP() << test::kNoSharedDatasets;
    const std::string predictions = test::temp_path("gsm8k-predictions.jsonl");
    {
        std::ofstream out(predictions);
        // Test line 0's gold is 18 ("#### 18").
        out << R"({"id": 0, "output": "She makes 9 * 2 = $18. The answer is $18."})"
            << "\n";
        out << R"({"id": 1, "output": "The answer is 4."})"
            << "\n";
    }
    const test::CommandResult r = test::run_command(test::kCli + " score --json --dataset gsm8k --data-dir " +
                                                    kDatasets + " --predictions " + predictions);
    ASSERT_EQ(r.exit_code, 0) << r.errors;
    const nlohmann::json summary = nlohmann::json::parse(r.output);
    EXPECT_EQ(summary.at("correct"), 1);  // line 1's gold is 3
    EXPECT_EQ(summary.at("dataset_size"), 1319);

    const std::string mmlu = test::temp_path("mmlu-predictions.jsonl");
    std::ofstream(mmlu) << R"({"id": 70, "output": "Unsafe practices cause distress. The answer is (I)."})"
                        << "\n";
    const test::CommandResult m = test::run_command(test::kCli + " score --json --dataset mmlu-pro --data-dir " +
                                                    kDatasets + " --predictions " + mmlu);
    ASSERT_EQ(m.exit_code, 0) << m.errors;
    EXPECT_EQ(nlohmann::json::parse(m.output).at("correct"), 1);  // question 70's answer is I
}

// Every MATH-500 reference solution's last \boxed{} matches its answer under the prm800k normaliser; a
// solution whose box is changed does not.
TEST(ScoreCommand, Math500ReferenceSolutionsScoreCorrect) {
    const std::string file = kDatasets + "/math500/test.jsonl";
    if (!std::filesystem::exists(file)) GTEST_SKIP() << test::kNoSharedDatasets;
    const std::string predictions = test::temp_path("math-predictions.jsonl");
    {
        std::ifstream in(file);
        std::ofstream out(predictions);
        std::string line;
        for (size_t n = 0; std::getline(in, line); ++n) {
            const nlohmann::json row = nlohmann::json::parse(line);
            const std::string solution = row.at("solution").get<std::string>();
            out << nlohmann::json{{"id", row.at("unique_id")},
                                  {"output", n == 0 ? solution + " Or rather \\boxed{\\text{no}}." : solution}}
                       .dump()
                << "\n";
        }
    }
    const test::CommandResult r = test::run_command(test::kCli + " score --json --dataset math500 --data-dir " +
                                                    kDatasets + " --predictions " + predictions);
    ASSERT_EQ(r.exit_code, 0) << r.errors;
    const nlohmann::json summary = nlohmann::json::parse(r.output);
    EXPECT_EQ(summary.at("scored"), 500);
    EXPECT_EQ(summary.at("correct"), 499);
}

TEST(ScoreCommand, BadInputGivesOneLineErrors) {
    const std::string dataset = std::string(build_paths::source_dir) + "/data/testbed_word_test.jsonl";
    const std::string unknown_id = test::temp_path("unknown-id.jsonl"), malformed = test::temp_path("malformed.jsonl");
    std::ofstream(unknown_id) << R"({"id": 100000, "output": "x"})"
                              << "\n";
    std::ofstream(malformed) << R"({"output": "no id"})"
                             << "\n";
    for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
             {" --dataset " + dataset + " --predictions " + unknown_id, "id 100000 is not in"},
             {" --dataset " + dataset + " --predictions " + malformed, "expected {\"id\""},
             {" --dataset math-1000 --predictions " + malformed, "unknown dataset 'math-1000'"},
             {" --dataset gsm8k --data-dir /nonexistent --predictions " + malformed, "cannot read /nonexistent"}}) {
        const test::CommandResult r = test::run_command(test::kCli + " score" + args);
        EXPECT_EQ(r.exit_code, 1) << args;
        EXPECT_NE(r.errors.find("klspec: error: "), std::string::npos) << r.errors;
        EXPECT_NE(r.errors.find(message), std::string::npos) << r.errors;
        EXPECT_EQ(std::count(r.errors.begin(), r.errors.end(), '\n'), 1) << r.errors;
    }
}

}  // namespace
}  // namespace klspec

namespace klspec {
namespace {

// Every GSM8K gold answer (test and train; thousands commas and negatives included), written the way the
// prompts ask ("The answer is N."), scores correct by its line-number id.
TEST(ScoreCommand, Gsm8kGoldAnswersScoreCorrectOnBothSplits) {
    for (const std::string split : {"test", "train"}) {
        const std::string file = kDatasets + "/gsm8k/" + split + ".jsonl";
        if (!std::filesystem::exists(file)) GTEST_SKIP() << test::kNoSharedDatasets;
        const std::string predictions = test::temp_path("gsm8k-gold-" + split + ".jsonl");
        size_t rows = 0;
        {
            std::ifstream in(file);
            std::ofstream out(predictions);
            for (std::string line; std::getline(in, line); ++rows) {
                const std::string answer = nlohmann::json::parse(line).at("answer").get<std::string>();
                const std::string gold = answer.substr(answer.rfind("#### ") + 5);
                out << nlohmann::json{{"id", rows}, {"output", "So it is " + gold + ". The answer is " + gold + "."}}
                           .dump()
                    << "\n";
            }
        }
        const test::CommandResult r = test::run_command(test::kCli + " score --json --dataset gsm8k --split " + split +
                                                        " --data-dir " + kDatasets + " --predictions " + predictions);
        ASSERT_EQ(r.exit_code, 0) << r.errors;
        const nlohmann::json summary = nlohmann::json::parse(r.output);
        EXPECT_EQ(summary.at("scored").get<size_t>(), rows) << split;
        EXPECT_EQ(summary.at("correct").get<size_t>(), rows) << split;
    }
}

}  // namespace
}  // namespace klspec
