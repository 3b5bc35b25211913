// The sweep's bookkeeping without models: parsing points, the resumable store, summaries, and the
// calibration choice (src/eval/sweep.h, src/eval/calibration.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "eval/calibration.h"
#include "eval/sweep.h"
#include "test_support.h"

namespace klspec {
namespace {

SweepExample example(const std::string& point, const std::string& id, bool correct, int64_t emitted, int64_t calls,
                     double wall) {
    SweepExample e;
    e.point = point;
    e.id = id;
    e.output = "out " + id;
    e.correct = correct;
    e.stop_reason = "eog";
    e.stats.emitted = emitted;
    e.stats.target_calls = calls;
    e.wall_seconds = wall;
    return e;
}

TEST(SweepPoints, VanillaFirstThenEachValueOfEachRule) {
    const std::vector<SweepPoint> points =
        parse_sweep_points({"kl:0.1,0.5", "topk:2", "topn-delta:4/0.2", "kl:0.5"}, {});
    std::vector<std::string> labels;
    for (const SweepPoint& p : points) labels.push_back(p.label());
    EXPECT_EQ(labels, (std::vector<std::string>{"vanilla", "kl:0.1", "kl:0.5", "topk:2", "topn-delta:4/0.2"}));
    EXPECT_EQ(*points[2].judge.threshold, 0.5);
    EXPECT_EQ(*points[3].judge.topk, 2);
    EXPECT_EQ(*points[4].judge.topk, 4);
    EXPECT_DOUBLE_EQ(*points[4].judge.threshold, 0.2);
}

TEST(SweepPoints, SharedJudgeSettingsComeFromTheBase) {
    JudgeOptions base;
    base.confidence_mask = 0.7;
    EXPECT_DOUBLE_EQ(parse_sweep_points({"kl:1"}, base)[1].judge.confidence_mask, 0.7);
    // A head file and a FLy window go only to the rules that take them.
    base.head_path = "head.json";
    base.window = 3;
    const std::vector<SweepPoint> points = parse_sweep_points({"kl:1", "fly:0.5"}, base);
    EXPECT_TRUE(points[0].judge.head_path.empty());  // vanilla
    EXPECT_FALSE(points[1].judge.window.has_value());
    EXPECT_EQ(points[2].judge.window, 3);
}

TEST(SweepPoints, BadPointsAreOneLineErrors) {
    EXPECT_THROW(parse_sweep_points({"kl:x"}, {}), Error);
    EXPECT_THROW(parse_sweep_points({"topk:0"}, {}), Error);
    EXPECT_THROW(parse_sweep_points({"kl"}, {}), Error);  // kl requires a threshold
    EXPECT_THROW(parse_sweep_points({"unknown:1"}, {}), Error);
}

TEST(SweepStore, ReopensKeepingCompleteLinesAndRefusesOtherSettings) {
    const std::string dir = test::temp_path("store");
    {
        SweepStore store(dir, {{"draft_max", 8}});
        store.append(example("vanilla", "0", true, 10, 5, 0.5));
        store.append(example("kl:1", "0", false, 12, 4, 0.25));
    }
    std::ofstream(dir + "/examples.jsonl", std::ios::app) << R"({"point": "kl:1", "id": "1", "outp)";  // cut
    SweepStore reopened(dir, {{"draft_max", 8}});
    ASSERT_EQ(reopened.examples().size(), 2u);
    EXPECT_TRUE(reopened.done("kl:1", "0"));
    EXPECT_FALSE(reopened.done("kl:1", "1"));
    EXPECT_EQ(reopened.examples()[1].stats.emitted, 12);
    EXPECT_EQ(reopened.examples()[0].output, "out 0");
    reopened.append(example("kl:1", "1", true, 3, 1, 0.1));
    EXPECT_EQ(SweepStore(dir, {{"draft_max", 8}}).examples().size(), 3u);  // the cut line was replaced

