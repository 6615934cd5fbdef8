// The ring endpoints' buffers of the memory estimate (experiment/estimate_ring.hpp).
#include <gtest/gtest.h>

#include "experiment/estimate_ring.hpp"
#include "host/ring.hpp"
#include "host/value_store.hpp"

namespace ina {
namespace {

// The simulator's held values are records (host/value_store.hpp): the
// estimate counts kRecordsPerBuffer of them per buffer a rank holds at once
// and for its kept range. `buffers`: those summed over the ranks, each
// rank's kept range included.
uint64_t values_of(uint64_t buffers) { return host::kValueRecordBytes * exp::kRecordsPerBuffer * buffers; }

// RAR over 4 ranks, 1024 values: shards of 256 values (4 packets of 64).
// A rank's op: 3 ScatterReduce receives (each kept until the next step's
// send or the finish reads it) and 3 AllGather receives (the first two kept
// until the next step forwards them). At its step 1 it holds the shard its
// send reads and the one arriving, and with one receive ahead
// (kRingAhead) the next one too: 3 buffers, not the 8 receive slots; plus
// its kept range.
TEST(EstimateRing, RarCountsTheReceivesARankHoldsAtOnce) {
  ASSERT_EQ(exp::kRingAhead, 1u);
  const auto plan = host::plan_rar(4, 1024);
  const auto one = exp::ring_buffers(plan, 1, 64);
  EXPECT_EQ(one.values, values_of(4 * (3 + 1)));
  // Per rank: 6 receive slots with a 64-bit bitmap word (4 packets), and a
  // 4-packet send of 36 B records.
  EXPECT_EQ(one.records, 4u * (6 * 8 + 4 * 36));
  // More ops hold no more values at once (the slots' bitmaps: all 8 used).
  const auto many = exp::ring_buffers(plan, 100, 64);
  EXPECT_EQ(many.values, one.values);
  EXPECT_EQ(many.records, 4u * (8 * 8 + 4 * 36));
  // Without running ahead: 2 per rank.
  EXPECT_EQ(exp::ring_buffers(plan, 1, 64, 0).values, values_of(4 * (2 + 1)));
}

// Rina, 2 INA racks of 2 ({0, 1} under ToR 10, {2, 3} under ToR 11), 1024
// values: 2 groups, shards of 512 values (8 packets). Each agent keeps the
// other rack's ScatterReduce partial until its final send adds it (1
// buffer); the ToR's complete shard goes to the kept range and the AllGather
// shard is written, neither buffered; a member keeps no received values.
// Every rank has its kept range (its rack's shard).
TEST(EstimateRing, RinaCountsOnePartialPerAgent) {
  const auto plan = host::plan_rina({{0, 1}, {2, 3}}, {10, 11}, 1024);
  const auto b = exp::ring_buffers(plan, 1, 64);
  EXPECT_EQ(b.values, values_of(2 * (1 + 1) + 2 * 1));
  // Agents: 3 receives of 8 packets (a bitmap word each, 8 B rack bits per
  // packet on the 2 from a ToR) and 8-packet sends; members: 2 receives
  // without rack bits, 8-packet sends.
  EXPECT_EQ(b.records, 2u * (3 * 8 + 2 * 8 * 8 + 8 * 36) + 2u * (2 * 8 + 8 * 36));
  // The ranks of INA groups count kRinaAhead (0), not kRingAhead: with two
  // ops and senders up to six receives ahead, an agent's op-1 partial
  // (receive ordinal 3) could arrive while it still holds op 0's: 2 buffers.
  ASSERT_EQ(exp::kRinaAhead, 0u);
  EXPECT_EQ(exp::ring_buffers(plan, 2, 64).values, b.values);
  EXPECT_EQ(exp::ring_buffers(plan, 2, 64, exp::kRingAhead, 6).values, values_of(2 * (2 + 1) + 2 * 1));
}

// H-AR over 2 racks of 2, 1024 values. A rank's op: step 0 receives the
// rack ReduceScatter's shard (512 values, kept), step 1 finishes with it
// (receiving nothing itself); step 2 receives the cross-rack ScatterReduce
// shard (256, kept), step 3 finishes with it; the cross-rack and rack
// AllGather receives are not kept. At step 1 the rank holds the rack shard
// and, as the first receive at or after its step, the cross-rack shard may
// be arriving: 2 buffers, running ahead or not (the one after it is not
// kept); and its kept range.
TEST(EstimateRing, HierarchicalHoldsTheRackShardAndTheNextOne) {
  const auto plan = host::plan_hierarchical({{0, 1}, {2, 3}}, 1024);
  EXPECT_EQ(exp::ring_buffers(plan, 1, 64).values, values_of(4 * (2 + 1)));
  EXPECT_EQ(exp::ring_buffers(plan, 1, 64, 0).values, values_of(4 * (2 + 1)));
}

}  // namespace
}  // namespace ina
