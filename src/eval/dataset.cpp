#include "eval/dataset.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <regex>
#include <utility>

#include <zlib.h>

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
            if (final_answer.is_number_integer())
                problem.gold = std::to_string(final_answer.get<int64_t>());
            else if (final_answer.is_string())
                problem.gold = final_answer.get<std::string>();
            else
                throw bad("\"final\" must be an integer or a string");
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

// The whole file, gunzipped when it is gzip (zlib reads plain files as they are).
std::string read_maybe_gzipped(const std::string& path) {
    gzFile file = gzopen(path.c_str(), "rb");
    if (!file) throw Error(fmt::format("cannot read {} (is --data-dir right?)", path));
    std::string text;
    std::array<char, 1 << 16> buffer;
    int n = 0;
    while ((n = gzread(file, buffer.data(), static_cast<unsigned>(buffer.size()))) > 0)
        text.append(buffer.data(), static_cast<size_t>(n));
    int error = Z_OK;
    const std::string message = n < 0 ? gzerror(file, &error) : "";
    gzclose(file);
    if (n < 0) throw Error(fmt::format("cannot read {}: {}", path, message));
    return text;
}

// Python's json.dumps writes non-finite floats as bare NaN, Infinity and -Infinity (MBPP+'s inputs have
// them), which is not JSON: outside strings they become null so that nlohmann reads the rest of the row.
std::string non_finite_as_null(std::string_view line) {
    std::string out;
    bool in_string = false;
    for (size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (in_string) {
            if (c == '\\' && i + 1 < line.size())
                out += line[i++];
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else {
            const size_t sign = c == '-' ? 1 : 0;
            const std::string_view rest = line.substr(i + sign);
            const size_t token = rest.starts_with("NaN") ? 3 : rest.starts_with("Infinity") ? 8 : 0;
            if (token != 0) {
                out += "null";
                i += sign + token - 1;
                continue;
            }
        }
        out += line[i];
    }
    return out;
}

// Calls on_row(line index, row, the line's text) for every JSON object line of a benchmark file.
template <typename OnRow>
void for_each_row(const std::string& path, OnRow on_row) {
    const std::string text = read_maybe_gzipped(path);
    size_t index = 0;
    for (size_t start = 0; start < text.size(); ++index) {
        const size_t end = std::min(text.find('\n', start), text.size());
        const std::string_view line(text.data() + start, end - start);
        start = end + 1;
        const nlohmann::json row = nlohmann::json::parse(non_finite_as_null(line), nullptr, /*allow_exceptions=*/false);
        if (!row.is_object()) throw Error(fmt::format("{}:{}: not a JSON object", path, index + 1));
        try {
            on_row(index, row, line);
        } catch (const nlohmann::json::exception& e) {
            throw Error(fmt::format("{}:{}: {}", path, index + 1, e.what()));
        } catch (const Error& e) {
            throw Error(fmt::format("{}:{}: {}", path, index + 1, e.what()));
        }
    }
}

Problem code_problem(const nlohmann::json& id, std::string prompt, CodeTests tests, const std::string& dataset) {
    return {id.is_string() ? id.get<std::string>() : id.dump(),
            std::move(prompt),
            std::nullopt,
            Scorer::Gsm8k,
            dataset,
            std::move(tests)};
}

// LiveCodeBench's public tests; functional ones call the first method of the starter code's class.
CodeTests livecodebench_tests(const nlohmann::json& row) {
    CodeTests tests{CodeBenchmark::LiveCodeBench, "", "", "", "", {}, ""};
    for (const nlohmann::json& test : row.at("public_test_cases")) {
        const std::string type = test.at("testtype").get<std::string>();
        if (type != "stdin" && type != "functional") throw Error(fmt::format("unknown testtype '{}'", type));
        tests.io_tests.push_back(
            {test.at("input").get<std::string>(), test.at("output").get<std::string>(), type == "functional"});
    }
    if (tests.io_tests.empty()) throw Error("no public_test_cases");
    if (tests.io_tests.front().functional) {
        static const std::regex method(R"(def\s+(\w+)\s*\(\s*self)");
        const std::string starter = row.at("starter_code").get<std::string>();
        std::smatch match;
        if (!std::regex_search(starter, match, method))
            throw Error("functional tests without a method in starter_code");
        tests.entry_point = match[1];
    }
    return tests;
}

}  // namespace

std::string mmlu_pro_question(const nlohmann::json& row) {
    std::string text = row.at("question").get<std::string>() + "\nOptions:";
    const nlohmann::json& options = row.at("options");
    for (size_t i = 0; i < options.size(); ++i)
        text += fmt::format("\n{}. {}", char('A' + i), options.at(i).get<std::string>());
    return text;
}

