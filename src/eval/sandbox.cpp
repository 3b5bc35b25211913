#include "eval/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace klspec {
namespace {

constexpr const char* kPython = "/usr/bin/python3";  // Debian's: never a pyenv or venv shim on PATH
constexpr const char* kSandboxDir = "/tmp/sandbox";  // the program's cwd inside the sandbox
// Started as root, each sandbox runs as a uid of its own, kSandboxUidBase + its reaper's pid (no account
// has one: nothing on the host belongs to it), so one sandbox's fork bomb exhausts RLIMIT_NPROC, which
// the kernel counts per uid, for itself alone and never for a sandbox running beside it.
constexpr uid_t kSandboxUidBase = 0x40000000;
constexpr gid_t kNogroup = 65534;

std::string find_bwrap() {
    const char* path = std::getenv("PATH");
    std::string_view dirs = path ? path : "/usr/bin:/bin";
    while (!dirs.empty()) {
        const size_t colon = dirs.find(':');
        const std::string candidate = std::string(dirs.substr(0, colon)) + "/bwrap";
        if (access(candidate.c_str(), X_OK) == 0) return candidate;
        dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
    }
    throw Error(
        "bubblewrap (bwrap) is not installed: code benchmarks run their tests in its sandbox "
        "(apt-get install bubblewrap)");
}

// Where run directories are made: the temporary directory (TMPDIR), if the program's uid can reach it. Started
// as root, the program runs as a uid of its own, for which bwrap cannot bind a TMPDIR in root's 0700 home
// ("Permission denied"); /tmp, world-writable and sticky, stands in then.
std::filesystem::path run_directory_parent() {
    const std::filesystem::path temp = std::filesystem::temp_directory_path();
    if (getuid() != 0) return temp;
    for (std::filesystem::path dir = temp;; dir = dir.parent_path()) {
        struct stat status {};
        if (stat(dir.c_str(), &status) != 0 || !(status.st_mode & S_IXOTH)) return "/tmp";
        if (dir == dir.root_path() || dir.parent_path() == dir) return temp;
    }
}

// A fresh host directory for one run, bound read-write as the program's cwd; removed with everything the
// program left in it.
class RunDirectory {
public:
    RunDirectory() {
        std::string pattern = (run_directory_parent() / "klspec-sandbox-XXXXXX").string();
        if (!mkdtemp(pattern.data())) throw Error(fmt::format("cannot create a sandbox directory: {}", pattern));
        path_ = pattern;
    }
    ~RunDirectory() {
        std::error_code ignored;  // a program that chmods its own files away must not crash the scorer
        std::filesystem::remove_all(path_, ignored);
    }
    RunDirectory(const RunDirectory&) = delete;
    RunDirectory& operator=(const RunDirectory&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// Closes a file descriptor once.
struct Fd {
    int fd = -1;
    ~Fd() { reset(); }
    void reset() {
        if (fd >= 0) close(fd);
        fd = -1;
    }
};

// In the reaper (a forked child): the sandbox's process group, which SIGTERM (the host's timeout) kills,
// and whether SIGTERM came (perhaps before the group existed).
volatile sig_atomic_t sandbox_group = 0, timeout_requested = 0;

// The forked child, a subreaper between the host and bwrap: bwrap exits without reaping its pid 1, and
// the host's init may take seconds to, all the while counting against the process limit; this reaps the
// whole tree before it exits with bwrap's status. Async-signal-safe system calls only, then exec.
[[noreturn]] void reap_sandbox(const std::vector<char*>& argv, const std::vector<char*>& env, const char* run_dir,
                               int stdin_fd, int stdout_fd, int stderr_fd, const SandboxLimits& limits) {
    setsid();  // no controlling terminal to inject input into
    const uid_t sandbox_uid = kSandboxUidBase + static_cast<uid_t>(getpid());
    if (getuid() == 0 && chown(run_dir, sandbox_uid, kNogroup) != 0) _exit(126);  // the program writes there
    dup2(stdin_fd, 0);
    dup2(stdout_fd, 1);
    dup2(stderr_fd, 2);
    close_range(3, ~0U, 0);  // no host file may stay open in the sandbox
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    struct sigaction on_timeout {};
    on_timeout.sa_handler = [](int) {
        timeout_requested = 1;
        if (sandbox_group > 0) kill(-sandbox_group, SIGKILL);
    };
    sigaction(SIGTERM, &on_timeout, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // the host thread's mask must not reach the reaper or Python

    const pid_t sandbox = fork();
    if (sandbox < 0) _exit(126);
    if (sandbox == 0) {
        setpgid(0, 0);  // its own process group, killed as one
        const auto limit = [](int resource, rlim_t soft, rlim_t hard) {
            const rlimit both{soft, hard};
            if (setrlimit(resource, &both) != 0) _exit(126);
        };
        limit(RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1);  // SIGXCPU first, SIGKILL a second later
        limit(RLIMIT_AS, limits.memory_bytes, limits.memory_bytes);
        limit(RLIMIT_FSIZE, limits.file_bytes, limits.file_bytes);
        limit(RLIMIT_NPROC, limits.processes, limits.processes);
        limit(RLIMIT_CORE, 0, 0);
        if (getuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(kNogroup) != 0 || setuid(sandbox_uid) != 0))
            _exit(126);
        execve(argv[0], argv.data(), env.data());
        _exit(127);
    }
    setpgid(sandbox, sandbox);  // on both sides: the group exists whichever runs first
    sandbox_group = sandbox;
    if (timeout_requested) kill(-sandbox, SIGKILL);
    int sandbox_status = 0;
    for (;;) {
        int status = 0;
        const pid_t reaped = waitpid(-1, &status, 0);
        if (reaped == sandbox) sandbox_status = status;
        if (reaped < 0 && errno == ECHILD) break;
    }
    _exit(WIFSIGNALED(sandbox_status) ? 128 + WTERMSIG(sandbox_status) : WEXITSTATUS(sandbox_status));
}

// Appends what `fd` has to `text`, keeping at most `cap` bytes. Returns false at end of file.
bool read_some(int fd, std::string& text, size_t cap, bool& truncated) {
    std::array<char, 65536> buffer;
    const ssize_t n = read(fd, buffer.data(), buffer.size());
    if (n < 0) return errno == EINTR || errno == EAGAIN;
    if (n == 0) return false;
    const size_t keep = std::min(static_cast<size_t>(n), cap - std::min(cap, text.size()));
    text.append(buffer.data(), keep);
    truncated |= keep < static_cast<size_t>(n);
    return true;
}

SandboxResult run_once(const std::string& bwrap, std::string_view program, std::string_view stdin_text,
                       const SandboxLimits& limits) {
    if (access(kPython, X_OK) != 0)
        throw Error(fmt::format("{} is missing: code benchmarks need Debian's python3", kPython));
    RunDirectory dir;
    std::ofstream(dir.path() + "/main.py", std::ios::binary) << program;

    std::vector<std::string> args = {
        bwrap,       "--ro-bind",    "/",      "/",       "--dev",     "/dev",          "--remount-ro",
        "/dev",      "--proc",       "/proc",  "--tmpfs", "/tmp",      "--bind",        dir.path(),
        kSandboxDir, "--remount-ro", "/tmp",   "--chdir", kSandboxDir, "--unshare-all", "--die-with-parent",
        kPython,     "-s",           "main.py"};
    // A fixed hash seed: set iteration order, and so any output that depends on it, is reproducible.
    std::vector<std::string> environment = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "PYTHONHASHSEED=0",
                                            "PYTHONDONTWRITEBYTECODE=1", fmt::format("HOME={}", kSandboxDir)};
    const auto pointers = [](std::vector<std::string>& strings) {
        std::vector<char*> p;
        for (std::string& s : strings) p.push_back(s.data());
        p.push_back(nullptr);
        return p;
    };
    const std::vector<char*> argv = pointers(args), env = pointers(environment);

    // stdin is a socket so that writing after the program closed it fails with EPIPE, not SIGPIPE.
    int stdin_pair[2], stdout_pipe[2], stderr_pipe[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, stdin_pair) != 0)
        throw Error("cannot create a sandbox pipe");
    Fd stdin_parent{stdin_pair[0]}, stdin_child{stdin_pair[1]};
    if (pipe2(stdout_pipe, O_CLOEXEC) != 0) throw Error("cannot create a sandbox pipe");
    Fd stdout_parent{stdout_pipe[0]}, stdout_child{stdout_pipe[1]};
    if (pipe2(stderr_pipe, O_CLOEXEC) != 0) throw Error("cannot create a sandbox pipe");
    Fd stderr_parent{stderr_pipe[0]}, stderr_child{stderr_pipe[1]};

