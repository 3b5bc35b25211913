#include "core/answer_scoring.h"

#include <cctype>
#include <charconv>

namespace klspec {

std::optional<int64_t> extract_final_answer(std::string_view text) {
    constexpr std::string_view kMarker = "The answer is ";
    const size_t at = text.find(kMarker);
    if (at == std::string_view::npos) return std::nullopt;
    const std::string_view rest = text.substr(at + kMarker.size());
    int64_t value = 0;
    const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (error != std::errc() || end == rest.data()) return std::nullopt;
    return value;
}

}  // namespace klspec
