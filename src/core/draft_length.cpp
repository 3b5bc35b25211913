#include "core/draft_length.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace klspec {
namespace {

// Weight of a new measurement in a size's running average: noise in one call moves it little, a lasting
// change (a longer context, another process on the cores) shows within ~10 calls.
constexpr double kNewMeasurementWeight = 0.2;

}  // namespace

std::string_view draft_policy_name(DraftPolicy policy) {
    switch (policy) {
        case DraftPolicy::Auto: return "auto";
        case DraftPolicy::Fixed: return "fixed";
        case DraftPolicy::Adaptive: return "adaptive";
        case DraftPolicy::Off: return "off";
    }
    return "unknown";
}

void BatchCostCurve::record(int32_t batch_size, double seconds) {
    if (batch_size < 1 || !(seconds >= 0.0) || !std::isfinite(seconds)) return;
    const auto [it, inserted] = mean_.try_emplace(batch_size, seconds);
    if (!inserted) it->second += kNewMeasurementWeight * (seconds - it->second);
}

double BatchCostCurve::seconds(int32_t batch_size) const {
    if (mean_.empty()) return 0.0;
    if (mean_.size() == 1) {  // one size known: proportional to the tokens is the safe guess (compute-bound)
        const auto& [size, secs] = *mean_.begin();
        return secs * double(std::max(batch_size, 1)) / double(size);
    }
    auto upper = mean_.lower_bound(batch_size);
    if (upper != mean_.end() && upper->first == batch_size) return upper->second;
    if (upper == mean_.begin()) {
        // Below the smallest size: no cheaper than it (a batch never costs less for fewer tokens here).
        return upper->second;
    }
    if (upper == mean_.end()) upper = std::prev(mean_.end());  // extrapolate through the two largest sizes
    const auto lower = std::prev(upper);
    const double slope = (upper->second - lower->second) / double(upper->first - lower->first);
    return std::max(0.0, lower->second + slope * double(batch_size - lower->first));
}

void AcceptanceEstimate::record(int32_t drafted, int32_t accepted) {
    if (drafted <= 0) return;
    kept_ = kDecay * kept_ + double(accepted);
    trials_ = kDecay * trials_ + double(accepted) + (accepted < drafted ? 1.0 : 0.0);
}

double expected_tokens(int32_t gamma, double acceptance) {
    const double a = std::clamp(acceptance, 0.0, 1.0);
    if (a >= 1.0) return double(gamma) + 1.0;
    return (1.0 - std::pow(a, gamma + 1)) / (1.0 - a);
}

DraftChoice evaluate_draft_lengths(const BatchCostCurve& verify, const BatchCostCurve& draft,
                                   std::span<const DraftCandidate> candidates, std::vector<int32_t> lengths) {
    DraftChoice choice;
    int32_t batch = 0, deepest = 0;
    for (size_t s = 0; s < candidates.size(); ++s) {
        choice.expected_tokens += expected_tokens(lengths[s], candidates[s].acceptance);
        batch += lengths[s] + 1;
        deepest = std::max(deepest, lengths[s]);
    }
    choice.expected_seconds = batch > 0 ? verify.seconds(batch) : 0.0;
    for (int32_t depth = 0; depth < deepest; ++depth) {
        const auto drafting = std::count_if(lengths.begin(), lengths.end(), [&](int32_t g) { return g > depth; });
        choice.expected_seconds += draft.seconds(static_cast<int32_t>(drafting));
    }
    choice.lengths = std::move(lengths);
    return choice;
}

DraftChoice choose_draft_lengths(const BatchCostCurve& verify, const BatchCostCurve& draft,
                                 std::span<const DraftCandidate> candidates) {
    int32_t longest = 0;
    for (const DraftCandidate& c : candidates) longest = std::max(longest, c.max_length);
    const auto common = [&](int32_t g) {
        std::vector<int32_t> lengths;
        for (const DraftCandidate& c : candidates) lengths.push_back(std::clamp(g, c.min_length, c.max_length));
        return evaluate_draft_lengths(verify, draft, candidates, std::move(lengths));
    };
    DraftChoice best = common(0);
    for (int32_t g = 1; g <= longest; ++g) {
        DraftChoice c = common(g);
        if (c.tokens_per_second() > best.tokens_per_second()) best = std::move(c);
    }
    // Coordinate ascent over single sequences; each pass strictly improves the rate, so it ends.
    for (int pass = 0; pass < 4 && candidates.size() > 1; ++pass) {
        bool improved = false;
        for (size_t s = 0; s < candidates.size(); ++s) {
            for (int32_t g = candidates[s].min_length; g <= candidates[s].max_length; ++g) {
                if (g == best.lengths[s]) continue;
                std::vector<int32_t> lengths = best.lengths;
                lengths[s] = g;
                DraftChoice c = evaluate_draft_lengths(verify, draft, candidates, std::move(lengths));
                if (c.tokens_per_second() > best.tokens_per_second() * (1.0 + 1e-9)) {
                    best = std::move(c);
                    improved = true;
                }
            }
        }
        if (!improved) break;
    }
    return best;
}

int32_t DraftProbe::adjust(int32_t chosen, int32_t max_length) {
    probing_ = false;
    if (chosen > 0 || max_length <= 0) {
        if (chosen > 0) {
            idle_steps_ = 0;
            interval_ = kFirstInterval;
        }
        return chosen;
    }
    if (++idle_steps_ < interval_) return 0;
    idle_steps_ = 0;
    interval_ = std::min(2 * interval_, kMaxInterval);
    probing_ = true;
    return std::min(kProbeLength, max_length);
}

}  // namespace klspec
