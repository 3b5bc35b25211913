// make_judge: every rule, every refused option, and AutoJudge head files good and bad.
#include "core/judge_factory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/judges/autojudge.h"
#include "temp_directory.h"

namespace klspec {
namespace {

std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = test::temp_path(name);
    std::ofstream(path) << text;
    return path;
}

// A head where only the second target coordinate matters:
//   z = 0.25 + 2 · (h_target[1] − 0.5) / 4,  s = σ(z).
const char* const kHead = R"({
  "draft_hidden_size": 2,
  "target_hidden_size": 3,
  "mean":    [9, 9, 0, 0.5, 0],
  "scale":   [1, 1, 1, 4, 1],
  "weights": [0, 0, 0, 2, 0],
  "bias": 0.25,
  "threshold": 0.5
})";

// JudgeOptions field by field (designated initializers that skip fields trip -Wmissing-field-initializers).
JudgeOptions options(std::string rule, std::optional<double> threshold = std::nullopt,
                     std::optional<int32_t> topk = std::nullopt, double confidence_mask = 0.9,
                     std::string head_path = "") {
    JudgeOptions result;
    result.rule = std::move(rule);
    result.threshold = threshold;
    result.topk = topk;
    result.confidence_mask = confidence_mask;
    result.head_path = std::move(head_path);
    return result;
}

