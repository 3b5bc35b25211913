// llama.cpp's own sampler chain, cost per sampled token on one logit row of a large vocabulary: the
// reference that issue 8's "Real vocabularies" goal compares the engine's per-drafted-token cost with.
//
// Chains (exactly as llama.cpp builds them, one chain per benchmark, created once):
//   greedy       llama_sampler_init_greedy()
//   top_p_temp   llama_sampler_init_top_p(0.9, 1), llama_sampler_init_temp(0.7), llama_sampler_init_dist(seed)
//                (top-p before temperature: the order of llama.cpp's common sampler)
//   temp_top_p   llama_sampler_init_temp(0.7), llama_sampler_init_top_p(0.9, 1), llama_sampler_init_dist(seed)
//                (the same knobs with top-p taken on logits / T; shown for comparison only)
//
// Two ways of running them:
//   BM_Apply/<chain>/<logits>   what llama_sampler_sample() does per token, on a logit row we hold:
//       fill a preallocated llama_token_data[V] from the row, llama_sampler_apply, read `selected`,
//       llama_sampler_accept. <logits> is
//         peaked  V draws of N(0, 2²) (std::mt19937 seed 1234), then 8 entries at ids drawn from the same
//                 generator set to 16, 15.5, ..., 12.5 (a confident LM step: at T = 1 the 8 hold ~96 % of
//                 the mass, top-p 0.9 keeps a handful of tokens)
//         model   the last-position logits of one decode of the GGUF given with --model (a random-weight
//                 synthetic model gives a nearly flat row: the worst case for top-p, which then sorts
//                 most of the vocabulary)
//   BM_Sample/<chain>           llama_sampler_sample(chain, ctx, -1) on a context that holds that decode's
//                               logits: llama.cpp's real per-token path (needs --model).
// BM_Fill measures the copy into llama_token_data alone. Counters: V, and `kept`, the candidates left
// after the chain's filters on the last iteration.
//
//   sampler_chain_benchmark [--model SYNTH.gguf] [Google Benchmark flags]
// The model is made by bench/costs/make_synthetic_gguf.py (e.g. --dim 256 --layers 2 --vocab 128256). Without
// --model, V defaults to 128256 for the peaked row and the model-based benchmarks are not registered.
#include <benchmark/benchmark.h>

#include "llama.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kDefaultVocab = 128256;
constexpr uint32_t kSeed = 42;

enum class Chain { greedy, top_p_temp, temp_top_p };

const char* chain_name(Chain c) {
    switch (c) {
        case Chain::greedy:
            return "greedy";
        case Chain::top_p_temp:
            return "top_p0.9_temp0.7_dist";
        case Chain::temp_top_p:
            return "temp0.7_top_p0.9_dist";
    }
    return "?";
}

llama_sampler* make_chain(Chain c) {
    llama_sampler* chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    switch (c) {
        case Chain::greedy:
            llama_sampler_chain_add(chain, llama_sampler_init_greedy());
            break;
        case Chain::top_p_temp:
            llama_sampler_chain_add(chain, llama_sampler_init_top_p(0.9f, 1));
            llama_sampler_chain_add(chain, llama_sampler_init_temp(0.7f));
            llama_sampler_chain_add(chain, llama_sampler_init_dist(kSeed));
            break;
        case Chain::temp_top_p:
            llama_sampler_chain_add(chain, llama_sampler_init_temp(0.7f));
            llama_sampler_chain_add(chain, llama_sampler_init_top_p(0.9f, 1));
            llama_sampler_chain_add(chain, llama_sampler_init_dist(kSeed));
            break;
    }
    return chain;
}

std::vector<float> peaked_logits(int n_vocab) {
    std::mt19937 gen(1234);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> logits(n_vocab);
    for (float& x : logits) x = normal(gen);
    std::uniform_int_distribution<int> pick(0, n_vocab - 1);
    for (int j = 0; j < 8; ++j) logits[pick(gen)] = 16.0f - 0.5f * static_cast<float>(j);
    return logits;
}

struct ModelState {
    llama_model* model = nullptr;
    llama_context* ctx = nullptr;
    std::vector<float> logits;  // copy of the last decode's last-position row
};

ModelState g_model;
std::vector<float> g_peaked;

