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

}  // namespace klspec
