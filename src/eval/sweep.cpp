#include "eval/sweep.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "eval/batch_decoding.h"
#include "eval/problem_scoring.h"

namespace klspec {
namespace fs = std::filesystem;
namespace {

// This run's SweepExample::run: the host and the UTC day, what a speed depends on beyond the settings.
std::string this_run() {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const std::time_t now = std::time(nullptr);
    char day[16] = {};
    std::strftime(day, sizeof day, "%Y-%m-%d", std::gmtime(&now));
    return fmt::format("{} {}", host, day);
}

constexpr std::string_view kFormat = "klspec-sweep/1";

std::vector<std::string> split(std::string_view text, char separator) {
    std::vector<std::string> parts;
    size_t begin = 0;
    while (true) {
        const size_t end = text.find(separator, begin);
        parts.emplace_back(text.substr(begin, end - begin));
        if (end == std::string_view::npos) return parts;
        begin = end + 1;
    }
}

double parse_number(const std::string& text, const std::string& spec) {
    size_t used = 0;
    double value = 0;
    try {
        value = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || text.empty())
        throw Error(fmt::format("sweep point '{}': '{}' is not a number", spec, text));
    return value;
}

int32_t parse_count(const std::string& text, const std::string& spec) {
    const double value = parse_number(text, spec);
    if (value != double(int32_t(value)))
        throw Error(fmt::format("sweep point '{}': '{}' is not an integer", spec, text));
    return int32_t(value);
}

// The judge options of one point: the rule's knob from the value, the rest from base.
JudgeOptions point_options(const std::string& rule, const std::string& value, const JudgeOptions& base) {
    JudgeOptions options = base;
    options.rule = rule;
    options.threshold.reset();
    options.topk.reset();
    options.max_tv.reset();
    options.divergence.reset();
    // The shared settings go only to the rules that take them (vanilla refuses a head file).
    for (const JudgeRule& known : judge_rules()) {
        if (known.name != rule) continue;
        if (known.head == Knob::Refused) options.head_path.clear();
        if (known.window == Knob::Refused) options.window.reset();
    }
    const std::string spec = value.empty() ? rule : rule + ":" + value;
    if (rule == "topk") {
        options.topk = parse_count(value, spec);
    } else if (rule == "topn-delta") {
        const std::vector<std::string> parts = split(value, '/');
        if (parts.size() != 2) throw Error(fmt::format("sweep point '{}': topn-delta takes N/DELTA, e.g. 4/0.2", spec));
        options.topk = parse_count(parts[0], spec);
        options.threshold = parse_number(parts[1], spec);
    } else if (rule == "fsd" && value.find('/') != std::string::npos) {
        const std::vector<std::string> parts = split(value, '/');
        if (parts.size() != 2)
            throw Error(fmt::format("sweep point '{}': fsd takes TAU or DIVERGENCE/TAU, e.g. js/0.1", spec));
        options.divergence = parts[0];
        options.threshold = parse_number(parts[1], spec);
    } else if (!value.empty()) {
        options.threshold = parse_number(value, spec);
    }
    try {
        make_judge(options);
    } catch (const Error& e) {
        throw Error(fmt::format("sweep point '{}': {}", spec, e.what()));
    }
    return options;
}

}  // namespace

std::vector<SweepPoint> parse_sweep_points(const std::vector<std::string>& specs, const JudgeOptions& base) {
    std::vector<SweepPoint> points{{"vanilla", "", point_options("vanilla", "", base)}};
    const auto add = [&](const std::string& rule, const std::string& value) {
        SweepPoint point{rule, value, point_options(rule, value, base)};
        const auto same = [&](const SweepPoint& p) { return p.label() == point.label(); };
        if (std::none_of(points.begin(), points.end(), same)) points.push_back(std::move(point));
    };
    for (const std::string& spec : specs) {
        const size_t colon = spec.find(':');
        const std::string rule = spec.substr(0, colon);
        if (colon == std::string::npos) {
            add(rule, "");
            continue;
        }
        for (const std::string& value : split(std::string_view(spec).substr(colon + 1), ','))
            if (!value.empty()) add(rule, value);
    }
    return points;
}

nlohmann::json to_json(const SweepExample& e) {
    const GenerationStats& s = e.stats;
    return {{"point", e.point},
            {"id", e.id},
            {"output", e.output},
            {"prediction", e.prediction},
            {"correct", e.correct},
            {"stop_reason", e.stop_reason},
            {"prompt_tokens", s.prompt_tokens},
            {"prompt_cached_tokens", s.prompt_cached_tokens},
            {"emitted", s.emitted},
            {"target_calls", s.target_calls},
            {"draft_calls", s.draft_calls},
            {"drafted", s.drafted},
            {"accepted", s.accepted},
            {"relaxed", s.relaxed_accepted},
            {"judge_seconds", s.judge_seconds},
            {"wall_seconds", e.wall_seconds},
            {"run", e.run}};
}

SweepExample sweep_example_from_json(const nlohmann::json& row) {
    SweepExample e;
    e.point = row.at("point").get<std::string>();
    e.id = row.at("id").get<std::string>();
    e.output = row.at("output").get<std::string>();
    e.prediction = row.at("prediction").get<std::string>();
    e.correct = row.at("correct").get<bool>();
    e.stop_reason = row.at("stop_reason").get<std::string>();
    GenerationStats& s = e.stats;
    s.prompt_tokens = row.at("prompt_tokens").get<int64_t>();
    s.prompt_cached_tokens = row.value("prompt_cached_tokens", int64_t{0});  // absent in older sweeps
    s.emitted = row.at("emitted").get<int64_t>();
    s.target_calls = row.at("target_calls").get<int64_t>();
    s.draft_calls = row.at("draft_calls").get<int64_t>();
    s.drafted = row.at("drafted").get<int64_t>();
    s.accepted = row.at("accepted").get<int64_t>();
    s.relaxed_accepted = row.at("relaxed").get<int64_t>();
    s.judge_seconds = row.at("judge_seconds").get<double>();
    e.wall_seconds = row.at("wall_seconds").get<double>();
    e.run = row.value("run", "");  // absent in older sweeps
    return e;
}

namespace {
std::optional<char> last_char(const fs::path& path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in || in.tellg() <= 0) return std::nullopt;
    in.seekg(-1, std::ios::end);
    return static_cast<char>(in.get());
}
}  // namespace

