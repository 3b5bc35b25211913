// Plots through gnuplot (Debian gnuplot-nox): klspec writes the data and a script, gnuplot draws.
#pragma once

#include <string>

namespace klspec {

// Runs `gnuplot` on `script`, in which the data file's path is available as the variable `datafile`.
// Throws klspec::Error with gnuplot's own message when it is missing or fails.
void run_gnuplot(const std::string& script, const std::string& data);

}  // namespace klspec
