// core/: the DeadlineQueue behind every node's single engine timer, and the
// RFC 6298 RttEstimator (exact values computed by hand from alpha = 1/8,
// beta = 1/4, K = 4).
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "core/deadline_queue.hpp"
#include "core/rtt_estimator.hpp"

namespace ina {
namespace {

using Fired = std::vector<std::pair<int, Time>>;

// ---------------------------------------------------------------- DeadlineQueue

// Catches: re-arming the engine timer for every push (one timer per packet
// instead of one per RTO), or not re-arming for an earlier (backed-off heap) deadline.
TEST(DeadlineQueue, PushAsksToArmOnlyForAnEarlierDeadline) {
  DeadlineQueue<int> q;
  EXPECT_TRUE(q.push(10, 1));   // nothing armed yet
  EXPECT_FALSE(q.push(20, 2));  // later than the armed 10
  EXPECT_FALSE(q.push(10, 3));  // equal: the armed timer covers it
  EXPECT_TRUE(q.push(5, 4));    // earlier (goes to the heap): re-arm at 5
  EXPECT_EQ(q.size(), 4u);
}

// Catches: expiring the FIFO before the heap (or vice versa) instead of
// merging them in deadline order, and firing items that are not due.
TEST(DeadlineQueue, ExpiresDueItemsInDeadlineOrderAcrossFifoAndHeap) {
  DeadlineQueue<int> q;
  q.push(10, 1);
  q.push(30, 2);
  q.push(20, 3);  // below the FIFO's back: heap
  q.push(5, 4);   // heap
  q.push(40, 5);  // FIFO
  Fired fired;
  const Time next = q.expire(30, [&](int k, Time at) { fired.emplace_back(k, at); }, [](int, Time) { return true; });
  EXPECT_EQ(fired, (Fired{{4, 5}, {1, 10}, {3, 20}, {2, 30}}));
  EXPECT_EQ(next, 40) << "the caller re-arms at the earliest remaining deadline";
  EXPECT_EQ(q.size(), 1u);
}

// Catches: a ring that stays the size of the live span, so that nearly every
// push finds it full, drops one dead item and asks `live` about the live one
// behind it too (for a transport, a second look at a record out of cache).
TEST(DeadlineQueue, PushAsksLiveAboutOncePerItemWhenTheLiveSpanFillsTheRing) {
  DeadlineQueue<int> q;
  constexpr int kLive = 120, kPushes = 20000;  // 120 live items: 8 short of a 128-item ring
  int pushed = 0;
  int64_t calls = 0;
  const auto live = [&](int k, Time) {
    ++calls;
    return k >= pushed - kLive;
  };
  for (int k = 0; k < kPushes; ++k, ++pushed) q.push(k, k, live);
  // Each dead item is asked about once when dropped, plus one live item per
  // batch of drops; a ring of 128 would drop 8 per batch (9 asks per 8 pushes).
  EXPECT_LE(calls, kPushes + kPushes / 50);
  EXPECT_LE(q.size(), 4u * kLive) << "dead items are still dropped";
}

// Catches: a ring that spans every push since a live item at its front (a
// packet waiting out its timeout while the ones sent after it are
// answered): the dead items behind that front go, it and the live ones
// stay, in order, and `live` is asked a few times per push at most.
TEST(DeadlineQueue, ALiveItemAtTheFrontDoesNotMakeTheRingSpanEveryPush) {
  DeadlineQueue<int> q;
  constexpr int kPushes = 20000, kLive = 10;
  int pushed = 0;
  int64_t calls = 0;
  const auto live = [&](int k, Time) {
    ++calls;
    return k == 0 || k > pushed - kLive;
  };
  for (int k = 0; k <= kPushes; ++k, pushed = k) q.push(100 + k, k, live);
  EXPECT_LE(q.size(), 64u) << "without dropping behind the front: " << kPushes + 1;
  EXPECT_LE(calls, 4 * kPushes);
  Fired fired;
  q.expire(100 + kPushes, [&](int k, Time at) { fired.emplace_back(k, at); }, live);
  ASSERT_GE(fired.size(), static_cast<size_t>(kLive + 1));
  EXPECT_EQ(fired.front(), (std::pair<int, Time>{0, 100}));
  Fired tail(fired.end() - kLive, fired.end());
  Fired expected;
  for (int k = kPushes - kLive + 1; k <= kPushes; ++k) expected.emplace_back(k, 100 + k);
  EXPECT_EQ(tail, expected) << "the live ones, in deadline order";
}

// Catches: a superseded (earlier-armed, now stale) engine timer firing items
// early, or multiplying timers.
TEST(DeadlineQueue, AFiringBeforeTheArmedTimeIsIgnored) {
  DeadlineQueue<int> q;
  q.push(100, 1);
  int calls = 0;
  EXPECT_EQ(q.expire(99, [&](int, Time) { ++calls; }, [](int, Time) { return true; }), kNever);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.expire(100, [&](int, Time) { ++calls; }, [](int, Time) { return true; }), kNever);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(q.size(), 0u);
}

// Catches: arming the timer for items the owner no longer cares about (acked
// packets), which turns one timer per RTO into one per packet.
TEST(DeadlineQueue, DeadItemsAtTheFrontAreSkippedBeforeReArming) {
  DeadlineQueue<int> q;
  for (int k = 1; k <= 5; ++k) q.push(10 * k, k);  // 10..50
  Fired fired;
  const Time next = q.expire(10, [&](int k, Time at) { fired.emplace_back(k, at); },
                             [](int k, Time) { return k >= 4; });  // 2 and 3 were acked
  EXPECT_EQ(fired, (Fired{{1, 10}}));
  EXPECT_EQ(next, 40);
  EXPECT_EQ(q.size(), 2u);
  // The next firing at 40 hands out 4 only.
  fired.clear();
  EXPECT_EQ(q.expire(40, [&](int k, Time at) { fired.emplace_back(k, at); }, [](int, Time) { return true; }), 50);
  EXPECT_EQ(fired, (Fired{{4, 40}}));
}

// Catches: an expire() that ignores pushes made by its own callback (a
// retransmission re-queued with a backoff) and either loses them or asks for
// a second timer at the same time.
TEST(DeadlineQueue, PushesFromTheCallbackAreArmedExactlyOnce) {
  DeadlineQueue<int> q;
  q.push(10, 1);
  q.push(70, 2);
  std::vector<Time> armed_by_callback;
  Fired fired;
  const Time next = q.expire(10, [&](int k, Time at) {
    fired.emplace_back(k, at);
    if (q.push(30, 9)) armed_by_callback.push_back(30);  // the backed-off retry
  }, [](int, Time) { return true; });
  EXPECT_EQ(armed_by_callback, (std::vector<Time>{30}));
  EXPECT_EQ(next, kNever) << "the callback already armed an earlier timer";
  fired.clear();
  EXPECT_EQ(q.expire(30, [&](int k, Time at) { fired.emplace_back(k, at); }, [](int, Time) { return true; }), 70);
  EXPECT_EQ(fired, (Fired{{9, 30}}));
}

// Catches: FIFO order lost among equal deadlines (packets sent in the same
// instant must time out in PSN order).
TEST(DeadlineQueue, EqualDeadlinesKeepPushOrder) {
  DeadlineQueue<int> q;
  for (int k : {7, 3, 9, 1}) q.push(50, k);
  std::vector<int> order;
  q.expire(50, [&](int k, Time) { order.push_back(k); }, [](int, Time) { return true; });
  EXPECT_EQ(order, (std::vector<int>{7, 3, 9, 1}));
}

// ---------------------------------------------------------------- RttEstimator

// Hand computation (RFC 6298): first sample R: srtt = R, rttvar = R/2;
// then rttvar = 3/4 rttvar + 1/4 |srtt - R|, srtt = 7/8 srtt + 1/8 R;
// timeout = srtt + 4 rttvar, clamped to [floor, ceiling].
// Catches: swapped alpha/beta, updating srtt before rttvar (RFC order), K != 4.
TEST(RttEstimator, ExactEwmaForAKnownSampleSequence) {
  RttEstimator e(1 * kMs, 200 * kMs);
  EXPECT_EQ(e.timeout(), 1 * kMs) << "before any sample: the floor";
  EXPECT_EQ(e.srtt(), 0);
  e.sample(10 * kMs);  // srtt 10, rttvar 5
  EXPECT_EQ(e.srtt(), 10 * kMs);
  EXPECT_EQ(e.timeout(), 30 * kMs);
  e.sample(2 * kMs);  // err 8: rttvar (15 + 8) / 4 = 5.75; srtt (70 + 2) / 8 = 9
  EXPECT_EQ(e.srtt(), 9 * kMs);
  EXPECT_EQ(e.timeout(), 32 * kMs);  // 9 + 23
  e.sample(9 * kMs);  // err 0: rttvar 17.25 / 4 = 4.3125; srtt 9
  EXPECT_EQ(e.srtt(), 9 * kMs);
  EXPECT_EQ(e.timeout(), 26'250 * kUs);  // 9 + 17.25
  e.sample(17 * kMs);  // err 8: rttvar (12.9375 + 8) / 4 = 5.234375; srtt (63 + 17) / 8 = 10
  EXPECT_EQ(e.srtt(), 10 * kMs);
  EXPECT_EQ(e.timeout(), 30'937'500 * kNs);  // 10 + 20.9375
}

// Catches: a missing or wrong clamp (a 1 ms floor is DSA §VI's; without it a
// microsecond RTT gives a microsecond RTO and spurious retransmissions).
TEST(RttEstimator, FloorAndCeilingClampTheTimeoutNotTheEstimate) {
  RttEstimator e(1 * kMs, 200 * kMs);
  e.sample(100 * kUs);  // 100 + 4 * 50 = 300 us: below the floor
  EXPECT_EQ(e.srtt(), 100 * kUs);
  EXPECT_EQ(e.timeout(), 1 * kMs);
  RttEstimator c(1 * kMs, 200 * kMs);
  c.sample(150 * kMs);  // 150 + 300 = 450 ms: above the ceiling
  EXPECT_EQ(c.srtt(), 150 * kMs);
  EXPECT_EQ(c.timeout(), 200 * kMs);
  c.sample(150 * kMs);  // rttvar 56.25: 150 + 225 = 375: still clamped
  EXPECT_EQ(c.timeout(), 200 * kMs);
  for (int k = 0; k < 30; ++k) c.sample(150 * kMs);  // rttvar decays to ~0: timeout -> 150 ms
  EXPECT_GE(c.timeout(), 150 * kMs);
  EXPECT_LT(c.timeout(), 151 * kMs);
}

}  // namespace
}  // namespace ina
