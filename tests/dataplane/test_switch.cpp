// What every switch program shares, driven directly: malformed data counted
// and dropped, the control plane refusing bad jobs, saturating int32 sums,
// and GRID's eviction of a stuck partial.
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

// ---- malformed data, every policy

class MalformedData : public ::testing::TestWithParam<std::string> {};

TEST_P(MalformedData, CountedAndDroppedNeverAggregated) {
  const std::string& policy = GetParam();
  FakeEffects fx(128);  // packets can carry more than the switch's 64 values
  auto sw = make_sw(policy, 8);
  dp::SwitchJob j;
  j.job = 1;
  j.workers = kJob1;
  if (policy == "switchml") {
    j.region_offset = 0;
    j.region_size = 8;
  } else {
    j.ps = kPs1;
  }
  sw->add_job(j);
  const auto g = ramp(64, 5);
  std::vector<Packet*> bad;
  bad.push_back(make_data(fx, 9, 0, 0, 3, 1, g));  // unknown job
  bad.push_back(make_data(fx, 0, 0, 0, 3, 1, g));  // job 0
  {
    Packet* p = make_data(fx, 1, 0, 0, 3, 1, g);
    p->h.rank = 3;  // rank >= n
    bad.push_back(p);
  }
  {
    Packet* p = make_data(fx, 1, 0, 0, 3, 1, g);
    p->h.bitmap = 0b1001;  // bit beyond n
    bad.push_back(p);
  }
  {
    Packet* p = make_data(fx, 1, 0, 0, 3, 1, g);
    p->h.bitmap = 0;  // contributes nothing
    bad.push_back(p);
  }
  bad.push_back(make_data(fx, 1, 0, 0, 3, 1, {}));              // count 0
  bad.push_back(make_data(fx, 1, 0, 0, 3, 1, ramp(65, 1)));     // count > payload
  bad.push_back(make_data(fx, 1, 0, 0, 4, 1, g));               // wrong worker count
  {
    Packet* p = make_data(fx, 1, 0, 0, 3, 1, g);
    p->h.type = PktType::GradRequest;  // not a switch packet
    bad.push_back(p);
  }
  size_t n = 0;
  for (Packet* p : bad) {
    sw->on_packet(p, 0, fx);
    ++n;
    EXPECT_EQ(sw->stats().malformed, n) << "case " << n;
    EXPECT_TRUE(fx.sent.empty()) << "case " << n;
    EXPECT_EQ(sw->occupied(), 0u) << "case " << n;
  }
  EXPECT_EQ(sw->stats().aggregated, 0u);
  EXPECT_EQ(fx.freed, bad.size());
  EXPECT_EQ(fx.pool.in_use(), 0u);
  // The job still aggregates correctly afterwards.
  const auto g1 = ramp(64, -9), g2 = ramp(64, 100, 3);
  sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, g), 0, fx);
  sw->on_packet(make_data(fx, 1, 0, 1, 3, 2, g1), 0, fx);
  sw->on_packet(make_data(fx, 1, 0, 2, 3, 3, g2), 0, fx);
  auto out = fx.take();
  ASSERT_FALSE(out.empty());
  for (const auto& s : out) EXPECT_EQ(s.v, add(add(g, g1), g2));
}

INSTANTIATE_TEST_SUITE_P(Policies, MalformedData,
                         ::testing::Values("switchml", "atp", "dsa"),
                         [](const auto& info) { return info.param; });

TEST(SwitchControlPlane, RejectsBadJobs) {
  auto shared = make_sw("dsa", 8);
  dp::SwitchJob j;
  j.job = 1;
  j.workers = kJob1;
  EXPECT_THROW(shared->add_job(j), std::invalid_argument) << "shared pool without a PS";
  j.ps = kPs1;
  j.job = 0;
  EXPECT_THROW(shared->add_job(j), std::invalid_argument);
  j.job = 1;
  shared->add_job(j);
  EXPECT_THROW(shared->add_job(j), std::invalid_argument) << "registered twice";
  auto iso = make_sw("switchml", 8);
  add_isolated_job(*iso, 1, {1}, 0, 4);
  EXPECT_THROW(add_isolated_job(*iso, 2, {2}, 2, 4), std::invalid_argument) << "overlap";
  EXPECT_THROW(add_isolated_job(*iso, 3, {3}, 4, 3), std::invalid_argument) << "odd size";
  EXPECT_THROW(add_isolated_job(*iso, 4, {4}, 6, 4), std::invalid_argument) << "beyond memory";
  add_isolated_job(*iso, 5, {5}, 4, 4);
}

// ====================================================================
// Switch arithmetic and GRID eviction, driven directly
// ====================================================================

