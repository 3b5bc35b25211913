// `klspec sweep`: vanilla and every rule setting on the same problems; per-example JSONL, summary, table
// and the accuracy-against-MAT and accuracy-against-speedup plots (src/eval/sweep.h says what DIR holds).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/progress_line.h"
#include "apps/sweep_command.h"
#include "apps/sweep_options.h"
#include "core/error.h"
#include "eval/sweep.h"
#include "report/curve_plot.h"

namespace klspec {
namespace {

struct SweepOptions {
    SweepRunOptions common;
    std::vector<std::string> rules;
    bool plots = true;
    bool summary_only = false;
    bool rescore = false;
    bool json = false;
};

// Accuracy (%) against `x` of each summary, one curve per rule sorted by x, vanilla as the reference. Each
// point's error bar is the 95 % interval of its paired accuracy change against vanilla, centred on its accuracy.
CurvePlot accuracy_plot(const std::vector<PointSummary>& summaries, const std::string& title,
                        const std::string& x_label, double (*x_of)(const PointSummary&, const PointSummary& vanilla)) {
    const PointSummary& vanilla = summaries.front();
    CurvePlot plot{title,
                   x_label,
                   "accuracy (%); bars: 95 % paired interval against vanilla",
                   {},
                   {x_of(vanilla, vanilla), 100 * vanilla.accuracy()},
                   "vanilla"};
    for (const PointSummary& s : summaries) {
        if (s.rule == "vanilla") continue;
        auto curve =
            std::find_if(plot.curves.begin(), plot.curves.end(), [&](const Curve& c) { return c.name == s.rule; });
        if (curve == plot.curves.end()) curve = plot.curves.insert(plot.curves.end(), Curve{s.rule, {}});
        CurvePoint& point = curve->points.emplace_back(CurvePoint{x_of(s, vanilla), 100 * s.accuracy(), std::nullopt});
        if (s.loss_against_vanilla) {
            const double half_width = 100 * (s.loss_against_vanilla->high - s.loss_against_vanilla->low) / 2;
            point.y_range = {point.y - half_width, point.y + half_width};
        }
    }
    for (Curve& c : plot.curves) std::sort(c.points.begin(), c.points.end());
    return plot;
}

// Agreement with vanilla's scored answer (%) against MAT, one curve per rule, vanilla at 100 %; error bars: the
// Wilson interval. What a rule changes, whatever the model's skill (a small model solves few problems).
CurvePlot agreement_plot(const std::vector<PointSummary>& summaries, const std::string& dataset, AnswerKind kind) {
    const PointSummary& vanilla = summaries.front();
    const std::string same =
        kind == AnswerKind::kTestOutcome ? "same test outcome as vanilla" : "same answer as vanilla";
    CurvePlot plot{fmt::format("{}: {} against mean accepted tokens", dataset, same),
                   "MAT (tokens per target call)",
                   same + " (%); bars: 95 % Wilson interval",
                   {},
                   {vanilla.totals.mat(), 100.0},
                   "vanilla"};
    for (const PointSummary& s : summaries) {
        if (s.rule == "vanilla" || !s.agreement_with_vanilla) continue;
        auto curve =
            std::find_if(plot.curves.begin(), plot.curves.end(), [&](const Curve& c) { return c.name == s.rule; });
        if (curve == plot.curves.end()) curve = plot.curves.insert(plot.curves.end(), Curve{s.rule, {}});
        const Proportion& agreement = *s.agreement_with_vanilla;
        curve->points.push_back(
            CurvePoint{s.totals.mat(), 100 * agreement.value, std::pair{100 * agreement.low, 100 * agreement.high}});
    }
    for (Curve& c : plot.curves) std::sort(c.points.begin(), c.points.end());
    return plot;
}

void draw_plots(const std::vector<PointSummary>& summaries, const std::string& dir, const std::string& dataset,
                AnswerKind kind) {
    if (summaries.size() < 2) return;  // vanilla alone: nothing to compare
    plot_curves(accuracy_plot(summaries, fmt::format("{}: accuracy against mean accepted tokens", dataset),
                              "MAT (tokens per target call)",
                              [](const PointSummary& s, const PointSummary&) { return s.totals.mat(); }),
                dir + "/accuracy_vs_mat");
    plot_curves(accuracy_plot(summaries, fmt::format("{}: accuracy against speedup over vanilla", dataset),
                              "speedup (tokens/s over vanilla's)",
                              [](const PointSummary& s, const PointSummary& v) {
                                  return v.tokens_per_second() > 0 ? s.tokens_per_second() / v.tokens_per_second()
                                                                   : 0.0;
                              }),
                dir + "/accuracy_vs_speedup");
    plot_curves(agreement_plot(summaries, dataset, kind), dir + "/agreement_vs_mat");
}

// The summary, table and plots of what the store holds; --summary-only keeps the problems every point has
// decoded (a sweep still running, or cut short), so that the points compare on the same problems, and
// --rescore scores them again with the current scorers.
void report_sweep(const SweepOptions& options, const SweepStore& store, const std::vector<SweepPoint>& points,
                  std::span<const Problem> problems) {
    const SweepRunOptions& common = options.common;
    std::vector<SweepExample> examples =
        options.summary_only ? examples_of_problems_every_point_has(store.examples(), points) : store.examples();
    if (options.rescore) {
        ProgressLine progress("sweep: rescoring", examples.size(), "answers");
        rescore_examples(examples, problems, [&](size_t scored) { progress.update(scored, ""); });
        progress.finish();
    }
    const AnswerKind kind = answer_kind(problems);
    const std::vector<PointSummary> summaries = summarize_sweep(points, examples, kind);
    const std::string table = write_sweep_summary(common.out_dir, summaries, kind);
    if (options.plots)
        draw_plots(summaries, common.out_dir, std::filesystem::path(common.dataset.name_or_path).stem().string(), kind);
    if (options.json) {
        std::ifstream in(common.out_dir + "/summary.json");
        std::cout << nlohmann::json::parse(in).dump() << "\n";
    } else {
        std::set<std::string> summarized;
        for (const SweepExample& e : examples) summarized.insert(e.id);
        const std::string count =
            summarized.size() < problems.size()
                ? fmt::format("{} of {} problems (those every point has)", summarized.size(), problems.size())
                : fmt::format("{} problems", problems.size());
        std::cout << fmt::format("{} of {} ({}), {} points; results in {}\n\n", count, common.dataset.name_or_path,
                                 common.dataset.split, points.size(), common.out_dir)
                  << table;
    }
}

void run_sweep(const SweepOptions& options) {
    const SweepRunOptions& common = options.common;
    std::vector<Problem> problems = load_scored_problems(common.dataset);
    const std::vector<SweepPoint> points = parse_sweep_points(options.rules, common.run.judge);
    if (options.summary_only) {
        // DIR's examples under the settings they were decoded with (its sweep.json): no model is loaded.
        const SweepStore store(common.out_dir, nlohmann::json::object(), SweepStore::Access::kReadOnly);
        report_sweep(options, store, points, problems);
        return;
    }
    PromptFormat format;
    DecodingSession session = open_sweep_session(common, points, problems, format);
    SweepStore store(common.out_dir, sweep_settings(common, session, format));
    const size_t total = points.size() * problems.size(), todo = missing_examples(store, points, problems);
    if (todo < total)
        std::fprintf(stderr, "sweep: resuming %s: %zu of %zu examples already done\n", common.out_dir.c_str(),
                     total - todo, total);
    ProgressLine progress("sweep", todo, "examples");
    size_t done = 0;
    std::map<std::string, std::pair<size_t, size_t>> correct_of;  // point -> (correct, decoded) this run
    run_sweep_points(*session.decoder, session.generation, problems, points, common.parallel, store,
                     [&](const SweepExample& example) {
                         auto& [correct, decoded] = correct_of[example.point];
                         correct += example.correct;
                         ++decoded;
                         progress.update(++done, fmt::format("{} {}/{} correct", example.point, correct, decoded));
                     });
    progress.finish();
    report_sweep(options, store, points, problems);
}

}  // namespace

void register_sweep_command(CLI::App& app) {
    auto options = std::make_shared<SweepOptions>();
    CLI::App* cmd = app.add_subcommand(
        "sweep",
        "Decode a dataset with vanilla and every rule setting; write per-example results, a summary, the "
        "paper's table and accuracy-vs-MAT / accuracy-vs-speedup plots (resumable)");
    add_sweep_run_options(*cmd, options->common,
                          "Directory for sweep.json, examples.jsonl, summary.{json,csv}, table.md and the plots; an "
                          "existing one with the same settings is resumed (new points are added)");
    cmd->add_option("--rules", options->rules,
                    "Points to run besides vanilla (always run, the reference): RULE:V1,V2,... with V the threshold, "
                    "K for topk, N/DELTA for topn-delta, TAU or DIVERGENCE/TAU for fsd (kl, reverse-kl, js); e.g. "
                    "kl:0.1,0.3,1 topk:2,4 target-entropy:0.5,1 fsd:js/0.05")
        ->required();
    cmd->add_flag("!--no-plots", options->plots, "Skip the SVG/PNG plots (gnuplot)");
    cmd->add_flag("--json", options->json, "Print summary.json instead of the table");
    cmd->add_flag("--summary-only", options->summary_only,
                  "Decode nothing and load no model: write the summary, table and plots of what DIR holds now (under "
                  "its own sweep.json's settings), over the problems every point has decoded (a sweep still running, "
                  "or cut short)");
    cmd->add_flag("--rescore", options->rescore,
                  "With --summary-only: score every stored answer again with the current scorers (code runs its tests "
                  "again) before summarising; DIR's examples.jsonl keeps its verdicts")
        ->needs("--summary-only");
    cmd->callback([options] { run_sweep(*options); });
}

}  // namespace klspec
