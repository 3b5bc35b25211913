// One line of progress on stderr for long commands: rewritten in place on a terminal, printed every
// `every` items (and at the end) when stderr is a file or pipe, so logs stay readable.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace klspec {

class ProgressLine {
public:
    // Shown as "NAME: DONE/TOTAL UNIT, DETAIL, elapsed …, ETA …".
    ProgressLine(std::string name, size_t total, std::string unit, size_t every = 10);
    // `done` of `total` items finished; `detail` is shown after the count, before elapsed time and ETA.
    void update(size_t done, const std::string& detail = "");
    // Ends the line on a terminal.
    void finish();
    double elapsed_seconds() const;

private:
    std::string name_, unit_;
    size_t total_, every_;
    bool tty_;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point start_;
};

}  // namespace klspec
