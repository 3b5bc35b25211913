// How much accuracy a lossy setting costs against a reference on the same problems (calibrate, sweep):
// a paired comparison, since both decode the same problems.
#pragma once

#include <cstddef>
#include <vector>

namespace klspec {

struct AccuracyLoss {
    double loss = 0;  // reference accuracy - candidate accuracy (a fraction; negative: the candidate is better)
    double low = 0;   // the two-sided confidence interval of the loss
    double high = 0;
    size_t problems = 0;
};

// Mean of d_i = reference_i - candidate_i (each 1, 0 or -1) with the normal-approximation interval
// mean ± z·s/√n (s: the sample standard deviation of d; z = 1.96 for 95 %). Throws klspec::Error when the
// spans differ in length or are empty.
// A proportion k/n with its Wilson score interval at z (1.96: 95 %), which stays inside [0, 1] and keeps a
// width at k = n, where the normal approximation collapses to a point (agreement near 100 %).
struct Proportion {
    double value = 0;
    double low = 0;
    double high = 0;
    size_t n = 0;
};
// Throws klspec::Error when n is 0 or k > n.
Proportion wilson_proportion(size_t k, size_t n, double z = 1.96);

AccuracyLoss paired_accuracy_loss(const std::vector<bool>& reference, const std::vector<bool>& candidate,
                                  double z = 1.96);

}  // namespace klspec
