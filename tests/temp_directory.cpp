#include "temp_directory.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <gtest/gtest.h>

namespace klspec::test {
namespace {

// A gtest environment: its TearDown runs once after the last test of the process, whatever the outcomes, and
// only in the test process (never in a child that a test forks).
class TempDirectory : public ::testing::Environment {
public:
    const std::filesystem::path& path() {
        if (path_.empty()) {
            std::string pattern = (std::filesystem::temp_directory_path() / "klspec-tests.XXXXXX").string();
            if (mkdtemp(pattern.data()) == nullptr)
                throw std::runtime_error("cannot create a directory like " + pattern);
            path_ = pattern;
        }
        return path_;
    }
    void TearDown() override {
        std::error_code ignored;  // a file a sandboxed child left read-only is no reason to fail the suite
        if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
    }

private:
    std::filesystem::path path_;
};

// Registered before main runs (gtest_main), and owned by gtest from then on.
TempDirectory* const temp_directory =
    static_cast<TempDirectory*>(::testing::AddGlobalTestEnvironment(new TempDirectory));

}  // namespace

std::string temp_path(const std::string& name) {
    const std::filesystem::path path = temp_directory->path() / name;
    std::filesystem::remove_all(path);
    return path.string();
}

}  // namespace klspec::test