    try {
        SweepStore other(dir, {{"draft_max", 4}});
        FAIL() << "other settings accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("draft_max: 8 there, 4 now"), std::string::npos) << e.what();
    }
}

// AutoJudge points can join a sweep of other rules: a sweep without a head takes one, then keeps it.
TEST(SweepStore, ASweepWithoutAHeadTakesOneAndKeepsIt) {
    const std::string dir = test::temp_path("store-head");
    SweepStore(dir, {{"draft_max", 8}, {"judge_head", ""}}).append(example("kl:1", "0", true, 10, 5, 0.5));
    SweepStore with_head(dir, {{"draft_max", 8}, {"judge_head", "head.json"}});
    EXPECT_EQ(with_head.examples().size(), 1u);
    EXPECT_NE(test::read_file(dir + "/sweep.json").find(R"("judge_head": "head.json")"), std::string::npos);
    EXPECT_THROW(SweepStore(dir, {{"draft_max", 8}, {"judge_head", "other.json"}}), Error);
    EXPECT_THROW(SweepStore(dir, {{"draft_max", 8}, {"judge_head", ""}}), Error);
    EXPECT_THROW(SweepStore(dir, {{"draft_max", 4}, {"judge_head", "head.json"}}), Error);
}

// --summary-only reads a sweep that may still be appending: opened read-only, the store must leave the file
// exactly as it is (the sweep's half-written line included) and refuse to append.
TEST(SweepStore, ReadOnlyLeavesARunningSweepsFileAlone) {
    const std::string dir = test::temp_path("store-read-only");
    {
        SweepStore store(dir, {{"draft_max", 8}});
        store.append(example("vanilla", "0", true, 10, 5, 0.5));
    }
    std::ofstream(dir + "/examples.jsonl", std::ios::app) << R"({"point": "kl:1", "id": "0", "outp)";  // being written
    const std::string before = test::read_file(dir + "/examples.jsonl");
    SweepStore reader(dir, {{"draft_max", 8}}, SweepStore::Access::kReadOnly);
    EXPECT_EQ(reader.examples().size(), 1u);
    EXPECT_EQ(test::read_file(dir + "/examples.jsonl"), before);
    EXPECT_THROW(reader.append(example("kl:1", "1", true, 3, 1, 0.1)), Error);
    EXPECT_THROW(SweepStore(test::temp_path("store-none"), {}, SweepStore::Access::kReadOnly),
                 Error);  // no sweep there
}

// A complete row whose newline the interrupt cut: kept, and the next row starts a line of its own.
TEST(SweepStore, ResumesAfterARowCutBeforeItsNewline) {
    const std::string dir = test::temp_path("store-newline");
    {
        SweepStore store(dir, {{"draft_max", 8}});
        store.append(example("vanilla", "0", true, 10, 5, 0.5));
    }
    std::string text = test::read_file(dir + "/examples.jsonl");
    text.pop_back();
    std::ofstream(dir + "/examples.jsonl", std::ios::trunc) << text;
    SweepStore(dir, {{"draft_max", 8}}).append(example("vanilla", "1", true, 10, 5, 0.5));
    const SweepStore reopened(dir, {{"draft_max", 8}});
    EXPECT_EQ(reopened.examples().size(), 2u);
    EXPECT_TRUE(reopened.done("vanilla", "1"));
}

