// Accuracy-against-X curves, one per rule with the reference point marked (the paper's Figs. 2-3),
// drawn by gnuplot as SVG and PNG.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace klspec {

struct CurvePoint {
    double x = 0, y = 0;
    std::optional<std::pair<double, double>> y_range;  // (low, high), drawn as an error bar
    auto operator<=>(const CurvePoint&) const = default;
};

struct Curve {
    std::string name;
    std::vector<CurvePoint> points;  // drawn in the given order; with error bars where any point has a y_range
};

struct CurvePlot {
    std::string title;
    std::string x_label, y_label;
    std::vector<Curve> curves;
    std::pair<double, double> reference;  // drawn as a single marked point
    std::string reference_name;
};

// Writes `path_stem`.svg and `path_stem`.png. Throws klspec::Error when gnuplot fails.
void plot_curves(const CurvePlot& plot, const std::string& path_stem);

}  // namespace klspec
