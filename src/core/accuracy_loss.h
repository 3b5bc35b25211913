// How much accuracy a lossy setting costs against a reference on the same problems (calibrate, sweep):
// a paired comparison, since both decode the same problems.
#pragma once

#include <cstddef>
#include <vector>

namespace klspec {

struct AccuracyLoss {
    double loss = 0;   // reference accuracy - candidate accuracy (a fraction; negative: the candidate is better)
    double low = 0;    // the two-sided confidence interval of the loss
    double high = 0;
    size_t problems = 0;
};

// Mean of d_i = reference_i - candidate_i (each 1, 0 or -1) with the normal-approximation interval
// mean ± z·s/√n (s: the sample standard deviation of d; z = 1.96 for 95 %). Throws klspec::Error when the
// spans differ in length or are empty.
AccuracyLoss paired_accuracy_loss(const std::vector<bool>& reference, const std::vector<bool>& candidate, double z = 1.96);

}  // namespace klspec