TEST(SweepSummary, HandComputedTotalsAndBestWithinOnePoint) {
    const std::vector<SweepPoint> points = parse_sweep_points({"kl:0.5,2", "topk:4"}, {});
    std::vector<SweepExample> examples;
    for (int i = 0; i < 100; ++i) {
        const std::string id = std::to_string(i);
        examples.push_back(example("vanilla", id, i < 80, 10, 5, 0.1));  // 80 %, MAT 2
        examples.push_back(example("kl:0.5", id, i < 80, 10, 4, 0.08));  // 80 %, MAT 2.5
        examples.push_back(example("kl:2", id, i < 79, 10, 2, 0.05));    // 79 %: within 1 point, MAT 5
        examples.push_back(example("topk:4", id, i < 70, 10, 1, 0.02));  // 70 %: out, MAT 10
    }
    const std::vector<PointSummary> s = summarize_sweep(points, examples);
    ASSERT_EQ(s.size(), 4u);
    EXPECT_DOUBLE_EQ(s[0].accuracy(), 0.8);
    EXPECT_DOUBLE_EQ(s[1].totals.mat(), 2.5);
    EXPECT_NEAR(s[2].tokens_per_second(), 1000.0 / 5.0, 1e-9);  // 100 walls of 0.05 s
    const auto best = best_within_loss(s, 0.01);
    EXPECT_EQ(best.at("kl")->point, "kl:2");
    EXPECT_FALSE(best.contains("topk"));
    EXPECT_EQ(best.at("vanilla")->point, "vanilla");

    const std::string dir = test::temp_path("summary");
    std::filesystem::create_directories(dir);
    const std::string table = write_sweep_summary(dir, s);
    // kl:2 misses one of vanilla's 100: d = 1 once, mean 0.01, s = 0.1, half width 1.96·0.1/√100 = 0.0196.
    EXPECT_NE(table.find("| kl | 2 | 79.0 % | -1.0 [-3.0, +1.0] | 5.00 |"), std::string::npos) << table;
    EXPECT_NE(table.find("| vanilla | — | 80.0 % | +0.0 | 2.00 |"), std::string::npos) << table;
    EXPECT_NE(table.find("| kl | 0.5 | 80.0 % | +0.0 [+0.0, +0.0] | 2.50 |"), std::string::npos) << table;
    EXPECT_NE(table.find("2.00×"), std::string::npos) << table;  // kl:2 at 200 tokens/s against vanilla's 100
    std::ifstream csv(dir + "/summary.csv");
    std::string header;
    std::getline(csv, header);
    EXPECT_EQ(header.rfind("point,rule,value,examples,correct,accuracy", 0), 0u);
}

// A point whose rule never fired (FLy's entropy gate at θ 0.5 relaxed nothing on MMLU-Pro) is flagged in the
// table and summary.json, not read as a measured trade-off; vanilla never is.
TEST(SweepSummary, PointsThatRelaxedNothingAreFlagged) {
    const std::vector<SweepPoint> points = parse_sweep_points({"kl:0.5,2"}, {});
    std::vector<SweepExample> examples;
    for (int i = 0; i < 4; ++i) {
        const std::string id = std::to_string(i);
        examples.push_back(example("vanilla", id, true, 10, 5, 0.1));
        examples.push_back(example("kl:0.5", id, true, 10, 5, 0.1));  // never relaxed
        examples.push_back(example("kl:2", id, true, 10, 4, 0.1));
        examples.back().stats.relaxed_accepted = 1;
    }
    const std::string dir = test::temp_path("summary-idle");
    std::filesystem::create_directories(dir);
    const std::string table = write_sweep_summary(dir, summarize_sweep(points, examples));
    EXPECT_NE(table.find("| 0 ⚠ |"), std::string::npos) << table;
    EXPECT_NE(table.find("⚠ relaxed nothing, so decoded as vanilla: kl:0.5 (the rule never fired"), std::string::npos)
        << table;
    std::ifstream in(dir + "/summary.json");
    const nlohmann::json summary = nlohmann::json::parse(in);
    EXPECT_FALSE(summary["points"][0]["relaxed_nothing"]);
    EXPECT_TRUE(summary["points"][1]["relaxed_nothing"]);
    EXPECT_FALSE(summary["points"][2]["relaxed_nothing"]);
}

// Where the rules could relax decides what MAT and the relaxed tokens count, so the table says it: the sweep's
// stored judge span (absent: everywhere, as in sweeps stored before spans existed).
TEST(SweepSummary, TheTableSaysWhereTheRulesCouldRelax) {
    const std::vector<SweepPoint> points = parse_sweep_points({"kl:2"}, {});
    const std::vector<SweepExample> examples = {example("vanilla", "0", true, 10, 5, 0.1),
                                                example("kl:2", "0", true, 10, 4, 0.1)};
    const std::string everywhere = test::temp_path("summary-span-all");
    SweepStore(everywhere, {{"n", 1}});
    EXPECT_NE(write_sweep_summary(everywhere, summarize_sweep(points, examples))
                  .find("Judge span all: the rules could relax any token, the paper's setting"),
              std::string::npos);
    const std::string until_answer = test::temp_path("summary-span-until");
    SweepStore(until_answer, {{"n", 1}, {"judge_span", "until:The answer is"}});
    EXPECT_NE(write_sweep_summary(until_answer, summarize_sweep(points, examples))
                  .find("Judge span until:The answer is: the rules relaxed only before the answer marker"),
              std::string::npos);
}