// The message make_judge throws, or "" if it does not throw.
std::string error_of(const JudgeOptions& options) {
    try {
        make_judge(options);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(JudgeFactory, BuildsEveryRule) {
    const std::string head = write_file("head_ok.json", kHead);
    const std::vector<JudgeOptions> cases{
        options("vanilla"),
        options("kl", 0.3),
        options("kl", 0.0, std::nullopt, 1.0),
        options("topk", std::nullopt, 3),
        options("target-entropy", 2.0),
        options("draft-entropy", 0.5),
        options("prob-threshold", 0.3),
        options("topn-delta", 0.1, 3),
        options("typical", 0.09),
        options("fly", 0.5),
        options("fsd", 0.1),
        options("autojudge", std::nullopt, std::nullopt, 0.9, head),
        options("autojudge", 0.2, std::nullopt, 0.9, head),
    };
    for (const JudgeOptions& judge_options : cases) {
        const auto judge = make_judge(judge_options);
        EXPECT_EQ(judge->name(), judge_options.rule);
        EXPECT_EQ(judge->needs_hidden_states(), judge_options.rule == "autojudge");
        // The table's flag (for --help and the up-front refusal) is the judge's own, and n-gram drafts can
        // feed exactly the rules that read nothing of the draft but its token.
        const bool reads_draft = judge_options.rule == "kl" || judge_options.rule == "draft-entropy" ||
                                 judge_options.rule == "fsd" || judge_options.rule == "autojudge";
        EXPECT_EQ(judge->needs_draft_model(), reads_draft) << judge_options.rule;
        for (const JudgeRule& rule : judge_rules()) {
            if (rule.name == judge_options.rule) {
                EXPECT_EQ(rule.needs_draft_model, reads_draft) << judge_options.rule;
            }
        }
    }
    size_t listed = 0;
    for (const JudgeRule& info : judge_rules()) {
        EXPECT_FALSE(info.summary.empty());
        ++listed;
    }
    EXPECT_EQ(listed, 11u);
}

TEST(JudgeFactory, RefusesBadOptionsNamingTheField) {
    const std::string head = write_file("head_ok.json", kHead);
    using F = JudgeField;
    const auto with = [](JudgeOptions o, auto&& change) {
        change(o);
        return o;
    };
    const std::vector<std::tuple<JudgeOptions, std::string, JudgeField>> cases{
        {options("bogus"), "unknown judge 'bogus'", F::Rule},
        {options("kl"), "needs a threshold", F::Threshold},
        {options("kl", -0.1), "threshold must be >= 0", F::Threshold},
        {options("kl", std::nan("")), "threshold must be >= 0", F::Threshold},
        {options("kl", 0.1, std::nullopt, 0.0), "confidence mask must be in (0, 1]", F::ConfidenceMask},
        {options("kl", 0.1, std::nullopt, 1.5), "confidence mask must be in (0, 1]", F::ConfidenceMask},
        {options("kl", 0.1, 2), "does not take K", F::TopK},
        {options("topk"), "needs K", F::TopK},
        {options("topk", std::nullopt, 0), "K must be >= 1", F::TopK},
        {options("topk", 0.1, 2), "does not take a threshold", F::Threshold},
        {options("prob-threshold", 1.5), "threshold must be in [0, 1]", F::Threshold},
        {options("target-entropy"), "needs a threshold", F::Threshold},
        {options("draft-entropy", -1.0), "threshold must be >= 0", F::Threshold},
        {options("vanilla", 0.1), "does not take a threshold", F::Threshold},
        {options("vanilla", std::nullopt, std::nullopt, 0.9, head), "does not take a head file", F::Head},
        {options("autojudge"), "needs a head file", F::Head},
        {options("fsd"), "needs a threshold", F::Threshold},
        {with(options("fsd", 0.1), [](JudgeOptions& o) { o.divergence = "hellinger"; }),
         "unknown divergence 'hellinger'", F::Divergence},
        {with(options("kl", 0.1), [](JudgeOptions& o) { o.divergence = "js"; }), "does not take a divergence",
         F::Divergence},
        {with(options("fly", 0.1), [](JudgeOptions& o) { o.window = 0; }), "the window must be >= 1", F::Window},
        {with(options("kl", 0.1), [](JudgeOptions& o) { o.window = 3; }), "does not take a window", F::Window},
        {with(options("kl"), [](JudgeOptions& o) { o.max_tv = 1.5; }), "--max-tv must be in (0, 1]", F::MaxTv},
        {with(options("topk", std::nullopt, 2), [](JudgeOptions& o) { o.max_tv = 0.1; }), "does not take --max-tv",
         F::MaxTv},
        {options("autojudge", 1.5, std::nullopt, 0.9, head), "threshold must be in [0, 1]", F::Threshold},
        {options("autojudge", std::nullopt, std::nullopt, 0.9, "/nonexistent/head.json"),
         "cannot open AutoJudge head file", F::Head},
    };
    for (const auto& [judge_options, expected, field] : cases) {
        try {
            make_judge(judge_options);
            ADD_FAILURE() << judge_options.rule << ": accepted, expected \"" << expected << "\"";
        } catch (const JudgeOptionError& e) {
            const std::string message = e.what();
            EXPECT_NE(message.find(expected), std::string::npos)
                << judge_options.rule << ": got \"" << message << "\", expected it to contain \"" << expected << "\"";
            EXPECT_EQ(message.find('\n'), std::string::npos);
            EXPECT_EQ(e.field, field) << message;
        }
    }
}

TEST(JudgeFactory, MaxTvIsKlsThresholdTwoEpsilonSquared) {
    EXPECT_DOUBLE_EQ(max_tv_threshold(0.5), 0.5);
    EXPECT_DOUBLE_EQ(max_tv_threshold(0.1), 0.02);
    JudgeOptions kl = options("kl");
    kl.max_tv = 0.1;
    EXPECT_NEAR(*make_judge(kl)->total_variation_bound(), 0.1, 1e-12);  // sqrt(τ / 2): the ε given
}

DraftPosition hidden_position(const std::vector<float>& draft_hidden, const std::vector<float>& target_hidden) {
    DraftPosition position;
    position.draft_hidden = draft_hidden;
    position.target_hidden = target_hidden;
    return position;
}

TEST(AutoJudge, ScoresWithTheHead) {
    AutoJudge judge(AutoJudgeHead::load(write_file("head_ok.json", kHead)), 0.5);
    EXPECT_TRUE(judge.needs_hidden_states());
    const std::vector<float> draft{100.0f, -100.0f};  // zero weights: no influence
    for (float h : {-3.0f, 0.0f, 0.5f, 2.0f}) {
        const double z = 0.25 + 2.0 * (h - 0.5) / 4.0;
        const JudgeDecision decision = judge.decide(hidden_position(draft, {7.0f, h, -7.0f}));
        const bool relaxed = decision.relaxed;
        EXPECT_NEAR(decision.statistic, 1.0 / (1.0 + std::exp(-z)), 1e-12) << h;
        EXPECT_EQ(relaxed, z < 0) << h;  // s < 1/2 iff z < 0
    }
    // The threshold comes from the head unless overridden.
    const std::string head = write_file("head_ok.json", kHead);
    const auto from_head = make_judge(options("autojudge", std::nullopt, std::nullopt, 0.9, head));
    EXPECT_EQ(dynamic_cast<AutoJudge&>(*from_head).threshold(), 0.5);
    const auto overridden = make_judge(options("autojudge", 0.9, std::nullopt, 0.9, head));
    EXPECT_EQ(dynamic_cast<AutoJudge&>(*overridden).threshold(), 0.9);
}

TEST(AutoJudge, RefusesHiddenStatesOfTheWrongSize) {
    AutoJudge judge(AutoJudgeHead::load(write_file("head_ok.json", kHead)), 0.5);
    EXPECT_THROW(judge.decide(hidden_position({1.0f, 2.0f}, {1.0f, 2.0f})), Error);
    EXPECT_THROW(judge.decide(hidden_position({1.0f}, {1.0f, 2.0f, 3.0f})), Error);
}

TEST(AutoJudge, RefusesMalformedHeads) {
    const std::vector<std::pair<std::string, std::string>> cases{
        {"{ not json", "bad AutoJudge head file"},
        {R"({"draft_hidden_size": 1, "target_hidden_size": 1, "mean": [0, 0], "scale": [1, 1],
             "weights": [1, 1], "bias": 0})",
         "threshold"},
        {R"({"draft_hidden_size": 1, "target_hidden_size": 1, "mean": [0], "scale": [1, 1],
             "weights": [1, 1], "bias": 0, "threshold": 0.5})",
         "\"mean\" has 1 entries, expected draft_hidden_size + target_hidden_size = 2"},
        {R"({"draft_hidden_size": 1, "target_hidden_size": 1, "mean": [0, 0], "scale": [1, 0],
             "weights": [1, 1], "bias": 0, "threshold": 0.5})",
         "\"scale\" entries must be positive"},
        {R"({"draft_hidden_size": 1, "target_hidden_size": 1, "mean": [0, 0], "scale": [1, 1],
             "weights": ["a", 1], "bias": 0, "threshold": 0.5})",
         "bad AutoJudge head file"},
        {R"({"draft_hidden_size": 0, "target_hidden_size": 1, "mean": [0], "scale": [1],
             "weights": [1], "bias": 0, "threshold": 0.5})",
         "must be positive"},
        // A size written as a huge float was cast to size_t unchecked (undefined behaviour).
        {R"({"draft_hidden_size": 1.66667e+50, "target_hidden_size": 1, "mean": [0], "scale": [1],
             "weights": [1], "bias": 0, "threshold": 0.5})",
         "'draft_hidden_size' must be an integer in [0, 4294967295], got 1.66667e+50"},
        {R"({"draft_hidden_size": 1, "target_hidden_size": 1, "mean": [0, 0], "scale": [1, 1],
             "weights": [1, 1], "bias": 0, "threshold": 2})",
         "\"threshold\" must be in [0, 1]"},
    };
    int index = 0;
    for (const auto& [text, expected] : cases) {
        const std::string path = write_file("head_bad_" + std::to_string(index++) + ".json", text);
        const std::string message = error_of(options("autojudge", std::nullopt, std::nullopt, 0.9, path));
        EXPECT_NE(message.find(expected), std::string::npos)
            << "got \"" << message << "\", expected it to contain \"" << expected << "\"";
        EXPECT_NE(message.find(path), std::string::npos) << message;  // names the file
    }
}

}  // namespace
}  // namespace klspec
