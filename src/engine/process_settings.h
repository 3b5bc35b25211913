// llama.cpp's --prio, --cpu-mask and --cpu-range, applied to the whole process before any decoding thread
// exists: ggml's OpenMP threads inherit the process's priority and CPU affinity (llama.cpp's own threadpool
// masks apply only to builds without OpenMP).
#pragma once

#include <string>

namespace klspec {

// llama.cpp's scale: -1 low, 0 normal, 1 medium, 2 high, 3 realtime (nice 5, 0, -5, -10, -20). Throws
// klspec::Error for a level outside it or one the process may not take (raising needs CAP_SYS_NICE).
void set_process_priority(int level);
// A hex mask ("0x3", "c") or a range ("0-1", as --cpu-range): the CPUs this process may run on. Throws
// klspec::Error for text that is neither, or a set with no CPU of this machine.
void set_cpu_affinity(const std::string& cpus, bool is_range);

}  // namespace klspec
