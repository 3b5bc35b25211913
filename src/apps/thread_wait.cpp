#include "apps/thread_wait.h"

#include <unistd.h>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace klspec {
namespace {

constexpr const char* kAppliedMarker = "KLSPEC_POLL_APPLIED";

std::optional<int> poll_flag(char** argv) {
    for (int i = 1; argv[i] != nullptr; ++i) {
        const std::string_view arg = argv[i];
        std::string_view value;
        if (arg == "--poll" && argv[i + 1] != nullptr) {
            value = argv[i + 1];
        } else if (arg.starts_with("--poll=")) {
            value = arg.substr(7);
        } else {
            continue;
        }
        int level = -1;
        const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), level);
        if (error != std::errc{} || end != value.data() + value.size()) return std::nullopt;  // CLI11 says why
        return level;
    }
    return std::nullopt;
}

}  // namespace

void apply_poll_level(char** argv) {
    if (std::getenv(kAppliedMarker) != nullptr) return;
    const std::optional<int> flag = poll_flag(argv);
    if (!flag && (std::getenv("GOMP_SPINCOUNT") != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr)) return;
    const int level = flag.value_or(kDefaultPollLevel);
    if (level < 0 || level > kMaxPollLevel) return;  // refused by the option's check
    if (level == 0) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        unsetenv("GOMP_SPINCOUNT");
    } else {
        setenv("GOMP_SPINCOUNT", std::to_string(level * 1000).c_str(), 1);
        unsetenv("OMP_WAIT_POLICY");
    }
    setenv(kAppliedMarker, "1", 1);
    execv("/proc/self/exe", argv);
}

}  // namespace klspec
