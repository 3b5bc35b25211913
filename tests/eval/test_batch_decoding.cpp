// Continuous batching over jobs (src/eval/batch_decoding.h): every job's sequences decode on its slot's id,
// one after another, as they would alone; each job is reported once; stopping drops the unfinished ones.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <set>

#include "eval/batch_decoding.h"
#include "test_support.h"

namespace klspec {
namespace {

ContextOptions slots_context(int32_t n_sequences) {
    ContextOptions options;
    options.n_ctx = 256;
    options.n_threads = 1;
    options.n_sequences = n_sequences;
    return options;
}

GenerationOptions greedy(int32_t max_tokens) {
    GenerationOptions options;
    options.max_tokens = max_tokens;
    options.draft_max = 4;
    return options;
}

// A job that decodes its prompts one after another (none: done at its start), keeping each one's tokens and id.
class PromptChain final : public DecodingJob {
public:
    PromptChain(SpeculativeDecoder& decoder, int32_t id, std::vector<std::string> prompts)
        : decoder_(decoder), id_(id), prompts_(std::move(prompts)) {
        start_next();
    }
    Sequence* sequence() override { return running_ ? &*running_ : nullptr; }
    void advance() override {
        ids.push_back(running_->id());
        outputs.push_back(running_->take_result().tokens);
        running_.reset();
        start_next();
    }

    std::vector<std::vector<int32_t>> outputs;
    std::vector<int32_t> ids;

private:
    void start_next() {
        const size_t k = outputs.size();
        if (k < prompts_.size()) running_.emplace(decoder_.start(id_, prompts_[k], greedy(16 + 8 * int32_t(k))));
    }

    SpeculativeDecoder& decoder_;
    const int32_t id_;
    const std::vector<std::string> prompts_;
    std::optional<Sequence> running_;
};

// Five jobs of 2, 0, 3, 1 and 0 prompts on two slots.
std::vector<std::vector<std::string>> chains() {
    const std::vector<std::string> p = test::story_prompts(6);
    return {{p[0], p[1]}, {}, {p[2], p[3], p[4]}, {p[5]}, {}};
}

TEST(RunJobs, EachJobsSequencesDecodeOnItsSlotAsAlone) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    SpeculativeDecoder decoder(target, &draft, slots_context(2));
    SpeculativeDecoder alone(target, &draft, slots_context(1));
    const auto jobs_prompts = chains();
    std::vector<std::optional<PromptChain>> running(2);
    std::vector<std::optional<PromptChain>> finished(jobs_prompts.size());
    std::vector<int32_t> slot_of(jobs_prompts.size(), -1);
    double attributed = 0;
    const auto start = std::chrono::steady_clock::now();
    run_jobs(
        decoder, jobs_prompts.size(), 2,
        [&](size_t index, int32_t slot) -> DecodingJob& {
            slot_of[index] = slot;
            return running[size_t(slot)].emplace(decoder, slot, jobs_prompts[index]);
        },
        [&](size_t index, int32_t slot, double seconds) {
            ASSERT_FALSE(finished[index]) << "job " << index << " reported twice";
            EXPECT_EQ(slot, slot_of[index]);
            finished[index].emplace(std::move(*running[size_t(slot)]));
            running[size_t(slot)].reset();
            EXPECT_GE(seconds, 0.0);
            attributed += seconds;
        });
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    for (size_t j = 0; j < jobs_prompts.size(); ++j) {
        ASSERT_TRUE(finished[j]) << "job " << j << " never reported";
        ASSERT_EQ(finished[j]->outputs.size(), jobs_prompts[j].size()) << "job " << j;
        for (size_t k = 0; k < jobs_prompts[j].size(); ++k) {
            EXPECT_EQ(finished[j]->ids[k], slot_of[j]) << "job " << j << " decoded off its slot's id";
            const GenerationResult reference = alone.generate(jobs_prompts[j][k], greedy(16 + 8 * int32_t(k)));
            EXPECT_EQ(finished[j]->outputs[k], reference.tokens) << "job " << j << ", prompt " << k;
        }
    }
    EXPECT_GT(attributed, 0.0);
    EXPECT_LE(attributed, wall);  // disjoint shares of the run's time
}

TEST(RunJobs, StopRequestedDropsTheUnfinishedJobs) {
    const Model target(test::kTargetModel, test::offload());
    const Model draft(test::kDraftQ4, test::offload());
    SpeculativeDecoder decoder(target, &draft, slots_context(2));
    const auto jobs_prompts = chains();
    std::vector<std::optional<PromptChain>> running(2);
    std::set<size_t> reported;
    int checks = 0;
    run_jobs(
        decoder, jobs_prompts.size(), 2,
        [&](size_t index, int32_t slot) -> DecodingJob& {
            return running[size_t(slot)].emplace(decoder, slot, jobs_prompts[index]);
        },
        [&](size_t index, int32_t slot, double) {
            reported.insert(index);
            running[size_t(slot)].reset();
        },
        [&] { return ++checks > 1; });  // one step: at most γ + 1 = 5 of 16 tokens, no sequence ends
    EXPECT_EQ(checks, 2);
    EXPECT_EQ(reported, (std::set<size_t>{1}));  // the empty job started in the first round ended at once
}

}  // namespace
}  // namespace klspec
