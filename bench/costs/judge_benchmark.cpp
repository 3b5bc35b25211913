// The cost of judging with the KL rule: the statistics of γ drafted positions, 2·γ·V logits, against a
// plain copy of the same number of bytes (the speed a memory-bound pass could reach).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/judges/kl_judge.h"

namespace {

// γ rows of target logits and γ rows of draft logits, V each.
struct Rows {
    Rows(int64_t gamma, int64_t vocab_size)
        : vocab(static_cast<size_t>(vocab_size)),
          target(static_cast<size_t>(gamma * vocab_size)),
          draft(target.size()) {
        std::mt19937 rng(42);
        std::normal_distribution<float> logit(0.0f, 3.0f);
        for (float& x : target) x = logit(rng);
        for (float& x : draft) x = logit(rng);
    }
    std::span<const float> target_row(size_t i) const { return {target.data() + i * vocab, vocab}; }
    std::span<const float> draft_row(size_t i) const { return {draft.data() + i * vocab, vocab}; }
    int64_t bytes() const { return static_cast<int64_t>((target.size() + draft.size()) * sizeof(float)); }

    size_t vocab;
    std::vector<float> target;
    std::vector<float> draft;
};

void BM_KlJudge(benchmark::State& state) {
    const int64_t gamma = state.range(0);
    const Rows rows(gamma, state.range(1));
    // τ above any KL and no confidence mask, so that every position is judged the same way.
    klspec::KlJudge judge(1e9, 1.0);
    for (auto _ : state) {
        for (int64_t i = 0; i < gamma; ++i) {
            klspec::DraftPosition position;
            position.target_logits = rows.target_row(static_cast<size_t>(i));
            position.draft_logits = rows.draft_row(static_cast<size_t>(i));
            position.draft_token = 0;
            benchmark::DoNotOptimize(judge.decide(position));
        }
    }
    state.SetBytesProcessed(state.iterations() * rows.bytes());
}

void BM_MemoryCopy(benchmark::State& state) {
    const Rows rows(state.range(0), state.range(1));
    std::vector<float> destination(rows.target.size() + rows.draft.size());
    for (auto _ : state) {
        std::memcpy(destination.data(), rows.target.data(), rows.target.size() * sizeof(float));
        std::memcpy(destination.data() + rows.target.size(), rows.draft.data(), rows.draft.size() * sizeof(float));
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * rows.bytes());
}

void judge_shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"gamma", "V"});
    for (int64_t gamma : {1, 8, 16})
        for (int64_t vocab : {512, 32000, 128256, 151936}) b->Args({gamma, vocab});
}

BENCHMARK(BM_KlJudge)->Apply(judge_shapes);
BENCHMARK(BM_MemoryCopy)->Apply(judge_shapes);

}  // namespace

BENCHMARK_MAIN();