SweepStore::SweepStore(const std::string& dir, const nlohmann::json& settings, Access access) : dir_(dir) {
    const fs::path root(dir);
    nlohmann::json stored = settings;
    stored["format"] = kFormat;
    const fs::path settings_path = root / "sweep.json";
    if (access == Access::kReadOnly && !fs::exists(settings_path))
        throw Error(fmt::format("{} holds no sweep (no sweep.json)", dir));
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) throw Error(fmt::format("cannot create sweep directory {}: {}", dir, ec.message()));
    if (fs::exists(settings_path)) {
        std::ifstream in(settings_path);
        const nlohmann::json old = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
        if (old.is_discarded() || old.value("format", "") != kFormat)
            throw Error(fmt::format("{} is not a klspec sweep (format {})", settings_path.string(), kFormat));
        nlohmann::json updated = old;
        for (const auto& [key, value] : stored.items()) {
            const nlohmann::json there = old.value(key, nlohmann::json());
            if (there == value) continue;
            // Only AutoJudge points read the head, so a sweep run without one may add them later (its other points
            // stay valid); a sweep that has a head keeps it.
            if (key == "judge_head" && there == "") {
                updated[key] = value;
                continue;
            }
            throw Error(fmt::format("{} holds a sweep with other settings ({}: {} there, {} now); use another --out",
                                    dir, key, there.dump(), value.dump()));
        }
        if (updated != old && access == Access::kResume) std::ofstream(settings_path) << updated.dump(2) << "\n";
    } else {
        std::ofstream(settings_path) << stored.dump(2) << "\n";
    }
    const fs::path examples_path = root / "examples.jsonl";
    const std::optional<uintmax_t> complete_bytes = read_examples(examples_path);
    if (access == Access::kReadOnly) return;
    if (complete_bytes) fs::resize_file(examples_path, *complete_bytes);  // the next append starts a line of its own
    const bool needs_newline = last_char(examples_path).value_or('\n') != '\n';  // a complete row cut before its \n
    run_ = this_run();
    out_.open(examples_path, std::ios::app);
    if (!out_) throw Error(fmt::format("cannot write {}", examples_path.string()));
    if (needs_newline) out_ << "\n";
}

