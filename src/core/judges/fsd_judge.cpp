#include "core/judges/fsd_judge.h"

#include <cmath>

#include <fmt/format.h>

#include "core/distribution_stats.h"
#include "core/error.h"

namespace klspec {

std::string_view divergence_name(Divergence divergence) {
    switch (divergence) {
        case Divergence::ForwardKl:
            return "kl";
        case Divergence::ReverseKl:
            return "reverse-kl";
        case Divergence::JensenShannon:
            return "js";
    }
    return "?";
}

Divergence parse_divergence(const std::string& name) {
    constexpr Divergence kAll[] = {Divergence::ForwardKl, Divergence::ReverseKl, Divergence::JensenShannon};
    std::string names;
    for (const Divergence d : kAll) {
        if (divergence_name(d) == name) return d;
        names += fmt::format("{}{}", names.empty() ? "" : ", ", divergence_name(d));
    }
    throw Error(fmt::format("unknown divergence '{}' (one of: {})", name, names));
}

JudgeDecision FsdJudge::decide(const DraftPosition& position) const {
    double divergence = 0;
    switch (divergence_) {
        case Divergence::ForwardKl:
            divergence = kl_stats(position.target_logits, position.draft_logits).kl;
            break;
        case Divergence::ReverseKl:
            divergence = kl_stats(position.draft_logits, position.target_logits).kl;
            break;
        case Divergence::JensenShannon:
            divergence = js_divergence(position.target_logits, position.draft_logits);
            break;
    }
    return {divergence < threshold_, divergence};
}

std::optional<double> FsdJudge::total_variation_bound() const {
    return divergence_ == Divergence::JensenShannon ? std::sqrt(2 * threshold_) : std::sqrt(threshold_ / 2);
}

}  // namespace klspec
