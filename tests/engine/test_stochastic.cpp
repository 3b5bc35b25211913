// A seed fixes the output of stochastic speculative decoding. (That it samples from the target's
// distribution is checked with temperature, top-k and top-p under batching in test_step.cpp.)
#include <gtest/gtest.h>

#include "engine/speculative_decoder.h"
#include "test_support.h"

namespace klspec {
namespace {

ContextOptions test_context() {
    ContextOptions options;
    options.n_ctx = 256;
    options.n_threads = 1;
    return options;
}

GenerationOptions sampled(uint64_t seed, int32_t max_tokens) {
    GenerationOptions options;
    options.max_tokens = max_tokens;
    options.draft_max = 4;
    options.sampling.temperature = 1.0f;
    options.sampling.seed = seed;
    return options;
}

TEST(Stochastic, SameSeedSameOutput) {
    const Model target(test::kTargetModel);
    const Model draft(test::kDraftQ4);
    SpeculativeDecoder decoder(target, &draft, test_context());
    const GenerationResult a = decoder.generate("Once upon a time", sampled(7, 64));
    const GenerationResult b = decoder.generate("Once upon a time", sampled(7, 64));
    const GenerationResult c = decoder.generate("Once upon a time", sampled(8, 64));
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_NE(a.tokens, c.tokens) << "different seeds gave the same 64 tokens";
}

}  // namespace
}  // namespace klspec
