// host::DelaySignal: a round trip more than the target above the smallest
// one seen is a congestion signal; the smallest is kept across samples.
#include <gtest/gtest.h>

#include "host/delay_signal.hpp"

namespace ina {
namespace {

TEST(DelaySignal, ARoundTripMoreThanTheTargetAboveTheSmallestSignals) {
  host::DelaySignal d(100 * kUs);
  EXPECT_EQ(d.min_rtt(), kNever);
  EXPECT_FALSE(d.sample(50 * kUs));
  EXPECT_FALSE(d.sample(150 * kUs));  // exactly the target above: not yet
  EXPECT_TRUE(d.sample(150 * kUs + 1));
  EXPECT_FALSE(d.sample(20 * kUs));    // a new smallest
  EXPECT_EQ(d.min_rtt(), 20 * kUs);
  EXPECT_TRUE(d.sample(121 * kUs));    // measured against the new smallest
  EXPECT_FALSE(d.sample(120 * kUs));
}

TEST(DelaySignal, TargetZeroNeverSignals) {
  host::DelaySignal d(0);
  EXPECT_FALSE(d.sample(1 * kUs));
  EXPECT_FALSE(d.sample(10 * kSec));
  EXPECT_EQ(d.min_rtt(), 1 * kUs);
}

}  // namespace
}  // namespace ina
