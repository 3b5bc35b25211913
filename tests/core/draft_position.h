// Building a DraftPosition from hand-made logit rows, for the core tests.
#pragma once

#include <vector>

#include "core/judge.h"

namespace klspec::test {

inline DraftPosition position(const std::vector<float>& target, const std::vector<float>& draft, int32_t token) {
    DraftPosition result;
    result.target_logits = target;
    result.draft_logits = draft;
    result.draft_token = token;
    return result;
}

}  // namespace klspec::test
