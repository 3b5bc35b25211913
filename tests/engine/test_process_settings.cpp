// --prio, --cpu-mask and --cpu-range (src/engine/process_settings.h): applied to the calling process and
// inherited by the threads it starts. Each case runs in a child process, which it changes for good.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <thread>

#include <functional>

#include "core/error.h"
#include "engine/process_settings.h"

namespace klspec {
namespace {

// The child's exit status: 0 when `check` holds.
int in_child(const std::function<bool()>& check) {
    const pid_t pid = fork();
    if (pid == 0) _exit(check() ? 0 : 1);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool only_cpu0_in_a_new_thread() {
    bool only_cpu0 = false;
    std::thread([&] {
        cpu_set_t set;
        CPU_ZERO(&set);
        only_cpu0 = sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1 && CPU_ISSET(0, &set);
    }).join();
    return only_cpu0;
}

TEST(ProcessSettings, CpuMaskAndRangeBindLaterThreads) {
    EXPECT_EQ(in_child([] {
                  set_cpu_affinity("0x1", false);
                  return only_cpu0_in_a_new_thread();
              }),
              0);
    EXPECT_EQ(in_child([] {
                  set_cpu_affinity("0-0", true);
                  return only_cpu0_in_a_new_thread();
              }),
              0);
    EXPECT_THROW(set_cpu_affinity("", false), Error);
    EXPECT_THROW(set_cpu_affinity("0xg", false), Error);
    EXPECT_THROW(set_cpu_affinity("2-1", true), Error);
}

TEST(ProcessSettings, PriorityIsLlamaCppsNiceScale) {
    EXPECT_EQ(in_child([] {
                  set_process_priority(-1);  // lowering needs no privilege
                  return getpriority(PRIO_PROCESS, 0) == 5;
              }),
              0);
    EXPECT_THROW(set_process_priority(4), Error);
    EXPECT_THROW(set_process_priority(-2), Error);
}

}  // namespace
}  // namespace klspec