// Keeps every complete example. When the last line was cut by an interrupt, returns the size of the lines
// before it.
std::optional<uintmax_t> SweepStore::read_examples(const fs::path& examples_path) {
    std::ifstream in(examples_path);
    if (!in) return std::nullopt;
    std::string line;
    uintmax_t complete_bytes = 0;
    for (size_t n = 1; std::getline(in, line); ++n) {
        const bool complete = !in.eof();
        const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (row.is_discarded()) {
            if (!complete) return complete_bytes;
            throw Error(fmt::format("{}:{}: not a JSON object", examples_path.string(), n));
        }
        try {
            examples_.push_back(sweep_example_from_json(row));
        } catch (const nlohmann::json::exception& e) {
            throw Error(fmt::format("{}:{}: {}", examples_path.string(), n, e.what()));
        }
        done_.insert({examples_.back().point, examples_.back().id});
        complete_bytes += line.size() + 1;
    }
    return std::nullopt;
}

void SweepStore::append(SweepExample example) {
    if (!out_.is_open()) throw Error(fmt::format("sweep {} was opened read-only", dir_));
    example.run = run_;
    out_ << to_json(example).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    out_.flush();
    done_.insert({example.point, example.id});
    examples_.push_back(std::move(example));
}

size_t missing_examples(const SweepStore& store, std::span<const SweepPoint> points,
                        std::span<const Problem> problems) {
    size_t missing = 0;
    for (const SweepPoint& point : points)
        for (const Problem& p : problems) missing += !store.done(point.label(), p.id);
    return missing;
}

void run_sweep_points(SpeculativeDecoder& decoder, const GenerationOptions& generation,
                      std::span<const Problem> problems, std::span<const SweepPoint> points, int32_t parallel,
                      SweepStore& store, const std::function<void(const SweepExample&)>& on_example) {
    std::vector<GenerationOptions> point_generation(points.size(), generation);
    for (size_t k = 0; k < points.size(); ++k) point_generation[k].judge = make_judge(points[k].judge);
    // Points take turns on small chunks of problems, so that a slow spell of a shared machine falls on
    // every point alike instead of on whichever point was running: tokens/s ratios stay comparable.
    const size_t chunk = 4 * static_cast<size_t>(parallel);
    for (size_t begin = 0; begin < problems.size(); begin += chunk) {
        const std::span<const Problem> part = problems.subspan(begin, std::min(chunk, problems.size() - begin));
        for (size_t k = 0; k < points.size(); ++k) {
            const std::string label = points[k].label();
            std::vector<Problem> remaining;
            for (const Problem& p : part)
                if (!store.done(label, p.id)) remaining.push_back(p);
            decode_problems(decoder, remaining, point_generation[k], parallel, [&](DecodedProblem&& decoded) {
                const Problem& problem = remaining[decoded.index];
                const ScoredOutput verdict = score_output(problem, decoded.result.text);
                store.append({label, problem.id, decoded.result.text, verdict.prediction.value_or(""), verdict.correct,
                              std::string(to_string(decoded.result.stop_reason)), decoded.result.stats,
                              decoded.wall_seconds, ""});
                on_example(store.examples().back());
            });
        }
    }
}