// Speeds compare only within one run: a point decoded on another machine or day than vanilla's, or in several
// runs, is marked in the tokens/s column; the store stamps what it appends with this run.
TEST(SweepSummary, TokensPerSecondFromOtherRunsAreMarked) {
    const std::vector<SweepPoint> points = parse_sweep_points({"kl:0.5,2"}, {});
    std::vector<SweepExample> examples;
    for (int i = 0; i < 2; ++i) {
        const std::string id = std::to_string(i);
        for (const std::string point : {"vanilla", "kl:0.5", "kl:2"}) {
            examples.push_back(example(point, id, true, 10, 5, 0.1));
            examples.back().run = point == "kl:2" && i == 1 ? "xeon 2026-11-27" : "epyc 2026-11-28";
        }
    }
    const std::string dir = test::temp_path("summary-runs");
    std::filesystem::create_directories(dir);
    const std::string table = write_sweep_summary(dir, summarize_sweep(points, examples));
    EXPECT_NE(table.find("| 100.0 † |"), std::string::npos) << table;
    EXPECT_NE(table.find("† tokens/s from other runs than vanilla's (another machine or day: epyc 2026-11-28), not "
                         "comparable: kl:2"),
              std::string::npos)
        << table;
    EXPECT_EQ(table.find("kl:0.5\n"), std::string::npos) << table;

    SweepStore store(test::temp_path("sweep-run-stamp"), {{"n", 1}});
    store.append(example("vanilla", "0", true, 10, 5, 0.1));
    EXPECT_FALSE(store.examples().front().run.empty());
    EXPECT_EQ(store.examples().front().run,
              SweepStore(store.dir(), {{"n", 1}}, SweepStore::Access::kReadOnly).examples().front().run);
}

TEST(SweepSummary, PairedIntervalAgainstVanillaOverTheProblemsBothDecoded) {
    const std::vector<SweepPoint> points = parse_sweep_points({"topk:4"}, {});
    std::vector<SweepExample> examples;
    for (int i = 0; i < 100; ++i) {
        examples.push_back(example("vanilla", std::to_string(i), i < 80, 10, 5, 0.1));
        examples.push_back(example("topk:4", std::to_string(i), i < 70, 10, 1, 0.02));
    }
    examples.push_back(example("topk:4", "not run by vanilla", false, 10, 1, 0.02));  // unpaired: left out
    const std::vector<PointSummary> s = summarize_sweep(points, examples);
    EXPECT_FALSE(s[0].loss_against_vanilla.has_value());
    ASSERT_TRUE(s[1].loss_against_vanilla.has_value());
    // d = 1 on problems 70..79, else 0: mean 0.1, s² = (10 − 100·0.1²)/99 = 1/11, half width 1.96·√(1/11)/10.
    const AccuracyLoss& loss = *s[1].loss_against_vanilla;
    EXPECT_EQ(loss.problems, 100u);
    EXPECT_NEAR(loss.loss, 0.1, 1e-12);
    EXPECT_NEAR(loss.low, 0.1 - 0.0590962, 1e-6);
    EXPECT_NEAR(loss.high, 0.1 + 0.0590962, 1e-6);
}

