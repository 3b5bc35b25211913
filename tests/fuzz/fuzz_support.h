// Shared by the libFuzzer targets: bad input must end in klspec::Error (the one-line error a user sees);
// any other exception escapes the harness and libFuzzer reports it as a crash, as it does a sanitizer
// report.
#pragma once

#include <unistd.h>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace klspec::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// `text` cut at NUL bytes: the fuzzer's way to give one input several parts (files, stop strings, pieces).
inline std::vector<std::string_view> split_at_nul(std::string_view text) {
    std::vector<std::string_view> parts;
    size_t start = 0;
    for (size_t nul; (nul = text.find('\0', start)) != std::string_view::npos; start = nul + 1)
        parts.push_back(text.substr(start, nul - start));
    parts.push_back(text.substr(start));
    return parts;
}

inline const std::filesystem::path& scratch_root() {
    static const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("klspec-fuzz-" + std::to_string(getpid()));
    return dir;
}

// A scratch directory of this process, emptied for each input and removed when the fuzzer exits.
inline std::filesystem::path scratch_dir() {
    static const bool removed_at_exit = std::atexit([] {
                                            std::error_code ignored;
                                            std::filesystem::remove_all(scratch_root(), ignored);
                                        }) == 0;
    (void)removed_at_exit;
    const std::filesystem::path& dir = scratch_root();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

inline std::string write_file(const std::filesystem::path& path, std::string_view content) {
    std::ofstream(path, std::ios::binary).write(content.data(), static_cast<std::streamsize>(content.size()));
    return path.string();
}

}  // namespace klspec::fuzz
