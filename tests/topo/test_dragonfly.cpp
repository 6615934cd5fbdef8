// The dragonfly generator (Kim et al. 2008; the Rina paper's a=4, g=9, h=2)
// and its generate() spec. Expected counts are derived in the comments.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

#include "topo/graph.hpp"

using ina::topo::Graph;
using ina::topo::NodeId;
using ina::topo::TopologyError;

namespace {
int switch_degree(const Graph& g, NodeId s) { return static_cast<int>(g.neighbors(s).size()); }
}  // namespace

TEST(RinaDragonfly, PaperDragonflyCountsDegreesAndAllToAllGroups) {
  // a = 4, g = 9, h = 2, p = 2: 36 routers, 72 hosts; links: local 9 * C(4,2) = 54,
  // global C(9,2) = 36, host 72 -> 162. Every router: 3 local + 2 global + 2 hosts = 7.
  const Graph g = ina::topo::dragonfly(4, 9, 2, 2);
  EXPECT_EQ(g.switches().size(), 36u);
  EXPECT_EQ(g.hosts().size(), 72u);
  EXPECT_EQ(g.links().size(), 162u);
  std::set<std::pair<int, int>> group_pairs;
  for (const NodeId s : g.switches()) {
    EXPECT_EQ(switch_degree(g, s), 7) << g.node(s).name;
    int global = 0;
    const int my_group = std::stoi(g.node(s).name.substr(1));
    for (const auto& e : g.neighbors(s)) {
      if (g.is_host(e.peer)) continue;
      const int peer_group = std::stoi(g.node(e.peer).name.substr(1));
      if (peer_group != my_group) {
        ++global;
        group_pairs.insert({std::min(my_group, peer_group), std::max(my_group, peer_group)});
      }
    }
    EXPECT_EQ(global, 2) << g.node(s).name;
  }
  EXPECT_EQ(group_pairs.size(), 36u);  // every pair of the 9 groups, once
  // Connected, and host-to-host at most 5 hops (host, local, global, local, host).
  const ina::topo::Routing r(g);
  for (const NodeId h : g.hosts()) {
    ASSERT_TRUE(r.reachable(g.hosts().front(), h));
    EXPECT_LE(r.hops(g.hosts().front(), h), 5);
  }
  // The generator spec uses p = a / 2 = 2.
  const auto spec = ina::topo::generate("dragonfly:4,9,2");
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->hosts().size(), 72u);
  EXPECT_EQ(spec->links().size(), 162u);
}

TEST(RinaDragonfly, SmallerThanBalancedFillsTheFirstRoutersGlobalPorts) {
  // a = 4, g = 5, h = 2: group i's 4 global links sit on routers 0, 0, 1, 1;
  // routers 0 and 1 have 3 local + 2 global + 1 host = 6, routers 2 and 3 have 4.
  const Graph g = ina::topo::dragonfly(4, 5, 2, 1);
  EXPECT_EQ(g.links().size(), 5u * 6 + 10 + 20);
  for (int grp = 0; grp < 5; ++grp)
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(switch_degree(g, g.at("g" + std::to_string(grp) + "r" + std::to_string(r), "t")), r < 2 ? 6 : 4);
}

TEST(RinaDragonfly, ParametersThatDoNotFormADragonflyAreRejected) {
  try {
    (void)ina::topo::dragonfly(2, 9, 1, 1);
    FAIL() << "a*h = 2 < g-1 = 8 accepted";
  } catch (const TopologyError& e) {
    EXPECT_NE(std::string(e.what()).find("g=9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("a*h = 2*1 = 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)ina::topo::dragonfly(0, 3, 1, 1), TopologyError);
  EXPECT_THROW((void)ina::topo::dragonfly(4, 1, 1, 1), TopologyError);
  EXPECT_THROW((void)ina::topo::dragonfly(4, 3, 0, 1), TopologyError);
  EXPECT_THROW((void)ina::topo::dragonfly(4, 3, 1, 0), TopologyError);
  EXPECT_THROW((void)ina::topo::generate("dragonfly:4,9"), TopologyError);
  EXPECT_THROW((void)ina::topo::generate("dragonfly:4,9,2,1"), TopologyError);
  EXPECT_THROW((void)ina::topo::generate("dragonfly:4,x,2"), TopologyError);
}

