#pragma once

#include <stdexcept>
#include <string>

namespace klspec {

// A user-facing failure (bad input, unusable model, ...). Its message is one line, shown as is.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The prompt itself is unusable: it does not tokenize, is empty, or does not fit the context
// (`exceeds_context`). A server answers it as a fault of the request's prompt.
class PromptError : public Error {
public:
    explicit PromptError(const std::string& message, bool too_long = false)
        : Error(message), exceeds_context(too_long) {}
    bool exceeds_context;
};

}  // namespace klspec
