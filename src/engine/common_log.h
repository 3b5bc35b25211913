// llama.cpp's common library logs its errors itself, over several lines, beside the result that reports
// them; klspec reports that result in one line. Engine-internal: includes common's log.h.
#pragma once

#include <mutex>

#include "log.h"  // llama.cpp's common library (include/llama-common)

namespace klspec {

inline void silence_common_log() {
    static std::once_flag once;
    std::call_once(once, [] { common_log_set_verbosity_thold(LOG_LEVEL_OUTPUT); });
}

}  // namespace klspec
