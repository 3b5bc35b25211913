// Greedy decoding trace of a GGUF model with llama.cpp, for bench/grown_target/test_grow_target.py: the prompt's token
// ids, then one line per generated token: the token id, the gap between the top two logits, and (with
// --logits) every logit of that step. Stops after N tokens or at an end-of-generation token.
//
//   greedy_trace MODEL.gguf N_PREDICT THREADS PROMPT [--logits]
//
// Output (stdout):  "prompt ID ID ..."  then  "step TOKEN GAP [LOGIT ...]"  per token, then "end eog|n".
// Built by bench/CMakeLists.txt; standalone:
//   g++ -O2 -std=c++17 greedy_trace.cpp -I$P/include -L$P/lib -Wl,-rpath,$P/lib -lllama -o greedy_trace
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"

static void quiet_log(ggml_log_level level, const char* text, void*) {
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char** argv) {
    if (argc != 5 && !(argc == 6 && std::strcmp(argv[5], "--logits") == 0)) {
        fprintf(stderr, "usage: %s MODEL.gguf N_PREDICT THREADS PROMPT [--logits]\n", argv[0]);
        return 2;
    }
    const int n_predict = std::atoi(argv[2]);
    const int n_threads = std::atoi(argv[3]);
    const std::string prompt = argv[4];
    const bool all_logits = argc == 6;

    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "greedy_trace: cannot load %s\n", argv[1]);
        return 1;
    }
    const llama_vocab* vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    int n = -llama_tokenize(vocab, prompt.c_str(), (int)prompt.size(), nullptr, 0, true, true);
    std::vector<llama_token> toks(n);
    if (llama_tokenize(vocab, prompt.c_str(), (int)prompt.size(), toks.data(), n, true, true) < 0) return 1;
    printf("prompt");
    for (llama_token t : toks) printf(" %d", t);
    printf("\n");

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n + n_predict + 8);
    cp.n_batch = (uint32_t)n;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;

    llama_batch batch = llama_batch_get_one(toks.data(), n);
    llama_token tok = 0;
    bool eog = false;
    for (int i = 0; i < n_predict; i++) {
        if (llama_decode(ctx, batch)) {
            fprintf(stderr, "greedy_trace: decode failed\n");
            return 1;
        }
        const float* lg = llama_get_logits_ith(ctx, -1);
        int best = 0;
        for (int v = 1; v < n_vocab; v++)
            if (lg[v] > lg[best]) best = v;
        float second = -1e30f;
        for (int v = 0; v < n_vocab; v++)
            if (v != best && lg[v] > second) second = lg[v];
        printf("step %d %.6g", best, (double)(lg[best] - second));
        if (all_logits)
            for (int v = 0; v < n_vocab; v++) printf(" %.6g", (double)lg[v]);
        printf("\n");
        tok = best;
        if (llama_vocab_is_eog(vocab, tok)) {
            eog = true;
            break;
        }
        batch = llama_batch_get_one(&tok, 1);
    }
    printf("end %s\n", eog ? "eog" : "n");
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
