#include "core/accuracy_loss.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace klspec {

AccuracyLoss paired_accuracy_loss(const std::vector<bool>& reference, const std::vector<bool>& candidate, double z) {
    if (reference.size() != candidate.size() || reference.empty())
        throw Error("paired_accuracy_loss: needs the same, non-empty set of problems for both settings");
    const size_t n = reference.size();
    double sum = 0, sum_squares = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = double(reference[i]) - double(candidate[i]);
        sum += d;
        sum_squares += d * d;
    }
    const double mean = sum / double(n);
    // Sample variance; with one problem there is no spread to estimate, so the interval is the point.
    const double variance = n > 1 ? (sum_squares - double(n) * mean * mean) / double(n - 1) : 0.0;
    const double half_width = z * std::sqrt(std::max(variance, 0.0) / double(n));
    return {mean, mean - half_width, mean + half_width, n};
}

Proportion wilson_proportion(size_t k, size_t n, double z) {
    if (n == 0 || k > n) throw Error("wilson_proportion: needs 0 <= k <= n and n > 0");
    const double p = double(k) / double(n);
    const double z2n = z * z / double(n);
    const double centre = (p + z2n / 2) / (1 + z2n);
    const double half_width = z / (1 + z2n) * std::sqrt(p * (1 - p) / double(n) + z2n / (4 * double(n)));
    return {p, std::max(0.0, centre - half_width), std::min(1.0, centre + half_width), n};
}

}  // namespace klspec
