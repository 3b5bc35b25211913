#include "eval/dataset.h"

#include <algorithm>
#include <fstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/stable_hash.h"

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

namespace {

// Calls on_row(line index, row) for every JSON object line of a benchmark file.
template <typename OnRow>
void for_each_row(const std::string& path, OnRow on_row) {
    std::ifstream in(path);
    if (!in) throw Error(fmt::format("cannot read {} (is --data-dir right?)", path));
    std::string line;
    for (size_t index = 0; std::getline(in, line); ++index) {
        const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (!row.is_object()) throw Error(fmt::format("{}:{}: not a JSON object", path, index + 1));
        try {
            on_row(index, row);
        } catch (const nlohmann::json::exception& e) {
            throw Error(fmt::format("{}:{}: {}", path, index + 1, e.what()));
        }
    }
}

}  // namespace

std::vector<Problem> load_dataset(const std::string& name_or_path, const std::string& data_dir,
                                  const std::string& split) {
    std::vector<Problem> problems;
    if (name_or_path == "gsm8k") {
        for_each_row(data_dir + "/gsm8k/" + split + ".jsonl", [&](size_t index, const nlohmann::json& row) {
            const std::string answer = row.at("answer").get<std::string>();
            const size_t marker = answer.rfind("#### ");
            if (marker == std::string::npos) throw Error("GSM8K answer without \"#### \"");
            std::string gold = answer.substr(marker + 5);
            std::erase_if(gold, [](char c) { return c == ',' || c == '$'; });
            problems.push_back({std::to_string(index), row.at("question").get<std::string>(), gold, Scorer::Gsm8k, "gsm8k"});
        });
    } else if (name_or_path == "mmlu-pro") {
        for_each_row(data_dir + "/mmlu_pro/" + split + ".jsonl", [&](size_t, const nlohmann::json& row) {
            problems.push_back({row.at("question_id").dump(), row.at("question").get<std::string>(),
                                row.at("answer").get<std::string>(), Scorer::MmluPro, "mmlu-pro"});
        });
    } else if (name_or_path == "math500" || name_or_path == "math500-hard") {
        // MATH-500-Hard is the file of its 134 Level-5 rows.
        const std::string file = name_or_path == "math500" ? split : split + "_level5";
        for_each_row(data_dir + "/math500/" + file + ".jsonl", [&](size_t, const nlohmann::json& row) {
            problems.push_back({row.at("unique_id").get<std::string>(), row.at("problem").get<std::string>(),
                                row.at("answer").get<std::string>(), Scorer::Math, name_or_path});
        });
    } else if (name_or_path.find('/') == std::string::npos && name_or_path.find('.') == std::string::npos) {
        throw Error(fmt::format("unknown dataset '{}' (gsm8k, mmlu-pro, math500, math500-hard, or a JSONL file)",
                                name_or_path));
    } else {
        return read_problems(name_or_path);
    }
    return problems;
}

size_t default_subset_size(std::string_view dataset_name) {
    if (dataset_name == "gsm8k") return 400;
    if (dataset_name == "mmlu-pro") return 100;
    return 0;
}

std::vector<Problem> seeded_subset(std::vector<Problem> problems, size_t size) {
    if (size == 0 || problems.size() <= size) return problems;
    std::vector<std::pair<uint64_t, size_t>> keyed;  // (hash, file position)
    for (size_t i = 0; i < problems.size(); ++i) keyed.emplace_back(fnv1a64("klspec-subset/1:" + problems[i].id), i);
    std::partial_sort(keyed.begin(), keyed.begin() + static_cast<std::ptrdiff_t>(size), keyed.end());
    std::vector<size_t> chosen;
    for (size_t k = 0; k < size; ++k) chosen.push_back(keyed[k].second);
    std::sort(chosen.begin(), chosen.end());
    std::vector<Problem> subset;
    for (size_t i : chosen) subset.push_back(std::move(problems[i]));
    return subset;
}

std::vector<Problem> DatasetChoice::load() const {
    std::vector<Problem> problems = load_dataset(name_or_path, data_dir, split);
    if (!full_split && split == "test") problems = seeded_subset(std::move(problems), default_subset_size(name_or_path));
    if (limit != 0 && problems.size() > limit) problems.resize(limit);
    if (problems.empty()) throw Error(fmt::format("no problems in dataset: {}", name_or_path));
    return problems;
}

}  // namespace klspec
