#include "autojudge/mining_store.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_integer.h"

namespace klspec {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kFormat = "klspec-autojudge-mining/1";

nlohmann::json read_json_file(const fs::path& path) {
    std::ifstream in(path);
    if (!in) throw Error(fmt::format("cannot read {}", path.string()));
    const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) throw Error(fmt::format("{} is not valid JSON", path.string()));
    return json;
}

// The JSON lines of a file, at most `limit`; a missing file has none.
std::vector<nlohmann::json> read_json_lines(const fs::path& path, size_t limit = SIZE_MAX) {
    std::vector<nlohmann::json> rows;
    std::ifstream in(path);
    std::string line;
    for (size_t n = 1; rows.size() < limit && std::getline(in, line); ++n) {
        nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (!row.is_object()) throw Error(fmt::format("{}:{}: not a JSON object", path.string(), n));
        rows.push_back(std::move(row));
    }
    return rows;
}

// The rows that finished problems account for, and those problems' ids.
size_t finished_rows(const fs::path& dir, std::set<std::string>* ids) {
    size_t rows = 0;
    for (const nlohmann::json& problem : read_json_lines(dir / "problems.jsonl")) {
        rows += integer_at<uint32_t>(problem, "mismatches");
        if (ids) ids->insert(problem.at("id").get<std::string>());
    }
    return rows;
}

size_t row_floats(const nlohmann::json& meta) {
    return size_t{integer_at<uint32_t>(meta, "draft_hidden_size")} + integer_at<uint32_t>(meta, "target_hidden_size");
}

}  // namespace

MiningWriter::MiningWriter(const std::string& dir, const nlohmann::json& meta, const FeatureRecompute& recompute)
    : dir_(dir) {
    const fs::path root(dir);
    fs::create_directories(root);
    nlohmann::json stored = meta;
    stored["format"] = kFormat;
    if (fs::exists(root / "meta.json")) {
        const nlohmann::json old = read_json_file(root / "meta.json");
        for (const char* key : {"format", "target", "draft", "draft_hidden_size", "target_hidden_size", "max_tokens",
                                "temperature", "seed", "stop", "judge_span"})
            if (old.value(key, nlohmann::json()) != stored.value(key, nlohmann::json()))
                throw Error(fmt::format("{} holds a mining run with {} = {}, this run has {}: use another --out", dir,
                                        key, old.value(key, nlohmann::json()).dump(),
                                        stored.value(key, nlohmann::json()).dump()));
    } else {
        std::ofstream(root / "meta.json") << stored.dump(2) << "\n";
    }
    row_floats_ = row_floats(stored);

    // Resume: keep exactly the rows of finished problems.
    rows_ = finished_rows(root, &finished_);
    const std::vector<nlohmann::json> labels = read_json_lines(root / "labels.jsonl", rows_);
    if (labels.size() < rows_)
        throw Error(fmt::format("{}/labels.jsonl has fewer rows than problems.jsonl counts", dir));
    {
        std::ofstream rewrite(root / "labels.jsonl", std::ios::trunc);
        for (const nlohmann::json& row : labels) rewrite << row.dump() << "\n";
    }
    const uintmax_t feature_bytes = rows_ * row_floats_ * sizeof(float);
    if (!fs::exists(root / "features.f32")) std::ofstream(root / "features.f32", std::ios::binary);
    if (fs::file_size(root / "features.f32") < feature_bytes) {
        if (!recompute) throw Error(fmt::format("{}/features.f32 is shorter than its labels", dir));
        write_recomputed_features(labels, recompute);
    }
    fs::resize_file(root / "features.f32", feature_bytes);

    labels_.open(root / "labels.jsonl", std::ios::app);
    features_.open(root / "features.f32", std::ios::app | std::ios::binary);
    problems_.open(root / "problems.jsonl", std::ios::app);
    if (!labels_ || !features_ || !problems_) throw Error(fmt::format("cannot write into {}", dir));
}

void MiningWriter::write_recomputed_features(const std::vector<nlohmann::json>& labels,
                                             const FeatureRecompute& recompute) const {
    const fs::path root(dir_);
    std::ofstream features(root / "features.f32", std::ios::trunc | std::ios::binary);
    size_t next = 0;  // labels are in problems.jsonl's order, each problem's rows before its line
    for (const nlohmann::json& problem : read_json_lines(root / "problems.jsonl")) {
        const std::string id = problem.at("id").get<std::string>();
        if (!problem.contains("response"))
            throw Error(
                fmt::format("{}/problems.jsonl keeps no response for {} (mined before responses were kept): "
                            "its features cannot be recomputed; mine it again into another --out",
                            dir_, id));
        std::vector<MinedPosition> mismatches;
        for (const size_t end = next + integer_at<uint32_t>(problem, "mismatches"); next < end; ++next)
            mismatches.push_back(
                {integer_at<int32_t>(labels[next], "position"), integer_at<int32_t>(labels[next], "draft_token")});
        const std::vector<float> rows = recompute(id, problem.at("response").get<std::vector<int32_t>>(), mismatches);
        if (rows.size() != mismatches.size() * row_floats_)
            throw Error(fmt::format("{}: recomputed {} feature values for {} rows of {}", dir_, rows.size(),
                                    mismatches.size(), row_floats_));
        features.write(reinterpret_cast<const char*>(rows.data()),
                       static_cast<std::streamsize>(rows.size() * sizeof(float)));
    }
    if (!features) throw Error(fmt::format("writing {}/features.f32 failed", dir_));
}

