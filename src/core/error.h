#pragma once

#include <stdexcept>

namespace klspec {

// A user-facing failure (bad input, unusable model, ...). Its message is one line, shown as is.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace klspec
