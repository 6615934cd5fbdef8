#include "core/config_error.hpp"

#include <fmt/format.h>

namespace ina {

void fail_field(std::string_view origin, std::string_view key, std::string_view what, std::string_view value) {
  throw ConfigError(fmt::format("{}: field '{}': {} (value: {})", origin, key, what, value));
}

}  // namespace ina
