// Prints llama.cpp's prompt token ids and the last position's logits (one per line) for a GGUF model,
// to compare an export against the PyTorch model (evaluate.py --dump-logits). Build:
//   g++ -O2 -std=c++17 dump_logits.cpp -I$D/install/include -L$D/install/lib -Wl,-rpath,$D/install/lib -lllama -o
//   dump_logits
#include <cstdio>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT\n", argv[0]);
        return 1;
    }
    llama_backend_init();
    llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) return 1;
    const llama_vocab* vocab = llama_model_get_vocab(model);
    std::string prompt = argv[2];
    int n = -llama_tokenize(vocab, prompt.c_str(), prompt.size(), nullptr, 0, true, true);
    std::vector<llama_token> toks(n);
    llama_tokenize(vocab, prompt.c_str(), prompt.size(), toks.data(), n, true, true);
    fprintf(stderr, "prompt ids:");
    for (llama_token t : toks) fprintf(stderr, " %d", t);
    fprintf(stderr, "\n");

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n + 8;
    cp.n_batch = n;
    cp.n_threads = 1;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (llama_decode(ctx, llama_batch_get_one(toks.data(), n))) return 1;
    const float* logits = llama_get_logits_ith(ctx, -1);
    for (int i = 0; i < llama_vocab_n_tokens(vocab); i++) printf("%.6f\n", logits[i]);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
