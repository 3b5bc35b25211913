#include "engine/process_settings.h"

#include <sched.h>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common.h"  // llama.cpp's common library: parse_cpu_mask, parse_cpu_range, set_process_priority
#include "core/error.h"
#include "engine/common_log.h"

namespace klspec {

void set_process_priority(int level) {
    if (level < GGML_SCHED_PRIO_LOW || level > GGML_SCHED_PRIO_REALTIME)
        throw Error(fmt::format("--prio must be -1 (low), 0 (normal), 1, 2 or 3 (realtime), got {}", level));
    silence_common_log();
    if (!::set_process_priority(static_cast<ggml_sched_priority>(level)))
        throw Error(fmt::format("--prio {}: cannot set the process priority ({})", level, std::strerror(errno)));
}

void set_cpu_affinity(const std::string& cpus, bool is_range) {
    const char* const flag = is_range ? "--cpu-range" : "--cpu-mask";
    silence_common_log();
    bool mask[GGML_MAX_N_THREADS] = {false};
    if (cpus.empty() || !(is_range ? parse_cpu_range(cpus, mask) : parse_cpu_mask(cpus, mask)))
        throw Error(
            fmt::format("{} '{}': not a {}", flag, cpus, is_range ? "range such as 0-3" : "hex mask such as 0x3"));
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu = 0; cpu < GGML_MAX_N_THREADS && cpu < CPU_SETSIZE; ++cpu)
        if (mask[cpu]) CPU_SET(cpu, &set);
    if (CPU_COUNT(&set) == 0) throw Error(fmt::format("{} '{}' selects no CPU", flag, cpus));
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        throw Error(fmt::format("{} '{}': no CPU of this machine in it ({})", flag, cpus, std::strerror(errno)));
}

}  // namespace klspec