// Agreement is about the scored answer, not correctness: a point that keeps vanilla's wrong answer agrees,
// one that turns it into another wrong answer does not.
TEST(SweepSummary, AgreementWithVanillaComparesPredictions) {
    const std::vector<SweepPoint> points = parse_sweep_points({"kl:1"}, {});
    std::vector<SweepExample> examples;
    for (int i = 0; i < 4; ++i) {
        SweepExample vanilla = example("vanilla", std::to_string(i), false, 10, 5, 0.1);
        SweepExample kl = example("kl:1", std::to_string(i), false, 10, 4, 0.1);
        vanilla.prediction = "7";
        kl.prediction = i == 0 ? "8" : "7";  // both wrong on every problem, different on the first
        examples.push_back(vanilla);
        examples.push_back(kl);
    }
    const std::vector<PointSummary> s = summarize_sweep(points, examples);
    EXPECT_FALSE(s[0].agreement_with_vanilla.has_value());
    ASSERT_TRUE(s[1].agreement_with_vanilla.has_value());
    EXPECT_DOUBLE_EQ(s[1].agreement_with_vanilla->value, 0.75);
    EXPECT_EQ(s[1].loss_against_vanilla->loss, 0.0);                 // the accuracy does not see it
    EXPECT_NEAR(s[1].agreement_with_vanilla->low, 0.3006360, 1e-6);  // Wilson, 3 of 4
    const std::string dir = test::temp_path("agreement");
    std::filesystem::create_directories(dir);
    const std::string table = write_sweep_summary(dir, s);
    EXPECT_NE(table.find("| 75.0 % [30.1, 95.4] |"), std::string::npos) << table;
}

// A code benchmark's prediction also says why a program failed ("fail: AssertionError", "fail: timeout"); its
// agreement is about the test outcome, so two failing programs agree, and the column says so.
TEST(SweepSummary, CodeAgreementComparesTestOutcomes) {
    const std::vector<SweepPoint> points = parse_sweep_points({"kl:1"}, {});
    std::vector<SweepExample> examples;
    for (int i = 0; i < 4; ++i) {
        SweepExample vanilla = example("vanilla", std::to_string(i), i == 3, 10, 5, 0.1);
        SweepExample kl = example("kl:1", std::to_string(i), false, 10, 4, 0.1);
        vanilla.prediction = i == 3 ? "pass" : "fail: AssertionError";
        kl.prediction = i == 0 ? "fail: timeout" : "fail: AssertionError";  // only problem 3's outcome moves
        examples.push_back(vanilla);
        examples.push_back(kl);
    }
    const std::vector<PointSummary> by_outcome = summarize_sweep(points, examples, AnswerKind::kTestOutcome);
    EXPECT_DOUBLE_EQ(by_outcome[1].agreement_with_vanilla->value, 0.75);
    EXPECT_DOUBLE_EQ(summarize_sweep(points, examples)[1].agreement_with_vanilla->value, 0.5);  // by prediction
    const std::string dir = test::temp_path("code-agreement");
    std::filesystem::create_directories(dir);
    EXPECT_NE(write_sweep_summary(dir, by_outcome, AnswerKind::kTestOutcome).find("same test outcome as vanilla"),
              std::string::npos);

    Problem code{"0", "q", std::nullopt, Scorer::Gsm8k, "", CodeTests{}};
    Problem text{"0", "q", "1", Scorer::Gsm8k, ""};
    EXPECT_EQ(answer_kind(std::vector<Problem>{code, code}), AnswerKind::kTestOutcome);
    EXPECT_EQ(answer_kind(std::vector<Problem>{code, text}), AnswerKind::kScoredAnswer);
    // calibrate --measure agreement charges a code problem by its outcome too.
    std::vector<Problem> code_problems;
    for (int i = 0; i < 4; ++i)
        code_problems.push_back({std::to_string(i), "q", std::nullopt, Scorer::Gsm8k, "", CodeTests{}});
    EXPECT_DOUBLE_EQ(
        losses_against_vanilla(examples, points, code_problems, CalibrationMeasure::Agreement).at("kl:1").loss, 0.25);
}

