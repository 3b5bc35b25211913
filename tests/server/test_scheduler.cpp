// The scheduler's failure paths (src/server/scheduler.h), driven without HTTP: a step that throws fails the
// requests it held with a 500 and the server goes on serving.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <thread>

#include "core/error.h"

#include "server/scheduler.h"
#include "test_support.h"

namespace klspec::server {
namespace {

// Throws where the vanilla test rejects a draft: a fault inside a step (as a failed llama_decode would be).
class ExplodingJudge final : public Judge {
public:
    std::string_view name() const override { return "exploding"; }
    JudgeDecision decide(const DraftPosition&) const override { throw std::runtime_error("the judge exploded"); }
};

GenerationOptions options(std::shared_ptr<const Judge> judge = nullptr) {
    GenerationOptions generation;
    generation.max_tokens = 64;
    generation.draft_max = 8;
    generation.judge = std::move(judge);
    return generation;
}

// Runs one request to its end; its result, or the error it failed with.
std::pair<GenerationResult, std::optional<ApiError>> run(Scheduler& scheduler, const Model& target,
                                                         GenerationOptions generation) {
    const std::vector<int32_t> prompt = target.tokenize("Once upon a time", true, true);
    auto request = std::make_shared<RequestChannel>(prompt, std::move(generation));
    scheduler.submit(request);
    if (std::optional<ApiError> error = request->wait_started()) return {{}, error};
    GenerationResult result = request->wait_result();
    return {std::move(result), request->failure()};
}

// stories260K's context, one thread.
ContextOptions small_context(int32_t sequences) {
    ContextOptions context;
    context.n_ctx = 256;
    context.n_sequences = sequences;
    context.n_threads = 1;
    return context;
}

TEST(Scheduler, AStepThatThrowsFailsItsRequestsWithA500AndServingGoesOn) {
    const Model target(test::kTargetModel);
    const Model draft(test::kDraftQ4);
    SpeculativeDecoder decoder(target, &draft, small_context(2));
    Scheduler scheduler(decoder, 2);

    const auto [before, no_error] = run(scheduler, target, options());
    ASSERT_FALSE(no_error.has_value()) << no_error->message;
    ASSERT_EQ(before.tokens.size(), 64u);

    const auto [failed, error] = run(scheduler, target, options(std::make_shared<ExplodingJudge>()));
    ASSERT_TRUE(error.has_value()) << "the exploding judge was never asked";
    EXPECT_EQ(error->status, 500);
    EXPECT_EQ(error->type, "server_error");
    EXPECT_EQ(error->message, "decoding failed: the judge exploded");
    EXPECT_EQ(scheduler.counters().requests_failed, 1);
    EXPECT_EQ(scheduler.counters().active, 0);
    for (const SlotState& slot : scheduler.slot_states()) EXPECT_FALSE(slot.processing);

    // The same request again decodes as before the failure.
    const auto [after, still_no_error] = run(scheduler, target, options());
    ASSERT_FALSE(still_no_error.has_value()) << still_no_error->message;
    EXPECT_EQ(after.tokens, before.tokens);
    EXPECT_EQ(scheduler.counters().requests_finished, 2);
}

TEST(Scheduler, TasksRunOnTheThreadThatDecodes) {
    // What the server does to the decoder before it listens (timing the step costs) must run on the thread
    // that steps: llama.cpp's CPU backend keeps its threads per calling thread (Scheduler::run_on_decoder_thread).
    const Model target(test::kTargetModel);
    const Model draft(test::kDraftQ4);
    SpeculativeDecoder decoder(target, &draft, small_context(1));
    std::thread::id stepping;
    decoder.set_observer([&](const JudgedPosition&) { stepping = std::this_thread::get_id(); });
    Scheduler scheduler(decoder, 1);
    std::thread::id calibrating;
    scheduler.run_on_decoder_thread([&](SpeculativeDecoder& d) {
        calibrating = std::this_thread::get_id();
        d.calibrate_step_costs(4);
    });
    EXPECT_FALSE(decoder.verify_costs().empty()) << "the task ran before run_on_decoder_thread returned";
    EXPECT_NE(calibrating, std::this_thread::get_id());
    const auto [result, error] = run(scheduler, target, options());
    ASSERT_FALSE(error.has_value()) << error->message;
    EXPECT_EQ(stepping, calibrating);
    // A task's exception reaches the caller, and the scheduler goes on.
    EXPECT_THROW(scheduler.run_on_decoder_thread([](SpeculativeDecoder&) { throw Error("the task failed"); }), Error);
    EXPECT_FALSE(run(scheduler, target, options()).second.has_value());
}

}  // namespace
}  // namespace klspec::server