    const pid_t pid = fork();
    if (pid < 0) throw Error("cannot fork the sandbox");
    if (pid == 0) reap_sandbox(argv, env, dir.path().c_str(), stdin_child.fd, stdout_child.fd, stderr_child.fd, limits);
    stdin_child.reset();
    stdout_child.reset();
    stderr_child.reset();
    Fd pidfd{static_cast<int>(syscall(SYS_pidfd_open, pid, 0))};  // glibc 2.36's wrapper lacks C linkage
    if (pidfd.fd < 0) {
        kill(pid, SIGTERM);
        waitpid(pid, nullptr, 0);
        throw Error("cannot watch the sandbox process (pidfd_open)");
    }
    if (stdin_text.empty()) stdin_parent.reset();  // end of file at once

    SandboxResult result;
    const auto start = std::chrono::steady_clock::now();
    // After the kill, the pid namespace and pipes close at once; the grace period only guards a kernel stall.
    const auto kill_deadline = start + limits.wall_time, give_up = kill_deadline + std::chrono::seconds(5);
    size_t written = 0;
    bool exited = false;
    while (!exited || stdout_parent.fd >= 0 || stderr_parent.fd >= 0) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= kill_deadline && !result.timed_out && !exited) {
            result.timed_out = true;
            kill(pid, SIGTERM);  // the reaper kills the sandbox's group, then reaps it
        }
        if (now >= give_up) break;
        std::vector<pollfd> fds = {{exited ? -1 : pidfd.fd, POLLIN, 0},
                                   {stdout_parent.fd, POLLIN, 0},
                                   {stderr_parent.fd, POLLIN, 0},
                                   {stdin_parent.fd, POLLOUT, 0}};
        const auto until = now < kill_deadline ? kill_deadline : give_up;
        const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
        if (poll(fds.data(), fds.size(), static_cast<int>(wait_ms)) < 0 && errno != EINTR)
            throw Error("poll failed while running the sandbox");
        if (fds[0].revents) exited = true;
        for (auto [index, fd, text] :
             {std::tuple{1, &stdout_parent, &result.stdout_text}, std::tuple{2, &stderr_parent, &result.stderr_text}}) {
            if (fds[index].revents && !read_some(fd->fd, *text, limits.output_bytes, result.output_truncated))
                fd->reset();
        }
        if (fds[3].revents) {
            const ssize_t n = send(stdin_parent.fd, stdin_text.data() + written, stdin_text.size() - written,
                                   MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) written += static_cast<size_t>(n);
            if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == stdin_text.size()) stdin_parent.reset();
        }
    }
    if (!exited) kill(pid, SIGKILL);  // the reaper did not finish in the grace period
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
    if (WIFEXITED(status)) {
        result.exit_code = WEXITSTATUS(status);
        if (result.exit_code > 128) result.signal = result.exit_code - 128;  // how bwrap and the reaper report signals
    }
    return result;
}

}  // namespace

SandboxResult run_python_sandboxed(std::string_view program, std::string_view stdin_text, const SandboxLimits& limits) {
    // Once per process: a sandbox that cannot start (no user namespaces, an unreadable temp dir) must be an
    // error, not every solution scored as failing.
    static const std::string bwrap = find_bwrap();
    static std::once_flag checked;
    std::call_once(checked, [&] {
        const SandboxResult probe = run_once(bwrap, "print('ok')", "", SandboxLimits{});
        if (probe.stdout_text != "ok\n") {
            const std::string why = probe.stderr_text.substr(0, probe.stderr_text.find('\n'));
            throw Error(fmt::format("the code sandbox does not work (bwrap exit {}): {}", probe.exit_code, why));
        }
    });
    return run_once(bwrap, program, stdin_text, limits);
}

}  // namespace klspec
