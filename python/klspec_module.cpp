// The klspec Python module (docs/python.md): a thin layer over the engine's SpeculativeDecoder. Decoding
// releases the GIL and looks for Ctrl-C between steps; klspec::Error becomes klspec.Error.
#include <Python.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "core/judge_factory.h"
#include "engine/chat_template.h"
#include "engine/speculative_decoder.h"
#include "engine/target_loading.h"
#include "eval/batch_decoding.h"

namespace py = pybind11;

namespace klspec {
namespace {

// Generated text may end inside a UTF-8 character (max_tokens cut it): shown with U+FFFD rather than raising.
py::str to_text(std::string_view text) {
    return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(text.data(), py::ssize_t(text.size()), "replace"));
}

// Takes the GIL for a moment: whether Ctrl-C (or another signal handler) asked to stop. When it did, the
// Python error is set, to be raised once decoding has returned.
bool python_wants_to_stop() {
    py::gil_scoped_acquire gil;
    return PyErr_CheckSignals() != 0;
}

// A generate() keyword argument that may be None.
template <typename T>
std::optional<T> optional_arg(const py::handle& value) {
    if (value.is_none()) return std::nullopt;
    return value.cast<T>();
}

// What one decoding call asks for: the engine's generation options with the judge they name, and whether
// to record the judged positions.
struct DecodingRequest {
    GenerationOptions generation;
    bool trace = false;
};

// The keyword arguments of generate, generate_batch and stream. Defaults are `klspec generate`'s.
DecodingRequest decoding_request(const py::kwargs& kwargs, const Model& target) {
    DecodingRequest request;
    GenerationOptions& generation = request.generation;
    generation.draft_policy = DraftPolicy::Auto;
    JudgeOptions judge;
    for (const auto& [key, value] : kwargs) {
        const std::string name = key.cast<std::string>();
        if (name == "judge")
            judge.rule = value.cast<std::string>();
        else if (name == "threshold")
            judge.threshold = optional_arg<double>(value);
        else if (name == "topk")
            judge.topk = optional_arg<int32_t>(value);
        else if (name == "max_tv")
            judge.max_tv = optional_arg<double>(value);
        else if (name == "window")
            judge.window = optional_arg<int32_t>(value);
        else if (name == "divergence")
            judge.divergence = optional_arg<std::string>(value);
        else if (name == "confidence_mask")
            judge.confidence_mask = optional_arg<double>(value).value_or(judge.confidence_mask);
        else if (name == "head")
            judge.head_path = optional_arg<std::string>(value).value_or("");
        else if (name == "judge_span")
            generation.judge_span = JudgeSpan::parse(value.cast<std::string>());
        else if (name == "max_tokens")
            generation.max_tokens = value.cast<int32_t>();
        else if (name == "draft_max")
            generation.draft_max = value.cast<int32_t>();
        else if (name == "draft_min")
            generation.draft_min = value.cast<int32_t>();
        else if (name == "draft_p_min")
            generation.draft_p_min = value.cast<float>();
        else if (name == "draft_policy") {
            const auto policy_name = value.cast<std::string>();
            const std::optional<DraftPolicy> policy = parse_draft_policy(policy_name);
            if (!policy)
                throw Error(fmt::format("unknown draft policy '{}' (auto, fixed, adaptive or off)", policy_name));
            generation.draft_policy = *policy;
        } else if (name == "temperature")
            generation.sampling.temperature = value.cast<float>();
        else if (name == "top_k")
            generation.sampling.top_k = value.cast<int32_t>();
        else if (name == "top_p")
            generation.sampling.top_p = value.cast<float>();
        else if (name == "seed")
            generation.sampling.seed = value.cast<uint64_t>();
        else if (name == "stop")
            generation.stop_strings = value.cast<std::vector<std::string>>();
        else if (name == "logprobs")
            generation.logprobs = optional_arg<int32_t>(value);
        else if (name == "trace")
            request.trace = value.cast<bool>();
        else
            throw py::type_error(fmt::format("unexpected keyword argument '{}'", name));
    }
    generation.judge = make_judge(judge);
    generation.judge_span = resolve_judge_span(std::move(generation.judge_span), target);
    validate(generation);
    return request;
}

// The judged positions of one generation, one array entry per position (core/judged_position.h).
struct Trace {
    std::vector<JudgedPosition> positions;