// Stored verdicts come from the scorer of their day; --rescore scores the stored text again.
TEST(SweepSummary, RescoringReplacesStoredVerdictsWithTheCurrentScorers) {
    std::vector<SweepExample> examples = {example("vanilla", "a", false, 10, 5, 0.1),
                                          example("kl:1", "a", true, 10, 4, 0.1)};
    examples[0].output = "So she has 18 left. The answer is 18.";
    examples[0].prediction = "";  // as an older scorer left it
    examples[1].output = "The answer is 17.";
    examples[1].prediction = "18";
    const std::vector<Problem> problems = {{"a", "q", "18", Scorer::Gsm8k, ""}};
    size_t calls = 0;
    rescore_examples(examples, problems, [&](size_t scored) { calls = scored; });
    EXPECT_EQ(calls, 2u);
    EXPECT_TRUE(examples[0].correct);
    EXPECT_EQ(examples[0].prediction, "18");
    EXPECT_FALSE(examples[1].correct);
    EXPECT_EQ(examples[1].prediction, "17");
    std::vector<SweepExample> stray = {example("vanilla", "not in the dataset", true, 1, 1, 0.1)};
    EXPECT_THROW(rescore_examples(stray, problems), Error);
}

TEST(SweepSummary, ACutSweepComparesOnTheProblemsEveryPointHas) {
    const std::vector<SweepPoint> points = parse_sweep_points({"kl:1"}, {});
    const std::vector<SweepExample> examples = {
        example("vanilla", "0", true, 10, 5, 0.1), example("kl:1", "0", true, 10, 4, 0.1),
        example("vanilla", "1", true, 10, 5, 0.1),  // kl:1 was cut before problem 1
        example("other:1", "2", true, 10, 5, 0.1),  // a point this summary does not ask for
    };
    const std::vector<SweepExample> kept = examples_of_problems_every_point_has(examples, points);
    ASSERT_EQ(kept.size(), 2u);
    EXPECT_EQ(kept[0].id, "0");
    EXPECT_EQ(kept[1].id, "0");
}

TEST(Calibration, PicksTheHighestMatWithinTheBudget) {
    const std::vector<SweepPoint> points = parse_sweep_points({"kl:0.5,1,3"}, {});
    std::vector<Problem> problems;
    std::vector<SweepExample> examples;
    for (int i = 0; i < 200; ++i) {
        const std::string id = std::to_string(i);
        problems.push_back({id, "q", "1", Scorer::Gsm8k, ""});
        examples.push_back(example("vanilla", id, i % 2 == 0, 10, 5, 0.1));
        examples.push_back(example("kl:0.5", id, i % 2 == 0, 10, 4, 0.1));               // loss 0
        examples.push_back(example("kl:1", id, i % 2 == 0 && i != 0, 10, 3, 0.1));       // loss 0.5 %
        examples.push_back(example("kl:3", id, i % 2 == 0 && i % 10 != 0, 10, 2, 0.1));  // loss 10 %
    }
    const auto losses = losses_against_vanilla(examples, points, problems);
    EXPECT_DOUBLE_EQ(losses.at("kl:1").loss, 0.005);
    EXPECT_DOUBLE_EQ(losses.at("kl:3").loss, 0.1);
    const std::vector<PointSummary> s = summarize_sweep(points, examples);
    EXPECT_EQ(s[*pick_within_budget(s, losses, 0.01, false)].point, "kl:1");
    // Strict: kl:1's interval reaches past 1 % (one loss in 200), kl:0.5's is exactly 0.
    EXPECT_EQ(s[*pick_within_budget(s, losses, 0.01, true)].point, "kl:0.5");
    EXPECT_FALSE(pick_within_budget(s, {{"kl:3", losses.at("kl:3")}}, 0.01, false).has_value());
    // Nothing within 0.1 % but kl:0.5: without it, the closest is kl:1 (loss 0.5 %), then kl:3 alone.
    const std::map<std::string, AccuracyLoss> lossy = {{"kl:1", losses.at("kl:1")}, {"kl:3", losses.at("kl:3")}};
    EXPECT_FALSE(pick_within_budget(s, lossy, 0.001, false).has_value());
    EXPECT_EQ(s[*closest_to_budget(s, lossy, false)].point, "kl:1");
    EXPECT_EQ(s[*closest_to_budget(s, lossy, true)].point, "kl:1");
    EXPECT_EQ(s[*closest_to_budget(s, {{"kl:3", losses.at("kl:3")}}, false)].point, "kl:3");
    EXPECT_EQ(s[*closest_to_budget(s, losses, false)].point, "kl:0.5");  // loss 0
    EXPECT_FALSE(closest_to_budget(s, {}, false).has_value());

    problems.push_back({"200", "q", "1", Scorer::Gsm8k, ""});
    EXPECT_THROW(losses_against_vanilla(examples, points, problems), Error);  // a problem without results
}

