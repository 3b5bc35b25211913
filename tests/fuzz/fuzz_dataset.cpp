// A JSONL dataset file (`--dataset FILE`): problems or one klspec::Error naming the line.
#include "core/error.h"
#include "eval/dataset.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path =
        klspec::fuzz::write_file(klspec::fuzz::scratch_dir() / "dataset.jsonl", klspec::fuzz::as_text(data, size));
    try {
        (void)klspec::read_problems(path);
    } catch (const klspec::Error&) {}
    return 0;
}
