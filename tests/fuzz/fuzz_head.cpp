// An AutoJudge head file (`--judge-head FILE`): a head or one klspec::Error.
#include "core/error.h"
#include "core/judges/autojudge.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path =
        klspec::fuzz::write_file(klspec::fuzz::scratch_dir() / "head.json", klspec::fuzz::as_text(data, size));
    try {
        (void)klspec::AutoJudgeHead::load(path);
    } catch (const klspec::Error&) {}
    return 0;
}