TEST(Calibration, AgreementChargesEveryChangedAnswer) {
    // 20 problems vanilla gets wrong: a rule that changes 2 of their answers loses no accuracy but 10 % agreement.
    const std::vector<SweepPoint> points = parse_sweep_points({"kl:0.5,1"}, {});
    std::vector<Problem> problems;
    std::vector<SweepExample> examples;
    for (int i = 0; i < 20; ++i) {
        const std::string id = std::to_string(i);
        problems.push_back({id, "q", "1", Scorer::Gsm8k, ""});
        for (const std::string point : {"vanilla", "kl:0.5", "kl:1"}) {
            SweepExample e =
                example(point, id, false, 10, point == std::string("kl:1") ? 4 : 5, 0.1);  // kl:1: more MAT
            const std::string answer = i % 3 == 0 ? std::string() : std::string("5");  // "" (no answer) agrees with ""
            e.prediction = point == "kl:1" && i < 2 ? std::string("7") : answer;
            examples.push_back(e);
        }
    }
    const auto accuracy = losses_against_vanilla(examples, points, problems, CalibrationMeasure::Accuracy);
    EXPECT_DOUBLE_EQ(accuracy.at("kl:1").loss, 0.0);
    const auto agreement = losses_against_vanilla(examples, points, problems, CalibrationMeasure::Agreement);
    EXPECT_DOUBLE_EQ(agreement.at("kl:0.5").loss, 0.0);
    EXPECT_DOUBLE_EQ(agreement.at("kl:1").loss, 0.1);
    const Proportion wilson = wilson_proportion(18, 20);
    EXPECT_DOUBLE_EQ(agreement.at("kl:1").low, 1 - wilson.high);
    EXPECT_DOUBLE_EQ(agreement.at("kl:1").high, 1 - wilson.low);
    EXPECT_GT(agreement.at("kl:0.5").high, 0.0) << "20 of 20 still leaves an interval";
    EXPECT_EQ(agreement.at("kl:1").problems, 20u);
    const std::vector<PointSummary> s = summarize_sweep(points, examples);
    EXPECT_EQ(s[*pick_within_budget(s, accuracy, 0.05, false)].point, "kl:1");
    EXPECT_EQ(s[*pick_within_budget(s, agreement, 0.05, false)].point, "kl:0.5");
    EXPECT_EQ(parse_calibration_measure("agreement"), CalibrationMeasure::Agreement);
    EXPECT_THROW(parse_calibration_measure("speed"), Error);
}

TEST(Calibration, SplitIsSeededByIdAndBudgetsParse) {
    std::vector<Problem> problems;
    for (int i = 0; i < 400; ++i) problems.push_back({std::to_string(i), "q", "1", Scorer::Gsm8k, ""});
    const auto [calibration, validation] = calibration_split(problems, 0.5);
    EXPECT_EQ(calibration.size() + validation.size(), 400u);
    EXPECT_NEAR(double(calibration.size()), 200.0, 40.0);
    EXPECT_EQ(calibration_split(problems, 0.5).first.front().id, calibration.front().id);
    EXPECT_DOUBLE_EQ(parse_accuracy_budget("1%"), 0.01);
    EXPECT_DOUBLE_EQ(parse_accuracy_budget("0.02"), 0.02);
    EXPECT_THROW(parse_accuracy_budget("150%"), Error);
    EXPECT_THROW(parse_accuracy_budget("abc"), Error);
    EXPECT_THROW(calibration_split(problems, 1.0), Error);
}

}  // namespace
}  // namespace klspec
