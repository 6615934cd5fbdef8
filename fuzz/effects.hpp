#pragma once
// The node targets' engine: the tests' fake Effects (tests/fake_effects.hpp)
// with every broken contract a finding at the call that broke it. A node
// target (the switch and the PS keep no packets between calls) calls
// settle() after each call into the node: it still owning a packet is a leak.
#include <cstdlib>
#include <string>

#include "../tests/fake_effects.hpp"
#include "fuzz.hpp"

namespace ina::fuzz {

// Makes every violation `fx` sees a finding (printed, then abort).
inline void report_violations_as_findings(test::FakeEffects& fx) {
  fx.on_violation = [](const std::string& what) { FUZZ_CHECK(false, "%s", what.c_str()); };
}

// INA_FUZZ_VERBOSE=1: the targets print what an input exercised (to check seeds).
inline bool verbose() {
  static const bool v = std::getenv("INA_FUZZ_VERBOSE") != nullptr;
  return v;
}

}  // namespace ina::fuzz
