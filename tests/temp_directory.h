// The temporary files of a test process: one directory of its own under the system's temporary directory,
// created on first use and removed when the process's tests end, passed or failed (ctest runs each test in a
// process of its own, so each test has its own directory). A crash or a timeout's kill leaves it behind, which
// scripts/test.sh reports (docs/reliability.md, "Tests clean up").
#pragma once

#include <string>

namespace klspec::test {

// A fresh path (nothing there) in the process's temporary directory.
std::string temp_path(const std::string& name);

}  // namespace klspec::test
