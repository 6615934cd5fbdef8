#pragma once
// The switch key of the test suite. tests/runtime/test_keys.cpp puts it in the test
// process's environment (INA_SWITCH_KEY) at start-up, so in-process
// communicators and PSes and every `ina` child a test starts derive their job
// credential from it, as a trusted launcher's children would. Tests of the
// credentials themselves pass keys explicitly.
#include "runtime/auth.hpp"

namespace ina::test {

inline const rt::Key& test_switch_key() {
  static const rt::Key k = rt::parse_key("00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978", "test key");
  return k;
}

}  // namespace ina::test