std::vector<SweepExample> examples_of_problems_every_point_has(const std::vector<SweepExample>& examples,
                                                               std::span<const SweepPoint> points) {
    std::map<std::string, size_t> points_of;  // problem id -> how many of the points decoded it
    for (const SweepExample& e : examples)
        if (std::any_of(points.begin(), points.end(), [&](const SweepPoint& p) { return p.label() == e.point; }))
            ++points_of[e.id];
    std::vector<SweepExample> kept;
    for (const SweepExample& e : examples)
        if (points_of[e.id] == points.size()) kept.push_back(e);
    return kept;
}

AnswerKind answer_kind(std::span<const Problem> problems) {
    const bool all_code = !problems.empty() && std::all_of(problems.begin(), problems.end(), [](const Problem& p) {
        return answer_kind(p) == AnswerKind::kTestOutcome;
    });
    return all_code ? AnswerKind::kTestOutcome : AnswerKind::kScoredAnswer;
}

bool same_answer(const SweepExample& a, const SweepExample& b, AnswerKind kind) {
    return kind == AnswerKind::kTestOutcome ? a.correct == b.correct : a.prediction == b.prediction;
}

void rescore_examples(std::vector<SweepExample>& examples, std::span<const Problem> problems,
                      const std::function<void(size_t scored)>& on_scored) {
    std::map<std::string, const Problem*> problem_of;
    for (const Problem& p : problems) problem_of[p.id] = &p;
    size_t scored = 0;
    for (SweepExample& e : examples) {
        const auto it = problem_of.find(e.id);
        if (it == problem_of.end())
            throw Error(
                fmt::format("sweep: cannot rescore {}'s answer to {}: the dataset has no such problem", e.point, e.id));
        const ScoredOutput verdict = score_output(*it->second, e.output);
        e.prediction = verdict.prediction.value_or("");
        e.correct = verdict.correct;
        if (on_scored) on_scored(++scored);
    }
}

std::vector<PointSummary> summarize_sweep(const std::vector<SweepPoint>& points,
                                          const std::vector<SweepExample>& examples, AnswerKind kind) {
    std::vector<PointSummary> summaries;
    std::map<std::string, size_t> index_of;
    for (const SweepPoint& p : points) {
        index_of[p.label()] = summaries.size();
        PointSummary summary;
        summary.point = p.label();
        summary.rule = p.rule;
        summary.value = p.value;
        summaries.push_back(std::move(summary));
    }
    for (const SweepExample& e : examples) {
        const auto it = index_of.find(e.point);
        if (it == index_of.end()) continue;
        PointSummary& s = summaries[it->second];
        ++s.examples;
        s.correct += e.correct;
        s.totals += e.stats;
        s.wall_seconds += e.wall_seconds;
        s.runs.insert(e.run);
    }

    std::map<std::string, const SweepExample*> vanilla_of;  // problem id -> vanilla's example
    for (const SweepExample& e : examples)
        if (e.point == "vanilla") vanilla_of[e.id] = &e;
    struct Paired {
        std::vector<bool> vanilla_correct, correct;
        size_t same_answer = 0;
    };
    std::map<std::string, Paired> pairs;  // point -> its problems paired with vanilla's
    for (const SweepExample& e : examples) {
        const auto reference = vanilla_of.find(e.id);
        if (e.point == "vanilla" || !index_of.contains(e.point) || reference == vanilla_of.end()) continue;
        Paired& paired = pairs[e.point];
        paired.vanilla_correct.push_back(reference->second->correct);
        paired.correct.push_back(e.correct);
        paired.same_answer += same_answer(e, *reference->second, kind);
    }
    for (const auto& [point, paired] : pairs) {
        PointSummary& summary = summaries[index_of.at(point)];
        summary.loss_against_vanilla = paired_accuracy_loss(paired.vanilla_correct, paired.correct);
        summary.agreement_with_vanilla = wilson_proportion(paired.same_answer, paired.correct.size());
    }
    return summaries;
}

