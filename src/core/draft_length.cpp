#include "core/draft_length.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

namespace klspec {
namespace {

// Weight of a new measurement in a size's running average: noise in one call moves it little, a lasting
// change (a longer context, another process on the cores) shows within ~10 calls.
constexpr double kNewMeasurementWeight = 0.2;

}  // namespace

std::string_view draft_policy_name(DraftPolicy policy) {
    switch (policy) {
        case DraftPolicy::Auto:
            return "auto";
        case DraftPolicy::Fixed:
            return "fixed";
        case DraftPolicy::Adaptive:
            return "adaptive";
        case DraftPolicy::Off:
            return "off";
    }
    return "unknown";
}

std::optional<DraftPolicy> parse_draft_policy(std::string_view name) {
    for (const DraftPolicy policy : kDraftPolicies)
        if (draft_policy_name(policy) == name) return policy;
    return std::nullopt;
}

int32_t next_adaptive_draft_budget(int32_t budget, int32_t drafted, int32_t accepted, int32_t draft_min,
                                   int32_t draft_max) {
    const int32_t next = accepted == drafted ? budget + 2 : budget - 1;
    return std::clamp(next, std::max(1, draft_min), draft_max);
}

void BatchCostCurve::record(int32_t batch_size, double seconds) {
    if (batch_size < 1 || !(seconds >= 0.0) || !std::isfinite(seconds)) return;
    const bool reused = batch_size == std::exchange(last_size_, batch_size);
    const auto fold_rebuild = [this](double excess) {
        rebuild_seconds_ =
            rebuild_seconds_ ? *rebuild_seconds_ + kNewMeasurementWeight * (excess - *rebuild_seconds_) : excess;
    };
    const bool was_stale = stale(batch_size);
    ++calls_;
    if (reused && previous_rebuilt_seconds_) fold_rebuild(*previous_rebuilt_seconds_ - seconds);
    previous_rebuilt_seconds_ = reused ? std::nullopt : std::optional<double>(seconds);
    const auto it = mean_.find(batch_size);
    if (it == mean_.end() || was_stale) {
        // A rebuilding call's own cost is what the rebuild price leaves, but that price is an average over other
        // calls: half the call at least stays the size's, so that a noisy price never makes a size look free (a
        // loaded machine timed target-only steps at 0 s until a call that reused the graph re-timed them).
        mean_[batch_size] = reused ? seconds : std::max(seconds - rebuild_seconds(), seconds / 2);
        if (reused) {
            provisional_.erase(batch_size);
        } else {
            provisional_.insert(batch_size);
        }
    } else if (reused) {
        it->second =
            provisional_.erase(batch_size) ? seconds : it->second + kNewMeasurementWeight * (seconds - it->second);
    } else {
        return;  // a rebuilding call of a known size: its average did not move
    }
    measured_at_[batch_size] = calls_;
}

void BatchCostCurve::expire(std::span<const int32_t> batch_sizes) {
    for (const int32_t size : batch_sizes) measured_at_[size] = calls_ - kStaleCalls;
}

int64_t BatchCostCurve::calls_since_measured(int32_t batch_size) const {
    const auto it = measured_at_.find(batch_size);
    return it == measured_at_.end() ? calls_ : calls_ - it->second;
}

double BatchCostCurve::seconds(std::span<const int32_t> batch_sizes) const {
    double total = 0.0;
    int32_t previous = last_size_;
    for (const int32_t size : batch_sizes) {
        total += seconds(size) + (size != previous ? rebuild_seconds() : 0.0);
        previous = size;
    }
    return total;
}

double BatchCostCurve::seconds(int32_t batch_size) const {
    if (mean_.empty()) return 0.0;
    if (mean_.size() == 1) {  // one size known: proportional to the tokens is the safe guess (compute-bound)
        const auto& [size, secs] = *mean_.begin();
        return secs * double(std::max(batch_size, 1)) / double(size);
    }
    double estimate;
    auto upper = mean_.lower_bound(batch_size);
    if (upper != mean_.end() && upper->first == batch_size) {
        estimate = upper->second;
    } else if (upper == mean_.begin()) {
        estimate = upper->second;  // below the smallest size: no cheaper than it
    } else {
        if (upper == mean_.end()) upper = std::prev(mean_.end());  // extrapolate through the two largest sizes
        const auto lower = std::prev(upper);
        const double slope = (upper->second - lower->second) / double(upper->first - lower->first);
        estimate = lower->second + slope * double(batch_size - lower->first);
    }
    // Never below a smaller size's cost: noise in one size's average must not make a longer draft look free.
    for (auto it = mean_.begin(); it != mean_.end() && it->first < batch_size; ++it)
        estimate = std::max(estimate, it->second);
    return estimate;
}

void AcceptanceEstimate::record(int32_t drafted, int32_t accepted) {
    kept_ = decay_ * kept_ + double(std::max(accepted, 0));
    trials_ = decay_ * trials_ + double(std::max(accepted, 0)) + (accepted < drafted ? 1.0 : 0.0);
}

std::vector<int32_t> sequential_equal_split(std::span<const BatchShare> shares) {
    std::vector<int32_t> left;
    for (const BatchShare& share : shares) left.push_back(std::max(share.tokens, 0));
    std::vector<int32_t> micro_batches;
    std::vector<size_t> members;
    while (true) {
        members.clear();
        for (size_t i = 0; i < shares.size(); ++i) {
            if (left[i] == 0) continue;
            if (members.empty() || shares[i].sequence_id == shares[members.back()].sequence_id + 1)
                members.push_back(i);
        }
        if (members.empty()) return micro_batches;
        int32_t each = left[members.front()];
        for (const size_t i : members) each = std::min(each, left[i]);
        for (const size_t i : members) left[i] -= each;
        micro_batches.push_back(each * static_cast<int32_t>(members.size()));
    }
}

void DepthAcceptance::record(int32_t drafted, int32_t accepted) {
    if (drafted <= 0) return;
    for (int32_t j = 0; j < kMaxDepth; ++j) {
        kept_[j] *= AcceptanceEstimate::kDecoderDecay;
        trials_[j] *= AcceptanceEstimate::kDecoderDecay;
    }
    // Depths 1..accepted were kept; depth accepted + 1 was judged and rejected (when there was one).
    const int32_t judged = std::min({accepted + 1, drafted, kMaxDepth});
    for (int32_t j = 0; j < judged; ++j) {
        trials_[j] += 1.0;
        kept_[j] += j < accepted ? 1.0 : 0.0;
    }
}

std::vector<double> DepthAcceptance::rates(int32_t max_depth, double rejection_scale) const {
    std::vector<double> out;
    double prior = AcceptanceEstimate::kDecoderPrior;
    for (int32_t j = 0; j < max_depth; ++j) {
        const size_t d = static_cast<size_t>(std::min(j, kMaxDepth - 1));
        const double rate = (kept_[d] + prior * AcceptanceEstimate::kPriorWeight / 4) /
                            (trials_[d] + AcceptanceEstimate::kPriorWeight / 4);
        const double scale = j == 0 ? rejection_scale : 1.0;
        out.push_back(std::clamp(1.0 - (1.0 - rate) * scale, 0.0, 0.999));
        prior = rate;
    }
    return out;
}

double expected_tokens(int32_t gamma, std::span<const double> acceptance_by_depth) {
    double tokens = 1.0, reach = 1.0;
    for (int32_t j = 0; j < gamma && j < static_cast<int32_t>(acceptance_by_depth.size()); ++j) {
        reach *= std::clamp(acceptance_by_depth[static_cast<size_t>(j)], 0.0, 1.0);
        tokens += reach;
    }
    return tokens;
}

double expected_tokens(int32_t gamma, double acceptance) {
    const double a = std::clamp(acceptance, 0.0, 1.0);
    if (a >= 1.0) return double(gamma) + 1.0;
    return (1.0 - std::pow(a, gamma + 1)) / (1.0 - a);
}

std::vector<int32_t> verify_micro_batches(std::span<const DraftCandidate> candidates,
                                          std::span<const int32_t> lengths) {
    std::vector<BatchShare> shares;
    for (size_t s = 0; s < candidates.size(); ++s) shares.push_back({candidates[s].sequence_id, lengths[s] + 1});
    return sequential_equal_split(shares);
}

DraftChoice evaluate_draft_lengths(const BatchCostCurve& verify, const BatchCostCurve& draft,
                                   std::span<const DraftCandidate> candidates, std::vector<int32_t> lengths) {
    DraftChoice choice;
    std::vector<BatchShare> shares;
    int32_t deepest = 0;
    for (size_t s = 0; s < candidates.size(); ++s) {
        const DraftCandidate& c = candidates[s];
        const double tokens = expected_tokens(lengths[s], std::span<const double>(c.acceptance));
        choice.expected_tokens += tokens;
        choice.expected_seconds += c.lookup_seconds;
        // A step never spreads a catch-up over fewer tokens than it emits: at most the whole of it.
        if (c.model_drafts && lengths[s] > 0)
            choice.expected_seconds += c.catch_up_seconds * tokens / std::max(c.catch_up_horizon, tokens);
        shares.push_back({candidates[s].sequence_id, 0});
        if (candidates[s].model_drafts) deepest = std::max(deepest, lengths[s]);
    }
    choice.expected_seconds += verify.seconds(std::span<const int32_t>(verify_micro_batches(candidates, lengths)));
    std::vector<int32_t> draft_calls;
    for (int32_t depth = 0; depth < deepest; ++depth) {
        for (size_t s = 0; s < candidates.size(); ++s)
            shares[s].tokens = candidates[s].model_drafts && lengths[s] > depth
                                   ? (depth == 0 ? candidates[s].first_call_tokens : 1)
                                   : 0;
        for (const int32_t size : sequential_equal_split(shares)) draft_calls.push_back(size);
    }
    choice.expected_seconds += draft.seconds(std::span<const int32_t>(draft_calls));
    choice.lengths = std::move(lengths);
    return choice;
}

double catch_up_horizon_tokens(int64_t decoded, int64_t left) {
    return static_cast<double>(std::max<int64_t>(std::min(decoded, left), 1));
}

DraftChoice choose_draft_lengths(const BatchCostCurve& verify, const BatchCostCurve& draft,
                                 std::span<const DraftCandidate> candidates) {
    int32_t longest = 0;
    for (const DraftCandidate& c : candidates) longest = std::max(longest, c.max_length);
    // Start from the best of: the k sequences with the highest acceptance drafting a common length, the
    // others none (k = 1..all). A split batch costs another pass, so lengths are coupled and single
    // changes alone get stuck (two sequences both at 2 can beat either alone at 8 while 8 and 0 is best).
    std::vector<size_t> by_acceptance(candidates.size());
    for (size_t s = 0; s < candidates.size(); ++s) by_acceptance[s] = s;
    std::stable_sort(by_acceptance.begin(), by_acceptance.end(), [&](size_t a, size_t b) {
        return expected_tokens(1, std::span<const double>(candidates[a].acceptance)) >
               expected_tokens(1, std::span<const double>(candidates[b].acceptance));
    });
    std::vector<int32_t> lengths(candidates.size());
    const auto top_k_at = [&](size_t k, int32_t g) {
        for (size_t r = 0; r < by_acceptance.size(); ++r) {
            const DraftCandidate& c = candidates[by_acceptance[r]];
            lengths[by_acceptance[r]] = std::clamp(r < k ? g : 0, c.min_length, c.max_length);
        }
        return evaluate_draft_lengths(verify, draft, candidates, lengths);
    };
    DraftChoice best = top_k_at(0, 0);
    for (size_t k = 1; k <= candidates.size(); ++k) {
        for (int32_t g = 1; g <= longest; ++g) {
            DraftChoice c = top_k_at(k, g);
            if (c.tokens_per_second() > best.tokens_per_second()) best = std::move(c);
        }
    }
    // Then coordinate ascent over single sequences; each change strictly improves the rate, so it ends.
    for (int pass = 0; pass < 4 && candidates.size() > 1; ++pass) {
        bool improved = false;
        for (size_t s = 0; s < candidates.size(); ++s) {
            for (int32_t g = candidates[s].min_length; g <= candidates[s].max_length; ++g) {
                if (g == best.lengths[s]) continue;
                lengths = best.lengths;
                lengths[s] = g;
                DraftChoice c = evaluate_draft_lengths(verify, draft, candidates, lengths);
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

bool drafting_could_pay(const BatchCostCurve& verify, const BatchCostCurve& draft,
                        std::span<const DraftCandidate> candidates, const DraftChoice& chosen, size_t s) {
    std::vector<DraftCandidate> ideal(candidates.begin(), candidates.end());
    ideal[s].acceptance.assign(static_cast<size_t>(std::max(ideal[s].max_length, 1)), 1.0);
    ideal[s].catch_up_seconds = 0;
    std::vector<int32_t> lengths = chosen.lengths;
    for (int32_t g = std::max(ideal[s].min_length, 1); g <= ideal[s].max_length; ++g) {
        lengths[s] = g;
        if (evaluate_draft_lengths(verify, draft, ideal, lengths).tokens_per_second() >=
            chosen.tokens_per_second() * (1.0 - 1e-9))
            return true;
    }
    return false;
}

bool TargetOnlyRetime::due(const DraftChoice& chosen, const DraftChoice& target_only) {
    const bool drafts = std::any_of(chosen.lengths.begin(), chosen.lengths.end(), [](int32_t g) { return g > 0; });
    if (!drafts) {  // the choice stepped aside: the size is being timed
        steps_ = 0;
        interval_ = kFirstInterval;
        return false;
    }
    if (chosen.tokens_per_second() >= kMargin * target_only.tokens_per_second()) return false;
    if (++steps_ < interval_) return false;
    steps_ = 0;
    interval_ = std::min(2 * interval_, kMaxInterval);
    return true;
}

int32_t DraftProbe::adjust(int32_t chosen, int32_t max_length, double probe_cost, double tokens_left, bool could_pay,
                           bool new_step) {
    probing_ = false;
    if (max_length <= 0) return chosen;
    if (chosen > 0) {
        idle_steps_ = 0;
        if (new_step) ++drafting_steps_;
        if (drafting_steps_ >= kFirstInterval) interval_ = kFirstInterval;
        return chosen;
    }
    drafting_steps_ = 0;
    const double cost = std::max(probe_cost, 0.0);
    const bool up_front = paid_up_front_ + cost <= kMaxShare * tokens_left;
    const double priced_interval = up_front ? 0.0 : std::ceil(cost / kMaxShare);
    if (new_step) ++idle_steps_;
    if (idle_steps_ < std::max(double(interval_), priced_interval) || !could_pay) return 0;
    idle_steps_ = 0;
    interval_ = std::min(2 * interval_, kMaxInterval);
    probing_ = true;
    if (up_front) paid_up_front_ += cost;
    return std::min(kProbeLength, max_length);
}

}  // namespace klspec
