// The scorers read model output, which is anything: every scorer extracts an answer or none and compares
// it with a gold answer (the input's second NUL-separated part) without throwing.
#include "core/answer_scoring.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto parts = klspec::fuzz::split_at_nul(klspec::fuzz::as_text(data, size));
    const std::string_view gold = parts.size() > 1 ? parts[1] : "42";
    for (const char* name : {"gsm8k", "mmlu-pro", "lcb-output", "math"}) {
        const klspec::Scorer scorer = klspec::parse_scorer(name);
        (void)klspec::extract_answer(scorer, parts[0]);
        (void)klspec::is_correct(scorer, parts[0], gold);
    }
    return 0;
}
