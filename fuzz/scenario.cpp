// Fuzz target: the scenario parser (src/experiment/scenario.cpp):
// parse_scenario on TOML text, which also expands and validates every point.
// A ScenarioError is the documented answer to bad input; anything else
// (crash, sanitizer report, another exception type) is a finding.
#include <string>

#include "experiment/scenario.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const ina::exp::Scenario sc = ina::exp::parse_scenario(text, "<fuzz>");
    // A scenario that loads expands again to the same points.
    const auto points = ina::exp::expand(sc);
    FUZZ_CHECK(!points.empty(), "a loaded scenario has no points");
  } catch (const ina::exp::ScenarioError&) {
  }
  return 0;
}
