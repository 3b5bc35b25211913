#include "eval/dataset.h"

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace klspec {

std::vector<Problem> read_problems(const std::string& path, size_t limit) {
    std::ifstream in(path);
    if (!in) throw Error(fmt::format("cannot read dataset: {}", path));
    std::vector<Problem> problems;
    std::string line;
    for (size_t line_number = 1; std::getline(in, line) && (limit == 0 || problems.size() < limit); ++line_number) {
        if (line.empty()) continue;
        const auto bad = [&](std::string_view why) { return Error(fmt::format("{}:{}: {}", path, line_number, why)); };
        const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (!row.is_object() || !row.contains("question") || !row["question"].is_string())
            throw bad("expected a JSON object with a string \"question\"");
        Problem problem;
        problem.prompt = row["question"].get<std::string>();
        problem.id = std::to_string(line_number - 1);
        if (row.contains("id")) problem.id = row["id"].is_string() ? row["id"].get<std::string>() : row["id"].dump();
        if (row.contains("final")) {
            const nlohmann::json& final_answer = row["final"];
            if (final_answer.is_number_integer()) problem.gold = std::to_string(final_answer.get<int64_t>());
            else if (final_answer.is_string()) problem.gold = final_answer.get<std::string>();
            else throw bad("\"final\" must be an integer or a string");
        }
        if (row.contains("scorer")) {
            if (!row["scorer"].is_string()) throw bad("\"scorer\" must be a string");
            try {
                problem.scorer = parse_scorer(row["scorer"].get<std::string>());
            } catch (const Error& e) {
                throw bad(e.what());
            }
        }
        if (row.contains("family") && row["family"].is_string()) problem.family = row["family"].get<std::string>();
        problems.push_back(std::move(problem));
    }
    if (problems.empty()) throw Error(fmt::format("no problems in dataset: {}", path));
    return problems;
}

}  // namespace klspec