    py::dict arrays() const {
        const auto column = [this](auto field) {
            using Value = std::decay_t<decltype(field(positions.front()))>;
            py::array_t<Value> out(py::ssize_t(positions.size()));
            auto view = out.template mutable_unchecked<1>();
            for (size_t i = 0; i < positions.size(); ++i) view(py::ssize_t(i)) = field(positions[i]);
            return out;
        };
        py::dict out;
        out["position"] = column([](const JudgedPosition& p) { return p.position; });
        out["draft_token"] = column([](const JudgedPosition& p) { return p.draft_token; });
        out["target_token"] = column([](const JudgedPosition& p) { return p.target_token; });
        out["kl"] = column([](const JudgedPosition& p) { return p.kl; });
        out["target_entropy"] = column([](const JudgedPosition& p) { return p.target_entropy; });
        out["draft_entropy"] = column([](const JudgedPosition& p) { return p.draft_entropy; });
        out["target_max_probability"] = column([](const JudgedPosition& p) { return p.target_max_probability; });
        out["draft_rank"] = column([](const JudgedPosition& p) { return p.draft_rank; });
        out["accepted"] = column([](const JudgedPosition& p) { return p.verdict.verdict != Verdict::Rejected; });
        out["relaxed"] = column([](const JudgedPosition& p) { return p.verdict.verdict == Verdict::Relaxed; });
        out["judged"] = column([](const JudgedPosition& p) { return p.verdict.judged; });
        out["in_span"] = column([](const JudgedPosition& p) { return p.verdict.in_span; });
        out["statistic"] = column([](const JudgedPosition& p) { return p.verdict.decision.statistic; });
        out["draft_length"] = column([](const JudgedPosition& p) { return p.draft_length; });
        return out;
    }
};

// One generation as Python sees it: the engine's result and, when asked for, its trace.
struct Generation {
    GenerationResult result;
    std::optional<Trace> trace;
};

py::list logprobs_list(const std::vector<TokenLogprobs>& logprobs) {
    py::list out;
    for (const TokenLogprobs& token : logprobs) {
        py::list top;
        for (const TokenLogprob& alternative : token.top)
            top.append(py::make_tuple(alternative.token, alternative.logprob));
        out.append(py::dict(py::arg("token") = token.chosen.token, py::arg("logprob") = token.chosen.logprob,
                            py::arg("top") = top));
    }
    return out;
}

py::array_t<float> matrix(const std::vector<float>& values, int32_t rows, int32_t columns) {
    py::array_t<float> out({py::ssize_t(rows), py::ssize_t(columns)});
    std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(float));
    return out;
}

// The models and one decoder over them, whose `parallel` sequences generate_batch decodes together.
class Engine {
public:
    Engine(const std::string& target, const std::optional<std::string>& draft, const ContextOptions& context,
           const ModelOptions& model_options, bool verbose) {
        set_llama_verbose(verbose);
        validate(context);
        std::string unrepacked_because;
        target_ = load_target(target, model_options, context, unrepacked_because);
        if (!unrepacked_because.empty()) PyErr_WarnEx(PyExc_RuntimeWarning, unrepacked_because.c_str(), 1);
        if (draft) draft_ = std::make_unique<Model>(*draft, draft_model_options(model_options));
        decoder_ = std::make_unique<SpeculativeDecoder>(*target_, draft_.get(), context);
    }

    Generation generate(const std::string& prompt, const py::kwargs& kwargs) {
        DecodingRequest request = decoding_request(kwargs, *target_);
        Generation out;
        const Use use(*this);
        Tracing tracing(*this, request.trace);
        {
            py::gil_scoped_release released;
            out.result = decoder_->generate(prompt, request.generation,
                                            [](const StepResult&) { return python_wants_to_stop(); });
        }
        if (PyErr_Occurred()) throw py::error_already_set();
        if (request.trace) out.trace = Trace{tracing.take(0)};
        return out;
    }

    std::vector<Generation> generate_batch(const std::vector<std::string>& prompts, const py::kwargs& kwargs) {
        DecodingRequest request = decoding_request(kwargs, *target_);
        std::vector<Problem> problems(prompts.size());
        for (size_t i = 0; i < prompts.size(); ++i) problems[i].prompt = prompts[i];
        std::vector<Generation> out(prompts.size());
        const Use use(*this);
        Tracing tracing(*this, request.trace);
        {
            py::gil_scoped_release released;
            decode_problems(
                *decoder_, problems, request.generation, decoder_->n_sequences(),
                [&](DecodedProblem&& decoded) {
                    Generation& generation = out[decoded.index];
                    // What the slot recorded since its last problem finished is this problem's.
                    if (request.trace) generation.trace = Trace{tracing.take(decoded.sequence_id)};
                    generation.result = std::move(decoded.result);
                },
                python_wants_to_stop);
        }
        if (PyErr_Occurred()) throw py::error_already_set();
        return out;
    }