std::map<std::string, const PointSummary*> best_within_loss(const std::vector<PointSummary>& summaries,
                                                            double max_loss) {
    std::map<std::string, const PointSummary*> best;
    if (summaries.empty()) return best;
    const double floor = summaries.front().accuracy() - max_loss - 1e-12;
    for (const PointSummary& s : summaries) {
        if (s.accuracy() < floor) continue;
        const PointSummary*& b = best[s.rule];
        if (b == nullptr || s.totals.mat() > b->totals.mat()) b = &s;
    }
    return best;
}

namespace {
// Where the sweep's rules could relax (sweep.json's judge_span; absent in a sweep that relaxed everywhere), which
// decides what MAT and the relaxed tokens count: said under the table.
std::string judge_span_note(const fs::path& settings_path) {
    std::ifstream in(settings_path);
    const nlohmann::json settings = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    const std::string span = settings.is_object() ? settings.value("judge_span", "all") : "all";
    if (span == "all")
        return "\nJudge span all: the rules could relax any token, the paper's setting (MAT counts every emitted "
               "token, "
               "up to the stop string).\n";
    if (span.starts_with("until:"))
        return fmt::format(
            "\nJudge span {}: the rules relaxed only before the answer marker; the answer and what follows "
            "it are the target's own tokens (MAT counts every emitted token, up to the stop string).\n",
            span);
    return fmt::format(
        "\nJudge span {}: the rules relaxed only inside it; elsewhere every token is the target's own.\n", span);
}
}  // namespace

