// The receiving side of a PS stream with delayed cumulative
// acknowledgements (host::delayed_ack_due, SparseConfig::ack_every).
#include <gtest/gtest.h>

#include <vector>

#include "host/sparse.hpp"

using namespace ina;

namespace {
struct Rx {
  std::vector<bool> got;
  uint32_t cum = 0, pending = 0;
  // Packet `psn` arrives; returns whether it is acknowledged now.
  bool arrive(uint32_t psn, bool ack_now = false, unsigned every = 2) {
    if (psn >= got.size()) got.resize(psn + 1, false);
    const bool fresh = !got[psn];
    got[psn] = true;
    return host::delayed_ack_due(got, psn, fresh, ack_now, every, cum, pending);
  }
};
}  // namespace

// TCP's delayed acknowledgement: every second packet in order; at once for
// one out of order, one that fills a gap, a repeat, or one the sender asks
// for; each acknowledgement counts every packet that arrived in order.
TEST(SparseDelayedAck, EverySecondInOrderAndAtOnceOtherwise) {
  Rx r;
  EXPECT_FALSE(r.arrive(0));
  EXPECT_EQ(r.cum, 1u);
  EXPECT_TRUE(r.arrive(1));
  EXPECT_EQ(r.cum, 2u);
  EXPECT_FALSE(r.arrive(2));
  EXPECT_TRUE(r.arrive(4));  // 3 is missing: at once, still counting to 3
  EXPECT_EQ(r.cum, 3u);
  EXPECT_TRUE(r.arrive(3));  // fills the gap
  EXPECT_EQ(r.cum, 5u);
  EXPECT_FALSE(r.arrive(5));
  EXPECT_TRUE(r.arrive(5));  // a repeat: its acknowledgement was lost
  EXPECT_EQ(r.cum, 6u);
  EXPECT_TRUE(r.arrive(6, true));  // the sender can send nothing more
  EXPECT_EQ(r.pending, 0u);
  EXPECT_FALSE(r.arrive(7));
  EXPECT_TRUE(r.arrive(8));  // the pending count restarted after the forced one
  EXPECT_EQ(r.cum, 9u);
}

TEST(SparseDelayedAck, EveryPacketWhenAckEveryIsOne) {
  Rx r;
  for (uint32_t i = 0; i < 5; ++i) EXPECT_TRUE(r.arrive(i, false, 1)) << i;
  EXPECT_EQ(r.cum, 5u);
}