    py::object forward(const std::vector<int32_t>& tokens, bool hidden, const std::string& model) {
        if (model != "target" && model != "draft")
            throw Error(fmt::format("model must be 'target' or 'draft', got '{}'", model));
        const ModelRole role = model == "target" ? ModelRole::Target : ModelRole::Draft;
        if (role == ModelRole::Draft && !draft_)
            throw Error("forward(model='draft') needs an engine with a draft model");
        if (tokens.empty()) throw Error("forward needs at least one token");
        const Use use(*this);
        ForwardResult result;
        {
            py::gil_scoped_release released;
            result = decoder_->forward(role, tokens, hidden);
        }
        py::array_t<float> logits = matrix(result.logits, result.n_tokens, result.n_vocab);
        if (!hidden) return logits;
        return py::make_tuple(logits, matrix(result.hidden, result.n_tokens, result.n_embd));
    }

    std::vector<int32_t> tokenize(const std::string& text, bool add_bos, bool parse_special) const {
        return target_->tokenize(text, add_bos, parse_special);
    }
    std::string detokenize(const std::vector<int32_t>& tokens) const { return target_->text(tokens); }

    SpeculativeDecoder& decoder() { return *decoder_; }
    const Model& target() const { return *target_; }
    bool has_draft() const { return draft_ != nullptr; }

    // Decoding releases the GIL, so a second Python thread could enter the decoder meanwhile, and a stream
    // holds sequence 0 between its steps: one user at a time, the others get an Error instead of a
    // corrupted cache. Taken and checked with the GIL held, which makes the flag race-free.
    class Use {
    public:
        explicit Use(Engine& engine) : engine_(&engine) {
            if (engine.in_use_)
                throw Error(
                    "the engine is busy: another thread is decoding on it, or a stream has not finished "
                    "(iterate it to the end or drop it)");
            engine.in_use_ = true;
        }
        ~Use() { engine_->in_use_ = false; }
        Use(const Use&) = delete;
        Use& operator=(const Use&) = delete;

    private:
        Engine* engine_;
    };

private:
    // Collects the judged positions of one call by sequence id, for as long as it lives.
    class Tracing {
    public:
        Tracing(Engine& engine, bool enabled) : engine_(enabled ? &engine : nullptr) {
            if (!engine_) return;
            engine_->decoder_->set_observer(
                [this](const JudgedPosition& position) { by_sequence_[position.sequence_id].push_back(position); });
        }
        ~Tracing() {
            if (engine_) engine_->decoder_->set_observer({});
        }
        Tracing(const Tracing&) = delete;
        Tracing& operator=(const Tracing&) = delete;
        std::vector<JudgedPosition> take(int32_t sequence_id) { return std::exchange(by_sequence_[sequence_id], {}); }

    private:
        Engine* engine_;
        std::map<int32_t, std::vector<JudgedPosition>> by_sequence_;
    };

    std::unique_ptr<Model> target_;
    std::unique_ptr<Model> draft_;
    std::unique_ptr<SpeculativeDecoder> decoder_;
    bool in_use_ = false;
};

// One step's output while streaming.
struct StreamStep {
    std::string text;
    std::vector<int32_t> tokens;
    bool is_last = false;
};

// engine.stream(): a Python iterator that advances one sequence (id 0) by one engine step per __next__.
class Stream {
public:
    Stream(py::object engine, const std::string& prompt, const py::kwargs& kwargs)
        : engine_object_(std::move(engine)), engine_(engine_object_.cast<Engine&>()) {
        DecodingRequest request = decoding_request(kwargs, engine_.decoder().target());
        if (request.trace) throw Error("stream records no trace: use generate(..., trace=True)");
        use_.emplace(engine_);
        sequence_ = engine_.decoder().start(0, prompt, std::move(request.generation));
    }

    StreamStep next() {
        if (sequence_->finished()) throw py::stop_iteration();
        StreamStep out;
        Sequence* const sequences[] = {&*sequence_};
        {
            py::gil_scoped_release released;
            engine_.decoder().step(sequences, [&out](const StepResult& step) {
                out.text = std::string(step.text);
                out.tokens.assign(step.tokens.begin(), step.tokens.end());
                out.is_last = step.is_last;
                return false;
            });
        }
        if (sequence_->finished()) use_.reset();
        return out;
    }

    // The whole generation (text, tokens, stop reason, stats) once the iterator is exhausted.
    Generation result() const {
        if (!sequence_->finished()) throw Error("the stream has not finished: iterate it to the end first");
        return Generation{sequence_->result(), std::nullopt};
    }

private:
    py::object engine_object_;  // keeps the engine alive while its sequence is
    Engine& engine_;
    std::optional<Engine::Use> use_;  // from start to the last step, or until the stream is dropped
    std::optional<Sequence> sequence_;
};

