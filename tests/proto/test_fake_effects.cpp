// The tests' and fuzz targets' fake engine (fake_effects.hpp): what it
// records, and the contract breaches it reports.
#include <gtest/gtest.h>

#include "fake_effects.hpp"

namespace ina::test {
namespace {

// A node's send is recorded with its payload and its packet goes back to the
// pool; freeing or sending it again is a violation, not a second put.
TEST(FakeEffects, RecordsSendsAndReportsADoubleFree) {
  FakeEffects fx(8);
  std::vector<std::string> seen;
  fx.on_violation = [&](const std::string& what) { seen.push_back(what); };
  Packet* p = fx.alloc();
  p->h.type = PktType::Data;
  p->h.nworkers = 2;
  p->h.bitmap = 1;
  p->h.count = 2;
  p->payload()[0] = 5;
  p->payload()[1] = -6;
  EXPECT_EQ(fx.live(), 1u);
  fx.send(p);
  EXPECT_EQ(fx.live(), 0u);
  ASSERT_EQ(fx.sent.size(), 1u);
  EXPECT_EQ(fx.sent[0].v, (std::vector<int32_t>{5, -6}));
  EXPECT_EQ(fx.sent[0].packet()->payload()[1], -6);
  EXPECT_TRUE(fx.violations().empty());
  fx.free(p);
  EXPECT_EQ(fx.freed, 0u);
  EXPECT_EQ(fx.live(), 0u);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_NE(seen[0].find("free of a packet the node does not own"), std::string::npos) << seen[0];
}

// A packet the node still owns after a call is a leak; one the decoder
// would refuse (count beyond the pool's capacity) is reported when sent.
TEST(FakeEffects, SettleReportsALeakAndSendChecksTheWire) {
  FakeEffects fx(4);
  Packet* kept = fx.alloc();
  EXPECT_EQ(fx.settle("on_packet").size(), 0u);
  ASSERT_EQ(fx.violations().size(), 1u);
  EXPECT_EQ(fx.violations()[0], "on_packet returned still owning 1 packet(s) (leak)");
  kept->h.nworkers = 1;
  kept->h.count = 5;
  fx.send(kept);
  ASSERT_EQ(fx.violations().size(), 2u);
  EXPECT_NE(fx.violations()[1].find("count 5 > capacity 4"), std::string::npos) << fx.violations()[1];
  EXPECT_EQ(fx.owned(), 0u);
}

// Timers fire in deadline order, ties in the order they were set; the record keeps every call.
TEST(FakeEffects, AdvanceFiresTimersInDeadlineOrder) {
  FakeEffects fx;
  fx.set_timer(30, 1);
  fx.set_timer(10, 2);
  fx.set_timer(10, 3);
  fx.set_timer(50, 4);
  std::vector<std::pair<uint64_t, Time>> fired;
  fx.advance(40, [&](uint64_t token, Time at) { fired.emplace_back(token, at); });
  EXPECT_EQ(fired, (std::vector<std::pair<uint64_t, Time>>{{2, 10}, {3, 10}, {1, 30}}));
  EXPECT_EQ(fx.now(), 40);
  EXPECT_EQ(fx.next_timer(), 50);
  EXPECT_EQ(fx.pending_timers(), 1u);
  EXPECT_EQ(fx.timers.size(), 4u);
}

}  // namespace
}  // namespace ina::test
