// The communicator's configuration file (runtime/comm_config.cpp) read by the
// strict TOML reader (core/toml_reader.hpp): its syntax errors, the values it
// accepts as the text the shared settings table parses, the ones it refuses.
#include <gtest/gtest.h>

#include <string>

#include "runtime/communicator.hpp"

namespace ina {
namespace {

std::string error_of(const std::string& text) {
  try {
    CommConfig::from_toml_string(text, "bad.toml", CommConfig{});
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return "no error";
}

TEST(CommConfigToml, SyntaxErrorIsTheReadersNamingLineAndColumn) {
  EXPECT_EQ(error_of("[communicator]\njob = = 2\n"),
            "bad.toml:2:7: TOML syntax error: Error while parsing value: could not determine value type");
}

TEST(CommConfigToml, ScalarsReachTheSettingsAsTheirText) {
  const auto c = CommConfig::from_toml_string(
      "[communicator]\nwindow_kb = 1.5\nmax_window_kb = 2e3\nfast_retransmit = false\nscale = \"agree\"\n"
      "job_key = \"" + std::string(64, 'a') + "\"\n[faults]\nseed = 18446744073709551\n",
      "t.toml", CommConfig{});
  EXPECT_EQ(c.window_kb, 1.5);
  EXPECT_EQ(c.max_window_kb, 2000.0);
  EXPECT_FALSE(c.fast_retransmit);
  EXPECT_EQ(c.scale_mode, ScaleMode::Agree);
  EXPECT_EQ(c.job_key, std::string(64, 'a'));
  EXPECT_EQ(c.faults.seed, 18446744073709551u);
}

TEST(CommConfigToml, RefusesOtherValuesKeysAndSections) {
  EXPECT_EQ(error_of("[communicator]\njob = [1]\n"),
            "invalid bad.toml: communicator.job: expected a number, a boolean or a string");
  EXPECT_EQ(error_of("[communicator]\njob = 1979-05-27\n"),
            "invalid bad.toml: communicator.job: expected a number, a boolean or a string");
  EXPECT_EQ(error_of("[communicator]\nrank = 1.5\n"),
            "invalid bad.toml: communicator.rank '1.5': expected an integer in 0..63");
  EXPECT_EQ(error_of("[communicator]\njobb = 1\n"), "bad.toml: unknown key communicator.jobb");
  EXPECT_EQ(error_of("job = 1\n"), "bad.toml: unknown section [job] (expected [communicator] and [faults])");
  EXPECT_EQ(error_of("[netw]\nx = 1\n"), "bad.toml: unknown section [netw] (expected [communicator] and [faults])");
}

}  // namespace
}  // namespace ina
