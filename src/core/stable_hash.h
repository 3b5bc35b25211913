// A hash that is the same on every machine and build (std::hash is not): for seeded splits and subsets.
#pragma once

#include <cstdint>
#include <string_view>

namespace klspec {

// 64-bit FNV-1a.
inline uint64_t fnv1a64(std::string_view text) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
    return h;
}

}  // namespace klspec
