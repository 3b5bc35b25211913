// Loading a target whose verification batches give one-token decoding's logits bit for bit.
#pragma once

#include <memory>
#include <string>

#include "engine/context.h"
#include "engine/model.h"

namespace klspec {

// Some forty tokens of code that the kernel checks decode: load_target's batch probe and --repack-prompt's check
// (SpeculativeDecoder::use_repacked_prompts).
inline constexpr const char* kKernelProbeText =
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n"
    "    for _ in range(n):\n        a, b = b, a + b\n    return a\n";

// The largest difference between the logits of a short probe decoded as one batch and one token at a time, in a
// scratch context of `options` (0: the model's kernels are batch-invariant here). ggml's repacked kernels take a
// batch's rows in fours and the rest one by one; the probe's twelve rows go through the first, its single tokens
// through the second.
float batch_logit_difference(const Model& model, const ContextOptions& options);

// The target at `path`. Repacked (ModelOptions::repack, the default), its batches are exact only where ggml's
// repacked kernels are: the x86 ones of klspec's patched ggml (scripts/patches/). Where the probe above finds a
// difference (another CPU, a llama.cpp of one's own), it loads the target again unrepacked, whose kernels are
// exact everywhere, and says why in `fallback` (left empty otherwise).
std::unique_ptr<Model> load_target(const std::string& path, const ModelOptions& options, const ContextOptions& context,
                                   std::string& fallback);

}  // namespace klspec
