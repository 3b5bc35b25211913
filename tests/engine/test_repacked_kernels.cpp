// ggml's repacked CPU kernels, on synthetic weights: a matrix product over a batch of rows gives each row what it
// gives that row alone, bit for bit, for any batch size. This is what makes klspec's default (repacked targets)
// exact: a verification batch then computes one-token decoding's logits. The pinned ggml's x86 four-row Q4_K
// kernel scaled each 64 values where the one-row kernel scales each 256 (up to 5e-6 apart here, 0.6 in the real
// target's logits); scripts/patches/ggml-repack-q4k-batch-invariant.patch makes them agree.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml.h>

namespace {

// The CPU device's "CPU_REPACK" buffer type (llama.cpp's use_extra_bufts), or null where this build has none.
ggml_backend_buffer_type_t repack_buffer_type(ggml_backend_dev_t cpu) {
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(cpu);
    using GetExtraBufts = ggml_backend_buffer_type_t* (*)(ggml_backend_dev_t);
    auto get =
        reinterpret_cast<GetExtraBufts>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
    if (get == nullptr) return nullptr;
    for (ggml_backend_buffer_type_t* buft = get(cpu); buft != nullptr && *buft != nullptr; ++buft)
        if (std::string(ggml_backend_buft_name(*buft)) == "CPU_REPACK") return *buft;
    return nullptr;
}

class RepackedKernels : public ::testing::TestWithParam<ggml_type> {
protected:
    static constexpr int64_t kInputs = 1536;  // six Q4_K superblocks: the real target's width
    static constexpr int64_t kOutputs = 72;   // 16-column groups and an 8-column rest (the kernels' two paths)

    void SetUp() override {
        cpu_ = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
        ASSERT_NE(cpu_, nullptr);
        repack_ = repack_buffer_type(cpu_);
        if (repack_ == nullptr) GTEST_SKIP() << "this ggml build has no repacked CPU kernels";
        backend_ = ggml_backend_dev_init(cpu_, nullptr);
        using SetThreads = void (*)(ggml_backend_t, int);
        auto set_threads = reinterpret_cast<SetThreads>(
            ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(cpu_), "ggml_backend_set_n_threads"));
        if (set_threads != nullptr) set_threads(backend_, 2);
        std::mt19937 rng(7);
        std::normal_distribution<float> gauss(0, 1);
        weights_.resize(kInputs * kOutputs);
        for (float& w : weights_) w = 0.05F * gauss(rng);
        inputs_.resize(kInputs * 32);
        for (float& x : inputs_) x = gauss(rng);
    }
    void TearDown() override {
        if (backend_ != nullptr) ggml_backend_free(backend_);
    }

    // W · X for the first `rows` input rows, W quantized to `type` and held in `buft` (its kernels chosen by it).
    std::vector<float> product(ggml_type type, ggml_backend_buffer_type_t buft, int64_t rows, int64_t first_row = 0) {
        ggml_init_params params{/*mem_size=*/8 * ggml_tensor_overhead() + ggml_graph_overhead(), /*mem_buffer=*/nullptr,
                                /*no_alloc=*/true};
        ggml_context* weights_ctx = ggml_init(params);
        ggml_context* ctx = ggml_init(params);
        ggml_tensor* w = ggml_new_tensor_2d(weights_ctx, type, kInputs, kOutputs);
        ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kInputs, rows);
        ggml_tensor* y = ggml_mul_mat(ctx, w, x);
        ggml_cgraph* graph = ggml_new_graph(ctx);
        ggml_build_forward_expand(graph, y);
        ggml_backend_buffer_t weights_buffer = ggml_backend_alloc_ctx_tensors_from_buft(weights_ctx, buft);
        ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors(ctx, backend_);
        std::vector<uint8_t> quantized(ggml_row_size(type, kInputs) * kOutputs);
        ggml_quantize_chunk(type, weights_.data(), quantized.data(), 0, kOutputs, kInputs, nullptr);
        ggml_backend_tensor_set(w, quantized.data(), 0, quantized.size());  // repacked here, for CPU_REPACK
        ggml_backend_tensor_set(x, inputs_.data() + first_row * kInputs, 0, ggml_nbytes(x));
        EXPECT_EQ(ggml_backend_graph_compute(backend_, graph), GGML_STATUS_SUCCESS);
        std::vector<float> out(static_cast<size_t>(kOutputs * rows));
        ggml_backend_tensor_get(y, out.data(), 0, ggml_nbytes(y));
        ggml_backend_buffer_free(buffer);
        ggml_backend_buffer_free(weights_buffer);
        ggml_free(ctx);
        ggml_free(weights_ctx);
        return out;
    }

    ggml_backend_dev_t cpu_ = nullptr;
    ggml_backend_buffer_type_t repack_ = nullptr;
    ggml_backend_t backend_ = nullptr;
    std::vector<float> weights_, inputs_;
};

