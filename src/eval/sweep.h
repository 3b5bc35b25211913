// A judge sweep (issue 10; docs/design.md "Metrics"): vanilla and every rule setting decoded on the same
// problems with the same models, scored, and summarised as the paper's table and curves.
//
// On disk (klspec sweep --out DIR), appended one example at a time so an interrupted sweep resumes:
//   sweep.json      the settings that shape the results (models, dataset, decoding, points)
//   examples.jsonl  one decoded problem a line: point, id, output, prediction, correct, counters, wall time
//   summary.json, summary.csv, table.md   written at the end from examples.jsonl
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/accuracy_loss.h"
#include "core/judge_factory.h"
#include "core/stats.h"
#include "engine/speculative_decoder.h"
#include "eval/dataset.h"
#include "eval/problem_scoring.h"

namespace klspec {

// One setting of one rule: "vanilla", "kl:0.3", "topk:4", "topn-delta:4/0.2".
struct SweepPoint {
    std::string rule;
    std::string value;  // as written; empty for vanilla
    JudgeOptions judge;
    std::string label() const { return value.empty() ? rule : rule + ":" + value; }
};

// Parses "RULE:V1,V2,..." specs (V: τ, or K for topk, or N/δ for topn-delta, or τ or DIVERGENCE/τ for fsd; vanilla
// takes none) into points, vanilla first and always present, duplicates dropped. `base` gives what every point shares
// (confidence mask, head file, FLy window). Every point is checked by building its judge.
std::vector<SweepPoint> parse_sweep_points(const std::vector<std::string>& specs, const JudgeOptions& base);

// One decoded example as stored.
struct SweepExample {
    std::string point;  // SweepPoint::label()
    std::string id;
    std::string output;
    std::string prediction;  // the scorer's extracted answer ("" when none)
    bool correct = false;
    std::string stop_reason;
    GenerationStats stats;
    double wall_seconds = 0;  // decode_problems' attribution
    std::string run;          // where and when it was decoded ("HOST YYYY-MM-DD"; "" in older sweeps): tokens/s
                              // compare only within one
};
nlohmann::json to_json(const SweepExample& example);
SweepExample sweep_example_from_json(const nlohmann::json& row);

// The sweep directory. Reopening with different settings is an error (start a new DIR).
class SweepStore {
public:
    // kReadOnly (--summary-only) reads what another sweep may still be appending to: it writes nothing, and
    // a line that sweep has not finished yet is left alone.
    enum class Access { kResume, kReadOnly };
    SweepStore(const std::string& dir, const nlohmann::json& settings, Access access = Access::kResume);
    bool done(const std::string& point, const std::string& id) const { return done_.contains({point, id}); }
    void append(SweepExample example);  // stamped with this run (SweepExample::run)
    const std::vector<SweepExample>& examples() const { return examples_; }
    const std::string& dir() const { return dir_; }

private:
    std::optional<uintmax_t> read_examples(const std::filesystem::path& examples_path);

    std::string dir_;
    std::string run_;  // this run's SweepExample::run, stamped on what it appends
    std::set<std::pair<std::string, std::string>> done_;
    std::vector<SweepExample> examples_;
    std::ofstream out_;
};

// How many (point, problem) pairs the store does not hold yet.
size_t missing_examples(const SweepStore& store, std::span<const SweepPoint> points, std::span<const Problem> problems);

// Decodes (with `generation`, its judge replaced by each point's), scores and stores every (point, problem)
// the store does not hold yet; the points take turns on chunks of 4·parallel problems. on_example is
// called after each is stored.
void run_sweep_points(SpeculativeDecoder& decoder, const GenerationOptions& generation,
                      std::span<const Problem> problems, std::span<const SweepPoint> points, int32_t parallel,
                      SweepStore& store, const std::function<void(const SweepExample&)>& on_example);

// The examples of the problems that every point has decoded (a sweep cut short: its points compare on the
// same problems).
std::vector<SweepExample> examples_of_problems_every_point_has(const std::vector<SweepExample>& examples,
                                                               std::span<const SweepPoint> points);

// A point's totals over the examples it has.
struct PointSummary {
    std::string point, rule, value;
    size_t examples = 0, correct = 0;
    GenerationStats totals;
    double wall_seconds = 0;
    // Vanilla's accuracy minus this point's, paired over the problems both decoded, with its 95 % interval
    // (pairing removes the spread between problems, as the points decode the same ones). None for vanilla.
    std::optional<AccuracyLoss> loss_against_vanilla;
    // The share of those problems whose scored final answer (the prediction) equals vanilla's, i.e. target-only
    // decoding's, with its Wilson interval: what the rule changes, whether or not the model solves the problem.
    // None for vanilla.
    std::optional<Proportion> agreement_with_vanilla;
    std::set<std::string> runs;  // the runs its examples were decoded in (SweepExample::run)
    double accuracy() const { return examples ? double(correct) / double(examples) : 0.0; }
    // Emitted tokens over the wall time decode_problems attributed to the examples (prompts included).
    double tokens_per_second() const { return wall_seconds > 0 ? double(totals.emitted) / wall_seconds : 0.0; }
    // The judge's share of that wall time.
    double judge_share() const { return wall_seconds > 0 ? totals.judge_seconds / wall_seconds : 0.0; }
};

// What "the same answer as vanilla" compares over a benchmark (eval/problem_scoring.h): kTestOutcome when every
// problem is a code problem.
AnswerKind answer_kind(std::span<const Problem> problems);
bool same_answer(const SweepExample& a, const SweepExample& b, AnswerKind kind);

// Scores every stored output again with its problem's current scorer (the scorers improve; the decoding stays):
// each example's prediction and verdict are replaced. klspec::Error names an example whose problem is not in
// `problems`. on_scored is called after each.
void rescore_examples(std::vector<SweepExample>& examples, std::span<const Problem> problems,
                      const std::function<void(size_t scored)>& on_scored = {});

// One summary per point, in the points' order; vanilla's is first.
std::vector<PointSummary> summarize_sweep(const std::vector<SweepPoint>& points,
                                          const std::vector<SweepExample>& examples,
                                          AnswerKind kind = AnswerKind::kScoredAnswer);

// Per rule, its point with the highest MAT whose accuracy is at most `max_loss` (a fraction) below
// vanilla's, if any: the paper's "best MAT at equal accuracy".
std::map<std::string, const PointSummary*> best_within_loss(const std::vector<PointSummary>& summaries,
                                                            double max_loss);

// summary.json (each point's speedup and accuracy change over vanilla, and best_within_loss at 1 point),
// summary.csv and table.md; returns the table to print. `kind` names the agreement column.
std::string write_sweep_summary(const std::string& dir, const std::vector<PointSummary>& summaries,
                                AnswerKind kind = AnswerKind::kScoredAnswer);

}  // namespace klspec