void quiet_log(ggml_log_level level, const char* text, void*) {
    if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

bool load_model(const std::string& path) {
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    g_model.model = llama_model_load_from_file(path.c_str(), mp);
    if (!g_model.model) return false;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 64;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    g_model.ctx = llama_init_from_model(g_model.model, cp);
    if (!g_model.ctx) return false;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(g_model.model));
    // BOS then a few ordinary ids: any token sequence gives a logit row of the model's shape.
    std::vector<llama_token> prompt = {1, 300, 301, 302, 303, 304, 305, 306};
    for (auto& t : prompt) t = std::min<llama_token>(t, n_vocab - 1);
    if (llama_decode(g_model.ctx, llama_batch_get_one(prompt.data(), static_cast<int32_t>(prompt.size()))) != 0) {
        return false;
    }
    const float* row = llama_get_logits_ith(g_model.ctx, -1);
    g_model.logits.assign(row, row + n_vocab);
    return true;
}

void BM_Fill(benchmark::State& state, const std::vector<float>* logits) {
    const int n = static_cast<int>(logits->size());
    std::vector<llama_token_data> cur(n);
    for (auto _ : state) {
        for (llama_token i = 0; i < n; ++i) cur[i] = llama_token_data{i, (*logits)[i], 0.0f};
        benchmark::DoNotOptimize(cur.data());
        benchmark::ClobberMemory();
    }
    state.counters["V"] = n;
}

void BM_Apply(benchmark::State& state, Chain c, const std::vector<float>* logits) {
    const int n = static_cast<int>(logits->size());
    llama_sampler* chain = make_chain(c);
    std::vector<llama_token_data> cur(n);
    size_t kept = 0;
    for (auto _ : state) {
        for (llama_token i = 0; i < n; ++i) cur[i] = llama_token_data{i, (*logits)[i], 0.0f};
        llama_token_data_array arr{cur.data(), cur.size(), -1, false};
        llama_sampler_apply(chain, &arr);
        if (arr.selected < 0 || arr.selected >= static_cast<int64_t>(arr.size)) {
            state.SkipWithError("sampler chain selected no token");
            break;
        }
        const llama_token token = arr.data[arr.selected].id;
        llama_sampler_accept(chain, token);
        benchmark::DoNotOptimize(token);
        kept = arr.size;
    }
    state.counters["V"] = n;
    state.counters["kept"] = static_cast<double>(kept);
    llama_sampler_free(chain);
}

void BM_Sample(benchmark::State& state, Chain c) {
    llama_sampler* chain = make_chain(c);
    for (auto _ : state) {
        const llama_token token = llama_sampler_sample(chain, g_model.ctx, -1);
        benchmark::DoNotOptimize(token);
    }
    state.counters["V"] = static_cast<double>(g_model.logits.size());
    llama_sampler_free(chain);
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path;
    std::vector<char*> rest;
    for (int i = 0; i < argc; ++i) {
        if (std::strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            model_path = argv[++i];
        } else if (std::strncmp(argv[i], "--model=", 8) == 0) {
            model_path = argv[i] + 8;
        } else {
            rest.push_back(argv[i]);
        }
    }
    int rest_argc = static_cast<int>(rest.size());

    llama_log_set(quiet_log, nullptr);
    llama_backend_init();

    int n_vocab = kDefaultVocab;
    if (!model_path.empty()) {
        if (!load_model(model_path)) {
            std::fprintf(stderr, "sampler_chain_benchmark: cannot load or decode %s\n", model_path.c_str());
            return 1;
        }
        n_vocab = static_cast<int>(g_model.logits.size());
    }
    g_peaked = peaked_logits(n_vocab);

    const Chain chains[] = {Chain::greedy, Chain::top_p_temp, Chain::temp_top_p};
    benchmark::RegisterBenchmark("BM_Fill/peaked", BM_Fill, &g_peaked);
    for (Chain c : chains) {
        benchmark::RegisterBenchmark((std::string("BM_Apply/") + chain_name(c) + "/peaked").c_str(), BM_Apply, c,
                                     &g_peaked);
    }
    if (g_model.ctx) {
        for (Chain c : chains) {
            benchmark::RegisterBenchmark((std::string("BM_Apply/") + chain_name(c) + "/model").c_str(), BM_Apply, c,
                                         &g_model.logits);
        }
        for (Chain c : chains) {
            benchmark::RegisterBenchmark((std::string("BM_Sample/") + chain_name(c) + "/model").c_str(), BM_Sample, c);
        }
    }

    benchmark::Initialize(&rest_argc, rest.data());
    if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();

    if (g_model.ctx) llama_free(g_model.ctx);
    if (g_model.model) llama_model_free(g_model.model);
    llama_backend_free();
    return 0;
}
