// The engine's verify pass: one ModelContext::decode of b tokens (every row output, as verification
// needs) after a 48-token prefix, rolled back after each pass, for b = 1..17, against b single-token
// decodes. "Same" repeats one batch shape, so llama.cpp can reuse its compute graph; "Alternating"
// interleaves a 1-token decode, as the speculative loop does, so every verify rebuilds the graph.
//
//   verify_cost_benchmark [--model GGUF] [Google Benchmark flags]
// Default model: the project's default target (models/testbed-target.gguf). One thread.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/model.h"

namespace {

std::string g_model_path = KLSPEC_SOURCE_DIR "/models/testbed-target.gguf";
constexpr int32_t kPrefix = 48;

struct Setup {
    Setup() : model(g_model_path) {
        klspec::ContextOptions options;
        options.n_ctx = 256;
        options.n_threads = 1;
        context = std::make_unique<klspec::ModelContext>(model, options);
        std::vector<int32_t> prefix(kPrefix);
        for (int32_t i = 0; i < kPrefix; ++i) prefix[static_cast<size_t>(i)] = 100 + i;
        context->prefill(0, prefix, 0);
    }
    klspec::Model model;
    std::unique_ptr<klspec::ModelContext> context;
    klspec::Batch batch{64};
};

Setup& setup() {
    static Setup instance;
    return instance;
}

void decode_tokens(Setup& s, int32_t n) {
    s.batch.clear();
    for (int32_t i = 0; i < n; ++i) s.batch.add(200 + i, kPrefix + i, 0, true);
    s.context->decode(s.batch);
    s.context->truncate(0, kPrefix);
}

void BM_VerifySame(benchmark::State& state) {
    Setup& s = setup();
    const int32_t b = static_cast<int32_t>(state.range(0));
    for (auto _ : state) decode_tokens(s, b);
    state.counters["tokens/s"] = benchmark::Counter(double(b), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_VerifyAlternating(benchmark::State& state) {
    Setup& s = setup();
    const int32_t b = static_cast<int32_t>(state.range(0));
    for (auto _ : state) {
        state.PauseTiming();
        decode_tokens(s, b == 1 ? 2 : 1);  // another shape in between, as a draft-then-verify loop has
        state.ResumeTiming();
        decode_tokens(s, b);
    }
}

}  // namespace

BENCHMARK(BM_VerifySame)->DenseRange(1, 17)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_VerifyAlternating)->DenseRange(1, 17)->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--model") == 0) {
            g_model_path = argv[i + 1];
            for (int j = i; j + 2 <= argc; ++j) argv[j] = argv[j + 2];
            argc -= 2;
            break;
        }
    }
    klspec::set_llama_verbose(false);
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
