// A mining directory (`train-judge --mined DIR`): the input's NUL-separated parts are meta.json,
// labels.jsonl, problems.jsonl and features.f32.
#include "autojudge/mining_store.h"
#include "core/error.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto dir = klspec::fuzz::scratch_dir();
    const auto parts = klspec::fuzz::split_at_nul(klspec::fuzz::as_text(data, size));
    const char* const files[] = {"meta.json", "labels.jsonl", "problems.jsonl", "features.f32"};
    for (size_t i = 0; i < parts.size() && i < std::size(files); ++i)
        klspec::fuzz::write_file(dir / files[i], parts[i]);
    try {
        (void)klspec::read_mined(dir.string());
    } catch (const klspec::Error&) {}
    return 0;
}