void MiningWriter::append(const Problem& problem, const ProblemMining& mining, double seconds) {
    size_t important = 0;
    for (const MinedMismatch& m : mining.mismatches) {
        if (m.draft_hidden.size() + m.target_hidden.size() != row_floats_)
            throw Error("mining: hidden-state sizes differ from the run's meta.json");
        const auto optional_text = [](const std::optional<std::string>& s) {
            return s ? nlohmann::json(*s) : nlohmann::json();
        };
        labels_ << nlohmann::json{{"problem_id", m.problem_id},
                                  {"position", m.position},
                                  {"draft_token", m.draft_token},
                                  {"target_token", m.target_token},
                                  {"label", m.important ? 1 : 0},
                                  {"answer", optional_text(m.answer)},
                                  {"answer_after_swap", optional_text(m.answer_after_swap)},
                                  {"kl", m.kl},
                                  {"target_entropy", m.target_entropy},
                                  {"draft_entropy", m.draft_entropy},
                                  {"target_max_probability", m.target_max_probability}}
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
        features_.write(reinterpret_cast<const char*>(m.draft_hidden.data()),
                        static_cast<std::streamsize>(m.draft_hidden.size() * sizeof(float)));
        features_.write(reinterpret_cast<const char*>(m.target_hidden.data()),
                        static_cast<std::streamsize>(m.target_hidden.size() * sizeof(float)));
        important += m.important;
    }
    labels_.flush();
    features_.flush();
    // Last: a problem counts as finished only once all its rows are on disk.
    problems_ << nlohmann::json{{"id", problem.id},
                                {"mismatches", mining.mismatches.size()},
                                {"important", important},
                                {"response_tokens", mining.final_response.size()},
                                {"response", mining.final_response},
                                {"seconds", seconds}}
                     .dump()
              << std::endl;
    if (!labels_ || !features_ || !problems_) throw Error(fmt::format("writing into {} failed", dir_));
    finished_.insert(problem.id);
    rows_ += mining.mismatches.size();
}

MinedData read_mined(const std::string& dir) {
    const fs::path root(dir);
    if (!fs::is_directory(root)) throw Error(fmt::format("{} is not a mining directory (klspec mine --out)", dir));
    MinedData data;
    const nlohmann::json meta = read_json_file(root / "meta.json");
    if (!meta.is_object() || !meta.contains("format") || meta["format"] != kFormat)
        throw Error(fmt::format("{}/meta.json: not a klspec mining run (format {})", dir, kFormat));
    try {
        data.draft_hidden_size = integer_at<uint32_t>(meta, "draft_hidden_size");
        data.target_hidden_size = integer_at<uint32_t>(meta, "target_hidden_size");
        const size_t rows = finished_rows(root, nullptr);
        for (const nlohmann::json& row : read_json_lines(root / "labels.jsonl", rows))
            data.labels.push_back({row.at("problem_id").get<std::string>(), integer_at<int32_t>(row, "position"),
                                   integer_at<int32_t>(row, "draft_token"), integer_at<int32_t>(row, "target_token"),
                                   integer_at<int32_t>(row, "label") == 1, row.at("kl").get<double>(),
                                   row.at("target_entropy").get<double>(), row.at("draft_entropy").get<double>(),
                                   row.at("target_max_probability").get<double>()});
        if (data.labels.size() != rows)
            throw Error(fmt::format("labels.jsonl has {} rows, problems.jsonl counts {}", data.labels.size(), rows));
    } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("{}: bad mining files: {}", dir, e.what()));
    }
    data.features.resize(data.labels.size() * data.n_features());
    std::ifstream in(root / "features.f32", std::ios::binary);
    in.read(reinterpret_cast<char*>(data.features.data()),
            static_cast<std::streamsize>(data.features.size() * sizeof(float)));
    if (!in)
        throw Error(
            fmt::format("{}/features.f32 holds fewer rows than labels.jsonl (mined on another machine? the "
                        "same klspec mine command computes them again)",
                        dir));
    return data;
}

}  // namespace klspec