std::string write_sweep_summary(const std::string& dir, const std::vector<PointSummary>& summaries, AnswerKind kind) {
    if (summaries.empty()) throw Error("sweep: nothing to summarise");
    const PointSummary& vanilla = summaries.front();
    const double vanilla_speed = vanilla.tokens_per_second();
    const auto speedup = [&](const PointSummary& s) {
        return vanilla_speed > 0 ? s.tokens_per_second() / vanilla_speed : 0.0;
    };

    nlohmann::json points = nlohmann::json::array();
    std::vector<std::string> idle_points;   // points that relaxed nothing
    std::vector<std::string> mixed_points;  // points whose speed comes from other runs than vanilla's
    std::ostringstream csv, table;
    csv << "point,rule,value,examples,correct,accuracy,accuracy_change,accuracy_change_low,accuracy_change_high,mat,"
           "acceptance,relaxed,emitted,target_calls,tokens_per_second,speedup,judge_share,agreement,agreement_low,"
           "agreement_high\n";
    table
        << "| rule | value | accuracy | Δ acc [95 % CI] | MAT | acceptance | relaxed | tokens/s | speedup | judge time "
        << (kind == AnswerKind::kTestOutcome ? "| same test outcome as vanilla [95 % CI] |\n"
                                             : "| same answer as vanilla [95 % CI] |\n")
        << "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const PointSummary& s : summaries) {
        const double change = s.accuracy() - vanilla.accuracy();
        // The interval of the paired change (−loss; 0 − x, as −0.0 would print "-0.0"); vanilla's is the point.
        const double change_low = s.loss_against_vanilla ? 0.0 - s.loss_against_vanilla->high : change;
        const double change_high = s.loss_against_vanilla ? 0.0 - s.loss_against_vanilla->low : change;
        const std::string change_text = s.loss_against_vanilla ? fmt::format("{:+.1f} [{:+.1f}, {:+.1f}]", 100 * change,
                                                                             100 * change_low, 100 * change_high)
                                                               : fmt::format("{:+.1f}", 100 * change);
        // Vanilla agrees with itself.
        const Proportion agreement = s.agreement_with_vanilla.value_or(Proportion{1.0, 1.0, 1.0, s.examples});
        const std::string agreement_text = s.agreement_with_vanilla
                                               ? fmt::format("{:.1f} % [{:.1f}, {:.1f}]", 100 * agreement.value,
                                                             100 * agreement.low, 100 * agreement.high)
                                               : "—";
        points.push_back({{"point", s.point},
                          {"rule", s.rule},
                          {"value", s.value},
                          {"examples", s.examples},
                          {"correct", s.correct},
                          {"accuracy", s.accuracy()},
                          {"accuracy_change", change},
                          {"accuracy_change_low", change_low},
                          {"accuracy_change_high", change_high},
                          {"mat", s.totals.mat()},
                          {"acceptance", s.totals.acceptance_rate()},
                          {"relaxed", s.totals.relaxed_accepted},
                          {"emitted", s.totals.emitted},
                          {"target_calls", s.totals.target_calls},
                          {"wall_seconds", s.wall_seconds},
                          {"tokens_per_second", s.tokens_per_second()},
                          {"speedup", speedup(s)},
                          {"judge_share", s.judge_share()},
                          {"agreement", agreement.value},
                          {"agreement_low", agreement.low},
                          {"agreement_high", agreement.high}});
        csv << fmt::format(
            "{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.3f},{:.4f},{},{},{},{:.1f},{:.3f},{:.5f},{:.4f},{:.4f},"
            "{:.4f}\n",
            s.point, s.rule, s.value, s.examples, s.correct, s.accuracy(), change, change_low, change_high,
            s.totals.mat(), s.totals.acceptance_rate(), s.totals.relaxed_accepted, s.totals.emitted,
            s.totals.target_calls, s.tokens_per_second(), speedup(s), s.judge_share(), agreement.value, agreement.low,
            agreement.high);
        // A rule that never fired at this setting (FLy's entropy gate at θ 0.5 on MMLU-Pro) decodes as vanilla does:
        // flagged, so that its point is not read as a measured trade-off.
        const bool relaxed_nothing = s.rule != "vanilla" && s.totals.relaxed_accepted == 0;
        points.back()["relaxed_nothing"] = relaxed_nothing;
        if (relaxed_nothing) idle_points.push_back(s.point);
        // Speeds compare only within one run (machine and day): a point decoded in another run than vanilla's, or
        // in several, is marked.
        const bool other_runs = s.runs != vanilla.runs || s.runs.size() > 1;
        points.back()["runs"] = s.runs;
        if (other_runs) mixed_points.push_back(s.point);
        table << fmt::format(
            "| {} | {} | {:.1f} % | {} | {:.2f} | {:.1f} % | {}{} | {:.1f}{} | {:.2f}× | {:.2f} % | {} |\n", s.rule,
            s.value.empty() ? "—" : s.value, 100 * s.accuracy(), change_text, s.totals.mat(),
            100 * s.totals.acceptance_rate(), s.totals.relaxed_accepted, relaxed_nothing ? " ⚠" : "",
            s.tokens_per_second(), other_runs ? " †" : "", speedup(s), 100 * s.judge_share(), agreement_text);
    }
    if (!mixed_points.empty())
        table << fmt::format(
            "\n† tokens/s from other runs than vanilla's (another machine or day: {}), not comparable: "
            "{}\n",
            fmt::join(vanilla.runs, "; "), fmt::join(mixed_points, ", "));
    if (!idle_points.empty())
        table << fmt::format("\n⚠ relaxed nothing, so decoded as vanilla: {} (the rule never fired at that setting)\n",
                             fmt::join(idle_points, ", "));
    table << judge_span_note(fs::path(dir) / "sweep.json");
    nlohmann::json best = nlohmann::json::object();
    table << "\nBest MAT within 1 point of vanilla's accuracy:";
    for (const auto& [rule, s] : best_within_loss(summaries, 0.01)) {
        best[rule] = {
            {"point", s->point}, {"mat", s->totals.mat()}, {"accuracy", s->accuracy()}, {"speedup", speedup(*s)}};
        table << fmt::format(" {} {:.2f} ({});", rule, s->totals.mat(), s->point);
    }
    table << "\n";

    const fs::path root(dir);
    std::ofstream(root / "summary.json") << nlohmann::json{{"points", points}, {"best_mat_within_1_point", best}}.dump(
                                                2)
                                         << "\n";
    std::ofstream(root / "summary.csv") << csv.str();
    std::ofstream(root / "table.md") << table.str();
    return table.str();
}

}  // namespace klspec
