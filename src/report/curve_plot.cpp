#include "report/curve_plot.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "report/gnuplot.h"

namespace klspec {
namespace {

// gnuplot single-quoted strings: a quote is doubled.
std::string quoted(const std::string& text) {
    std::string out = "'";
    for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

}  // namespace

void plot_curves(const CurvePlot& plot, const std::string& path_stem) {
    if (plot.curves.empty()) throw Error("plot: no curves");
    // One gnuplot data block per curve (blank-line separated, addressed by `index`): x, y, y low, y high
    // (a point without a range gets a bar of zero length); the reference last.
    std::ostringstream data;
    for (const Curve& curve : plot.curves) {
        for (const CurvePoint& p : curve.points) {
            const auto [low, high] = p.y_range.value_or(std::pair{p.y, p.y});
            data << fmt::format("{} {} {} {}\n", p.x, p.y, low, high);
        }
        data << "\n\n";
    }
    data << fmt::format("{} {}\n", plot.reference.first, plot.reference.second);

    std::string plots;
    for (size_t i = 0; i < plot.curves.size(); ++i) {
        const std::vector<CurvePoint>& points = plot.curves[i].points;
        const bool bars =
            std::any_of(points.begin(), points.end(), [](const CurvePoint& p) { return p.y_range.has_value(); });
        plots += fmt::format("datafile index {} using 1:2{} with {} lw 2 pt 7 ps 0.8 title {}, ", i, bars ? ":3:4" : "",
                             bars ? "yerrorlines" : "linespoints", quoted(plot.curves[i].name));
    }
    plots += fmt::format("datafile index {} with points pt 9 ps 2.2 lc rgb 'black' title {}", plot.curves.size(),
                         quoted(plot.reference_name));

    for (const auto& [terminal, extension] : {std::pair{"svg size 800,560 dynamic background rgb 'white'", "svg"},
                                              std::pair{"pngcairo size 1000,700", "png"}}) {
        // noenhanced: names like testbed_word_test stay literal (no subscripts); offsets keep points off the frame.
        run_gnuplot(fmt::format(R"(set terminal {}
set termoption noenhanced
set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05
set output {}
set title {}
set xlabel {}
set ylabel {}
set grid
set key outside right top
plot {}
)",
                                terminal, quoted(path_stem + "." + extension), quoted(plot.title), quoted(plot.x_label),
                                quoted(plot.y_label), plots),
                    data.str());
    }
}

}  // namespace klspec
