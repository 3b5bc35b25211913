// Decoding a list of problems with continuous batching (llama.cpp server's slots): each of `parallel`
// slots takes the next problem as soon as its own finishes, and every step verifies all slots' drafts in
// one target batch. Bench and sweep decode answers with it; mining decodes its continuations with it.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "engine/speculative_decoder.h"
#include "eval/dataset.h"

namespace klspec {

// One problem's work as a slot runs it: one Sequence at a time (an answer is one; mining decodes a
// continuation per swap, with its own work in between).
class DecodingJob {
public:
    // The sequence to step now; null once the job is done.
    virtual Sequence* sequence() = 0;
    // After the step that finished sequence(): take in what it decoded, then start the next one or be done.
    virtual void advance() = 0;

protected:
    ~DecodingJob() = default;
};

// Runs n_jobs jobs on `parallel` slots: slot s starts job `index` with start_job(index, s), which returns the
// job (owned by the caller; its sequences decode on id s), and a slot starts the next job as soon as its own is
// done. Each step verifies every slot's sequence in one target batch. on_done(index, s, seconds) comes as each job
// finishes (in finishing order), with the wall time attributed to it: its start and advances, plus each step it
// took part in divided by the number of sequences in that step, so that summed over jobs it is the run's wall time
// (tokens/s stay right with -np > 1 and across resumed runs). Returns early, unfinished jobs dropped, when
// stop_requested (checked between steps) says so.
using StartJob = std::function<DecodingJob&(size_t index, int32_t slot)>;
using JobDone = std::function<void(size_t index, int32_t slot, double seconds)>;
void run_jobs(SpeculativeDecoder& decoder, size_t n_jobs, int32_t parallel, const StartJob& start_job,
              const JobDone& on_done, const std::function<bool()>& stop_requested = {});

struct DecodedProblem {
    size_t index = 0;  // into the problems given to decode_problems
    GenerationResult result;
    double wall_seconds = 0;  // attributed as run_jobs does
    int32_t sequence_id = 0;  // the decoder's sequence (slot) it ran on: whose judged positions were its
};

// Decodes every problem with `generation` (run_jobs with an answer per job); calls on_done as each finishes (in
// finishing order). Returns early, the unfinished problems dropped, when stop_requested says so.
void decode_problems(SpeculativeDecoder& decoder, std::span<const Problem> problems,
                     const GenerationOptions& generation, int32_t parallel,
                     const std::function<void(DecodedProblem&&)>& on_done,
                     const std::function<bool()>& stop_requested = {});

}  // namespace klspec
