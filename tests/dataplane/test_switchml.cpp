// SwitchML's switch program driven directly: slot indices, the two pools,
// results kept for retransmissions, stale packets.
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

// ---- SwitchML


TEST(SwitchMLSwitch, SlotIndexIsOffsetPlusPoolPlusPsnModS) {
  FakeEffects fx;
  auto sw = make_sw("switchml", 16);
  add_isolated_job(*sw, 1, {1}, 4, 6);   // S = 3, slots 4..9
  add_isolated_job(*sw, 2, {2}, 10, 6);  // S = 3, slots 10..15
  for (uint32_t psn = 0; psn < 14; ++psn) {
    for (uint16_t job : {1, 2}) {
      const uint32_t off = job == 1 ? 4 : 10, s = 3;
      sw->on_packet(make_data(fx, job, psn, 0, 1, job, ramp(8, static_cast<int32_t>(psn))), 0, fx);
      auto out = fx.take();
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].h.type, PktType::Ack);
      EXPECT_EQ(out[0].h.dst, job);
      EXPECT_EQ(sw->holder_of(job, psn), off + ((psn / s) % 2) * s + psn % s) << "job " << job << " psn " << psn;
      EXPECT_EQ(out[0].v, ramp(8, static_cast<int32_t>(psn)));
    }
    EXPECT_EQ(sw->occupied_by(1), std::min<size_t>(psn + 1, 6));
    EXPECT_EQ(sw->occupied_by(2), std::min<size_t>(psn + 1, 6));
  }
  EXPECT_EQ(sw->stats().to_ps, 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(SwitchMLSwitch, PsnsTwoPoolsApartShareASlotOthersDoNot) {
  FakeEffects fx;
  auto sw = make_sw("switchml", 16);
  add_isolated_job(*sw, 1, {1, 2}, 0, 6);  // S = 3
  const auto a = ramp(64, 1), b = ramp(64, 2);
  // psn 0 and psn 3 use different slots: both complete.
  sw->on_packet(make_data(fx, 1, 0, 0, 2, 1, a), 0, fx);
  sw->on_packet(make_data(fx, 1, 3, 0, 2, 1, a), 0, fx);
  sw->on_packet(make_data(fx, 1, 0, 1, 2, 2, b), 0, fx);
  expect_multicast(fx.take(), {1, 2}, 1, 0, add(a, b));
  sw->on_packet(make_data(fx, 1, 3, 1, 2, 2, b), 0, fx);
  expect_multicast(fx.take(), {1, 2}, 1, 3, add(a, b));
  EXPECT_EQ(sw->stats().stale, 0u);
}

TEST(SwitchMLSwitch, RetransmissionAfterCompletionIsServedFromKeptResult) {
  FakeEffects fx;
  auto sw = make_sw("switchml", 16);
  add_isolated_job(*sw, 1, {1, 2, 3}, 0, 8);  // S = 4
  const auto g0 = ramp(64, 1), g1 = ramp(64, -5), g2 = ramp(64, 77, 2);
  const auto sum = add(add(g0, g1), g2);
  sw->on_packet(make_data(fx, 1, 2, 0, 3, 1, g0), 0, fx);
  sw->on_packet(make_data(fx, 1, 2, 1, 3, 2, g1), 0, fx);
  sw->on_packet(make_data(fx, 1, 2, 2, 3, 3, g2), 0, fx);
  expect_multicast(fx.take(), {1, 2, 3}, 1, 2, sum);
  // Worker of rank 1 lost the result: its retransmission gets it, unicast.
  sw->on_packet(make_data(fx, 1, 2, 1, 3, 2, g1, 0, flag::kResend), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::Ack);
  EXPECT_EQ(out[0].h.dst, 2);
  EXPECT_EQ(out[0].h.psn, 2u);
  EXPECT_TRUE(out[0].h.has(flag::kResult));
  EXPECT_EQ(out[0].h.bitmap, 0b111u);
  EXPECT_EQ(out[0].v, sum) << "the kept result must not absorb the retransmitted gradient";
  EXPECT_EQ(sw->stats().resend_served, 1u);
  EXPECT_EQ(sw->stats().completed, 1u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

// What a task owes is the switch's to say: a job registered with its
// derived fields set wrong (one rank owed, every bit allowed) still
// completes only with every worker's contribution, and a re-registration
// takes the new worker count. Catches: add_job or replace_job keeping the
// caller's all_ranks / owes.
TEST(SwitchMLSwitch, ARegisteredJobOwesEveryRankWhateverTheCallerWrote) {
  FakeEffects fx;
  auto sw = make_sw("switchml", 16);
  dp::SwitchJob j;
  j.job = 1;
  j.workers = {1, 2, 3};
  j.region_size = 6;
  j.owes = RankBits::first(1);
  j.all_ranks = RankBits::first(128);
  sw->add_job(j);
  const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3);
  sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, a), 0, fx);
  sw->on_packet(make_data(fx, 1, 0, 1, 3, 2, b), 0, fx);
  EXPECT_TRUE(fx.sent.empty()) << "completed before every rank contributed";
  sw->on_packet(make_data(fx, 1, 0, 2, 3, 3, c), 0, fx);
  expect_multicast(fx.take(), {1, 2, 3}, 1, 0, add(add(a, b), c));
  j.workers = {1, 2};
  j.owes = RankBits::first(3);
  sw->replace_job(j);
  sw->on_packet(make_data(fx, 1, 1, 0, 2, 1, a), 0, fx);
  sw->on_packet(make_data(fx, 1, 1, 1, 2, 2, b), 0, fx);
  expect_multicast(fx.take(), {1, 2}, 1, 1, add(a, b));
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(SwitchMLSwitch, StaleOlderPsnIsDropped) {
  FakeEffects fx;
  auto sw = make_sw("switchml", 16);
  add_isolated_job(*sw, 1, {1, 2}, 0, 6);  // S = 3: psn 0 and 6 share slot 0
  const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3), d = ramp(64, 4);
  sw->on_packet(make_data(fx, 1, 0, 0, 2, 1, a), 0, fx);
  sw->on_packet(make_data(fx, 1, 0, 1, 2, 2, b), 0, fx);
  expect_multicast(fx.take(), {1, 2}, 1, 0, add(a, b));
  sw->on_packet(make_data(fx, 1, 6, 0, 2, 1, c), 0, fx);  // new phase of slot 0
  EXPECT_TRUE(fx.sent.empty());
  // A delayed copy of psn 0 must neither be answered nor disturb psn 6.
  sw->on_packet(make_data(fx, 1, 0, 1, 2, 2, b), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  EXPECT_EQ(sw->stats().stale, 1u);
  sw->on_packet(make_data(fx, 1, 6, 1, 2, 2, d), 0, fx);
  expect_multicast(fx.take(), {1, 2}, 1, 6, add(c, d));
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

}  // namespace
}  // namespace ina::test