const char* knob_name(Knob knob) {
    switch (knob) {
        case Knob::Refused:
            return "refused";
        case Knob::Optional:
            return "optional";
        case Knob::Required:
            return "required";
    }
    return "unknown";
}

// The judge rules and which knobs each takes (core/judge_factory.h).
py::list rules() {
    py::list out;
    for (const JudgeRule& rule : judge_rules()) {
        out.append(py::dict(py::arg("name") = std::string(rule.name), py::arg("summary") = std::string(rule.summary),
                            py::arg("threshold") = knob_name(rule.threshold), py::arg("topk") = knob_name(rule.topk),
                            py::arg("head") = knob_name(rule.head), py::arg("window") = knob_name(rule.window),
                            py::arg("divergence") = knob_name(rule.divergence)));
    }
    return out;
}

constexpr const char* kDecodingArguments =
    "Keyword arguments (defaults as `klspec generate`): judge='vanilla', threshold, topk, max_tv, window, "
    "divergence (fsd: 'kl', 'reverse-kl', 'js'), confidence_mask (0.9), head (the autojudge head file), "
    "judge_span='all' ('until:STRING', 'think', "
    "'think:OPEN,CLOSE': where the rule may relax), max_tokens=128, draft_max=16, draft_min=0, "
    "draft_p_min=0.0, draft_policy='auto' ('fixed', 'adaptive', 'off'), temperature=0.0, top_k=0, top_p=1.0, "
    "seed=0, stop=[...], logprobs (top alternatives per token, 0..20), trace=False (result.trace: the judged "
    "positions as numpy arrays).";

}  // namespace
}  // namespace klspec

