// The buffers a ring endpoint's compiled steps hold (host/ring_footprint.hpp).
#include <gtest/gtest.h>

#include "host/ring_footprint.hpp"

namespace ina::host {
namespace {

// RAR over 4 ranks, 1024 values, 64 per packet: shards of 256 values (4
// packets). Rank 0's op, by step: 0 SR0 receives r0 (kept); 1 SR1 sends
// with r0, receives r1 (kept); 2 SR2 with r1, receives r2 (kept); 3 finish
// with r2; 4 AG0 receives r3 (kept: forwarded next); 5 AG1 sends r3,
// receives r4 (kept); 6 AG2 sends r4, receives r5 (written, not kept).
// Ahead 0: at step 1 it holds r0 (its send reads it) and r1: 2 buffers;
// never 3 (at step 3: r2 and r3, at step 4: r3 alone).
TEST(RingFootprint, RarHoldsTheShardItReadsAndTheOneArriving) {
  const auto plan = plan_rar(4, 1024);
  const RingFootprint f = ring_footprint(plan[0], 0, 64, 0, 1);
  EXPECT_EQ(f.receives, 6u);
  EXPECT_EQ(f.held_buffers, 2u);
  EXPECT_EQ(f.held_values, 512u);
  EXPECT_EQ(f.kept_values, 256u);
  EXPECT_EQ(f.send_packets, 4u);
  // Six receives of 4 packets in slots 0..5: a 64-bit bitmap word each.
  EXPECT_EQ(f.slot_bytes, 6u * 8);
}

// One receive ahead: at steps 1 to 3 the predecessor's next shard has
// started too (step 1: r0, r1, r2; step 3: r2, r3, r4): 3 buffers. Across
// the op boundary no more (op 0's step 6: r4 and op 1's r0).
TEST(RingFootprint, RarOneAheadHoldsThree) {
  const auto plan = plan_rar(4, 1024);
  EXPECT_EQ(ring_footprint(plan[0], 0, 64, 1, 1).held_buffers, 3u);
  const RingFootprint two = ring_footprint(plan[0], 0, 64, 1, 2);
  EXPECT_EQ(two.held_buffers, 3u);
  EXPECT_EQ(two.held_values, 768u);
  // Two ops: 12 receives over the 8 slots; every slot gets a 4-packet receive.
  EXPECT_EQ(two.slot_bytes, 8u * 8);
}

// Flow control's bound: at most 6 receives past the current one. Two ops,
// at step 1: r0 (read), r1..r4, op 1's r0 and r1 (op 0's r5 is not kept):
// 7 buffers; a larger `ahead` is capped there.
TEST(RingFootprint, AheadIsCappedWhereFlowControlRefuses) {
  const auto plan = plan_rar(4, 1024);
  EXPECT_EQ(ring_footprint(plan[0], 0, 64, 6, 2).held_buffers, 7u);
  EXPECT_EQ(ring_footprint(plan[0], 0, 64, 100, 2).held_buffers, 7u);
}

// Rina, 4 ranks in 2 INA racks ({0, 1} under ToR 10, {2, 3} under ToR 11),
// 1024 values: 2 groups, shards of 512 values (8 packets). The agent (rank
// 0) receives the other rack's ScatterReduce partial (kept: its final send
// adds it), then its own rack's complete shard from the ToR (into the kept
// range) and the other rack's AllGather shard (written): 1 buffer of 512,
// whatever runs ahead. The member (rank 1) keeps no received values.
TEST(RingFootprint, RinaAgentHoldsOnePartialAndMembersNone) {
  const auto plan = plan_rina({{0, 1}, {2, 3}}, {10, 11}, 1024);
  const RingFootprint agent = ring_footprint(plan[0], 0, 64, 1, 1);
  EXPECT_EQ(agent.receives, 3u);
  EXPECT_EQ(agent.held_buffers, 1u);
  EXPECT_EQ(agent.held_values, 512u);
  EXPECT_EQ(agent.kept_values, 512u);
  // Three 8-packet receives: a bitmap word each, and rack bits (8 B per
  // packet) on the two that come from a Rina ToR.
  EXPECT_EQ(agent.slot_bytes, 3u * 8 + 2u * 8 * 8);
  const RingFootprint member = ring_footprint(plan[1], 1, 64, 6, 4);
  EXPECT_EQ(member.held_buffers, 0u);
  EXPECT_EQ(member.held_values, 0u);
  EXPECT_EQ(member.send_packets, 8u);
}

TEST(RingFootprint, ARankInNoGroupIsRefused) {
  const auto plan = plan_rar(4, 1024);
  EXPECT_THROW(ring_footprint(plan[0], 7, 64, 0, 1), std::invalid_argument);
}

}  // namespace
}  // namespace ina::host
