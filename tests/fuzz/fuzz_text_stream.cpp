// Generated text as the server streams it: stop strings and token pieces (UTF-8 split anywhere) from the
// input's NUL-separated parts, the first byte saying how many parts are stop strings. Properties: what
// take_stable releases, in order, is the final text; the final text holds no stop string; the provenance
// spans cover exactly the released text.
#include <algorithm>

#include "core/text_stream.h"
#include "fuzz_support.h"
#include "server/provenance.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const auto parts = klspec::fuzz::split_at_nul(klspec::fuzz::as_text(data + 1, size - 1));
    const size_t n_stops = std::min<size_t>(data[0] % 4, parts.size());
    std::vector<std::string> stops(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(n_stops));
    klspec::TextStream stream(stops);
    klspec::server::ProvenanceSpans spans;
    std::string released, covered;
    const auto release = [&] {
        const std::string text(stream.take_stable());
        released += text;
        for (const auto& span : spans.take(text)) covered += span.text;
    };
    for (size_t i = n_stops; i < parts.size(); ++i) {
        spans.add_token(parts[i], {});
        const bool stopped = stream.append(parts[i]);
        release();
        if (stopped) break;
    }
    stream.finish();
    release();
    if (released != stream.text() || covered != released) __builtin_trap();
    for (const std::string& stop : stops)
        if (!stop.empty() && stream.text().find(stop) != std::string::npos) __builtin_trap();
    return 0;
}
