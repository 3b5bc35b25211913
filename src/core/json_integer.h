// Integer fields of JSON files klspec reads from outside (head files, mining directories): nlohmann's
// get<T>() casts a floating-point or out-of-range value without a check (1e50 as size_t is undefined
// behaviour), so such a field is refused with a one-line klspec::Error instead.
#pragma once

#include <cstdint>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace klspec {

template <typename T>
T integer_at(const nlohmann::json& object, const char* key) {
    const nlohmann::json& value = object.at(key);
    const bool fits = value.is_number_unsigned()  ? value.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max())
                      : value.is_number_integer() ? value.get<int64_t>() >= int64_t(std::numeric_limits<T>::min()) &&
                                                        value.get<int64_t>() <= int64_t(std::numeric_limits<T>::max())
                                                  : false;
    if (!fits)
        throw Error(fmt::format("'{}' must be an integer in [{}, {}], got {}", key, std::numeric_limits<T>::min(),
                                std::numeric_limits<T>::max(), value.dump()));
    return value.get<T>();
}

}  // namespace klspec
