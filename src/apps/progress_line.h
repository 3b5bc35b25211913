// One line of progress on stderr for long commands: rewritten in place on a terminal; when stderr is a
// file or pipe, printed at most every `log_every` seconds, so logs of long runs show progress and short
// runs print nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace klspec {

class ProgressLine {
public:
    // Shown as "NAME: DONE/TOTAL UNIT, DETAIL, elapsed …, ETA …".
    ProgressLine(std::string name, size_t total, std::string unit, double log_every_seconds = 30);
    // `done` of `total` items finished; `detail` is shown after the count, before elapsed time and ETA.
    void update(size_t done, const std::string& detail = "");
    // Ends the line on a terminal.
    void finish();
    double elapsed_seconds() const;

private:
    std::string name_, unit_;
    size_t total_;
    double log_every_;
    double last_logged_ = 0;
    bool tty_;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point start_;
};

}  // namespace klspec
