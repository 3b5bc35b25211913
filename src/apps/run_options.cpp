#include "apps/run_options.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "apps/stats_report.h"
#include "apps/thread_wait.h"
#include "core/error.h"
#include "core/judges/fsd_judge.h"
#include "engine/chat_template.h"
#include "engine/process_settings.h"
#include "engine/target_loading.h"

namespace klspec {
namespace {

// The folder of the default pair: KLSPEC_MODELS_DIR if set; else, for an installed binary,
// <bin>/KLSPEC_INSTALLED_MODELS_DIR (../share/klspec/models) when it holds the target; else the source tree's
// models/ (KLSPEC_DEFAULT_MODELS_DIR, the build tree's binary).
std::string default_models_dir() {
    if (const char* env_dir = std::getenv("KLSPEC_MODELS_DIR"); env_dir != nullptr) return env_dir;
    std::error_code error;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
    if (!error) {
        const std::filesystem::path installed = exe.parent_path() / KLSPEC_INSTALLED_MODELS_DIR;
        if (std::filesystem::exists(installed / "testbed-target.gguf", error))
            return installed.lexically_normal().string();
    }
    return KLSPEC_DEFAULT_MODELS_DIR;
}

// CLI11's NonNegativeNumber prints its whole double range on failure; this says it in words.
const CLI::Validator kNonNegative(
    [](const std::string& text) {
        double value = 0;
        return CLI::detail::lexical_cast(text, value) && value >= 0 ? std::string() : "must be >= 0, got " + text;
    },
    "N >= 0");
const CLI::Validator kPositive(
    [](const std::string& text) {
        double value = 0;
        return CLI::detail::lexical_cast(text, value) && value >= 1 ? std::string() : "must be >= 1, got " + text;
    },
    "N >= 1");

// "a:1,b:2" -> {"a:1", "b:2"}; empty pieces stay, so the model load reports them as malformed addresses.
std::vector<std::string> split_server_list(const std::string& list) {
    std::vector<std::string> servers;
    size_t start = 0;
    for (size_t comma = list.find(','); comma != std::string::npos; comma = list.find(',', start)) {
        servers.push_back(list.substr(start, comma - start));
        start = comma + 1;
    }
    servers.push_back(list.substr(start));
    return servers;
}

// --spec-type's names into the n-gram types; returns whether the draft model drafts (draft-simple listed,
// or nothing listed).
bool parse_spec_types(const std::vector<std::string>& names, NgramOptions& ngram) {
    ngram.types.clear();
    if (names.empty()) return true;
    bool draft_model = false;
    for (const std::string& name : names) {
        const std::span<const std::string_view> known = ngram_type_names();
        if (name == "draft-simple") {
            draft_model = true;
        } else if (std::find(known.begin(), known.end(), name) != known.end()) {
            if (std::find(ngram.types.begin(), ngram.types.end(), name) == ngram.types.end())
                ngram.types.push_back(name);
        } else if (name == "draft-eagle3" || name == "draft-mtp" || name == "draft-dflash" || name == "draft-dspark") {
            throw Error(
                fmt::format("--spec-type {} is not supported: klspec's judges need the draft's distribution, "
                            "which llama.cpp's drafter does not hand back (docs/drafters.md)",
                            name));
        } else {
            throw Error(
                fmt::format("unknown --spec-type '{}' (one of: draft-simple, {})", name, fmt::join(known, ", ")));
        }
    }
    return draft_model;
}

}  // namespace

void add_model_options(CLI::App& app, RunOptions& options) {
    // As in llama.cpp, a flag given twice takes its last value (wrappers can append overrides).
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_option("-m,--model", options.target_path,
                   "Target model (GGUF). Default: the project's pair, models/testbed-{target,draft}.gguf")
        ->check(CLI::ExistingFile);
    app.add_option("--model-draft,--spec-draft-model", options.draft_path,
                   "Draft model (GGUF, a vocabulary llama.cpp pairs with the target's: docs/judges.md); also -md. With "
                   "-m but without -md: "
                   "target-only decoding");
    app.add_option("--spec-type", options.spec_types,
                   "Drafters, comma-separated as llama.cpp's --spec-type: draft-simple (the draft model), "
                   "ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache (lookups in the sequence's own "
                   "prompt and output: no second model). Chained: the n-gram types first, in that order, the draft "
                   "model where none finds a draft. N-gram drafts have no distribution q: the rules that read q or "
                   "hidden states (kl, draft-entropy, autojudge) are refused with them. Default: draft-simple when "
                   "there is a draft model")
        ->delimiter(',')
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option(
           "--spec-ngram-size-n,--spec-ngram-simple-size-n,--spec-ngram-map-k-size-n,--spec-ngram-map-k4v-size-n",
           options.ngram.size_n, "ngram-simple, ngram-map-k, ngram-map-k4v: length of the lookup n-gram")
        ->capture_default_str()
        ->check(kPositive);
    app.add_option(
           "--spec-ngram-size-m,--spec-ngram-simple-size-m,--spec-ngram-map-k-size-m,--spec-ngram-map-k4v-size-m",
           options.ngram.size_m,
           "ngram-simple, ngram-map-k, ngram-map-k4v: length of the m-gram proposed after a "
           "match (a draft's length at most)")
        ->capture_default_str()
        ->check(kPositive);
    app.add_option("--spec-ngram-min-hits,--spec-ngram-map-k-min-hits,--spec-ngram-map-k4v-min-hits",
                   options.ngram.min_hits, "ngram-map-k, ngram-map-k4v: hits an n-gram needs before it is used")
        ->capture_default_str()
        ->check(kPositive);
    app.add_option("--spec-ngram-mod-n-match", options.ngram.mod_n_match, "ngram-mod: lookup length")
        ->capture_default_str()
        ->check(kPositive);
    app.add_option("--spec-ngram-mod-n-min", options.ngram.mod_n_min, "ngram-mod: a shorter continuation is no draft")
        ->capture_default_str()
        ->check(kNonNegative);
    app.add_option("--spec-ngram-mod-n-max", options.ngram.mod_n_max, "ngram-mod: longest draft")
        ->capture_default_str()
        ->check(kPositive);
    app.add_option("-c,--ctx-size", options.context.n_ctx, "Context size in tokens per sequence (prompt + output)")
        ->capture_default_str()
        ->check(kPositive);
    app.add_option("-b,--batch-size", options.context.n_batch, "Prompt-processing batch size")
        ->capture_default_str()
        ->check(kPositive);
    app.add_option("-t,--threads", options.context.n_threads, "CPU threads (0 = all)")
        ->capture_default_str()
        ->check(kNonNegative);
    app.add_option("--threads-draft", options.context.n_threads_draft,
                   "CPU threads of the draft model (0 = as --threads); also -td. A small draft decodes one token "
                   "per call, where one thread can beat several")
        ->capture_default_str()
        ->check(kNonNegative);
    // Taken before parsing (apps/thread_wait.h): here it is only checked and explained.
    app.add_option_function<int>(
           "--poll", [](int) {},
           fmt::format("How ggml's idle threads wait, as llama.cpp's --poll: 0 = sleep at once, "
                       "N = spin N x 1000 times first (default {}, llama.cpp's: fastest on a "
                       "quiet machine; on a busy, shared one spinning threads starve the ones "
                       "they wait for, and --poll 1 decodes ~2.5x faster there)",
                       kDefaultPollLevel))
        ->check(CLI::Range(0, kMaxPollLevel));
    app.add_option("--prio", options.priority,
                   "Process priority, as llama.cpp's --prio: -1 low, 0 normal, 1 medium, 2 high, 3 realtime (raising "
                   "it needs CAP_SYS_NICE)")
        ->capture_default_str()
        ->check(CLI::Range(-1, 3));
    app.add_option("--cpu-mask", options.cpu_mask,
                   "Run on these CPUs only, a hex mask (llama.cpp's -C): e.g. 0x3 for CPUs 0 and 1");
    app.add_option("--cpu-range", options.cpu_range, "Run on these CPUs only, lo-hi (llama.cpp's -Cr), e.g. 0-3")
        ->excludes(app.get_option("--cpu-mask"));
    app.add_option_function<int32_t>(
           "--n-gpu-layers", [&options](int32_t layers) { options.model.gpu_layers = layers; },
           "Layers to offload to the GPU when llama.cpp was built with a GPU backend, or to the --rpc servers; "
           "also -ngl. Default: all with --rpc, else 0")
        ->check(kNonNegative);
    app.add_option_function<std::string>(
        "--rpc", [&options](const std::string& list) { options.model.rpc_servers = split_server_list(list); },
        "Run the target's layers on these ggml-rpc-servers (HOST:PORT,...; llama.cpp's --rpc), split by their "
        "free memory; all layers unless -ngl says otherwise");
    app.add_option_function<std::string>(
        "--rpc-draft", [&options](const std::string& list) { options.draft_rpc_servers = split_server_list(list); },
        "The same for the draft. Default: the draft stays local (it runs token by token, so a network round "
        "trip per draft token costs more than its small compute)");
    app.add_flag("--repack,!--no-repack", options.model.repack,
                 "Repack the target's quantized weights for the CPU's interleaved kernels (default on, as in "
                 "llama.cpp; 1.26x decode, 1.3-2.1x prompts on an AVX-512 EPYC). klspec's patched ggml makes a "
                 "verification batch's logits one-token decoding's bit for bit; a probe at load checks it and loads "
                 "the target unrepacked, with a warning, where this CPU's kernels differ (docs/repacked-kernels.md). "
                 "The draft is always repacked");
    app.add_flag(
        "--repack-prompt", options.repack_prompt,
        "Prefill prompts with a second, repacked copy of the target (its memory again, and a second KV "
        "cache), whose prompts ran 1.3x faster on 2 AVX2 cores (docs/server.md); decoding and verification keep "
        "the unrepacked kernels, so speculative output stays target-only output. A prompt's cells then "
        "differ from an unrepacked prefill's, as llama-server's repacked ones do (docs/server.md). Only with "
        "--no-repack, on a target on the CPU");
    app.add_flag("-v,--verbose", options.verbose, "Show llama.cpp's own log output");
}

void add_dataset_options(CLI::App& app, DatasetChoice& dataset, bool with_limit) {
    app.add_option(
           "--dataset", dataset.name_or_path,
           "gsm8k, mmlu-pro, math500, math500-hard, humaneval, mbpp-plus or livecodebench (read from "
           "--data-dir; code benchmarks are scored by running their tests in a sandbox), or a JSONL file with one "
           "{\"question\": PROMPT, \"final\": GOLD, \"scorer\": gsm8k|mmlu-pro|lcb-output|math, \"id\": ID} a line "
           "(final, scorer and id optional; scorer defaults to gsm8k)")
        ->required();
    app.add_option("--data-dir", dataset.data_dir,
                   "Where the benchmark folders are (which files, and where to get them: docs/datasets.md)")
        ->capture_default_str();
    app.add_option("--split", dataset.split, "Which file of a benchmark (test, train, validation)")
        ->capture_default_str();
    if (!with_limit) {
        dataset.full_split = true;  // scoring outputs made elsewhere: any problem of the split
        return;
    }
    app.add_option("--limit", dataset.limit, "Use only the first N problems (0 = all)")->capture_default_str();
    app.add_option("--skip", dataset.skip,
                   "Leave out the first N problems before --limit (e.g. the train problems a draft was trained on, so "
                   "that a calibration or mining run uses others)")
        ->capture_default_str();
    app.add_flag("--full-split", dataset.full_split,
                 "Use the whole test split instead of the paper-sized seeded subset (GSM8K 400, MMLU-Pro 100; see "
                 "docs/datasets.md)");
}

void add_prompt_options(CLI::App& app, PromptOptions& prompt) {
    app.add_option("--chat", prompt.chat,
                   "Put each problem in the target GGUF's chat template: auto (when it has one), on, off")
        ->transform(CLI::CheckedTransformer(
            std::map<std::string, ChatMode>{{"auto", ChatMode::Auto}, {"on", ChatMode::On}, {"off", ChatMode::Off}}))
        ->default_str("auto");
    app.add_option("--few-shot", prompt.few_shot,
                   "Worked exemplars before each problem (GSM8K: from train; MMLU-Pro: its validation CoT of the same "
                   "category). Default: 8 and 5 in plain prompts, 0 under a chat template")
        ->check(kNonNegative);
}

void add_judge_options(CLI::App& app, JudgeOptions& judge, bool with_rule) {
    if (with_rule) {
        std::string rules;
        for (const JudgeRule& rule : judge_rules())
            rules += fmt::format("\n  {}: {}{}", rule.name, rule.summary,
                                 rule.needs_draft_model ? " [reads the draft model: not with n-gram drafts]" : "");
        app.add_option("--judge", judge.rule,
                       "Verification rule; every rule accepts d_i if relaxed(i), else applies"
                       " the lossless vanilla test:" +
                           rules)
            ->capture_default_str();
        app.add_option("--judge-threshold", judge.threshold, "Threshold tau of the kl, entropy and autojudge rules");
        app.add_option("--judge-topk", judge.topk, "K of the topk rule");
        app.add_option("--judge-divergence", judge.divergence,
                       "fsd rule: the divergence compared with the threshold: kl (KL(p || q)), reverse-kl (KL(q || p), "
                       "the default: what FSD's published numbers used) or js (Jensen-Shannon)")
            ->check([](const std::string& name) {
                try {
                    parse_divergence(name);
                    return std::string();
                } catch (const Error& e) {
                    return std::string(e.what());
                }
            });
        app.add_option("--max-tv", judge.max_tv,
                       "kl rule, instead of --judge-threshold: tau = 2 eps^2, so every relaxed token's TV(p, q) < eps "
                       "(Pinsker); the run reports the bound");
    }
    app.add_option("--judge-window", judge.window,
                   "fly rule: W, the drafts after a position that must match the target for it to be relaxed (6)");
    app.add_option("--confidence-mask", judge.confidence_mask,
                   "kl rule: relax only where the target's top probability is <= m (1 disables the mask)")
        ->capture_default_str();
    app.add_option("--judge-head", judge.head_path, "AutoJudge head file (JSON, see docs/autojudge-head.md)");
    add_judge_span_option(app, judge);
}

void add_judge_span_option(CLI::App& app, JudgeOptions& judge) {
    app.add_option_function<std::string>(
           "--judge-span",
           [&judge](const std::string& spec) {
               judge.span = JudgeSpan::parse(spec);
               judge.span_given = true;
           },
           "Where the rule may relax; outside, every draft token gets the exact test: all (default), "
           "until:STRING (until the output contains STRING, e.g. until:\"The answer is\"), think (the reasoning "
           "span between the markers of the model's chat template, e.g. <think> ... </think>), "
           "think:OPEN,CLOSE (markers given). sweep, mine and calibrate on gsm8k, mmlu-pro and math500 default to "
           "until the benchmark's answer marker, so that the answer and what follows it stay the target's own")
        ->option_text("SPAN=all");
}

static std::map<std::string, DraftPolicy> draft_policies_by_name() {
    std::map<std::string, DraftPolicy> out;
    for (const DraftPolicy policy : kDraftPolicies) out.emplace(draft_policy_name(policy), policy);
    return out;
}

void add_draft_policy_option(CLI::App& app, DraftPolicy& policy) {
    app.add_option("--draft-policy", policy,
                   "How gamma is chosen each step: auto (the cost model: the gamma in 0..draft-max with the most "
                   "expected tokens per second, from the step costs measured as it runs and each sequence's "
                   "running acceptance; 0 is a target-only step, and a draft that stops paying is probed again "
                   "now and then), fixed (always draft-max), adaptive (as --draft-adaptive), off (target-only)")
        ->transform(CLI::CheckedTransformer(draft_policies_by_name()))
        ->option_text("auto|fixed|adaptive|off=" + std::string(draft_policy_name(policy)));
}

void add_generation_options(CLI::App& app, GenerationOptions& gen) {
    SamplingParams& sampling = gen.sampling;
    app.add_option("-n,--n-predict", gen.max_tokens, "Maximum number of tokens to generate")
        ->capture_default_str()
        ->check(kNonNegative);
    app.add_option("--draft-max,--spec-draft-n-max", gen.draft_max,
                   "Draft tokens proposed per target call at most (gamma; with --draft-policy fixed, exactly)")
        ->capture_default_str()
        ->check(kPositive);
    add_draft_policy_option(app, gen.draft_policy);
    app.add_option("--draft-min,--spec-draft-n-min", gen.draft_min,
                   "Drop drafts shorter than this (a target-only step), as llama.cpp")
        ->capture_default_str()
        ->check(kNonNegative);
    app.add_option("--draft-p-min,--spec-draft-p-min", gen.draft_p_min,
                   "Stop drafting at a token whose draft probability is below P (0 = off)")
        ->capture_default_str();
    app.add_flag_callback(
        "--draft-adaptive", [&gen] { gen.draft_policy = DraftPolicy::Adaptive; },
        "--draft-policy adaptive: gamma within [max(1, draft-min), draft-max], +2 after a fully "
        "accepted draft, -1 after a rejection");
    app.add_option_function<std::string>(
           "--verify", [&gen](const std::string& text) { gen.verification = parse_verification(text); },
           "How sampled drafts are verified: token (the standard test, position by position) or block (the block "
           "accepted jointly, Sun et al. 2025: exact, never fewer tokens in expectation; vanilla judge only). "
           "At --temp 0 both are argmax matching")
        ->option_text("token|block=token");
    app.add_option("--temp", sampling.temperature, "Sampling temperature; 0 = greedy")->capture_default_str();
    app.add_option("--top-k", sampling.top_k, "Keep only the K most likely tokens (0 = off)")->capture_default_str();
    app.add_option("--top-p", sampling.top_p, "Keep the smallest set of tokens with mass >= P (1 = off)")
        ->capture_default_str();
    app.add_option("-s,--seed", sampling.seed, "Random seed for sampling")->capture_default_str();
    app.add_option("--stop", gen.stop_strings, "Stop when the output contains this string (repeatable)")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

void add_run_options(CLI::App& app, RunOptions& options) {
    add_model_options(app, options);
    add_generation_options(app, options.generation);
    add_judge_options(app, options.judge, /*with_rule=*/true);
    app.add_option("--trace", options.trace_path,
                   "Write one JSON line per judged position (KL, entropies, max p, rank, verdict) to this file");
    add_cost_trace_option(app, options);
}

void add_cost_trace_option(CLI::App& app, RunOptions& options) {
    app.add_option("--cost-trace", options.cost_trace_path,
                   "Write one JSON line per step to this file: the γ each sequence drafted, the tokens emitted, the "
                   "measured target and draft llama_decode time, and under --draft-policy auto the cost model's "
                   "predicted time and tokens for its choice and its predicted time without drafts (docs/speed.md)");
}

DecodingSession open_session(const RunOptions& options) {
    set_llama_verbose(options.verbose);
    // Before any decoding thread exists: they inherit both.
    if (options.priority != 0) set_process_priority(options.priority);
    if (!options.cpu_mask.empty() || !options.cpu_range.empty())
        set_cpu_affinity(options.cpu_range.empty() ? options.cpu_mask : options.cpu_range, !options.cpu_range.empty());
    std::string target_path = options.target_path;
    std::string draft_path = options.draft_path;
    NgramOptions ngram = options.ngram;
    const bool uses_draft_model = parse_spec_types(options.spec_types, ngram);
    validate(ngram);
    if (!uses_draft_model && !draft_path.empty())
        throw Error(
            "a draft model is given (-md) but --spec-type does not list draft-simple: add it to chain the "
            "draft model after the n-gram drafters");
    if (target_path.empty()) {
        const std::string dir = default_models_dir();
        target_path = dir + "/testbed-target.gguf";
        if (draft_path.empty() && uses_draft_model) draft_path = dir + "/testbed-draft.gguf";
    }
    if (!options.spec_types.empty() && uses_draft_model && draft_path.empty())
        throw Error("--spec-type draft-simple needs a draft model (-md)");
    DecodingSession session;
    session.generation = options.generation;
    session.generation.judge = make_judge(options.judge);
    validate(session.generation);
    validate(options.context);
    std::string unrepacked_because;
    session.target = load_target(target_path, options.model, options.context, unrepacked_because);
    if (!unrepacked_because.empty()) std::cerr << "klspec: warning: " << unrepacked_because << "\n";
    session.generation.judge_span = resolve_judge_span(options.judge.span, *session.target);
    if (!draft_path.empty()) {
        ModelOptions draft_model = draft_model_options(options.model);
        draft_model.rpc_servers = options.draft_rpc_servers;
        session.draft = std::make_unique<Model>(draft_path, draft_model);
    }
    ContextOptions context = options.context;
    context.hidden_states = options.context.hidden_states || session.generation.judge->needs_hidden_states();
    session.decoder = std::make_unique<SpeculativeDecoder>(*session.target, session.draft.get(), context, ngram);
    if (options.repack_prompt && !options.model.repack && session.target->cpu_resident()) {
        ModelOptions repacked = options.model;
        repacked.repack = true;
        session.prompt_target = std::make_unique<Model>(target_path, repacked);
        if (std::optional<std::string> why_not = session.decoder->use_repacked_prompts(*session.prompt_target)) {
            std::cerr << "klspec: warning: --repack-prompt ignored: " << *why_not << "\n";
            session.prompt_target.reset();
        }
    }
    if (!options.trace_path.empty()) {
        session.trace = std::make_unique<std::ofstream>(options.trace_path);
        if (!*session.trace) throw Error(fmt::format("cannot write trace file: {}", options.trace_path));
        session.decoder->set_observer([out = session.trace.get()](const JudgedPosition& position) {
            *out << judged_position_to_json(position).dump() << "\n";
        });
    }
    if (!options.cost_trace_path.empty()) {
        session.cost_trace = std::make_unique<std::ofstream>(options.cost_trace_path);
        if (!*session.cost_trace) throw Error(fmt::format("cannot write cost trace file: {}", options.cost_trace_path));
        session.decoder->set_step_cost_observer([out = session.cost_trace.get()](const StepCostRecord& step) {
            *out << step_cost_to_json(step).dump() << "\n";
        });
    }
    return session;
}

PromptFormat prepare_prompts(std::vector<Problem>& problems, const DatasetChoice& dataset, const PromptOptions& prompt,
                             DecodingSession& session) {
    PromptFormat format = format_prompts(problems, dataset.name_or_path, dataset.data_dir, prompt, *session.target);
    std::vector<std::string>& stops = session.generation.stop_strings;
    stops.insert(stops.end(), format.stop_strings.begin(), format.stop_strings.end());
    return format;
}

void relax_until_answer(DecodingSession& session, const PromptFormat& format, const JudgeOptions& judge) {
    if (judge.span_given || format.answer_marker.empty()) return;
    session.generation.judge_span = JudgeSpan::parse("until:" + format.answer_marker);
}

void normalize_llama_style_flags(int argc, char** argv) {
    static char model_draft[] = "--model-draft";
    static char gpu_layers[] = "--n-gpu-layers";
    static char parallel[] = "--parallel";
    static char threads_draft[] = "--threads-draft";
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "-md") == 0) argv[i] = model_draft;
        if (std::strcmp(argv[i], "-ngl") == 0) argv[i] = gpu_layers;
        if (std::strcmp(argv[i], "-np") == 0) argv[i] = parallel;
        if (std::strcmp(argv[i], "-td") == 0) argv[i] = threads_draft;
    }
}

}  // namespace klspec
