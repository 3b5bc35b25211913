// How ggml's worker threads wait between pieces of work. ggml runs them under OpenMP (libgomp), whose idle
// threads spin GOMP_SPINCOUNT times (300,000 by default) before they sleep, at every barrier between two graph
// nodes. On a quiet machine spinning is cheapest: with 1,000 spins the real pair's 1.5B target decoded 0.87-0.92x
// and served four clients at 0.77-0.89x llama-server (whose threads spin 300,000 times); with 50,000, 0.98-1.00x
// and 0.99-1.00x. On a busy one a spinning thread holds a core the thread it waits for needs: with two other
// CPU-bound processes on 2 cores the same target decodes 2.8 tokens/s at 50,000 (llama-bench 3.2) and 7.7 at
// 1,000 (docs/reliability.md, "A busy CPU"). So the default is llama.cpp's level, and `--poll 1` is for shared
// machines. libgomp reads its settings once, when it loads, before main; so `--poll` is applied by re-executing
// the process once with them set.
#pragma once

namespace klspec {

// llama.cpp's --poll scale: 0 = sleep at once (OMP_WAIT_POLICY=passive), N = spin N × 1000 times.
inline constexpr int kDefaultPollLevel = 50;
inline constexpr int kMaxPollLevel = 100;

// Re-executes this process with the wait settings of argv's --poll (or the default) unless they are in
// effect already, or the user set GOMP_SPINCOUNT / OMP_WAIT_POLICY and no --poll. Returns when nothing
// needs doing (or the re-exec failed: decoding then runs with libgomp's defaults).
void apply_poll_level(char** argv);

}  // namespace klspec
