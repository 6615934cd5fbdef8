// topo::Routing::first_in: the first node of a set on path(from, to), found
// without building the path, is the one path() reaches first, for every
// pair of nodes and several sets (the PS trees' builder asks it once per
// worker and per switch of a tree: ShardedPsCluster).
#include <gtest/gtest.h>

#include <vector>

#include "topo/graph.hpp"

namespace ina::test {
namespace {

using topo::NodeId;

NodeId first_on_path(const topo::Graph& g, const topo::Routing& r, NodeId from, NodeId to, const std::vector<bool>& in) {
  for (const topo::ArcId a : r.path(from, to)) {
    const NodeId v = g.arc_to(a);
    if (v != to && in[v]) return v;
  }
  return to;
}

TEST(Routing, FirstInIsTheFirstNodeOfTheSetOnThePath) {
  const topo::Graph g = topo::fat_tree(4);
  const topo::Routing r(g);
  const size_t n = g.num_nodes();
  std::vector<std::vector<bool>> sets;
  sets.emplace_back(n, false);  // none: `to` itself
  sets.emplace_back(n, true);   // every node: the first hop
  std::vector<bool> edges(n, false), every_third(n, false);
  for (NodeId v = 0; v < n; ++v) {
    edges[v] = g.node(v).name.rfind("edge", 0) == 0;
    every_third[v] = v % 3 == 1;
  }
  sets.push_back(edges);
  sets.push_back(every_third);
  size_t not_to = 0;
  for (const auto& in : sets)
    for (NodeId from = 0; from < n; ++from)
      for (NodeId to = 0; to < n; ++to) {
        if (from == to) continue;
        if (!r.reachable(from, to)) continue;
        const NodeId want = first_on_path(g, r, from, to, in);
        ASSERT_EQ(r.first_in(from, to, in), want) << g.node(from).name << " -> " << g.node(to).name;
        not_to += want != to;
      }
  EXPECT_GT(not_to, n * n / 2) << "pairs whose answer is a node of the set, not `to`";
}

TEST(Routing, FirstInRefusesAnUnreachableDestination) {
  topo::Graph g;
  const NodeId a = g.add_host("a"), b = g.add_host("b");
  const topo::Routing r(g);
  EXPECT_THROW(r.first_in(a, b, std::vector<bool>(2, true)), topo::TopologyError);
}

}  // namespace
}  // namespace ina::test
