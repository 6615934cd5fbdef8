// host::RecordRing: the records of a transport's packets sent and not
// done, checked against a plain map of them; one packet that stays out
// does not make the ring span everything sent after it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <vector>

#include "host/record_ring.hpp"

namespace ina::host {
namespace {

struct Rec {
  uint64_t tag = 0;
};

// Sends packets 0, 1, ... keeping `window` open; each result is the
// oldest open packet's but `stuck`, which is done once `released_at` packets were sent.
struct Flow {
  RecordRing<Rec> ring;
  uint32_t low = 0, next = 0;
  std::map<uint32_t, uint64_t> open;  // the model: open packets and their tags

  void send() {
    ring.open(low, next).tag = 1000 + next;
    open[next] = 1000 + next;
    ++next;
  }
  void finish(uint32_t idx) {
    ASSERT_FALSE(ring.done(idx)) << idx;
    ring.set_done(idx);
    open.erase(idx);
    while (low < next && ring.done(low)) ++low;
  }
  void check() {
    for (uint32_t i = low; i < next; ++i) {
      const bool is_open = open.count(i) > 0;
      ASSERT_EQ(ring.done(i), !is_open) << "packet " << i;
      if (is_open) {
        ASSERT_EQ(ring[i].tag, open[i]) << "packet " << i;
      }
    }
    // next_open walks exactly the open packets.
    std::vector<uint32_t> walked, expected;
    for (uint32_t i = ring.next_open(low, next); i < next; i = ring.next_open(i + 1, next)) walked.push_back(i);
    for (const auto& [i, tag] : open) expected.push_back(i);
    ASSERT_EQ(walked, expected);
  }
};

TEST(RecordRing, InOrderResultsKeepTheRingAtTheWindow) {
  Flow f;
  for (int k = 0; k < 4; ++k) f.send();
  for (int k = 0; k < 1000; ++k) {
    f.finish(f.low);
    f.send();
  }
  f.check();
  EXPECT_EQ(f.ring.capacity(), RecordRing<Rec>::kMinRecs);
  EXPECT_EQ(f.ring.stragglers(), 0u);
}

// Packet 0 stays out while 20 000 others go and come back, four at a
// time: the ring stays within a few windows and 0 keeps its record.
TEST(RecordRing, OnePacketStayingOutDoesNotMakeTheRingSpanTheRest) {
  Flow f;
  for (int k = 0; k < 5; ++k) f.send();
  for (int k = 0; k < 20000; ++k) {
    f.finish(f.ring.next_open(1, f.next));  // the oldest open one but packet 0
    f.send();
  }
  f.check();
  EXPECT_EQ(f.low, 0u);
  EXPECT_LE(f.ring.capacity(), 32u) << "span " << f.next;  // without eviction: 32 768
  EXPECT_EQ(f.ring.stragglers(), 1u);
  EXPECT_EQ(f.ring[0].tag, 1000u);
  f.ring[0].tag = 7;  // a straggler's record is the caller's to change, like any other
  EXPECT_EQ(f.ring[0].tag, 7u);
  f.open[0] = 7;
  f.check();
  f.finish(0);
  EXPECT_EQ(f.ring.stragglers(), 0u);
  EXPECT_EQ(f.low, f.ring.next_open(0, f.next));
  f.check();
}

// Random results (out of order; now and then a packet stays out for
// thousands of sends, several at once; windows that grow and shrink): the
// ring always agrees with the map, and stays within a few windows.
TEST(RecordRing, RandomResultsAgreeWithAMapOfTheOpenPackets) {
  size_t most_stragglers = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    Flow f;
    std::multimap<int, uint32_t> due;  // step -> packet
    for (int step = 0; step < 6000; ++step) {
      const size_t window = 1 + (step / 500 % 4) * 40;
      while (f.open.size() < window && rng() % 8) {
        due.emplace(step + 1 + static_cast<int>(rng() % 20) + (rng() % 40 == 0 ? 3000 : 0), f.next);
        f.send();
      }
      for (auto it = due.begin(); it != due.end() && it->first <= step;) {
        f.finish(it->second);
        it = due.erase(it);
      }
      if (step % 97 == 0) f.check();
      most_stragglers = std::max(most_stragglers, f.ring.stragglers());
    }
    f.check();
    EXPECT_LE(f.ring.capacity(), 8 * 128u) << "open " << f.open.size() << ", span " << f.next - f.low;
  }
  EXPECT_GE(most_stragglers, 5u) << "the runs should leave several packets behind the ring at once";
}

}  // namespace
}  // namespace ina::host
