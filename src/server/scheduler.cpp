#include "server/scheduler.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace klspec::server {

std::optional<ApiError> RequestChannel::wait_started() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return started_ || error_.has_value(); });
    return error_;
}

Delta RequestChannel::wait_delta() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return finished_ || error_ || !pending_.text.empty() || !pending_.origins.empty(); });
    Delta delta = std::exchange(pending_, Delta{});
    delta.last = finished_ || error_;
    return delta;
}

GenerationResult RequestChannel::wait_result() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return finished_ || error_; });
    return std::move(result_);
}

std::optional<ApiError> RequestChannel::failure() {
    std::lock_guard lock(mutex_);
    return error_;
}

void RequestChannel::fail(ApiError error) {
    {
        std::lock_guard lock(mutex_);
        error_ = std::move(error);
    }
    changed_.notify_all();
}

void RequestChannel::start(int32_t slot, std::vector<TokenLogprobs> prompt_logprobs) {
    {
        std::lock_guard lock(mutex_);
        slot_ = slot;
        prompt_logprobs_ = std::move(prompt_logprobs);
        started_ = true;
    }
    changed_.notify_all();
}

void RequestChannel::append(const StepResult& step, std::span<const TokenOrigin> origins, std::vector<TextSpan> spans) {
    {
        std::lock_guard lock(mutex_);
        pending_.logprobs.insert(pending_.logprobs.end(), step.logprobs.begin(), step.logprobs.end());
        pending_.text += step.text;
        pending_.tokens.insert(pending_.tokens.end(), step.tokens.begin(), step.tokens.end());
        pending_.origins.insert(pending_.origins.end(), origins.begin(), origins.end());
        pending_.spans.insert(pending_.spans.end(), std::make_move_iterator(spans.begin()),
                              std::make_move_iterator(spans.end()));
    }
    changed_.notify_all();
}

void RequestChannel::finish(GenerationResult result) {
    {
        std::lock_guard lock(mutex_);
        result_ = std::move(result);
        finished_ = true;
    }
    changed_.notify_all();
}

Scheduler::Scheduler(SpeculativeDecoder& decoder, int32_t slots)
    : decoder_(decoder), slots_(static_cast<size_t>(slots)), states_(slots_.size()) {
    if (slots < 1 || slots > decoder.n_sequences())
        throw Error(fmt::format("the server needs 1..{} slots (the decoder's sequences), got {}", decoder.n_sequences(),
                                slots));
    for (size_t s = 0; s < states_.size(); ++s) states_[s].id = static_cast<int32_t>(s);
    thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void Scheduler::submit(std::shared_ptr<RequestChannel> request) {
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(request));
        counters_.queued = static_cast<int32_t>(queue_.size());
    }
    wake_.notify_all();
}

ServerCounters Scheduler::counters() const {
    std::lock_guard lock(mutex_);
    return counters_;
}

std::vector<SlotState> Scheduler::slot_states() const {
    std::lock_guard lock(mutex_);
    return states_;
}

void Scheduler::cancel_all() {
    std::lock_guard lock(mutex_);
    for (const Slot& slot : slots_)
        if (slot.request) slot.request->cancel();
    for (const std::shared_ptr<RequestChannel>& request : queue_) request->cancel();
}

void Scheduler::run_on_decoder_thread(const std::function<void(SpeculativeDecoder&)>& task) {
    std::packaged_task<void()> job([this, &task] { task(decoder_); });
    std::future<void> done = job.get_future();
    {
        std::lock_guard lock(mutex_);
        tasks_.push_back(std::move(job));
    }
    wake_.notify_all();
    done.get();
}

void Scheduler::run_tasks() {
    while (true) {
        std::packaged_task<void()> job;
        {
            std::lock_guard lock(mutex_);
            if (tasks_.empty()) return;
            job = std::move(tasks_.front());
            tasks_.pop_front();
        }
        job();
    }
}

void Scheduler::run() {
    while (true) {
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || !tasks_.empty() || !queue_.empty() || counters_.active > 0; });
            if (stopping_) break;
        }
        run_tasks();
        start_queued();
        active_.clear();
        for (Slot& slot : slots_)
            if (slot.sequence) active_.push_back(&*slot.sequence);
        try {
            decoder_.step(active_, [this](const StepResult& step) { return step_callback(step); });
        } catch (const std::exception& e) {
            fail_active(e);
            continue;
        }
        release_finished();
    }
    // Shutting down: nobody is left waiting forever.
    const ApiError shutting_down{503, "the server is shutting down", "server_error", "", ""};
    std::lock_guard lock(mutex_);
    for (Slot& slot : slots_)
        if (slot.request) slot.request->fail(shutting_down);
    for (const std::shared_ptr<RequestChannel>& request : queue_) request->fail(shutting_down);
}