// Catches: wrapping int32 addition, a saturation redo that corrupts lanes
// that did not overflow, or an overflow counter per lane instead of per packet.
TEST(SwitchSaturation, ClampsToInt32AndCountsOverflowingPackets) {
  for (uint16_t count : {uint16_t{64}, uint16_t{5}}) {  // the fixed-width and the generic adder
    SCOPED_TRACE(count);
    FakeEffects fx;
    auto sw = make_sw("dsa", 4);
    add_shared_jobs(*sw);
    constexpr int32_t kMax = INT32_MAX, kMin = INT32_MIN;
    std::vector<int32_t> g0 = ramp(count, 1000), g1 = ramp(count, -20), g2 = ramp(count, 7, 2);
    std::vector<int32_t> want = add(add(g0, g1), g2);
    g0[0] = kMax - 5, g1[0] = 10, g2[0] = 1;       // saturates, then saturates again
    g0[1] = kMin + 5, g1[1] = -10, g2[1] = 0;      // saturates low
    g0[2] = 100, g1[2] = 200, g2[2] = -300;        // exact 0, in overflowing packets
    g0[3] = kMax, g1[3] = 0, g2[3] = kMin;         // exact -1: no overflow at all
    g0[4] = kMax - 1, g1[4] = 1, g2[4] = -kMax;    // exact 0, reaches MAX without overflow
    want[0] = kMax, want[1] = kMin, want[2] = 0, want[3] = -1, want[4] = 0;
    sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, g0), 0, fx);
    sw->on_packet(make_data(fx, 1, 0, 1, 3, 2, g1), 0, fx);
    EXPECT_EQ(sw->stats().overflow, 1u);
    sw->on_packet(make_data(fx, 1, 0, 2, 3, 3, g2), 0, fx);
    EXPECT_EQ(sw->stats().overflow, 2u);
    expect_multicast(fx.take(), kJob1, 1, 0, want);
    EXPECT_EQ(fx.pool.in_use(), 0u);
  }
}

// Catches: a GRID unit that never gives up its stuck partial (its index is
// blocked for good), one that evicts too early, or an evicted partial sent to
// the colliding fragment's PS or with the wrong values/bitmap.
TEST(GridSwitch, AfterEvictAfterCollisionsThePartialGoesToItsPs) {
  FakeEffects fx;
  dp::SwitchConfig sc;
  sc.payload_values = 64;
  sc.memory_bytes = 256;  // one unit: every fragment maps to it
  sc.grid.evict_after = 3;
  auto sw = schemes::find("grid").make_switch(sc);
  sw->set_id(kSw);
  dp::SwitchJob j1;
  j1.job = 1;
  j1.workers = kJob1;
  j1.ps = kPs1;
  j1.agg_mask = 0b111;
  sw->add_job(j1);
  dp::SwitchJob j2;
  j2.job = 2;
  j2.workers = kJob2;
  j2.ps = kPs2;
  j2.agg_mask = 0b11;
  sw->add_job(j2);
  const auto g0 = ramp(64, -40, 3), g1 = ramp(64, 11, -1);
  sw->on_packet(make_data(fx, 1, 5, 0, 3, 1, g0), 0, fx);
  sw->on_packet(make_data(fx, 1, 5, 1, 3, 2, g1), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  const auto h0 = ramp(30, 500), h1 = ramp(30, -9, 4);
  for (int k = 1; k <= 2; ++k) {  // collisions below evict_after: rate-sync back to the sender
    sw->on_packet(make_data(fx, 2, 8, 0, 2, 4, h0), k * kUs, fx);
    auto out = fx.take();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].h.type, PktType::RateSync);
    EXPECT_EQ(out[0].h.dst, 4);
    EXPECT_EQ(out[0].h.psn, 8u);
    EXPECT_EQ(sw->occupied_by(1), 1u) << "collision " << k;
  }
  sw->on_packet(make_data(fx, 2, 8, 0, 2, 4, h0), 3 * kUs, fx);  // the 3rd: evict
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.dst, kPs1) << "to the evicted partial's own PS";
  EXPECT_EQ(out[0].h.job, 1);
  EXPECT_EQ(out[0].h.psn, 5u);
  EXPECT_EQ(out[0].h.bitmap, 0b011u);
  EXPECT_TRUE(out[0].h.has(flag::kPartial));
  EXPECT_TRUE(out[0].h.has(flag::kEvicted));
  EXPECT_EQ(out[0].v, add(g0, g1));
  EXPECT_EQ(sw->occupied_by(1), 0u);
  EXPECT_EQ(sw->occupied_by(2), 1u);
  // The new fragment holds the unit with its own values and a reset counter.
  sw->on_packet(make_data(fx, 2, 8, 1, 2, 5, h1), 4 * kUs, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs2);
  EXPECT_EQ(out[0].h.job, 2);
  EXPECT_EQ(out[0].h.bitmap, 0b11u);
  EXPECT_TRUE(out[0].h.has(flag::kPartial));
  EXPECT_FALSE(out[0].h.has(flag::kEvicted));
  EXPECT_EQ(out[0].v, add(h0, h1));
  const auto& st = sw->stats();
  EXPECT_EQ(st.collisions, 3u);
  EXPECT_EQ(st.rate_syncs, 2u);
  EXPECT_EQ(st.evictions, 1u);
  EXPECT_EQ(st.completed, 1u);
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

}  // namespace
}  // namespace ina::test
