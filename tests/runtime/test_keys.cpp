#include "test_keys.hpp"

#include <cstdlib>

namespace {
// Runs before any test: every process the suite starts inherits the key.
const bool kKeyInEnvironment = [] {
  return ::setenv("INA_SWITCH_KEY", ina::rt::to_hex(ina::test::test_switch_key()).c_str(), 1) == 0;
}();
}  // namespace
