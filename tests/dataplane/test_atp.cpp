// ATP's switch program driven directly: collisions, completion through the
// PS, retransmissions.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cluster_fixture.hpp"
#include "schemes/registry.hpp"
#include "switch_rig.hpp"

namespace ina::test {
namespace {

// ---- ATP

TEST(AtpSwitch, CollisionGoesToPs) {
  FakeEffects fx;
  auto sw = make_sw("atp", 1);
  add_shared_jobs(*sw);
  const auto g = ramp(64, 1), h = ramp(64, 2);
  sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, g, 1), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  sw->on_packet(make_data(fx, 2, 0, 1, 2, 5, h, 1000), 0, fx);  // priorities mean nothing to ATP
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs2);
  EXPECT_EQ(out[0].h.job, 2);
  EXPECT_TRUE(out[0].h.has(flag::kCollision));
  EXPECT_EQ(out[0].h.bitmap, 0b10u);
  EXPECT_EQ(out[0].v, h);
  EXPECT_EQ(sw->occupied_by(1), 1u);
  EXPECT_EQ(sw->occupied_by(2), 0u);
  EXPECT_EQ(sw->stats().collisions, 1u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

// Values live in slots taken at reservation and given back when the
// task's result passes: 200 tasks one after another over 4 096 hashed
// aggregators use one slot, three at once use three. A reused slot holds
// the last task's values: a task of 10 values on it adds its other rank's
// 64 onto zeros. Catches: values kept per aggregator (a hashed pool then
// touches all of its memory), a reused slot not cleared.
TEST(AtpSwitch, ValuesTakeASlotOnlyWhileTheirTaskLives) {
  FakeEffects fx;
  auto sw = make_sw("atp", 4096);
  add_shared_jobs(*sw);
  for (uint32_t psn = 0; psn < 200; ++psn) {
    const auto g0 = ramp(psn % 2 ? 10 : 64, static_cast<int32_t>(psn) * 7, 3), g1 = ramp(64, -5, static_cast<int32_t>(psn));
    sw->on_packet(make_data(fx, 2, psn, 0, 2, 4, g0), 0, fx);
    ASSERT_TRUE(fx.take().empty());
    sw->on_packet(make_data(fx, 2, psn, 1, 2, 5, g1), 0, fx);
    auto out = fx.take();
    ASSERT_EQ(out.size(), 1u) << "psn " << psn;
    EXPECT_EQ(out[0].h.dst, kPs2);
    EXPECT_TRUE(out[0].h.has(flag::kPartial));
    std::vector<int32_t> sum = g1;
    for (size_t k = 0; k < g0.size(); ++k) sum[k] += g0[k];
    ASSERT_EQ(out[0].v, sum) << "psn " << psn;
    sw->on_packet(ps_result(fx, 2, psn, kPs2, 2, sum), 0, fx);
    fx.take();
    ASSERT_EQ(sw->occupied(), 0u);
  }
  EXPECT_EQ(sw->value_slots_used(), 1u);
  for (uint32_t psn = 1000; psn < 1003; ++psn) sw->on_packet(make_data(fx, 2, psn, 0, 2, 4, ramp(64, 1)), 0, fx);
  EXPECT_TRUE(fx.take().empty());
  EXPECT_EQ(sw->occupied(), 3u);
  EXPECT_EQ(sw->value_slots_used(), 3u);
  EXPECT_EQ(sw->stats().collisions, 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

// A task split by a collision: job 1's rank 0 finds the one aggregator
// held by job 2 and goes to the PS; job 2's result frees it; ranks 1 and 2
// arrive and reserve it. The switch remembers that rank 0 went around: the
// aggregate of ranks 1 and 2 is complete without it and goes to the PS,
// which holds rank 0 already (no timeout needed), and a late copy of rank 0
// is not added twice. Catches: a split task that waits for an RTO.
TEST(AtpSwitch, ATaskSplitByACollisionCompletesWithoutTheRankThatWentAround) {
  FakeEffects fx;
  auto sw = make_sw("atp", 1);
  add_shared_jobs(*sw);
  const auto g0 = ramp(64, 1), g1 = ramp(64, -20, 4), g2 = ramp(64, 300, -9), h = ramp(64, 2);
  sw->on_packet(make_data(fx, 2, 7, 0, 2, 4, h), 0, fx);  // job 2 holds the aggregator
  sw->on_packet(make_data(fx, 1, 3, 0, 3, 1, g0), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_TRUE(out[0].h.has(flag::kCollision));
  EXPECT_EQ(out[0].h.bitmap, 0b001u);
  sw->on_packet(make_data(fx, 2, 7, 1, 2, 5, ramp(64, 9)), 0, fx);  // job 2 completes
  ASSERT_EQ(fx.take().size(), 1u);
  sw->on_packet(ps_result(fx, 2, 7, kPs2, 2, ramp(64, 11)), 0, fx);  // job 2's result passes: the aggregator is free
  fx.take();
  EXPECT_EQ(sw->occupied(), 0u);
  sw->on_packet(make_data(fx, 1, 3, 1, 3, 2, g1), 0, fx);
  EXPECT_TRUE(fx.take().empty());
  EXPECT_EQ(sw->occupied_by(1), 1u);
  sw->on_packet(make_data(fx, 1, 3, 0, 3, 1, g0), 0, fx);  // a late copy of rank 0: already at the PS
  EXPECT_TRUE(fx.take().empty());
  sw->on_packet(make_data(fx, 1, 3, 2, 3, 3, g2), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u) << "the aggregate of the ranks that met here goes to the PS";
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_TRUE(out[0].h.has(flag::kPartial));
  EXPECT_EQ(out[0].h.bitmap, 0b110u);
  EXPECT_EQ(out[0].v, add(g1, g2));
  const auto& st = sw->stats();
  EXPECT_EQ(st.completed, 2u);
  EXPECT_EQ(st.duplicates, 1u);
  EXPECT_EQ(st.bypass_overwritten, 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

// Tasks go around the same aggregator while it is held. With one
// aggregator both record tables have one slot: the first task's record takes
// the first table, the second's the second, and the third overwrites the
// second's (counted); the first task's record survives, the second's is gone.
TEST(AtpSwitch, AThirdBypassRecordOverwritesTheSecondTablesAndIsCounted) {
  FakeEffects fx;
  auto sw = make_sw("atp", 1);
  add_shared_jobs(*sw);
  const auto g = ramp(64, 1);
  sw->on_packet(make_data(fx, 2, 7, 0, 2, 4, ramp(64, 2)), 0, fx);  // job 2 holds the aggregator
  sw->on_packet(make_data(fx, 1, 3, 0, 3, 1, g), 0, fx);
  sw->on_packet(make_data(fx, 1, 3, 1, 3, 2, g), 0, fx);  // the same task: one record
  sw->on_packet(make_data(fx, 1, 4, 0, 3, 1, g), 0, fx);  // the second table
  EXPECT_EQ(sw->stats().bypass_overwritten, 0u);
  sw->on_packet(make_data(fx, 1, 5, 0, 3, 1, g), 0, fx);  // overwrites task 4's record
  EXPECT_EQ(sw->stats().bypass_overwritten, 1u);
  EXPECT_EQ(fx.take().size(), 4u);
  EXPECT_EQ(sw->stats().collisions, 4u);
  // Job 2 completes and its result passes: the aggregator is free.
  sw->on_packet(make_data(fx, 2, 7, 1, 2, 5, ramp(64, 9)), 0, fx);
  fx.take();
  sw->on_packet(ps_result(fx, 2, 7, kPs2, 2, ramp(64, 11)), 0, fx);
  fx.take();
  // Task 3's rank 2 completes it without ranks 0 and 1 (its record held).
  sw->on_packet(make_data(fx, 1, 3, 2, 3, 3, g), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.bitmap, 0b100u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(AtpSwitch, CompletionGoesToPsAndAggregatorWaitsForPsAck) {
  FakeEffects fx;
  auto sw = make_sw("atp", 4);
  add_shared_jobs(*sw);
  const auto g0 = ramp(50, 1), g1 = ramp(50, -20, 4), g2 = ramp(50, 300, -9);
  const auto sum = add(add(g0, g1), g2);
  sw->on_packet(make_data(fx, 1, 12, 0, 3, 1, g0), 0, fx);
  sw->on_packet(make_data(fx, 1, 12, 1, 3, 2, g1), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  sw->on_packet(make_data(fx, 1, 12, 2, 3, 3, g2), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u) << "the aggregate goes to the PS only, not to the workers";
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.bitmap, 0b111u);
  EXPECT_EQ(out[0].v, sum);
  EXPECT_EQ(sw->occupied_by(1), 1u) << "kept until the PS ack passes";
  // A late duplicate of a first transmission: nothing new.
  sw->on_packet(make_data(fx, 1, 12, 2, 3, 3, g2), 0, fx);
  for (const auto& s : fx.take()) EXPECT_NE(s.h.type, PktType::Ack);
  EXPECT_EQ(sw->occupied_by(1), 1u);
  // The PS's ack to the multicast group releases the aggregator and reaches every worker.
  sw->on_packet(ps_result(fx, 1, 12, kPs1, 3, sum), 0, fx);
  expect_multicast(fx.take(), kJob1, 1, 12, sum);
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(sw->stats().released_by_ack, 1u);
  EXPECT_EQ(sw->stats().completed, 1u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(AtpSwitch, RetransmissionFlushesItsOwnPartialAndNeverReserves) {
  FakeEffects fx;
  auto sw = make_sw("atp", 1);
  add_shared_jobs(*sw);
  const auto g0 = ramp(64, 1), g1 = ramp(64, 1000);
  // A retransmission finding a free aggregator goes to the PS.
  sw->on_packet(make_data(fx, 1, 3, 1, 3, 2, g1, 0, flag::kResend), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(sw->occupied(), 0u);
  // One finding its own task flushes the partial to the PS. Rank 1 is at
  // the PS already (its first retransmission went there, and the switch
  // recorded it): the partial carries rank 0 alone.
  sw->on_packet(make_data(fx, 1, 3, 0, 3, 1, g0), 0, fx);
  sw->on_packet(make_data(fx, 1, 3, 1, 3, 2, g1, 0, flag::kResend), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(out[0].h.bitmap, 0b001u);
  EXPECT_EQ(out[0].v, g0);
  EXPECT_EQ(sw->occupied(), 0u);
  // With nothing gone around, a retransmission joins its task and flushes both.
  sw->on_packet(make_data(fx, 1, 4, 0, 3, 1, g0), 0, fx);
  sw->on_packet(make_data(fx, 1, 4, 1, 3, 2, g1, 0, flag::kResend), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.bitmap, 0b011u);
  EXPECT_EQ(out[0].v, add(g0, g1));
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

}  // namespace
}  // namespace ina::test