void Scheduler::start_queued() {
    // As many queued requests as there are free slots, in arrival order.
    std::vector<std::shared_ptr<RequestChannel>> starting;
    {
        std::lock_guard lock(mutex_);
        const auto free = std::count_if(slots_.begin(), slots_.end(), [](const Slot& slot) { return !slot.request; });
        while (!queue_.empty() && std::ssize(starting) < free) {
            starting.push_back(std::move(queue_.front()));
            queue_.pop_front();
        }
        counters_.queued = static_cast<int32_t>(queue_.size());
        counters_.active += static_cast<int32_t>(starting.size());
    }
    for (const std::shared_ptr<RequestChannel>& request : starting) {
        std::optional<size_t> s;  // set once the request holds a slot
        try {
            const std::vector<int32_t>& prompt = request->prompt();
            s = choose_slot(prompt, request->generation().cache_prompt);
            Slot& slot = slots_[*s];
            {
                std::lock_guard lock(mutex_);  // cancel_all() reads slot.request under it
                slot.request = request;
                states_[*s].processing = true;
                const std::shared_ptr<const Judge>& judge = request->generation().judge;
                states_[*s].judge = judge ? judge->name() : VanillaJudge::kName;  // null: vanilla
                states_[*s].prompt_tokens = 0;
            }
            // On the slot's own cells, before its sequence starts: the pass's cells become the slot's cached prompt
            // (its earlier one is lost), which the start reuses rather than decoding the prompt twice.
            std::vector<TokenLogprobs> prompt_logprobs;
            if (const std::optional<int32_t> top = request->prompt_logprobs_top())
                prompt_logprobs = decoder_.prompt_logprobs(prompt, *top, static_cast<int32_t>(*s));
            slot.sequence = decoder_.start(static_cast<int32_t>(*s), prompt, request->generation());
            {
                std::lock_guard lock(mutex_);
                states_[*s].prompt_tokens = slot.sequence->result().stats.prompt_tokens;
                states_[*s].cached_tokens = static_cast<int32_t>(slot.sequence->result().stats.prompt_cached_tokens);
            }
            request->start(static_cast<int32_t>(*s), std::move(prompt_logprobs));
        } catch (const PromptError& e) {
            fail_starting(*request, s,
                          ApiError{400, e.what(), "invalid_request_error", "prompt",
                                   e.exceeds_context ? "context_length_exceeded" : ""});
        } catch (const Error& e) {
            // The other checks left to the engine: what the judge needs of the decoder (hidden states, a draft).
            fail_starting(*request, s, ApiError{400, e.what(), "invalid_request_error", "judge", ""});
        } catch (const std::exception& e) {
            fail_starting(
                *request, s,
                ApiError{500, fmt::format("starting the request failed: {}", e.what()), "server_error", "", ""});
        }
    }
}

// The counters and slots are updated before the request learns of its end: a client that reads /metrics
// or /slots next sees them.
void Scheduler::fail_starting(RequestChannel& request, std::optional<size_t> slot, ApiError error) {
    {
        std::lock_guard lock(mutex_);
        if (slot) free_slot(*slot);
        --counters_.active;
        ++counters_.requests_failed;
    }
    request.fail(std::move(error));
}

void Scheduler::fail_active(const std::exception& cause) {
    // A failed step leaves no sequence in a state worth continuing: each one's request fails, its slot is
    // freed (a next sequence on it overwrites its cells) and the server goes on serving.
    const ApiError error{500, fmt::format("decoding failed: {}", cause.what()), "server_error", "", ""};
    for (size_t s = 0; s < slots_.size(); ++s) {
        Slot& slot = slots_[s];
        if (!slot.request) continue;
        const std::shared_ptr<RequestChannel> request = slot.request;
        slot.sequence.reset();
        slot.spans = {};
        {
            std::lock_guard lock(mutex_);
            free_slot(s);
            --counters_.active;
            ++counters_.requests_failed;
        }
        request->fail(error);
    }
}

void Scheduler::free_slot(size_t s) {
    slots_[s].request.reset();
    states_[s].processing = false;
    states_[s].judge.clear();
    states_[s].cached_tokens = decoder_.cached_tokens(static_cast<int32_t>(s));
}

size_t Scheduler::choose_slot(std::span<const int32_t> prompt, bool cache_prompt) const {
    // llama-server's choice: the free slot whose kept cells share the longest prefix with the prompt; a
    // request that does not cache takes the slot that keeps least, sparing the others' caches.
    size_t best = slots_.size();
    int32_t best_score = 0;
    for (size_t s = 0; s < slots_.size(); ++s) {
        if (slots_[s].request) continue;
        const int32_t id = static_cast<int32_t>(s);
        const int32_t score = cache_prompt ? decoder_.reusable_prompt(id, prompt) : -decoder_.cached_tokens(id);
        if (best == slots_.size() || score > best_score) {
            best = s;
            best_score = score;
        }
    }
    return best;
}

bool Scheduler::step_callback(const StepResult& step) {
    Slot& slot = slots_[static_cast<size_t>(step.sequence_id)];
    const std::vector<TokenOrigin> origins = step_origins(step.tokens.size(), step.verdicts);
    for (size_t i = 0; i < step.tokens.size(); ++i)
        slot.spans.add_token(decoder_.target().piece(step.tokens[i]), origins[i]);
    slot.request->append(step, origins, slot.spans.take(step.text));
    return slot.request->cancelled();
}

void Scheduler::release_finished() {
    for (size_t s = 0; s < slots_.size(); ++s) {
        Slot& slot = slots_[s];
        if (!slot.sequence || !slot.sequence->finished()) continue;
        GenerationResult result = slot.sequence->take_result();
        std::shared_ptr<RequestChannel> request;
        {
            std::lock_guard lock(mutex_);
            request = slot.request;
            free_slot(s);
            ++counters_.requests_finished;
            counters_.requests_cancelled += result.stop_reason == StopReason::Cancelled;
            counters_.stats += result.stats;
            --counters_.active;
        }
        request->finish(std::move(result));
        slot.sequence.reset();
        slot.spans = {};  // what a stop string cut off
    }
}

}  // namespace klspec::server
