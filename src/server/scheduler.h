// The server's decoding loop (llama.cpp tools/server's shape): a queue of pending requests and N slots.
// One thread owns the decoder; each iteration starts queued requests in free slots and runs ONE
// SpeculativeDecoder::step() over every active slot, so all their drafts are verified in one target batch
// (continuous batching). HTTP handlers talk to it only through a RequestChannel.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/speculative_decoder.h"
#include "server/provenance.h"
#include "server/request.h"

namespace klspec::server {

// Text that became final in one step (or several, when the handler was slower) and the tokens emitted.
struct Delta {
    std::string text;
    std::vector<int32_t> tokens;          // the emitted tokens
    std::vector<TokenOrigin> origins;     // one per emitted token
    std::vector<TextSpan> spans;          // exactly cover `text`, one per token piece (or part of one)
    std::vector<TokenLogprobs> logprobs;  // one per emitted token when the request asked for them
    bool last = false;                    // the request finished: nothing follows
};

// One request between an HTTP handler (which waits on it) and the scheduler (which fills it). Events
// arrive in order: started or failed; deltas; finished.
class RequestChannel {
public:
    // `prompt_logprobs_top`: set, the scheduler computes the prompt's own logprobs with that many
    // alternatives before decoding (an echo with logprobs).
    RequestChannel(std::vector<int32_t> prompt, GenerationOptions generation,
                   std::optional<int32_t> prompt_logprobs_top = std::nullopt)
        : prompt_(std::move(prompt)), generation_(std::move(generation)), prompt_logprobs_top_(prompt_logprobs_top) {}

    const std::vector<int32_t>& prompt() const { return prompt_; }
    const GenerationOptions& generation() const { return generation_; }
    std::optional<int32_t> prompt_logprobs_top() const { return prompt_logprobs_top_; }

    // Handler side. Blocks until the request started (nullopt) or failed (the error to answer).
    std::optional<ApiError> wait_started();
    // Blocks until text is pending or the request finished; takes what is pending.
    Delta wait_delta();
    // Blocks until the request finished; its result.
    GenerationResult wait_result();
    // Set when the request failed (before it started, or while decoding: its result is then empty).
    std::optional<ApiError> failure();
    // Once started: SpeculativeDecoder::prompt_logprobs of the prompt when they were asked for, else empty.
    const std::vector<TokenLogprobs>& prompt_logprobs() const { return prompt_logprobs_; }
    // Once started: the slot it decodes in.
    int32_t slot() const { return slot_; }
    // Marks the client gone: the scheduler stops the sequence after its next step and frees the slot.
    void cancel() { cancelled_ = true; }
    bool cancelled() const { return cancelled_; }

    // Scheduler side.
    void fail(ApiError error);
    void start(int32_t slot, std::vector<TokenLogprobs> prompt_logprobs = {});
    void append(const StepResult& step, std::span<const TokenOrigin> origins, std::vector<TextSpan> spans);
    void finish(GenerationResult result);

private:
    std::vector<int32_t> prompt_;
    GenerationOptions generation_;
    std::optional<int32_t> prompt_logprobs_top_;
    std::vector<TokenLogprobs> prompt_logprobs_;  // written before started_, read after it
    int32_t slot_ = -1;                           // likewise
    std::atomic<bool> cancelled_ = false;
    std::mutex mutex_;
    std::condition_variable changed_;
    bool started_ = false;
    std::optional<ApiError> error_;
    Delta pending_;
    bool finished_ = false;
    GenerationResult result_;
};

// Totals since the server started, for /metrics.
struct ServerCounters {
    int64_t requests_finished = 0;  // every request that ran to its end, cancelled ones included
    int64_t requests_cancelled = 0;
    int64_t requests_failed = 0;  // refused when starting (a prompt over the context, ...) or failed decoding
    GenerationStats stats;        // summed over finished requests
    int32_t queued = 0;           // waiting for a slot
    int32_t active = 0;           // in a slot
};

// One slot as GET /slots shows it: a copy, taken under the scheduler's lock.
struct SlotState {
    int32_t id = 0;
    bool processing = false;    // a request holds the slot
    std::string judge;          // that request's judge rule; empty when idle
    int64_t prompt_tokens = 0;  // of the current request, or the last one (0 while it is still starting)
    // Prompt caching: while processing, the prompt tokens the request reused from the slot's cache; idle,
    // the tokens the slot's cache keeps for a next request to reuse.
    int32_t cached_tokens = 0;
};

class Scheduler {
public:
    // The decoder must have at least `slots` sequences; it is used only from the scheduler's thread.
    Scheduler(SpeculativeDecoder& decoder, int32_t slots);
    ~Scheduler();  // stops the thread; requests still waiting fail with 503
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    // Queues a request; it waits (never dropped) until a slot is free.
    void submit(std::shared_ptr<RequestChannel> request);
    ServerCounters counters() const;
    std::vector<SlotState> slot_states() const;
    // Cancels every request, queued or decoding: each ends after its next step with StopReason::Cancelled.
    void cancel_all();
    // Runs `task` on the scheduler's thread, the one that decodes, before any later step, and waits for it;
    // its exception is rethrown here. llama.cpp's CPU backend keeps a team of OpenMP threads per thread that
    // decodes: decoding from a second thread (timing the step costs from main) left two teams on the cores,
    // and every later draft call of `serve` took 15x as long.
    void run_on_decoder_thread(const std::function<void(SpeculativeDecoder&)>& task);
    int32_t slots() const { return static_cast<int32_t>(slots_.size()); }

private:
    struct Slot {
        std::shared_ptr<RequestChannel> request;
        std::optional<Sequence> sequence;
        ProvenanceSpans spans;  // the request's tokens whose text the stream has not released yet
    };
    void run();
    void run_tasks();  // on the scheduler's thread
    // Takes queued requests into free slots and starts their sequences, reusing what the slot's cache kept.
    void start_queued();
    // The free slot a request with this prompt starts in (one is free).
    size_t choose_slot(std::span<const int32_t> prompt, bool cache_prompt) const;
    // After a step: hands finished results back and frees their slots.
    void release_finished();
    bool step_callback(const StepResult& step);
    // A request that could not start: answered with `error`, its slot (if it took one) freed.
    void fail_starting(RequestChannel& request, std::optional<size_t> slot, ApiError error);
    // A step threw: every request in a slot fails with a 500, and serving goes on.
    void fail_active(const std::exception& cause);
    void free_slot(size_t s);  // under the lock

    SpeculativeDecoder& decoder_;
    std::vector<Slot> slots_;
    std::vector<Sequence*> active_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::shared_ptr<RequestChannel>> queue_;
    std::deque<std::packaged_task<void()>> tasks_;  // run_on_decoder_thread's
    ServerCounters counters_;
    std::vector<SlotState> states_;  // what slot_states() copies; slots_ itself is the scheduler thread's
    bool stopping_ = false;
    std::thread thread_;  // last: starts after every member above exists
};

}  // namespace klspec::server
