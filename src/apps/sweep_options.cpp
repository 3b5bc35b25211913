#include "apps/sweep_options.h"

#include <fmt/format.h>

#include "core/error.h"

namespace klspec {

void add_sweep_run_options(CLI::App& app, SweepRunOptions& options, const std::string& out_help) {
    options.run.generation.max_tokens = 512;
    add_model_options(app, options.run);
    add_generation_options(app, options.run.generation);
    add_judge_options(app, options.run.judge, /*with_rule=*/false);
    add_dataset_options(app, options.dataset, /*with_limit=*/true);
    add_prompt_options(app, options.prompt);
    app.add_option("--out", options.out_dir, out_help)->required();
    app.add_flag("--cache-prompt", options.run.generation.cache_prompt,
                 "Reuse the longest prefix a slot's prompt shares with the one it decoded last (llama-server's "
                 "cache_prompt): the few-shot exemplars a benchmark's prompts share are prefilled once per slot, "
                 "not once per problem; the outputs stay the same");
    app.add_option("--parallel", options.parallel,
                   "Decode this many problems together (also -np); tokens/s then counts each step's time shared")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
}

DecodingSession open_sweep_session(const SweepRunOptions& options, const std::vector<SweepPoint>& points,
                                   std::vector<Problem>& problems, PromptFormat& format) {
    RunOptions run = options.run;
    run.judge = points.front().judge;  // vanilla: each point sets its own judge per decode
    run.context.n_sequences = options.parallel;
    for (const SweepPoint& point : points) run.context.hidden_states |= make_judge(point.judge)->needs_hidden_states();
    DecodingSession session = open_session(run);
    if (!session.draft && !session.decoder->has_ngram_drafter())
        throw Error("a sweep needs a drafter: give -md with -m, or --spec-type ngram-...");
    // Refused before any point decodes, not at the first point that reads the draft model.
    if (session.decoder->has_ngram_drafter())
        for (const SweepPoint& point : points)
            if (make_judge(point.judge)->needs_draft_model())
                throw Error(
                    fmt::format("sweep point '{}': the {} rule reads the draft model, which n-gram drafts do "
                                "not have: drop it or the ngram types of --spec-type",
                                point.label(), point.rule));
    format = prepare_prompts(problems, options.dataset, options.prompt, session);
    relax_until_answer(session, format, options.run.judge);
    return session;
}

nlohmann::json sweep_settings(const SweepRunOptions& options, const DecodingSession& session,
                              const PromptFormat& format) {
    const GenerationOptions& g = session.generation;
    const JudgeOptions& j = options.run.judge;
    nlohmann::json settings = {{"target", session.target->path()},
                               {"draft", session.draft ? nlohmann::json(session.draft->path()) : nlohmann::json()},
                               {"dataset", options.dataset.name_or_path},
                               {"split", options.dataset.split},
                               {"full_split", options.dataset.full_split},
                               {"limit", options.dataset.limit},
                               {"chat", format.chat},
                               {"few_shot", format.few_shot},
                               {"max_tokens", g.max_tokens},
                               {"draft_max", g.draft_max},
                               {"draft_min", g.draft_min},
                               {"draft_p_min", g.draft_p_min},
                               {"draft_policy", draft_policy_name(g.draft_policy)},
                               {"temperature", g.sampling.temperature},
                               {"top_k", g.sampling.top_k},
                               {"top_p", g.sampling.top_p},
                               {"seed", g.sampling.seed},
                               {"stop", g.stop_strings},
                               {"confidence_mask", j.confidence_mask},
                               {"judge_head", j.head_path},
                               {"judge_window", j.window ? nlohmann::json(*j.window) : nlohmann::json()},
                               {"threads", options.run.context.n_threads},
                               {"parallel", options.parallel}};
    // Only when set: sweeps stored before spans existed relaxed everywhere and stay resumable.
    if (!g.judge_span.is_all()) settings["judge_span"] = g.judge_span.to_string();
    // Other kernels, other logits. Always stored: a sweep stored before the default changed says false (run with
    // --no-repack) and resumes, or nothing (repacked) and is refused.
    settings["repack"] = options.run.model.repack;
    if (!options.run.spec_types.empty()) {
        const NgramOptions& n = options.run.ngram;
        settings["spec_type"] = options.run.spec_types;
        settings["spec_ngram"] = {{"size_n", n.size_n},       {"size_m", n.size_m},
                                  {"min_hits", n.min_hits},   {"mod_n_match", n.mod_n_match},
                                  {"mod_n_min", n.mod_n_min}, {"mod_n_max", n.mod_n_max}};
    }
    // Absent when off: older sweeps resume.
    if (options.dataset.skip != 0) settings["skip"] = options.dataset.skip;
    if (g.cache_prompt) settings["cache_prompt"] = true;
    return settings;
}

std::vector<Problem> load_scored_problems(const DatasetChoice& dataset) {
    std::vector<Problem> problems = dataset.load();
    for (const Problem& p : problems)
        if (!p.gold && !p.code)
            throw Error(fmt::format("problem {} of {} has no gold answer to score", p.id, dataset.name_or_path));
    return problems;
}

}  // namespace klspec