TEST_P(RepackedKernels, EveryBatchSizeGivesEachRowWhatItGivesAlone) {
    const ggml_type type = GetParam();
    std::vector<std::vector<float>> alone;
    for (int64_t r = 0; r < 32; ++r) alone.push_back(product(type, repack_, 1, r));
    for (const int64_t rows : {2, 3, 4, 5, 8, 13, 16, 17, 32}) {
        const std::vector<float> batch = product(type, repack_, rows);
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t o = 0; o < kOutputs; ++o) {
                ASSERT_EQ(batch[r * kOutputs + o], alone[r][o])
                    << ggml_type_name(type) << ": row " << r << " of a batch of " << rows << ", output " << o;
            }
        }
    }
}

// The repacked products are the plain ones up to rounding: the repacking moved no weight.
TEST_P(RepackedKernels, ComputeThePlainProductUpToRounding) {
    const ggml_type type = GetParam();
    const std::vector<float> repacked = product(type, repack_, 8);
    const std::vector<float> plain = product(type, ggml_backend_dev_buffer_type(cpu_), 8);
    for (size_t i = 0; i < plain.size(); ++i)
        EXPECT_NEAR(repacked[i], plain[i], 1e-3F) << ggml_type_name(type) << " " << i;
}

INSTANTIATE_TEST_SUITE_P(Types, RepackedKernels, ::testing::Values(GGML_TYPE_Q4_K, GGML_TYPE_Q4_0),
                         [](const ::testing::TestParamInfo<ggml_type>& type) {
                             return std::string(ggml_type_name(type.param));
                         });

// Flash attention scores an F16 cache with ggml_vec_dot_f16. Built with AVX512-FP16 (Intel Sapphire Rapids and
// later), the pinned ggml sums it in half precision, and one query against one cell of 128 values of 300 overflows
// FP16's 65,504: on an AMX Xeon the repacked target's batches then gave rows of zeros (docs/repacked-kernels.md).
// scripts/build-llama.sh builds without AVX512-FP16; here the sum must be FP32's: the output is the cell's V.
class FlashAttentionScores : public ::testing::TestWithParam<ggml_type> {};

TEST_P(FlashAttentionScores, OfAnF16CacheSumInFloat32) {
    constexpr int64_t kDim = 128;
    ggml_backend_t backend = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);
    ASSERT_NE(backend, nullptr);
    ggml_init_params params{/*mem_size=*/8 * ggml_tensor_overhead() + ggml_graph_overhead(), /*mem_buffer=*/nullptr,
                            /*no_alloc=*/true};
    ggml_context* ctx = ggml_init(params);
    ggml_tensor* q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, kDim, 1, 1);
    ggml_tensor* k = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, kDim, 1, 1);
    ggml_tensor* v = ggml_new_tensor_3d(ctx, GetParam(), kDim, 1, 1);
    ggml_tensor* out = ggml_flash_attn_ext(ctx, q, k, v, nullptr, 1.0F / 128, 0.0F, 0.0F);
    ggml_cgraph* graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, out);
    ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors(ctx, backend);
    std::vector<float> values(kDim, 300.0F), cell(kDim);
    for (int64_t i = 0; i < kDim; ++i) cell[static_cast<size_t>(i)] = 1.0F + static_cast<float>(i) / 8;
    std::vector<ggml_fp16_t> k_data(kDim);
    ggml_fp32_to_fp16_row(values.data(), k_data.data(), kDim);
    ggml_backend_tensor_set(q, values.data(), 0, ggml_nbytes(q));
    ggml_backend_tensor_set(k, k_data.data(), 0, ggml_nbytes(k));
    std::vector<uint16_t> v_data(kDim);  // F16 or BF16, both two bytes a value
    if (GetParam() == GGML_TYPE_F16)
        ggml_fp32_to_fp16_row(cell.data(), reinterpret_cast<ggml_fp16_t*>(v_data.data()), kDim);
    else
        ggml_fp32_to_bf16_row(cell.data(), reinterpret_cast<ggml_bf16_t*>(v_data.data()), kDim);
    ggml_backend_tensor_set(v, v_data.data(), 0, ggml_nbytes(v));
    ASSERT_EQ(ggml_backend_graph_compute(backend, graph), GGML_STATUS_SUCCESS);
    std::vector<float> result(kDim);
    ggml_backend_tensor_get(out, result.data(), 0, ggml_nbytes(out));
    for (int64_t i = 0; i < kDim; ++i)
        ASSERT_EQ(result[static_cast<size_t>(i)], cell[static_cast<size_t>(i)]) << "value " << i;
    ggml_backend_buffer_free(buffer);
    ggml_free(ctx);
    ggml_backend_free(backend);
}

INSTANTIATE_TEST_SUITE_P(Caches, FlashAttentionScores, ::testing::Values(GGML_TYPE_F16, GGML_TYPE_BF16),
                         [](const ::testing::TestParamInfo<ggml_type>& type) {
                             return std::string("V_") + ggml_type_name(type.param);
                         });

}  // namespace