PYBIND11_MODULE(_klspec, m) {
    using namespace klspec;
    m.doc() = "klspec: judge decoding (speculative decoding with a relaxing judge) over llama.cpp";
    py::register_exception<Error>(m, "Error", PyExc_RuntimeError);

    py::class_<GenerationStats>(m, "Stats", "Counters and timings of one generation")
        .def_readonly("prompt_tokens", &GenerationStats::prompt_tokens)
        .def_readonly("prompt_cached_tokens", &GenerationStats::prompt_cached_tokens)
        .def_readonly("emitted", &GenerationStats::emitted)
        .def_readonly("target_calls", &GenerationStats::target_calls)
        .def_readonly("draft_calls", &GenerationStats::draft_calls)
        .def_readonly("drafted", &GenerationStats::drafted)
        .def_readonly("accepted", &GenerationStats::accepted)
        .def_readonly("relaxed_accepted", &GenerationStats::relaxed_accepted)
        .def_readonly("target_only_steps", &GenerationStats::target_only_steps)
        .def_readonly("outside_span", &GenerationStats::outside_span, "tokens emitted outside the judge span")
        .def_readonly("span_blocked", &GenerationStats::span_blocked,
                      "positions outside the judge span that the rule would have relaxed")
        .def_readonly("prompt_seconds", &GenerationStats::prompt_seconds)
        .def_readonly("llama_decode_seconds", &GenerationStats::llama_decode_seconds)
        .def_property_readonly("decode_seconds", &GenerationStats::decode_seconds)
        .def_property_readonly("mat", &GenerationStats::mat, "mean accepted tokens per target call")
        .def_property_readonly("acceptance_rate", &GenerationStats::acceptance_rate)
        .def_property_readonly("mean_draft_length", &GenerationStats::mean_draft_length)
        .def_property_readonly("tokens_per_second", &GenerationStats::tokens_per_second)
        .def("__repr__", [](const GenerationStats& s) {
            return fmt::format(
                "Stats(emitted={}, target_calls={}, mat={:.3f}, drafted={}, accepted={}, relaxed_accepted={}, "
                "tokens_per_second={:.1f})",
                s.emitted, s.target_calls, s.mat(), s.drafted, s.accepted, s.relaxed_accepted, s.tokens_per_second());
        });

    py::class_<Generation>(m, "Result", "One generation: text, tokens, stop reason, stats (and trace, logprobs)")
        .def_property_readonly("text", [](const Generation& g) { return to_text(g.result.text); })
        .def_property_readonly("tokens", [](const Generation& g) { return g.result.tokens; })
        .def_property_readonly("stop_reason",
                               [](const Generation& g) { return std::string(to_string(g.result.stop_reason)); })
        .def_property_readonly("stats", [](const Generation& g) { return g.result.stats; })
        .def_property_readonly(
            "logprobs", [](const Generation& g) { return logprobs_list(g.result.logprobs); },
            "per token: {'token', 'logprob', 'top': [(token, logprob), ...]} (with logprobs=N)")
        .def_property_readonly(
            "trace",
            [](const Generation& g) -> py::object {
                if (!g.trace) return py::none();
                return g.trace->arrays();
            },
            "with trace=True: a dict of numpy arrays, one entry per judged position")
        .def("__repr__", [](const Generation& g) {
            return fmt::format("Result(stop_reason='{}', tokens={})", to_string(g.result.stop_reason),
                               g.result.tokens.size());
        });

    py::class_<StreamStep>(m, "StreamStep", "What one engine step emitted")
        .def_property_readonly("text", [](const StreamStep& s) { return to_text(s.text); })
        .def_readonly("tokens", &StreamStep::tokens)
        .def_readonly("is_last", &StreamStep::is_last);

    py::class_<Stream>(m, "Stream", "Iterates a generation step by step (engine.stream)")
        .def(
            "__iter__", [](Stream& s) -> Stream& { return s; }, py::return_value_policy::reference_internal)
        .def("__next__", &Stream::next)
        .def_property_readonly("result", &Stream::result);

    py::class_<Engine>(m, "Engine", "A target model, an optional draft model, and a decoder over them")
        .def(py::init([](const std::string& target, const std::optional<std::string>& draft, int32_t threads,
                         int32_t threads_draft, int32_t ctx, int32_t batch, int32_t parallel, bool hidden_states,
                         std::optional<int32_t> gpu_layers, bool verbose) {
                 ContextOptions context;
                 context.n_threads = threads;
                 context.n_threads_draft = threads_draft;
                 context.n_ctx = ctx;
                 context.n_batch = batch;
                 context.n_sequences = parallel;
                 context.hidden_states = hidden_states;
                 ModelOptions model;
                 model.gpu_layers = gpu_layers;
                 return std::make_unique<Engine>(target, draft, context, model, verbose);
             }),
             py::arg("target"), py::arg("draft") = py::none(), py::arg("threads") = 0, py::arg("threads_draft") = 0,
             py::arg("ctx") = ContextOptions{}.n_ctx, py::arg("batch") = ContextOptions{}.n_batch,
             py::arg("parallel") = 1, py::arg("hidden_states") = false, py::arg("gpu_layers") = py::none(),
             py::arg("verbose") = false,
             "Loads the models (GGUF paths). threads=0: all hardware threads; parallel: sequences generate_batch "
             "decodes "
             "together (-np); hidden_states: forward(hidden=True) and the autojudge rule need them.")
        .def("generate", &Engine::generate, py::arg("prompt"),
             (std::string("Generates a continuation of the prompt; returns a Result. ") + kDecodingArguments).c_str())
        .def("generate_batch", &Engine::generate_batch, py::arg("prompts"),
             (std::string("Decodes the prompts together over the engine's `parallel` sequences (continuous batching); "
                          "returns one Result per prompt, in order. ") +
              kDecodingArguments)
                 .c_str())
        .def(
            "stream",
            [](py::object self, const std::string& prompt, const py::kwargs& kwargs) {
                return std::make_unique<Stream>(std::move(self), prompt, kwargs);
            },
            py::arg("prompt"),
            (std::string("Iterates the generation one engine step at a time (StreamStep: text, tokens, is_last); the "
                         "iterator's .result then holds the whole Result. Uses sequence 0. ") +
             kDecodingArguments)
                .c_str())
        .def("forward", &Engine::forward, py::arg("tokens"), py::arg("hidden") = false, py::arg("model") = "target",
             "Teacher-forced logits (n_tokens x n_vocab numpy array) of the tokens; with hidden=True a tuple (logits, "
             "hidden states n_tokens x n_embd), which needs Engine(hidden_states=True). model: 'target' or 'draft'.")
        .def("tokenize", &Engine::tokenize, py::arg("text"), py::arg("add_bos") = true,
             py::arg("parse_special") = false, "The target's tokens of the text")
        .def(
            "detokenize",
            [](const Engine& e, const std::vector<int32_t>& tokens) { return to_text(e.detokenize(tokens)); },
            py::arg("tokens"), "The text of generated tokens (end-of-generation tokens left out)")
        .def_property_readonly("n_vocab", [](const Engine& e) { return e.target().n_vocab(); })
        .def_property_readonly("n_embd", [](const Engine& e) { return e.target().n_embd(); })
        .def_property_readonly("has_draft", &Engine::has_draft);

    m.def("rules", &rules,
          "The judge rules: name, summary, and whether each takes threshold, topk, head, window and divergence");
}
