#include "core/answer_scoring.h"

#include <charconv>
#include <regex>

#include <fmt/format.h>

#include "core/error.h"

namespace klspec {
namespace {

// "1,200.50" -> "1200.5": a number in its shortest form, so that equal values compare equal as text.
std::optional<std::string> canonical_number(std::string text) {
    std::erase(text, ',');
    double value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return fmt::format("{}", value + 0.0);  // + 0.0 turns -0 into 0
}

std::string_view strip(std::string_view s) {
    const size_t begin = s.find_first_not_of(" \t\r\n");
    if (begin == std::string_view::npos) return {};
    return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

std::optional<std::string> extract_gsm8k(std::string_view text) {
    static const std::regex kAnswer(R"(The answer is \$?(-?[\d,]*\d(?:\.\d+)?))");
    std::match_results<std::string_view::const_iterator> m;
    if (!std::regex_search(text.begin(), text.end(), m, kAnswer)) return std::nullopt;
    return canonical_number(m[1].str());
}

std::optional<std::string> extract_mmlu_pro(std::string_view text) {
    static const std::regex kAnswerIs(R"(answer is \(?([A-J])\)?)");
    static const std::regex kLastAnswerColon(R"([\s\S]*[aA]nswer:\s*([A-J]))");  // greedy: the last one
    static const std::regex kStandaloneLetter(R"(\b[A-J]\b)");
    std::match_results<std::string_view::const_iterator> m;
    if (std::regex_search(text.begin(), text.end(), m, kAnswerIs)) return m[1].str();
    if (std::regex_search(text.begin(), text.end(), m, kLastAnswerColon)) return m[1].str();
    std::optional<std::string> last;
    for (std::regex_iterator<std::string_view::const_iterator> it(text.begin(), text.end(), kStandaloneLetter), end;
         it != end; ++it)
        last = it->str();
    return last;
}

std::optional<std::string> extract_lcb_output(std::string_view text) {
    constexpr std::string_view kMarker = "Output:";
    const size_t at = text.rfind(kMarker);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view rest = text.substr(at + kMarker.size());
    rest = rest.substr(0, rest.find('\n'));
    return std::string(strip(rest));
}

}  // namespace

Scorer parse_scorer(std::string_view name) {
    for (Scorer s : {Scorer::Gsm8k, Scorer::MmluPro, Scorer::LcbOutput})
        if (name == to_string(s)) return s;
    throw Error(fmt::format("unknown scorer \"{}\" (known: gsm8k, mmlu-pro, lcb-output)", name));
}

std::string_view to_string(Scorer scorer) {
    switch (scorer) {
        case Scorer::Gsm8k: return "gsm8k";
        case Scorer::MmluPro: return "mmlu-pro";
        case Scorer::LcbOutput: return "lcb-output";
    }
    return "?";
}

std::optional<std::string> extract_answer(Scorer scorer, std::string_view text) {
    switch (scorer) {
        case Scorer::Gsm8k: return extract_gsm8k(text);
        case Scorer::MmluPro: return extract_mmlu_pro(text);
        case Scorer::LcbOutput: return extract_lcb_output(text);
    }
    return std::nullopt;
}

bool is_correct(Scorer scorer, std::string_view text, std::string_view gold) {
    const std::optional<std::string> answer = extract_answer(scorer, text);
    if (!answer) return false;
    if (scorer == Scorer::Gsm8k) return answer == canonical_number(std::string(strip(gold)));
    return *answer == strip(gold);
}

}  // namespace klspec
