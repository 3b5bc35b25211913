#include "autojudge/head_training.h"

#include <cmath>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <linear.h>

#include "core/classification_metrics.h"
#include "core/error.h"
#include "core/stable_hash.h"

namespace klspec {
namespace {

// liblinear's problem in its sparse format: rows of (index, value) from 1, a bias column, -1 at the end.
class LiblinearProblem {
public:
    LiblinearProblem(const std::vector<std::vector<double>>& rows, const std::vector<int>& labels) {
        const size_t n = rows.empty() ? 0 : rows[0].size();
        nodes_.resize(rows.size() * (n + 2));
        pointers_.resize(rows.size());
        targets_.resize(rows.size());
        for (size_t i = 0; i < rows.size(); ++i) {
            feature_node* row = &nodes_[i * (n + 2)];
            for (size_t j = 0; j < n; ++j) row[j] = {static_cast<int>(j + 1), rows[i][j]};
            row[n] = {static_cast<int>(n + 1), 1.0};  // the bias column (problem.bias = 1)
            row[n + 1] = {-1, 0.0};
            pointers_[i] = row;
            targets_[i] = labels[i] == 1 ? 1.0 : -1.0;
        }
        problem_.l = static_cast<int>(rows.size());
        problem_.n = static_cast<int>(n + 1);
        problem_.y = targets_.data();
        problem_.x = pointers_.data();
        problem_.bias = 1.0;
    }
    const problem& get() const { return problem_; }

private:
    std::vector<feature_node> nodes_;
    std::vector<feature_node*> pointers_;
    std::vector<double> targets_;
    problem problem_{};
};

struct Fit {
    std::vector<double> weights;  // on standardised features, for label 1 ("important")
    double bias = 0;
};

Fit fit_logistic_regression(const LiblinearProblem& data, size_t n_features, double c) {
    parameter param{};
    param.solver_type = L2R_LR;
    param.eps = 0.01;  // liblinear's default for L2R_LR
    param.C = c;
    if (const char* error = check_parameter(&data.get(), &param)) throw Error(fmt::format("liblinear: {}", error));
    std::unique_ptr<model, void (*)(model*)> m(train(&data.get(), &param),
                                               [](model* p) { free_and_destroy_model(&p); });
    // liblinear orients w towards the first label it met; get_decfun_* take the label's index.
    int labels[2] = {0, 0};
    get_labels(m.get(), labels);
    const int important = labels[0] == 1 ? 0 : 1;
    Fit fit;
    fit.weights.resize(n_features);
    for (size_t j = 0; j < n_features; ++j)
        fit.weights[j] = get_decfun_coef(m.get(), static_cast<int>(j + 1), important);
    fit.bias = get_decfun_bias(m.get(), important);
    return fit;
}

double score(const Fit& fit, const std::vector<double>& standardised) {
    double z = fit.bias;
    for (size_t j = 0; j < standardised.size(); ++j) z += fit.weights[j] * standardised[j];
    return 1.0 / (1.0 + std::exp(-z));
}

}  // namespace

std::vector<double> autojudge_c_grid() {
    std::vector<double> grid;
    for (int k = 1; k <= 14; ++k) grid.push_back(std::pow(std::sqrt(10.0), -k));
    for (double c : {1.0, 3.0, 10.0, 50.0, 100.0}) grid.push_back(c);
    return grid;
}

bool in_validation_split(const std::string& problem_id, double validation_fraction) {
    return double(fnv1a64(problem_id) % 10000) < validation_fraction * 10000.0;
}

TrainedHead train_head(const MinedData& data, const HeadTrainingOptions& options) {
    const size_t n = data.n_features();
    std::vector<size_t> train_rows, validation_rows;
    std::set<std::string> train_problems, validation_problems;
    for (size_t i = 0; i < data.labels.size(); ++i) {
        const bool held_out = in_validation_split(data.labels[i].problem_id, options.validation_fraction);
        (held_out ? validation_rows : train_rows).push_back(i);
        (held_out ? validation_problems : train_problems).insert(data.labels[i].problem_id);
    }
    TrainedHead out;
    out.train_rows = train_rows.size();
    out.validation_rows = validation_rows.size();
    out.train_problems = train_problems.size();
    out.validation_problems = validation_problems.size();
    for (size_t i : train_rows) out.train_important += data.labels[i].important;
    for (size_t i : validation_rows) out.validation_important += data.labels[i].important;
    if (out.train_important == 0 || out.train_important == out.train_rows || out.validation_important == 0 ||
        out.validation_important == out.validation_rows)
        throw Error(
            fmt::format("both splits need important and unimportant mismatches: train has {} of {} "
                        "important, validation {} of {} (mine more problems)",
                        out.train_important, out.train_rows, out.validation_important, out.validation_rows));

    // Standardise with the training rows' mean and standard deviation (σ = 1 for a constant feature).
    AutoJudgeHead& head = out.head;
    head.draft_hidden_size = data.draft_hidden_size;
    head.target_hidden_size = data.target_hidden_size;
    head.mean.assign(n, 0.0);
    head.scale.assign(n, 0.0);
    for (size_t i : train_rows)
        for (size_t j = 0; j < n; ++j) head.mean[j] += data.feature_row(i)[j];
    for (double& m : head.mean) m /= double(train_rows.size());
    for (size_t i : train_rows)
        for (size_t j = 0; j < n; ++j) head.scale[j] += std::pow(data.feature_row(i)[j] - head.mean[j], 2);
    for (double& s : head.scale) {
        s = std::sqrt(s / double(train_rows.size()));
        if (!(s > 1e-12)) s = 1.0;
    }
    const auto standardised = [&](const std::vector<size_t>& rows) {
        std::vector<std::vector<double>> out_rows(rows.size(), std::vector<double>(n));
        for (size_t r = 0; r < rows.size(); ++r)
            for (size_t j = 0; j < n; ++j)
                out_rows[r][j] = (data.feature_row(rows[r])[j] - head.mean[j]) / head.scale[j];
        return out_rows;
    };
    const std::vector<std::vector<double>> x_train = standardised(train_rows),
                                           x_validation = standardised(validation_rows);
    std::vector<int> y_train, y_validation;
    for (size_t i : train_rows) y_train.push_back(data.labels[i].important);
    for (size_t i : validation_rows) y_validation.push_back(data.labels[i].important);

    set_print_string_function([](const char*) {});  // liblinear prints its iterations otherwise
    const LiblinearProblem problem(x_train, y_train);
    Fit best;
    std::vector<double> best_scores;
    out.validation_auc = -1;
    for (double c : autojudge_c_grid()) {
        const Fit fit = fit_logistic_regression(problem, n, c);
        std::vector<double> scores;
        for (const auto& row : x_validation) scores.push_back(score(fit, row));
        const double auc = roc_auc(scores, y_validation);
        out.auc_by_c.emplace_back(c, auc);
        if (auc > out.validation_auc) {
            out.validation_auc = auc;
            out.c = c;
            best = fit;
            best_scores = std::move(scores);
        }
    }
    head.weights = best.weights;
    head.bias = best.bias;

    // Candidate thresholds: validation-score quantiles 0.05, 0.10, ..., 0.95.
    for (int k = 1; k <= 19; ++k) {
        ThresholdCandidate t;
        t.quantile = 0.05 * k;
        t.threshold = quantile(best_scores, t.quantile);
        const PrecisionRecall pr = precision_recall_at(best_scores, y_validation, t.threshold);
        t.precision = pr.precision;
        t.recall = pr.recall;
        t.relaxed_share = pr.below_share;
        out.thresholds.push_back(t);
    }
    head.threshold = out.thresholds.front().threshold;
    for (const ThresholdCandidate& t : out.thresholds)
        if (t.recall >= options.min_recall) head.threshold = std::max(head.threshold, t.threshold);
    head.validate();
    return out;
}

nlohmann::json head_to_json(const TrainedHead& trained) {
    const AutoJudgeHead& h = trained.head;
    nlohmann::json thresholds = nlohmann::json::array();
    for (const ThresholdCandidate& t : trained.thresholds)
        thresholds.push_back({{"quantile", t.quantile},
                              {"threshold", t.threshold},
                              {"precision", t.precision},
                              {"recall", t.recall},
                              {"relaxed_share", t.relaxed_share}});
    nlohmann::json grid = nlohmann::json::array();
    for (const auto& [c, auc] : trained.auc_by_c) grid.push_back({{"C", c}, {"validation_auc", auc}});
    return {
        {"draft_hidden_size", h.draft_hidden_size},
        {"target_hidden_size", h.target_hidden_size},
        {"mean", h.mean},
        {"scale", h.scale},
        {"weights", h.weights},
        {"bias", h.bias},
        {"threshold", h.threshold},
        {"C", trained.c},
        {"validation_auc", trained.validation_auc},
        {"auc_by_C", grid},
        {"threshold_candidates", thresholds},
        {"train",
         {{"rows", trained.train_rows}, {"problems", trained.train_problems}, {"important", trained.train_important}}},
        {"validation",
         {{"rows", trained.validation_rows},
          {"problems", trained.validation_problems},
          {"important", trained.validation_important}}}};
}

}  // namespace klspec
