// Rina above the ToR (§IV-D) in the packet simulator: a group topped by an
// INA switch above its racks' INA ToRs (control/rina_bom.hpp's groups;
// dataplane/rina.cpp's levels), through exp::run_collective.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/rina_bom.hpp"
#include "experiment/collective.hpp"
#include "ring_settings.hpp"
#include "topo/graph.hpp"

namespace ina {
namespace {

// Fat-tree k = 4, all 16 hosts work, INA at the 8 edges and at `more`.
topo::Graph fat_tree_with(const std::vector<std::string>& more) {
  auto g = *topo::generate("fat-tree:4");
  for (auto t : g.tor_switches()) g.set_ina(t, true, 100);
  for (const auto& n : more) g.set_ina(g.at(n, "test"), true, 100);
  return g;
}

size_t bom_groups(const topo::Graph& g) {
  return control::rina::rina_throughput(g, g.hosts(), g.ina_switches()).groups.size();
}

// agg0 above the edges (the deployment order's 9th switch): the BOM's
// groups {h0, h1} (edge0) and {h2..h15} (agg0, agent h2): G = 2, so every
// worker runs 2G - 1 = 3 steps (G ScatterReduce steps, the group's own
// shard through its top to its agent among them, and G - 1 AllGather).
// Shard S / 2 = 8192 values = 128 packets of 256 + 50 bytes. Each worker
// sends its 2 ScatterReduce shards (to its INA edge, which sends one
// partial up to agg0); in AllGather only the two agents send (their
// broadcast of the group's complete shard, s = 0): the agents 3 shards,
// the other 14 workers 2: mean 2 + 2/16. Exact sums, no aggregator left
// (run_collective's checks).
TEST(RinaLevels, AggregationSwitchAboveTheEdgesIsOneGroupOnAFatTree) {
  const auto g = fat_tree_with({"agg0"});
  ASSERT_EQ(bom_groups(g), 2u);
  const auto r = exp::run_collective(g, "rina", test::small_ring());
  ASSERT_TRUE(r.ok) << r.problems;
  const double shard = 128 * (256 + 50);
  EXPECT_EQ(r.steps, 2u * 2 - 1);
  EXPECT_EQ(r.max_bytes_per_worker, 3 * shard);
  EXPECT_EQ(r.bytes_per_worker, (2 + 2.0 / 16) * shard);
  EXPECT_EQ(r.retransmits, 0u);
}

// Nested levels: agg0 on top, core0 below it aggregating pods 1-3 (their
// edges send to core0, core0 one partial to agg0), then agg2/4/6 between
// the edges and core0: 2, 3 and 4 levels of aggregation; the groups, steps
// and bytes stay those of agg0 alone; every run exact.
TEST(RinaLevels, NestedLevelsStayExact) {
  const std::vector<std::vector<std::string>> sets = {
      {"agg0", "core0"}, {"agg0", "core0", "agg2"}, {"agg0", "core0", "agg2", "agg4", "agg6"}};
  for (const auto& more : sets) {
    const auto g = fat_tree_with(more);
    ASSERT_EQ(bom_groups(g), 2u);
    const auto r = exp::run_collective(g, "rina", test::small_ring());
    ASSERT_TRUE(r.ok) << more.size() << ": " << r.problems;
    EXPECT_EQ(r.steps, 3u) << more.size();
    EXPECT_EQ(r.bytes_per_worker, (2 + 2.0 / 16) * 128 * (256 + 50)) << more.size();
  }
}

// core0 alone above the edges: groups edge0 {h0,h1}, edge1 {h2,h3} and
// core0 {h4..h15}: G = 3, 2G - 1 = 5 steps; three iterations, exact.
TEST(RinaLevels, CoreAboveThreePodsIsOneOfThreeGroups) {
  const auto g = fat_tree_with({"core0"});
  ASSERT_EQ(bom_groups(g), 3u);
  auto s = test::small_ring();
  s.iterations = 3;
  const auto r = exp::run_collective(g, "rina", s);
  ASSERT_TRUE(r.ok) << r.problems;
  EXPECT_EQ(r.steps, 5u);
}

// Loss, duplication and reordering on every link: the levels' retransmission
// paths (a member's resend finding its level's slot complete goes up as a
// resend; a late partial at a finished top is acknowledged at once; a lost
// AllGather copy is copied again) keep every sum exact, nothing leaked.
// Without freeing a level's sum whose acknowledgement was lost once the
// group moved on, these runs stall (agg0 alone, seed 1: a later step's
// packets meet the held slot forever) or end with aggregators left (seed
// 5 with agg2 too).
TEST(RinaLevels, NestedLevelsStayExactUnderLoss) {
  for (const auto& more : {std::vector<std::string>{"agg0"}, std::vector<std::string>{"agg0", "core0", "agg2"}})
  for (const uint64_t seed : {1, 3, 4, 5, 6}) {
    const auto g = fat_tree_with(more);
    auto s = test::small_ring();
    s.seed = seed;
    s.loss = 0.01;
    s.dup = 0.005;
    s.reorder = 0.01;
    s.iterations = 2;
    const auto r = exp::run_collective(g, "rina", s);
    ASSERT_TRUE(r.ok) << more.size() << " seed " << seed << ": " << r.problems;
    EXPECT_GT(r.retransmits, 0u) << seed;
  }
}

}  // namespace
}  // namespace ina
