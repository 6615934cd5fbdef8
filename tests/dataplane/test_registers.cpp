// dataplane/switch.hpp's Registers: a switch program's register arrays
// are zero at the start and mapped only where written, so building a
// switch touches none of their pages, whatever its memory (a fabric's idle
// ToRs cost nothing; a busy one holds the pages its tasks reach).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "dataplane/switch.hpp"
#include "resident_set.hpp"
#include "switch_rig.hpp"

namespace ina::test {
namespace {

class RegisterPages : public ::testing::TestWithParam<std::string> {};

// 1 Mi aggregators (256 MiB of 64-value aggregators): ATP's registers
// alone are ~110 MiB (key, bitmap, slot, completion, bypass records), DSA's
// ~48, and each would be resident at once if zero-filled.
TEST_P(RegisterPages, BuildingASwitchMapsNoneOfThem) {
  const auto before = static_cast<int64_t>(resident_bytes());
  const auto sw = make_sw(GetParam(), size_t{1} << 20);
  ASSERT_EQ(sw->aggregators(), size_t{1} << 20);
  ASSERT_GT(sw->register_bytes(), size_t{24} << 20) << "registers the test expects to stay unmapped";
  // (Rina's forwarding register starts at "none", not zero: 2 MiB written.)
  EXPECT_LT(static_cast<int64_t>(resident_bytes()) - before, int64_t{4} << 20)
      << GetParam() << ": " << sw->register_bytes() / (1 << 20) << " MiB of registers";
  EXPECT_EQ(sw->occupied(), 0u);  // read as free: zeros
}

// (Not P4INC-AOI: beside its registers it keeps an instrumentation record
// per aggregator, a std::vector each, built at construction.)
INSTANTIATE_TEST_SUITE_P(Schemes, RegisterPages, ::testing::Values("atp", "dsa", "grid", "switchml", "rina"));

}  // namespace
}  // namespace ina::test
