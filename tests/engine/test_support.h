// Paths and prompts shared by the model-based tests (stories260K and drafts quantized from it, and the
// project's default pair).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "build_paths.h"
#include "engine/context.h"
#include "engine/model.h"
#include "temp_directory.h"

namespace klspec::test {

inline const std::string kTargetModel = build_paths::stories_gguf;
inline const std::string kDraftQ8 = std::string(build_paths::model_dir) + "/stories260K-q8_0.gguf";
inline const std::string kDraftQ4 = std::string(build_paths::model_dir) + "/stories260K-q4_0.gguf";
inline const std::string kCli = build_paths::cli;
// The project's default pair and its test problems (tools/testbed).
inline const std::string kDefaultTarget = std::string(build_paths::source_dir) + "/models/testbed-target.gguf";
inline const std::string kDefaultDraft = std::string(build_paths::source_dir) + "/models/testbed-draft.gguf";
// data/testbed_<family>_test.jsonl for family word, choice or trace.
inline std::string testbed_test_set(const std::string& family) {
    return std::string(build_paths::source_dir) + "/data/testbed_" + family + "_test.jsonl";
}
inline const std::string kWordTestSet = testbed_test_set("word");

// How the tests load models: on the CPU, or with KLSPEC_TEST_GPU_LAYERS=N in the environment (the `gpu`
// label, scripts/test-gpu.sh) with N layers offloaded to the build's GPU backend. Every model-based test that
// should hold on any backend loads through these.
ModelOptions offload();
// The same as `klspec` arguments: none, or "-ngl" "N".
std::vector<std::string> offload_args();

// The first `count` of 25 story openings.
std::vector<std::string> story_prompts(size_t count);
// The first `count` GSM8K test questions, or none when ../shared/datasets is absent (a user's clone):
// tests that need them skip and say so.
std::vector<std::string> gsm8k_prompts(size_t count);
inline const char* const kNoSharedDatasets = "../shared/datasets/gsm8k/test.jsonl is absent: GSM8K prompts skipped";

struct CommandResult {
    int exit_code = 0;
    std::string output;  // stdout: what --json and the results go to
    std::string errors;  // stderr: errors, logs, progress (its timing varies with the machine's speed)
};
// Runs a shell command line and captures its two streams apart: a test parses the one it reads.
CommandResult run_command(const std::string& command_line);

// A file's bytes ("" when it cannot be read).
std::string read_file(const std::string& path);

// stories260K with a ChatML chat template in its metadata (a fresh copy under the temporary directory).
std::string stories_with_chat_template();

// The greedy guarantee with llamafile's sgemm (on by default): a batch of tokens and a single token sum
// their dot products in different orders, so verification logits differ from target-only logits in the
// last bits, and where the top two are that close the argmax may flip. Speculative (or -np) output must
// therefore equal target-only output token for token, except that it may leave it at a position where
// the target-only logits' top-2 gap is below kNearTieGap (logit units). A flip needs a gap below twice
// the largest difference of a logit between the two paths, and test_lossless.cpp checks that difference
// stays below half the bound on both test models.
inline constexpr float kNearTieGap = 0.1f;  // the two tokens' probabilities within e^0.1 = 1.105x
// On a GPU backend (docs/gpu.md) batched and single-token logits come from different kernels that keep
// products in half precision: on lavapipe they differ by up to 0.20 on the F16 default target (and a GPU's
// logits from the CPU's as much), so the guarantee there holds at this looser gap (probabilities within 1.65x).
inline constexpr float kGpuNearTieGap = 0.5f;
// Whether KLSPEC_TEST_GPU_LAYERS offloads layers to a GPU backend.
bool offloaded();
// The gap of the backend the tests run on: kGpuNearTieGap where layers are offloaded, else kNearTieGap.
float near_tie_gap();

// Target-only greedy decoding done by hand as the decoder does it (the prompt but its last token
// prefilled, then one token per llama_decode), keeping each step's top-2 logit gap.
struct GreedyReference {
    std::vector<int32_t> tokens;  // generated tokens, the end-of-generation token excluded
    std::vector<float> top2_gap;  // gap of the logits that chose tokens[i] (one more when it ended at EOG)
    std::vector<float> logits;    // those logits, one n_vocab row per entry of top2_gap
};
GreedyReference greedy_reference(const Model& target, const std::string& prompt, int32_t max_tokens,
                                 const ContextOptions& context);
// The same from prompt tokens (BOS included where the model adds one).
GreedyReference greedy_reference(const Model& target, std::vector<int32_t> prompt_tokens, int32_t max_tokens,
                                 const ContextOptions& context);

// The basis of the near-tie bound: the largest difference of a logit between teacher-forced batched
// logits (how verification computes them) and one-token-at-a-time logits (target-only decoding), over
// `tokens` greedy tokens after each prompt. Below kNearTieGap / 2, the argmax can flip only at a near tie.
double max_batch_single_difference(const std::string& model_path, const std::vector<std::string>& prompts,
                                   int32_t tokens, const ContextOptions& context,
                                   const ModelOptions& model = offload());
// The same at each verification batch size (ContextOptions::n_batch), one difference a size, with the model loaded
// and the one-token reference decoded once (its prompt prefilled in batches of the last size). The verification
// side's prompt cells are prefilled once, in batches of the first size, and loaded for each size.
std::vector<double> max_batch_single_differences(const std::string& model_path, const std::vector<std::string>& prompts,
                                                 int32_t tokens, const ContextOptions& context,
                                                 const ModelOptions& model, const std::vector<int32_t>& batch_sizes);

// Where `tokens` first leaves `reference.tokens` (-1: equal). Fails the test when that position is not
// a near tie of the reference's logits (top-2 gap below `gap`); `divergences` counts the accepted ones.
int64_t check_equal_up_to_near_tie(const GreedyReference& reference, const std::vector<int32_t>& tokens,
                                   const std::string& label, int64_t& divergences, float gap = near_tie_gap());

// The judge span's guarantee, checked from outside the engine: teacher-forced over prompt + `tokens`, of the
// tokens that `outside(text so far)` puts outside the span, how many are not the target's own greedy choice
// (its argmax, up to a near tie: a forward pass's logits differ from a verification batch's in the last bits).
struct SpanCheck {
    int outside = 0;
    int not_target_choice = 0;
};
SpanCheck check_outside_span(const Model& target, const std::string& prompt, const std::vector<int32_t>& tokens,
                             const std::function<bool(const std::string&)>& outside, const ContextOptions& context);

}  // namespace klspec::test
