// How ggml's worker threads wait between pieces of work. ggml runs them under OpenMP (libgomp), whose idle
// threads spin GOMP_SPINCOUNT times (300,000 by default) before they sleep. On a quiet machine that is
// cheapest, but on a busy one a spinning thread holds a core the thread it waits for needs: with two other
// CPU-bound processes on 2 cores, `-t 2` decoded nothing in 150 s. libgomp reads its settings once, when it
// loads, before main; so `--poll` is applied by re-executing the process once with them set.
#pragma once

namespace klspec {

// llama.cpp's --poll scale: 0 = sleep at once (OMP_WAIT_POLICY=passive), N = spin N × 1000 times.
inline constexpr int kDefaultPollLevel = 1;
inline constexpr int kMaxPollLevel = 100;

// Re-executes this process with the wait settings of argv's --poll (or the default) unless they are in
// effect already, or the user set GOMP_SPINCOUNT / OMP_WAIT_POLICY and no --poll. Returns when nothing
// needs doing (or the re-exec failed: decoding then runs with libgomp's defaults).
void apply_poll_level(char** argv);

}  // namespace klspec
