#pragma once
// The error of every strict reader of a settings file (scenarios, AOI and GRID
// plans, the runtime's layouts): its message names the origin (a file, or a
// command-line flag), the field and the value.
#include <stdexcept>
#include <string_view>

namespace ina {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws the ConfigError "<origin>: field '<key>': <what> (value: <value>)".
[[noreturn]] void fail_field(std::string_view origin, std::string_view key, std::string_view what,
                             std::string_view value);

}  // namespace ina
