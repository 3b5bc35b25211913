// Running untrusted Python (a model's solution to a code benchmark) without letting it touch the host.
//
// The program runs as Debian's /usr/bin/python3 under bubblewrap: no network, its own pid namespace (the
// whole tree dies with it), the host filesystem read-only except a fresh temporary directory that is its
// cwd (removed afterwards), no host file descriptors, and a new session (no controlling terminal).
// setrlimit bounds its CPU time, address space, file size and process count; run as root, it drops to a
// uid of its own first, since the kernel never applies the process limit to root and counts it per uid.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace klspec {

struct SandboxLimits {
    std::chrono::milliseconds wall_time{10'000};  // then its whole process group is killed (SIGKILL)
    unsigned long cpu_seconds = 10;               // RLIMIT_CPU: SIGXCPU after this much CPU time
    unsigned long memory_bytes = 1UL << 30;       // RLIMIT_AS: allocations beyond it fail (MemoryError)
    unsigned long file_bytes = 16UL << 20;        // RLIMIT_FSIZE: no file it writes grows beyond this
    unsigned long processes = 64;                 // RLIMIT_NPROC: fork fails beyond this many
    size_t output_bytes = 1UL << 20;              // stdout and stderr are each kept up to this size
};

struct SandboxResult {
    int exit_code = -1;  // the program's exit status (when it was not killed)
    int signal = 0;      // the signal that ended it (bwrap reports the program's as status 128 + N), 0: none
    bool timed_out = false;
    std::string stdout_text;
    std::string stderr_text;
    bool output_truncated = false;  // stdout or stderr went over output_bytes (the rest was read and dropped)

    bool succeeded() const { return !timed_out && signal == 0 && exit_code == 0; }
};

// Runs `program` as a Python 3 script (main.py in its cwd) with `stdin_text` on its standard input.
// Throws klspec::Error when bubblewrap or /usr/bin/python3 is missing or the sandbox cannot be set up;
// anything the program does wrong is reported in the result.
SandboxResult run_python_sandboxed(std::string_view program, std::string_view stdin_text,
                                   const SandboxLimits& limits = {});

}  // namespace klspec
