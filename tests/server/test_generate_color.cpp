// `klspec generate --color`: the server page's provenance colours on a terminal.
#include <gtest/gtest.h>

#include <regex>

#include "test_support.h"

namespace klspec {
namespace {

// A loose KL judge on stories260K and its Q4_0 draft: some drafts are relaxed, some rejected.
const std::string kGenerate =
    test::kCli + " generate -m " + test::kTargetModel + " -md " + test::kDraftQ4 +
    " -p 'One day, a little girl named Lily' -n 64 -t 1 --judge kl --judge-threshold 0.5 --draft-policy fixed"
    " --confidence-mask 1";

test::CommandResult stdout_of(const std::string& arguments) { return test::run_command(kGenerate + " " + arguments); }

TEST(GenerateColor, AlwaysColoursEveryKindAndTheTextIsThePlainOne) {
    const test::CommandResult plain = stdout_of("--color never");
    ASSERT_EQ(plain.exit_code, 0) << plain.errors;
    EXPECT_EQ(plain.output.find('\x1b'), std::string::npos);
    const test::CommandResult coloured = stdout_of("--color always");
    ASSERT_EQ(coloured.exit_code, 0) << coloured.errors;
    for (const char* code : {"\x1b[32m", "\x1b[30;48;5;214m", "\x1b[34m"})  // draft, relaxed, target
        EXPECT_NE(coloured.output.find(code), std::string::npos) << "no " << code + 1 << " in " << coloured.output;
    EXPECT_EQ(std::regex_replace(coloured.output, std::regex("\x1b\\[[0-9;]*m"), ""), plain.output);
    // auto: stdout here is a pipe, not a terminal.
    EXPECT_EQ(stdout_of("").output, plain.output);
}

TEST(GenerateColor, LegendGoesToStderrAndABadModeIsAnError) {
    const test::CommandResult legend = test::run_command(kGenerate + " --color always");
    ASSERT_EQ(legend.exit_code, 0) << legend.errors;
    EXPECT_EQ(legend.errors.rfind("colours: \x1b[32mdraft\x1b[0m \x1b[30;48;5;214mrelaxed\x1b[0m \x1b[34mtarget", 0),
              0u)
        << legend.errors;
    EXPECT_EQ(legend.output.find("colours:"), std::string::npos) << legend.output;
    const test::CommandResult bad = test::run_command(kGenerate + " --color sometimes");
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.errors.find("--color"), std::string::npos) << bad.errors;
}

}  // namespace
}  // namespace klspec
