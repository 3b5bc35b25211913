#include "apps/progress_line.h"

#include <unistd.h>
#include <cstdio>

#include <fmt/format.h>

namespace klspec {

ProgressLine::ProgressLine(std::string name, size_t total, std::string unit, double log_every_seconds)
    : name_(std::move(name)),
      unit_(std::move(unit)),
      total_(total),
      log_every_(log_every_seconds),
      tty_(isatty(fileno(stderr)) != 0),
      start_(std::chrono::steady_clock::now()) {}

double ProgressLine::elapsed_seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressLine::update(size_t done, const std::string& detail) {
    const double elapsed = elapsed_seconds();
    if (!tty_) {
        if (elapsed - last_logged_ < log_every_) return;
        last_logged_ = elapsed;
    }
    const double eta = done ? elapsed / double(done) * double(total_ - done) : 0.0;
    const std::string line = fmt::format("{}: {}/{} {}{}{}, elapsed {:.0f} s, ETA {:.0f} s", name_, done, total_, unit_,
                                         detail.empty() ? "" : ", ", detail, elapsed, eta);
    if (tty_)
        std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
    else
        std::fprintf(stderr, "%s\n", line.c_str());
    drawn_ = true;
}

void ProgressLine::finish() {
    if (tty_ && drawn_) std::fputs("\n", stderr);
    drawn_ = false;
}

}  // namespace klspec
