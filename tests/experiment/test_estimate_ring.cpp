// The ring endpoints' buffers of the memory estimate (experiment/estimate_ring.hpp).
#include <gtest/gtest.h>

#include "experiment/estimate_ring.hpp"
#include "host/ring.hpp"

namespace ina {
namespace {

// RAR over 4 ranks, 1024 values: shards of 256 values (4 packets of 64).
// Per op a rank receives 3 ScatterReduce shards (kept) and 3 AllGather
// shards (the first two kept: it forwards them), so 6 receives; its kept
// range is one shard; its largest send is one shard.
TEST(EstimateRing, RarSlotsKeepTheShardsOfTheReceivesThatLandInThem) {
  const auto plan = host::plan_rar(4, 1024);
  const auto one = exp::ring_buffers(plan, 1, 64);
  // Op 0: receives 0..5 in slots 0..5, values in slots 0..4; + the kept shard.
  EXPECT_EQ(one.values, 4u * (5 * 256 * 4 + 256 * 4));
  // A 64-bit bitmap word per used slot (4 packets) and 4 send records of 34 B.
  EXPECT_EQ(one.records, 4u * (6 * 8 + 4 * 34));
  // Op 1's receives land in slots 6, 7, 0, 1, 2, 3: slots 6 and 7 get shards too.
  const auto two = exp::ring_buffers(plan, 2, 64);
  EXPECT_EQ(two.values, 4u * (7 * 256 * 4 + 256 * 4));
  EXPECT_EQ(two.records, 4u * (8 * 8 + 4 * 34));
  // Op 2's land in slots 4, 5, ...: from then on every slot holds a shard,
  // and the pattern repeats within 8 ops, so more ops hold no more.
  EXPECT_EQ(exp::ring_buffers(plan, 3, 64).values, 4u * (8 * 256 * 4 + 256 * 4));
  EXPECT_EQ(exp::ring_buffers(plan, 100, 64).values, 4u * (8 * 256 * 4 + 256 * 4));
}

// H-AR over 2 racks of 2, 1024 values: the rack ReduceScatter's shard (512
// values) is received once per op and kept at every rank; the ring across
// racks (2 groups over 512 values) receives 256-value shards.
TEST(EstimateRing, HierarchicalKeepsTheRackShard) {
  const auto plan = host::plan_hierarchical({{0, 1}, {2, 3}}, 1024);
  const auto b = exp::ring_buffers(plan, 1, 64);
  // Per rank: slot 0 the rack shard (512), slot 1 the cross-rack ScatterReduce
  // shard (256); the cross-rack AllGather and the rack AllGather receives are
  // not forwarded (not kept); kept range: the rack shard (512).
  EXPECT_EQ(b.values, 4u * (512 * 4 + 256 * 4 + 512 * 4));
}

}  // namespace
}  // namespace ina
