// Bad input to the CLI gives one clear error line and a non-zero exit, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "engine/model.h"
#include "test_support.h"

namespace klspec {
namespace {

std::string generate_cmd(const std::string& args) { return test::kCli + " generate " + args; }

void expect_one_line_error(const test::CommandResult& r, const std::string& phrase) {
    EXPECT_NE(r.exit_code, -1) << "killed by a signal: " << r.errors;
    EXPECT_EQ(r.exit_code, 1) << "bad input and usage exit 1: " << r.errors;
    EXPECT_EQ(std::count(r.errors.begin(), r.errors.end(), '\n'), 1) << r.errors;
    EXPECT_NE(r.errors.find(phrase), std::string::npos) << "expected '" << phrase << "' in: " << r.errors;
    EXPECT_EQ(r.output, "") << "an error's output goes to stderr alone";
}

void write_file(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

TEST(BadInput, MissingModelFile) {
    expect_one_line_error(test::run_command(generate_cmd("-m /nonexistent/model.gguf -p hi")), "does not exist");
    EXPECT_THROW(Model("/nonexistent/model.gguf"), Error);
}

TEST(BadInput, NotAGgufFile) {
    const std::string path = test::temp_path("not-a-model.gguf");
    write_file(path, "this is a text file, not a model\n");
    expect_one_line_error(test::run_command(generate_cmd("-m " + path + " -p hi")), "not a GGUF file");
}

TEST(BadInput, TruncatedGguf) {
    const std::string bytes = test::read_file(test::kTargetModel);
    ASSERT_GT(bytes.size(), 1000u);
    const std::string path = test::temp_path("truncated.gguf");
    write_file(path, bytes.substr(0, bytes.size() / 2));
    expect_one_line_error(test::run_command(generate_cmd("-m " + path + " -p hi")), "failed to load model");
}

// A draft whose vocabulary differs in one token text: the model file with " Lily" renamed
// " Lilo" in place (same length, so the GGUF stays valid).
TEST(BadInput, MismatchedVocabulary) {
    std::string bytes = test::read_file(test::kTargetModel);
    const std::string token_text = "\xe2\x96\x81Lily";  // SentencePiece's "▁Lily"
    const size_t at = bytes.find(token_text);
    ASSERT_NE(at, std::string::npos);
    bytes[at + token_text.size() - 1] = 'o';
    const std::string path = test::temp_path("other-vocab.gguf");
    write_file(path, bytes);
    expect_one_line_error(test::run_command(generate_cmd("-m " + test::kTargetModel + " -md " + path + " -p hi")),
                          "vocabularies differ");
}

TEST(BadInput, PromptLongerThanContext) {
    expect_one_line_error(
        test::run_command(generate_cmd("-m " + test::kTargetModel +
                                       " -c 16 -p 'Once upon a time there was a "
                                       "little girl named Lily who liked to play in the park with her dog'")),
        "context");
}

TEST(BadInput, JudgeSpans) {
    const std::string base = "-m " + test::kTargetModel + " -md " + test::kDraftQ8 + " -p hi -n 4 --judge-span ";
    expect_one_line_error(test::run_command(generate_cmd(base + "sometimes")), "unknown judge span 'sometimes'");
    expect_one_line_error(test::run_command(generate_cmd(base + "until:")), "needs a string after the colon");
    expect_one_line_error(test::run_command(generate_cmd(base + "think:'<think>'")), "expected think:OPEN,CLOSE");
    // stories260K has no template; chatml marks no reasoning span.
    expect_one_line_error(test::run_command(generate_cmd(base + "think")), "marks no reasoning span");
}

TEST(BadInput, NonPositiveDraftMax) {
    expect_one_line_error(
        test::run_command(generate_cmd("-m " + test::kTargetModel + " -md " + test::kDraftQ8 + " --draft-max 0 -p hi")),
        "draft-max");
}

// --poll is read before the command line is parsed (it re-executes the process): a bad value must still
// reach the parser's one-line error, and a good one must decode.
TEST(BadInput, PollLevelOutOfRange) {
    for (const char* level : {"101", "-1", "lots"})
        expect_one_line_error(test::run_command(generate_cmd("-m " + test::kTargetModel + " -p hi --poll " + level)),
                              "--poll");
    const test::CommandResult ok = test::run_command(generate_cmd("-m " + test::kTargetModel + " -p hi -n 4 --poll 0"));
    EXPECT_EQ(ok.exit_code, 0) << ok.errors;
}

TEST(BadInput, DraftThreadsOutOfRange) {
    expect_one_line_error(
        test::run_command(generate_cmd("-m " + test::kTargetModel + " -md " + test::kDraftQ8 + " -p hi -td 600")),
        "draft threads must be in 0..512");
    expect_one_line_error(test::run_command(generate_cmd("-m " + test::kTargetModel + " -p hi -td -1")),
                          "threads-draft");
}

TEST(BadInput, PriorityAndCpuSetsOutOfRange) {
    const std::string model = "-m " + test::kTargetModel + " -p hi -n 2 ";
    expect_one_line_error(test::run_command(generate_cmd(model + "--prio 4")), "--prio");
    expect_one_line_error(test::run_command(generate_cmd(model + "--cpu-mask 0xzz")), "not a hex mask");
    expect_one_line_error(test::run_command(generate_cmd(model + "--cpu-range 0to1")), "not a range");
    expect_one_line_error(test::run_command(generate_cmd(model + "--cpu-range 3-1")), "selects no CPU");
    // No CPU of this machine: CPU 4095 is in no machine this runs on.
    expect_one_line_error(test::run_command(generate_cmd(model + "--cpu-mask 0x8" + std::string(127, '0'))),
                          "no CPU of this machine");
    expect_one_line_error(test::run_command(generate_cmd(model + "--cpu-mask 1 --cpu-range 0-1")), "excludes");
}

TEST(BadInput, NegativeTemperature) {
    expect_one_line_error(test::run_command(generate_cmd("-m " + test::kTargetModel + " --temp -1 -p hi")),
                          "temperature");
}

TEST(BadInput, ThreadCountLlamaCppCannotCreate) {
    expect_one_line_error(test::run_command(generate_cmd("-m " + test::kTargetModel + " -t 100000 -p hi")),
                          "threads must be in 0..512");
}

TEST(BadInput, NegativeTokenCountSaysSoInWords) {
    const test::CommandResult r = test::run_command(generate_cmd("-m " + test::kTargetModel + " -n -5 -p hi"));
    expect_one_line_error(r, "must be >= 0, got -5");
    EXPECT_LT(r.errors.size(), 200u) << r.errors;
}

TEST(BadInput, DraftOptionsOutOfRange) {
    const std::string pair = "-m " + test::kTargetModel + " -md " + test::kDraftQ8 + " -p hi ";
    expect_one_line_error(test::run_command(generate_cmd(pair + "--draft-p-min 1.5")), "draft-p-min must be in [0, 1]");
    expect_one_line_error(test::run_command(generate_cmd(pair + "--draft-max 4 --draft-min 5")),
                          "draft-min must be in 0..draft-max");
    expect_one_line_error(test::run_command(generate_cmd(pair + "--spec-draft-n-max 0")), "must be >= 1");
}

TEST(BadInput, SpecTypes) {
    const std::string target = "-m " + test::kTargetModel + " -p hi ";
    const std::string pair = target + "-md " + test::kDraftQ8 + " ";
    expect_one_line_error(test::run_command(generate_cmd(target + "--spec-type ngram-bogus")),
                          "unknown --spec-type 'ngram-bogus' (one of: draft-simple, ngram-simple");
    expect_one_line_error(test::run_command(generate_cmd(pair + "--spec-type draft-eagle3")), "docs/drafters.md");
    expect_one_line_error(test::run_command(generate_cmd(pair + "--spec-type ngram-simple")),
                          "--spec-type does not list draft-simple");
    expect_one_line_error(test::run_command(generate_cmd(target + "--spec-type ngram-simple,draft-simple")),
                          "draft-simple needs a draft model (-md)");
    expect_one_line_error(test::run_command(generate_cmd(target + "--spec-type ngram-mod --spec-ngram-mod-n-min 9 "
                                                                  "--spec-ngram-mod-n-max 8")),
                          "ngram-mod needs");
    expect_one_line_error(test::run_command(generate_cmd(pair + "--spec-type ngram-simple,draft-simple --judge kl "
                                                                "--judge-threshold 0.5")),
                          "the kl rule reads the draft model's distribution q, which n-gram drafts do not have");
}

TEST(BadInput, ParallelOutOfRange) {
    expect_one_line_error(
        test::run_command(test::kCli + " bench -m " + test::kTargetModel + " --dataset /dev/null -np 0"), "parallel");
}

TEST(BadInput, UnknownFlag) {
    expect_one_line_error(test::run_command(generate_cmd("-m " + test::kTargetModel + " --bogus -p hi")), "--bogus");
}

}  // namespace
}  // namespace klspec
