// The ECN marking rule both engines apply (proto/ecn.hpp): a congested
// queue marks CE on every packet type, counts a packet already marked
// again, and leaves every other flag alone. The simulator's queue thresholds:
// Link.EcnMarksWhenBacklogExceedsThreshold.
#include <gtest/gtest.h>

#include "proto/ecn.hpp"

namespace ina {
namespace {

TEST(EcnMark, ACongestedQueueMarksEveryPacketType) {
  for (unsigned t = 1; t <= kMaxPktType; ++t) {
    Header h;
    h.type = static_cast<PktType>(t);
    h.flags = flag::kPartial | flag::kResend;
    EXPECT_TRUE(ecn_mark(h, true)) << "type " << t;
    EXPECT_EQ(h.flags, flag::kPartial | flag::kResend | flag::kEcn) << "type " << t;
  }
}

TEST(EcnMark, AnUncongestedQueueLeavesThePacketAlone) {
  Header h;
  h.type = PktType::Data;
  h.flags = flag::kEce;
  EXPECT_FALSE(ecn_mark(h, false));
  EXPECT_EQ(h.flags, flag::kEce);
  h.flags = flag::kEcn;  // marked upstream: kept, not counted here
  EXPECT_FALSE(ecn_mark(h, false));
  EXPECT_EQ(h.flags, flag::kEcn);
}

TEST(EcnMark, APacketMarkedUpstreamCountsAgainAtTheNextCongestedQueue) {
  Header h;
  h.type = PktType::RingData;
  h.flags = flag::kEcn;
  EXPECT_TRUE(ecn_mark(h, true));
  EXPECT_EQ(h.flags, flag::kEcn);
}

}  // namespace
}  // namespace ina
