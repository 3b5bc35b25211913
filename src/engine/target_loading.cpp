#include "engine/target_loading.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <gguf.h>

#include "core/distribution_stats.h"

namespace klspec {

namespace {

// Three groups of four rows, past the 8 rows from which a ggml built with AVX512-FP16 gave an AMX Xeon's repacked
// batches rows of zeros (half-precision attention scores; scripts/build-llama.sh now builds without it).
constexpr size_t kProbeRows = 12;

// Whether the file holds weights of a type that ggml repacks for some CPU (ggml-cpu/repack.cpp); an F16 or F32
// model loads the same either way, so the probe has nothing to tell.
bool has_repackable_weights(const std::string& path) {
    gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
    gguf_context* gguf = gguf_init_from_file(path.c_str(), params);
    if (gguf == nullptr) return false;  // the loader has read it already; nothing to decide here
    bool found = false;
    for (int64_t i = 0; i < gguf_get_n_tensors(gguf) && !found; ++i) {
        switch (gguf_get_tensor_type(gguf, i)) {
            case GGML_TYPE_Q4_0:
            case GGML_TYPE_Q4_K:
            case GGML_TYPE_Q5_K:
            case GGML_TYPE_Q6_K:
            case GGML_TYPE_Q2_K:
            case GGML_TYPE_Q8_0:
            case GGML_TYPE_IQ4_NL:
            case GGML_TYPE_MXFP4:
                found = true;
                break;
            default:
                break;
        }
    }
    gguf_free(gguf);
    return found;
}

}  // namespace

float batch_logit_difference(const Model& model, const ContextOptions& options) {
    std::vector<int32_t> probe = model.tokenize(kKernelProbeText, /*add_bos=*/true);
    probe.resize(std::min(probe.size(), kProbeRows));
    ContextOptions scratch = options;
    scratch.n_sequences = 1;
    scratch.n_ctx = 64;
    scratch.hidden_states = false;
    ModelContext ctx(model, scratch);
    std::vector<std::vector<float>> batched(probe.size());
    ctx.forward_rows(0, probe, 0, [&](size_t i, int32_t row) {
        const std::span<const float> logits = ctx.logits(row);
        batched[i].assign(logits.begin(), logits.end());
    });
    ctx.truncate(0, 0);
    float largest = 0;
    for (size_t i = 0; i < probe.size(); ++i) {
        ctx.forward_rows(0, std::span(probe).subspan(i, 1), static_cast<int32_t>(i), [&](size_t, int32_t row) {
            largest = std::max(largest, max_abs_difference(ctx.logits(row), batched[i]));
        });
    }
    return largest;
}

std::unique_ptr<Model> load_target(const std::string& path, const ModelOptions& options, const ContextOptions& context,
                                   std::string& fallback) {
    fallback.clear();
    auto target = std::make_unique<Model>(path, options);
    if (!target->repacked() || options.vocab_only || !has_repackable_weights(path)) return target;
    const float difference = batch_logit_difference(*target, context);
    if (difference == 0) return target;
    fallback = fmt::format(
        "this CPU's repacked kernels give a batch's rows other logits than one-token decoding "
        "(up to {:.3g} apart): the target loads unrepacked, so that speculative output stays "
        "target-only output (--no-repack says so; docs/repacked-kernels.md)",
        difference);
    ModelOptions unrepacked = options;
    unrepacked.repack = false;
    target.reset();
    return std::make_unique<Model>(path, unrepacked);
}

}  // namespace klspec