std::vector<Problem> load_dataset(const std::string& name_or_path, const std::string& data_dir,
                                  const std::string& split) {
    std::vector<Problem> problems;
    if (name_or_path == "gsm8k") {
        for_each_row(
            data_dir + "/gsm8k/" + split + ".jsonl", [&](size_t index, const nlohmann::json& row, std::string_view) {
                const std::string answer = row.at("answer").get<std::string>();
                const size_t marker = answer.rfind("#### ");
                if (marker == std::string::npos) throw Error("GSM8K answer without \"#### \"");
                std::string gold = answer.substr(marker + 5);
                std::erase_if(gold, [](char c) { return c == ',' || c == '$'; });
                problems.push_back(
                    {std::to_string(index), row.at("question").get<std::string>(), gold, Scorer::Gsm8k, "gsm8k"});
            });
    } else if (name_or_path == "mmlu-pro") {
        for_each_row(data_dir + "/mmlu_pro/" + split + ".jsonl",
                     [&](size_t, const nlohmann::json& row, std::string_view) {
                         problems.push_back({row.at("question_id").dump(), mmlu_pro_question(row),
                                             row.at("answer").get<std::string>(), Scorer::MmluPro,
                                             row.at("category").get<std::string>()});
                     });
    } else if (name_or_path == "math500" || name_or_path == "math500-hard") {
        // MATH-500-Hard is the file of its 134 Level-5 rows.
        const std::string file = name_or_path == "math500" ? split : split + "_level5";
        for_each_row(
            data_dir + "/math500/" + file + ".jsonl", [&](size_t, const nlohmann::json& row, std::string_view) {
                problems.push_back({row.at("unique_id").get<std::string>(), row.at("problem").get<std::string>(),
                                    row.at("answer").get<std::string>(), Scorer::Math, name_or_path});
            });
    } else if (name_or_path == "humaneval") {
        for_each_row(data_dir + "/humaneval/HumanEval.jsonl.gz",
                     [&](size_t, const nlohmann::json& row, std::string_view) {
                         CodeTests tests{CodeBenchmark::HumanEval,
                                         row.at("entry_point").get<std::string>(),
                                         row.at("test").get<std::string>(),
                                         row.at("canonical_solution").get<std::string>(),
                                         "",
                                         {},
                                         row.at("prompt").get<std::string>()};
                         problems.push_back(code_problem(row.at("task_id"), row.at("prompt").get<std::string>(),
                                                         std::move(tests), name_or_path));
                     });
    } else if (name_or_path == "mbpp-plus") {
        for_each_row(data_dir + "/mbpp_plus/MbppPlus-v0.1.0.jsonl", [&](size_t, const nlohmann::json& row,
                                                                        std::string_view line) {
            CodeTests tests{CodeBenchmark::MbppPlus,
                            row.at("entry_point").get<std::string>(),
                            "",
                            row.at("canonical_solution").get<std::string>(),
                            std::string(line),
                            {},
                            ""};
            const nlohmann::json& plus_input = row.at("plus_input");  // Mbpp/793 has {}: no plus inputs
            if (!row.at("base_input").is_array() ||
                !(plus_input.is_array() || plus_input == nlohmann::json::object()) || !row.at("atol").is_number())
                throw Error("base_input and plus_input must be arrays and atol a number");
            // EvalPlus's instruction prompt (evalplus/codegen.py) around the task text and its example assert.
            const std::string task = row.at("prompt").get<std::string>();
            const std::string prompt =
                "Please provide a self-contained Python script that solves the following problem "
                "in a markdown code block:\n```\n" +
                std::string(strip(task)) + "\n```\n";
            problems.push_back(code_problem(row.at("task_id"), prompt, std::move(tests), name_or_path));
        });
    } else if (name_or_path == "livecodebench") {
        for_each_row(data_dir + "/livecodebench_public_only/lcb_2408_2502_279_merged_public_tests.jsonl",
                     [&](size_t, const nlohmann::json& row, std::string_view) {
                         std::string prompt = row.value("prompt", "");
                         if (prompt.empty()) {
                             const std::string starter = row.at("starter_code").get<std::string>();
                             prompt = row.at("question_content").get<std::string>() +
                                      (starter.empty() ? "" : "\n\n" + starter);
                         }
                         problems.push_back(code_problem(row.at("question_id"), std::move(prompt),
                                                         livecodebench_tests(row), name_or_path));
                     });
    } else if (name_or_path.find('/') == std::string::npos && name_or_path.find('.') == std::string::npos) {
        throw Error(
            fmt::format("unknown dataset '{}' (gsm8k, mmlu-pro, math500, math500-hard, humaneval, mbpp-plus, "
                        "livecodebench, or a JSONL file)",
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
    if (!full_split && split == "test")
        problems = seeded_subset(std::move(problems), default_subset_size(name_or_path));
    if (skip >= problems.size() && skip > 0)
        throw Error(fmt::format("--skip {} leaves none of the {} problems of {}", skip, problems.size(), name_or_path));
    problems.erase(problems.begin(), problems.begin() + static_cast<std::ptrdiff_t>(skip));
    if (limit != 0 && problems.size() > limit) problems.resize(limit);
    if (problems.empty()) throw Error(fmt::format("no problems in dataset: {}", name_or_path));
    return problems;
}

}  // namespace klspec
