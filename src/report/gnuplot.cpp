#include "report/gnuplot.h"

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"

namespace klspec {

void run_gnuplot(const std::string& script, const std::string& data) {
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("klspec-plot-{}", getpid());
    std::filesystem::create_directories(dir);
    const auto data_path = dir / "data.tsv", script_path = dir / "plot.gp", log_path = dir / "gnuplot.log";
    std::ofstream(data_path) << data;
    std::ofstream(script_path) << fmt::format("datafile = '{}'\n", data_path.string()) << script;
    const int status =
        std::system(fmt::format("gnuplot '{}' > '{}' 2>&1", script_path.string(), log_path.string()).c_str());
    std::string log;
    {
        std::ifstream in(log_path);
        std::getline(in, log);
    }
    std::filesystem::remove_all(dir);
    if (status != 0)
        throw Error(fmt::format("gnuplot failed{} (install Debian's gnuplot-nox)", log.empty() ? "" : ": " + log));
}

}  // namespace klspec
