// The server's request parser on any body, for both endpoints: it returns a request or an API error and
// never throws.
#include "fuzz_support.h"
#include "server/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace klspec::server;
    RequestDefaults defaults;
    defaults.n_ctx = 512;
    for (const Endpoint endpoint : {Endpoint::Completions, Endpoint::ChatCompletions}) {
        const auto parsed = parse_completion_request(klspec::fuzz::as_text(data, size), endpoint, defaults);
        if (const auto* error = std::get_if<ApiError>(&parsed)) {
            if (error->status < 400 || error->status >= 500 || error->message.empty()) __builtin_trap();
            (void)error->to_json().dump();
        }
    }
    return 0;
}
