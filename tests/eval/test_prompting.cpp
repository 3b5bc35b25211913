// How problems are put to a model (src/eval/prompting.h): chat templates, few-shot exemplars, stop strings.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "build_paths.h"
#include "core/error.h"
#include "engine/model.h"
#include "eval/problem_scoring.h"
#include "eval/prompting.h"
#include "test_support.h"

namespace klspec {
namespace {

const std::string kDatasets = std::string(build_paths::shared_dir) + "/datasets";

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

TEST(Prompting, ChatTemplateWrapsTheInstructionAndQuestion) {
    const Model model(test::stories_with_chat_template());
    ASSERT_TRUE(model.chat_template().has_value());
    std::vector<Problem> problems{{"0", "What is 2 + 3?", "5", Scorer::Gsm8k, "gsm8k"}};
    const PromptFormat format = format_prompts(problems, "gsm8k", kDatasets, {}, model);
    EXPECT_TRUE(format.chat);
    EXPECT_EQ(format.few_shot, 0);
    EXPECT_TRUE(format.stop_strings.empty());  // the turn's end-of-generation token stops it
    EXPECT_EQ(problems[0].prompt,
              "<|im_start|>user\nSolve the math problem step by step. End with \"The answer is N.\" "
              "where N is the final number.\n\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n");
}

// HumanEval under a chat template as EvalPlus puts it to instruct models (evalplus/provider/utility.py,
// make_raw_chat_prompt): the code prompt fenced after its instruction, the assistant's turn opened with the
// response prefix and a python fence, the answer ended at the closing fence; the program scored is the
// original prompt and the answer (program_head), not the chat text.
TEST(Prompting, CodeBenchmarksUnderChatTakeEvalPlussInstructPrompt) {
    const Model model(test::stories_with_chat_template());
    const std::string code = "def f(x):\n    \"\"\"Twice x.\"\"\"\n";
    Problem humaneval{"HumanEval/0", code, std::nullopt, Scorer::Gsm8k, "humaneval"};
    humaneval.code = CodeTests{
        CodeBenchmark::HumanEval, "f", "def check(candidate):\n    assert candidate(2) == 4\n", "", "", {}, code};
    std::vector<Problem> problems{humaneval};
    const PromptFormat format = format_prompts(problems, "humaneval", kDatasets, {}, model);
    EXPECT_TRUE(format.chat);
    EXPECT_EQ(format.stop_strings, std::vector<std::string>{"\n```"});
    EXPECT_EQ(problems[0].prompt,
              "<|im_start|>user\nPlease provide a self-contained Python script that solves the following problem in a "
              "markdown code block:\n```\ndef f(x):\n    \"\"\"Twice x.\"\"\"\n```\n<|im_end|>\n<|im_start|>assistant\n"
              "Below is a Python script with a self-contained function that solves the problem and passes "
              "corresponding tests:\n```python\n");
    EXPECT_EQ(problems[0].code->program_head, code);
    const ScoredOutput passed = score_output(problems[0], "def f(x):\n    return 2 * x");
    EXPECT_TRUE(passed.correct) << passed.prediction.value_or("no answer");

    // Plain prompts keep the code prompt to be continued, with Codex's stop sequences.
    std::vector<Problem> plain{humaneval};
    const PromptFormat plain_format = format_prompts(plain, "humaneval", kDatasets, {ChatMode::Off, {}}, model);
    EXPECT_EQ(plain[0].prompt, code);
    EXPECT_EQ(plain_format.stop_strings.front(), "\nclass ");
}

TEST(Prompting, PlainPromptsWithoutTemplateAndChatOnIsAnError) {
    const Model model(test::kTargetModel);
    std::vector<Problem> problems{{"0", "Q: 1 + 1?\nA:", "2", Scorer::Gsm8k, "word"}};
    const PromptFormat format = format_prompts(problems, "data/testbed_word_test.jsonl", kDatasets, {}, model);
    EXPECT_FALSE(format.chat);
    EXPECT_EQ(problems[0].prompt, "Q: 1 + 1?\nA:");  // a JSONL file's prompts are used as written
    EXPECT_THROW(format_prompts(problems, "gsm8k", kDatasets, {ChatMode::On, 0}, model), Error);
    EXPECT_THROW(format_prompts(problems, "math500", kDatasets, {ChatMode::Off, 2}, model), Error);  // no exemplars
    EXPECT_THROW(parse_chat_mode("maybe"), Error);
}

TEST(Prompting, Gsm8kPlainPromptHasEightCleanedExemplars) {
    if (!std::filesystem::exists(kDatasets + "/gsm8k/train.jsonl")) GTEST_SKIP() << test::kNoSharedDatasets;
    const Model model(test::kTargetModel);
    std::vector<Problem> problems = load_dataset("gsm8k", kDatasets, "test");
    problems.resize(2);
    const std::string question = problems[1].prompt;
    const PromptFormat format = format_prompts(problems, "gsm8k", kDatasets, {}, model);
    EXPECT_EQ(format.few_shot, 8);
    EXPECT_EQ(format.stop_strings, std::vector<std::string>{"\n\nQuestion:"});
    const std::string& prompt = problems[1].prompt;
    EXPECT_EQ(count(prompt, "Question: "), 9u);
    EXPECT_EQ(count(prompt, "The answer is "), 8u + 1u);  // 8 exemplars and the instruction
    EXPECT_EQ(prompt.find("<<"), std::string::npos);      // calculator annotations removed
    EXPECT_EQ(prompt.find("####"), std::string::npos);
    EXPECT_TRUE(prompt.ends_with("Question: " + question + "\nAnswer:"));
    EXPECT_EQ(problems[0].prompt.substr(0, 2000), prompt.substr(0, 2000));  // the same exemplars for every problem
}

TEST(Prompting, SkipLeavesOutTheFirstProblemsBeforeTheLimit) {
    if (!std::filesystem::exists(kDatasets + "/gsm8k/train.jsonl")) GTEST_SKIP() << test::kNoSharedDatasets;
    const std::vector<Problem> train = load_dataset("gsm8k", kDatasets, "train");
    DatasetChoice choice{"gsm8k", kDatasets, "train"};
    choice.skip = 240;
    choice.limit = 3;
    const std::vector<Problem> chosen = choice.load();
    ASSERT_EQ(chosen.size(), 3u);
    for (size_t i = 0; i < chosen.size(); ++i) EXPECT_EQ(chosen[i].id, train[240 + i].id);
    choice.skip = train.size();
    EXPECT_THROW(choice.load(), Error);
}

// The answer marker (where sweep and mine stop relaxing by default) is where each benchmark's scorer reads the
// answer: text after it decides the score. Code has none: its whole output is the answer.
TEST(Prompting, AnswerMarkersAreWhereTheScorersReadTheAnswer) {
    const Model model(test::kTargetModel);
    const struct {
        std::string dataset;
        Scorer scorer;
        std::string answer_text;  // what follows the marker
        std::string answer;
    } benchmarks[] = {{"gsm8k", Scorer::Gsm8k, " 42.", "42"},
                      {"mmlu-pro", Scorer::MmluPro, " (C).", "C"},
                      {"math500", Scorer::Math, "\\frac{1}{3}}$.", "\\frac{1}{3}"}};
    for (const auto& b : benchmarks) {
        std::vector<Problem> problems{{"0", "question", "gold", b.scorer, ""}};
        const PromptFormat format = format_prompts(problems, b.dataset, kDatasets, {ChatMode::Off, 0}, model);
        ASSERT_FALSE(format.answer_marker.empty()) << b.dataset;
        const std::string working = "Step 1 gives 7 (B) and 9. So ";
        EXPECT_EQ(extract_answer(b.scorer, working + format.answer_marker + b.answer_text), b.answer) << b.dataset;
    }
    std::vector<Problem> code{{"HumanEval/0", "def f():\n", std::nullopt, Scorer::Gsm8k, ""}};
    EXPECT_EQ(format_prompts(code, "humaneval", kDatasets, {ChatMode::Off, {}}, model).answer_marker, "");
}

TEST(Prompting, MmluProPlainPromptHasItsCategorysFiveExemplarsAndOptions) {
    if (!std::filesystem::exists(kDatasets + "/mmlu_pro/validation.jsonl")) GTEST_SKIP() << test::kNoSharedDatasets;
    const Model model(test::kTargetModel);
    std::vector<Problem> problems = load_dataset("mmlu-pro", kDatasets, "test");
    problems.resize(1);
    const std::string category = problems[0].family;
    const PromptFormat format = format_prompts(problems, "mmlu-pro", kDatasets, {}, model);
    EXPECT_EQ(format.few_shot, 5);
    const std::string& prompt = problems[0].prompt;
    EXPECT_EQ(prompt.rfind("The following are multiple choice questions (with answers) about " + category + ".", 0),
              0u);
    EXPECT_EQ(count(prompt, "\nOptions:\nA. "), 6u);
    EXPECT_EQ(count(prompt, "Answer: Let's think step by step."), 6u);
    EXPECT_TRUE(prompt.ends_with("Answer: Let's think step by step.")) << prompt.substr(prompt.size() - 200);
}

}  // namespace
}  // namespace klspec
