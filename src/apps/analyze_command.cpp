// `klspec analyze`: the paper's Fig. 5 (mismatches binned by the head's score) and Fig. 4 (label
// consistency across sampled continuations), from mining runs (src/autojudge/analysis.h).
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "apps/autojudge_commands.h"
#include "autojudge/analysis.h"
#include "core/error.h"
#include "report/gnuplot.h"

namespace klspec {
namespace {

struct AnalyzeOptions {
    std::vector<std::string> mining_dirs;
    std::string head_path;
    std::string svg_path;
    int bins = 10;
    bool json = false;
};

// Fig. 5 as an SVG: the mean KL and entropies per score bin (left axis), the bin counts as boxes (right).
void plot_score_bins(const std::vector<ScoreBin>& bins, const std::string& svg_path) {
    std::string data = "# center\tcount\timportant_share\tmean_kl\tmean_target_entropy\tmean_draft_entropy\n";
    for (const ScoreBin& b : bins)
        if (b.count)
            data += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\n", 0.5 * (b.low + b.high), b.count,
                                double(b.important) / double(b.count), b.mean_kl, b.mean_target_entropy,
                                b.mean_draft_entropy);
    const std::string script = fmt::format(R"(set terminal svg size 800,500 dynamic background rgb 'white'
set output '{}'
set title 'Mismatches binned by AutoJudge head score'
set xlabel 'head score (probability the mismatch is important)'
set ylabel 'mean over the bin (nats; share)'
set y2label 'mismatches in the bin'
set xrange [0:1]
set yrange [0:*]
set y2range [0:*]
set ytics nomirror
set y2tics
set key top center
set style fill transparent solid 0.2 noborder
set boxwidth {} absolute
plot datafile using 1:2 axes x1y2 with boxes lc rgb 'gray' title 'count',      '' using 1:4 with linespoints lw 2 title 'mean KL(p||q)',      '' using 1:5 with linespoints lw 2 title 'mean H(p) target',      '' using 1:6 with linespoints lw 2 title 'mean H(q) draft',      '' using 1:3 with linespoints lw 2 dt 2 title 'share important'
)",
                                           svg_path, 0.9 / double(bins.size()));
    run_gnuplot(script, data);
}

void run_analyze(const AnalyzeOptions& options) {
    nlohmann::json out;
    if (!options.head_path.empty()) {
        const AutoJudgeHead head = AutoJudgeHead::load(options.head_path);
        const std::vector<ScoreBin> bins =
            bin_by_head_score(read_mined(options.mining_dirs.front()), head, options.bins);
        out["score_bins"] = to_json(bins);
        if (!options.svg_path.empty()) plot_score_bins(bins, options.svg_path);
        if (!options.json) {
            std::cout << fmt::format("Mismatches of {} binned by the head's score (Fig. 5)\n",
                                     options.mining_dirs.front())
                      << "score bin     count  important  mean KL  (inf)  mean H(p)  mean H(q)\n";
            for (const ScoreBin& b : bins)
                std::cout << fmt::format("[{:.1f}, {:.1f})  {:6}  {:9}  {:7.3f}  {:5}  {:9.3f}  {:9.3f}\n", b.low,
                                         b.high, b.count, b.important, b.mean_kl, b.infinite_kl, b.mean_target_entropy,
                                         b.mean_draft_entropy);
        }
    }
    if (options.mining_dirs.size() > 1) {
        const LabelConsistency c = label_consistency(options.mining_dirs);
        out["label_consistency"] = {
            {"runs", c.runs}, {"matched", c.matched}, {"agreeing", c.agreeing}, {"share", c.share()}};
        if (!options.json)
            std::cout << fmt::format(
                "Label consistency (Fig. 4): {} of {} mismatches found in all {} runs have the same "
                "label in all of them ({:.1f} %)\n",
                c.agreeing, c.matched, c.runs, 100 * c.share());
    }
    if (out.empty())
        throw Error("nothing to analyze: give --head (score bins) and/or several mining runs (consistency)");
    if (options.json) std::cout << out.dump() << "\n";
}

}  // namespace

void register_analyze_command(CLI::App& app) {
    auto options = std::make_shared<AnalyzeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "analyze",
        "The paper's AutoJudge analyses: with --head, mismatches binned by the head's score with mean KL and "
        "entropies (Fig. 5); with several mining runs sampled with different seeds, label consistency (Fig. 4)");
    cmd->add_option("DIRS", options->mining_dirs, "Mining runs (klspec mine --out); the first is binned")->required();
    cmd->add_option("--head", options->head_path, "AutoJudge head file (klspec train-judge --out)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--bins", options->bins, "Number of equal-width score bins")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--svg", options->svg_path, "With --head: also draw the score bins into this SVG (gnuplot)");
    cmd->add_flag("--json", options->json, "Print one JSON object");
    cmd->callback([options] { run_analyze(*options); });
}

}  // namespace klspec
