#include "core/answer_scoring.h"

#include <charconv>
#include <regex>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace klspec {

std::string_view strip(std::string_view s) {
    const size_t begin = s.find_first_not_of(" \t\r\n");
    if (begin == std::string_view::npos) return {};
    return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

namespace {

// "1,200.50" -> "1200.5": a number in its shortest form, so that equal values compare equal as text.
std::optional<std::string> canonical_number(std::string text) {
    std::erase(text, ',');
    double value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return fmt::format("{}", value + 0.0);  // + 0.0 turns -0 into 0
}

// --- MATH: prm800k's grading/math_normalize.py, function for function ----------------------------------
// Its asserts and index errors make normalize_answer give up and return the answer as it was; here they
// are a thrown MathNormalizeFailure.
struct MathNormalizeFailure {};

void replace_all(std::string& s, std::string_view from, std::string_view to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
        s.replace(at, from.size(), to);
}

std::vector<std::string> split_on(const std::string& s, std::string_view separator) {
    std::vector<std::string> parts;
    size_t begin = 0;
    for (size_t at = s.find(separator); at != std::string::npos; at = s.find(separator, begin)) {
        parts.push_back(s.substr(begin, at - begin));
        begin = at + separator.size();
    }
    parts.push_back(s.substr(begin));
    return parts;
}

std::string fix_fracs(const std::string& string) {
    const std::vector<std::string> parts = split_on(string, "\\frac");
    std::string out = parts[0];
    for (size_t k = 1; k < parts.size(); ++k) {
        const std::string& part = parts[k];
        out += "\\frac";
        if (part.empty()) throw MathNormalizeFailure{};
        if (part[0] == '{') {
            out += part;
            continue;
        }
        if (part.size() < 2) return string;
        const std::string a(1, part[0]), b(1, part[1]), rest = part.substr(2);
        out += b != "{" ? "{" + a + "}{" + b + "}" + rest : "{" + a + "}" + b + rest;
    }
    return out;
}

bool is_python_int(const std::string& s) {
    if (s.empty()) return false;
    size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
    if (i == s.size()) return false;
    for (; i < s.size(); ++i)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

std::string fix_a_slash_b(const std::string& string) {
    const std::vector<std::string> parts = split_on(string, "/");
    if (parts.size() != 2 || !is_python_int(parts[0]) || !is_python_int(parts[1])) return string;
    const std::string a = std::to_string(std::stoll(parts[0])), b = std::to_string(std::stoll(parts[1]));
    if (string != a + "/" + b) return string;  // "01/2" stays
    return "\\frac{" + a + "}{" + b + "}";
}

std::string remove_right_units(const std::string& string) {
    if (string.find("\\text{ ") == std::string::npos) return string;
    const std::vector<std::string> parts = split_on(string, "\\text{ ");
    if (parts.size() != 2) throw MathNormalizeFailure{};
    return parts[0];
}

std::string fix_sqrt(const std::string& string) {
    if (string.find("\\sqrt") == std::string::npos) return string;
    const std::vector<std::string> parts = split_on(string, "\\sqrt");
    std::string out = parts[0];
    for (size_t k = 1; k < parts.size(); ++k) {
        if (parts[k].empty()) throw MathNormalizeFailure{};
        out += parts[k][0] != '{' ? "\\sqrt{" + parts[k].substr(0, 1) + "}" + parts[k].substr(1) : "\\sqrt" + parts[k];
    }
    return out;
}

std::string strip_math_string(std::string string) {
    replace_all(string, "\n", "");
    replace_all(string, "\\!", "");
    replace_all(string, "\\\\", "\\");
    replace_all(string, "tfrac", "frac");
    replace_all(string, "dfrac", "frac");
    replace_all(string, "\\left", "");
    replace_all(string, "\\right", "");
    replace_all(string, "^{\\circ}", "");
    replace_all(string, "^\\circ", "");
    replace_all(string, "\\$", "");
    string = remove_right_units(string);
    replace_all(string, "\\%", "");
    replace_all(string, " .", " 0.");
    replace_all(string, "{.", "{0.");
    if (string.empty()) return string;
    if (string[0] == '.') string = "0" + string;
    if (const std::vector<std::string> sides = split_on(string, "="); sides.size() == 2 && sides[0].size() <= 2)
        string = sides[1];
    string = fix_sqrt(string);
    replace_all(string, " ", "");
    string = fix_fracs(string);
    if (string == "0.5") string = "\\frac{1}{2}";
    return fix_a_slash_b(string);
}

std::optional<std::string> extract_gsm8k(std::string_view text) {
    static const std::regex kAnswer(R"(The answer is \$?(-?[\d,]*\d(?:\.\d+)?))");
    static const std::regex kNumber(R"(-?[\d,]*\d(?:\.\d+)?)");
    std::match_results<std::string_view::const_iterator> m;
    if (std::regex_search(text.begin(), text.end(), m, kAnswer)) return canonical_number(m[1].str());
    // Instruct models (Qwen2.5) write \boxed{18} whatever the instruction asks: the last box's first number.
    std::smatch boxed_number;
    if (const std::optional<std::string> boxed = last_boxed(text);
        boxed && std::regex_search(*boxed, boxed_number, kNumber))
        return canonical_number(boxed_number[0].str());
    return std::nullopt;
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

std::string normalize_math_answer(std::string_view raw) {
    std::string answer(strip(raw));
    // An answer wrapped whole in \text{...} (prm800k's ^\\text\{(.+?)\}$: anchored, so up to the last brace).
    if (answer.starts_with("\\text{") && answer.ends_with("}") && answer.size() > 7 &&
        answer.find('\n') == std::string::npos)
        answer = std::string(strip(std::string_view(answer).substr(6, answer.size() - 7)));
    try {
        return strip_math_string(answer);
    } catch (const MathNormalizeFailure&) {
        return answer;
    }
}

std::optional<std::string> last_boxed(std::string_view text) {
    size_t at = std::string_view::npos;
    for (std::string_view marker : {"\\boxed", "\\fbox"}) {
        const size_t found = text.rfind(marker);
        if (found != std::string_view::npos && (at == std::string_view::npos || found > at)) at = found;
    }
    if (at == std::string_view::npos) return std::nullopt;
    const size_t open = text.find('{', at);
    if (open == std::string_view::npos) return std::nullopt;
    int depth = 0;
    for (size_t i = open; i < text.size(); ++i) {
        depth += text[i] == '{' ? 1 : text[i] == '}' ? -1 : 0;
        if (depth == 0) return std::string(text.substr(open + 1, i - open - 1));
    }
    return std::nullopt;  // unbalanced
}

Scorer parse_scorer(std::string_view name) {
    for (Scorer s : {Scorer::Gsm8k, Scorer::MmluPro, Scorer::LcbOutput, Scorer::Math})
        if (name == to_string(s)) return s;
    throw Error(fmt::format("unknown scorer \"{}\" (known: gsm8k, mmlu-pro, lcb-output, math)", name));
}

std::string_view to_string(Scorer scorer) {
    switch (scorer) {
        case Scorer::Gsm8k:
            return "gsm8k";
        case Scorer::MmluPro:
            return "mmlu-pro";
        case Scorer::LcbOutput:
            return "lcb-output";
        case Scorer::Math:
            return "math";
    }
    return "?";
}

std::optional<std::string> extract_answer(Scorer scorer, std::string_view text) {
    switch (scorer) {
        case Scorer::Gsm8k:
            return extract_gsm8k(text);
        case Scorer::MmluPro:
            return extract_mmlu_pro(text);
        case Scorer::LcbOutput:
            return extract_lcb_output(text);
        case Scorer::Math:
            if (std::optional<std::string> boxed = last_boxed(text)) return normalize_math_answer(*boxed);
            return std::nullopt;
    }
    return std::nullopt;
}

bool is_correct(Scorer scorer, std::string_view text, std::string_view gold) {
    const std::optional<std::string> answer = extract_answer(scorer, text);
    if (!answer) return false;
    if (scorer == Scorer::Gsm8k) return answer == canonical_number(std::string(strip(gold)));
    if (scorer == Scorer::Math) return *answer == normalize_math_answer(gold);
    return *answer == strip(gold);
}

}  // namespace klspec
