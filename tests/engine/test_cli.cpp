// `klspec generate --json` end to end: the CLI reports what the library computes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/judge.h"
#include "engine/speculative_decoder.h"
#include "test_support.h"

namespace klspec {
namespace {

TEST(Cli, GenerateJsonMatchesLibrary) {
    const test::CommandResult r = test::run_command(test::kCli + " generate -m " + test::kTargetModel + " -md " +
                                                    test::kDraftQ8 + " -p 'Once upon a time' -n 24 -t 1 --json");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json out = nlohmann::json::parse(r.output);
    const nlohmann::json& stats = out.at("stats");
    for (const char* key : {"target_calls", "draft_calls", "drafted", "accepted", "relaxed_accepted", "mat",
                            "acceptance_rate", "tokens_per_second"}) {
        EXPECT_TRUE(stats.contains(key)) << key;
    }
    EXPECT_GT(stats.at("mat").get<double>(), 1.0);
    EXPECT_EQ(stats.at("relaxed_accepted").get<int>(), 0);

    const Model target(test::kTargetModel);
    ContextOptions context;
    context.n_threads = 1;
    SpeculativeDecoder target_only(target, nullptr, context);
    VanillaJudge judge;
    GenerationOptions options;
    options.max_tokens = 24;
    const GenerationResult reference = target_only.generate("Once upon a time", options, judge);
    EXPECT_EQ(out.at("tokens").get<std::vector<int32_t>>(), reference.tokens);
    EXPECT_EQ(out.at("text").get<std::string>(), reference.text);
}

TEST(Cli, StopStringCutsTheText) {
    const test::CommandResult r = test::run_command(test::kCli + " generate -m " + test::kTargetModel +
                                                    " -p 'Once upon a time' -n 64 -t 1 --stop Lily --json");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json out = nlohmann::json::parse(r.output);
    EXPECT_EQ(out.at("stop_reason"), "stop_string");
    EXPECT_EQ(out.at("text").get<std::string>().find("Lily"), std::string::npos);
}

TEST(Cli, HelpExplainsFlags) {
    const test::CommandResult r = test::run_command(test::kCli + " generate --help");
    EXPECT_EQ(r.exit_code, 0);
    for (const char* flag : {"--model", "--model-draft", "--draft-max", "--temp", "--top-k", "--top-p", "--seed",
                             "--threads", "--ctx-size", "--json"}) {
        EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
    }
}

}  // namespace
}  // namespace klspec
