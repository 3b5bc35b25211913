// `klspec calibrate`: the most productive setting of one rule whose accuracy loss against vanilla stays
// within a budget, chosen on a calibration split and checked on held-out problems (src/eval/calibration.h).
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/calibrate_command.h"
#include "apps/progress_line.h"
#include "apps/sweep_options.h"
#include "core/error.h"
#include "eval/calibration.h"

namespace klspec {
namespace {

struct CalibrateOptions {
    SweepRunOptions common;
    std::string rule = "kl";
    std::string values = "0.1,0.2,0.3,0.5,0.75,1,1.5,2,3,5";
    std::string max_loss = "1%";
    std::string measure = "accuracy";  // parse_calibration_measure
    double calibration_share = 0.5;
    bool strict = false;
    bool json = false;
};

// Runs `points` on `problems` into DIR/<name>, resumably; returns the summaries (vanilla first) and losses.
std::pair<std::vector<PointSummary>, std::map<std::string, AccuracyLoss>> run_stage(
    const CalibrateOptions& options, CalibrationMeasure measure, DecodingSession& session, const PromptFormat& format,
    const std::string& name, const std::vector<Problem>& problems, const std::vector<SweepPoint>& points) {
    nlohmann::json settings = sweep_settings(options.common, session, format);
    settings["stage"] = name;
    settings["calibration_share"] = options.calibration_share;
    SweepStore store(options.common.out_dir + "/" + name, settings);
    ProgressLine progress("calibrate: " + name, missing_examples(store, points, problems), "examples");
    size_t done = 0;
    run_sweep_points(*session.decoder, session.generation, problems, points, options.common.parallel, store,
                     [&](const SweepExample& example) { progress.update(++done, example.point); });
    progress.finish();
    std::vector<PointSummary> summaries = summarize_sweep(points, store.examples(), answer_kind(problems));
    write_sweep_summary(store.dir(), summaries, answer_kind(problems));
    return {std::move(summaries), losses_against_vanilla(store.examples(), points, problems, measure)};
}

nlohmann::json loss_to_json(const PointSummary& s, const AccuracyLoss& loss) {
    return {{"point", s.point},         {"accuracy", s.accuracy()},
            {"mat", s.totals.mat()},    {"tokens_per_second", s.tokens_per_second()},
            {"loss", loss.loss},        {"loss_ci95", {loss.low, loss.high}},
            {"problems", loss.problems}};
}

void run_calibrate(const CalibrateOptions& options) {
    const double budget = parse_accuracy_budget(options.max_loss);
    const CalibrationMeasure measure = parse_calibration_measure(options.measure);
    const char* loss_name =
        measure == CalibrationMeasure::Agreement ? "disagreement with vanilla's answers" : "loss against vanilla";
    if (options.rule == "vanilla") throw Error("calibrate: vanilla is lossless; name a lossy rule with --rule");
    std::vector<Problem> problems = load_scored_problems(options.common.dataset);
    const std::vector<SweepPoint> points =
        parse_sweep_points({options.rule + ":" + options.values}, options.common.run.judge);
    PromptFormat format;
    DecodingSession session = open_sweep_session(options.common, points, problems, format);
    auto [calibration, validation] = calibration_split(std::move(problems), options.calibration_share);

    const auto [summaries, losses] = run_stage(options, measure, session, format, "calibration", calibration, points);
    const std::optional<size_t> chosen = pick_within_budget(summaries, losses, budget, options.strict);

    nlohmann::json report = {{"rule", options.rule},
                             {"measure", options.measure},
                             {"max_loss", budget},
                             {"strict", options.strict},
                             {"calibration_problems", calibration.size()},
                             {"validation_problems", validation.size()},
                             {"vanilla_calibration_accuracy", summaries.front().accuracy()}};
    report["calibration"] = nlohmann::json::array();
    for (const PointSummary& s : summaries)
        if (losses.contains(s.point)) report["calibration"].push_back(loss_to_json(s, losses.at(s.point)));
    std::string text = fmt::format("calibration ({} problems, vanilla {:.1f} %): {}, 95 % CI\n", calibration.size(),
                                   100 * summaries.front().accuracy(), loss_name);
    for (const PointSummary& s : summaries) {
        if (!losses.contains(s.point)) continue;
        const AccuracyLoss& l = losses.at(s.point);
        text += fmt::format("  {:<22} accuracy {:5.1f} %  loss {:+5.1f} [{:+.1f}, {:+.1f}]  MAT {:.2f}{}\n", s.point,
                            100 * s.accuracy(), 100 * l.loss, 100 * l.low, 100 * l.high, s.totals.mat(),
                            chosen && summaries[*chosen].point == s.point ? "  <- chosen" : "");
    }
    if (!chosen) {
        report["chosen"] = nullptr;
        text += fmt::format("no setting of {} keeps its {} within {:.1f} %{}\n", options.rule, loss_name, 100 * budget,
                            options.strict ? " (upper CI bound)" : "");
        if (const std::optional<size_t> closest = closest_to_budget(summaries, losses, options.strict)) {
            const PointSummary& s = summaries[*closest];
            const AccuracyLoss& l = losses.at(s.point);
            report["closest"] = loss_to_json(s, l);
            text += fmt::format("closest: {}, {} {:+.1f} [{:+.1f}, {:+.1f}] (MAT {:.2f})\n", s.point, loss_name,
                                100 * l.loss, 100 * l.low, 100 * l.high, s.totals.mat());
        }
    } else {
        const SweepPoint& point = points[*chosen];  // summaries follow the points' order
        const std::vector<SweepPoint> check{points.front(), point};
        const auto [held_out, held_out_losses] =
            run_stage(options, measure, session, format, "validation", validation, check);
        const AccuracyLoss& loss = held_out_losses.at(point.label());
        const bool within = (options.strict ? loss.high : loss.loss) <= budget + 1e-12;
        report["chosen"] = point.label();
        report["validation"] = loss_to_json(held_out.back(), loss);
        report["validation"]["vanilla_accuracy"] = held_out.front().accuracy();
        report["validation"]["within_budget"] = within;
        report["judge"] = {
            {"rule", point.rule}, {"value", point.value}, {"confidence_mask", point.judge.confidence_mask}};
        text += fmt::format(
            "chosen: {} (MAT {:.2f})\nvalidation ({} problems): vanilla {:.1f} %, {} {:.1f} %, {} {:+.1f} "
            "[{:+.1f}, {:+.1f}] -> {}\n",
            point.label(), summaries[*chosen].totals.mat(), validation.size(), 100 * held_out.front().accuracy(),
            point.label(), 100 * held_out.back().accuracy(), loss_name, 100 * loss.loss, 100 * loss.low,
            100 * loss.high, within ? "within the budget" : "OVER the budget on held-out problems");
    }
    std::ofstream(options.common.out_dir + "/setting.json") << report.dump(2) << "\n";
    if (options.json)
        std::cout << report.dump() << "\n";
    else
        std::cout << text << "written: " << options.common.out_dir << "/setting.json\n";
}

}  // namespace

void register_calibrate_command(CLI::App& app) {
    auto options = std::make_shared<CalibrateOptions>();
    CLI::App* cmd = app.add_subcommand(
        "calibrate",
        "Pick the setting of a rule with the highest MAT whose accuracy loss against vanilla is within "
        "--max-loss on a calibration split, and check it on the held-out rest (resumable)");
    add_sweep_run_options(*cmd, options->common,
                          "Directory for calibration/ and validation/ (sweep layouts) and setting.json; resumed "
                          "when it exists");
    cmd->add_option("--rule", options->rule, "The rule to calibrate")->capture_default_str();
    cmd->add_option("--values", options->values,
                    "Its settings to try, comma-separated (thresholds; K for topk; N/DELTA for topn-delta)")
        ->capture_default_str();
    cmd->add_option("--max-loss", options->max_loss,
                    "Budget against vanilla, of the --measure: a percentage (1%) or a fraction")
        ->capture_default_str();
    cmd->add_option(
           "--measure", options->measure,
           "What the budget bounds: accuracy (the paired accuracy loss against vanilla) or agreement (the share "
           "of problems whose scored answer differs from vanilla's, Wilson interval: for a model that solves "
           "few problems, whose accuracy cannot fall)")
        ->check(CLI::IsMember({"accuracy", "agreement"}))
        ->capture_default_str();
    cmd->add_option("--calibration-share", options->calibration_share,
                    "Share of the problems used to choose (a seeded split by id); the rest validates")
        ->capture_default_str();
    cmd->add_flag("--strict", options->strict,
                  "Require the upper end of the loss's 95 % confidence interval, not the estimate, within the budget");
    cmd->add_flag("--json", options->json, "Print the report as one JSON object");
    cmd->callback([options] { run_calibrate(*options); });
}

}  // namespace klspec
