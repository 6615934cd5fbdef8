// The PS-based INA aggregation tree (schemes/atp_tree.hpp): the builder by
// hand, and the runtime's racks layout (rt::RingLayout::atp_tree, tree_job).
// The simulator's trees from a topology's routes: PsCollective.ShardTreeFollowsTheWayToThePs.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <vector>

#include "runtime/ring_layout.hpp"
#include "schemes/atp_tree.hpp"

namespace ina {
namespace {

using schemes::AtpTree;
using schemes::AtpTreeBuilder;

// Two levels: PS node 0; root switch 10 under it; switches 11 and 12 under
// 10. Ranks 0 and 1 enter at 11, rank 2 at 12, rank 3 at the root, rank 4
// at the PS (no switch on its way), rank 5 has no leaf (the PS's own host).
TEST(AtpTree, TwoLevelsByHand) {
  AtpTreeBuilder b(13);
  int ups = 0;
  const AtpTreeBuilder::Up up = [&](NodeId x) -> NodeId {
    ++ups;
    return x == 10 ? 0 : 10;
  };
  b.start(0, 6);
  b.leaf(2, 12, up);  // 12 is met first: the root's first child
  b.leaf(0, 11, up);
  b.leaf(1, 11, up);
  b.leaf(3, 10, up);
  b.leaf(4, 0, up);
  const AtpTree t = b.finish();
  EXPECT_EQ(ups, 3);  // once per switch
  EXPECT_EQ(t.ps, 0);
  EXPECT_EQ(t.first, (std::vector<NodeId>{11, 11, 12, 10, 0, 0}));
  EXPECT_EQ(t.switches, (std::vector<NodeId>{10, 11, 12}));
  ASSERT_EQ(t.entries.size(), 4u);
  std::vector<NodeId> nodes;
  for (const auto& e : t.entries) nodes.push_back(e.node);
  EXPECT_EQ(nodes, (std::vector<NodeId>{0, 10, 11, 12}));

  EXPECT_EQ(t.parent(0), kNoNode);
  EXPECT_EQ(t.children(0), std::vector<NodeId>{10});
  EXPECT_EQ(t.direct(0), 0b010000u);
  EXPECT_EQ(t.subtree(0), 0u);  // the PS is no switch: no subtree

  EXPECT_EQ(t.parent(10), 0);
  EXPECT_EQ(t.children(10), (std::vector<NodeId>{12, 11}));
  EXPECT_EQ(t.subtree(10), 0b001111u);
  EXPECT_EQ(t.direct(10), 0b001000u);

  EXPECT_EQ(t.parent(11), 10);
  EXPECT_TRUE(t.children(11).empty());
  EXPECT_EQ(t.subtree(11), 0b000011u);
  EXPECT_EQ(t.direct(11), 0b000011u);

  EXPECT_EQ(t.parent(12), 10);
  EXPECT_EQ(t.subtree(12), 0b000100u);
  EXPECT_EQ(t.direct(12), 0b000100u);

  // Off the tree: nothing.
  EXPECT_EQ(t.find(5), nullptr);
  EXPECT_EQ(t.parent(5), kNoNode);
  EXPECT_EQ(t.subtree(5), 0u);
  EXPECT_TRUE(t.children(5).empty());
}

TEST(AtpTree, TheBuilderStartsEachTreeClean) {
  AtpTreeBuilder b(8);
  const AtpTreeBuilder::Up up = [](NodeId x) -> NodeId { return x == 5 ? 1 : 5; };
  b.start(1, 2);
  b.leaf(0, 6, up);
  b.leaf(1, 6, up);
  const AtpTree first = b.finish();
  EXPECT_EQ(first.subtree(5), 0b11u);
  // A second tree toward another PS reuses no entry of the first.
  const AtpTreeBuilder::Up up2 = [](NodeId) -> NodeId { return 2; };
  b.start(2, 2);
  b.leaf(1, 5, up2);
  const AtpTree second = b.finish();
  EXPECT_EQ(second.ps, 2);
  EXPECT_EQ(second.first, (std::vector<NodeId>{2, 5}));
  EXPECT_EQ(second.parent(5), 2);
  EXPECT_EQ(second.subtree(5), 0b10u);
  EXPECT_EQ(second.direct(5), 0b10u);
  EXPECT_EQ(second.find(6), nullptr);
  EXPECT_EQ(second.children(2), std::vector<NodeId>{5});
  EXPECT_EQ(second.switches, std::vector<NodeId>{5});
  EXPECT_THROW(b.leaf(0, 8, up2), std::out_of_range);  // node ids stay below the builder's size
}

rt::RingLayout racks_layout(std::vector<std::vector<uint16_t>> racks) {
  rt::RingLayout L;
  L.scheme = "atp";
  size_t n = 0;
  for (const auto& r : racks) n += r.size();
  for (size_t r = 0; r < n; ++r) L.workers.push_back(rt::Endpoint::parse(fmt::format("127.0.0.1:{}", 40001 + r)));
  for (auto& r : racks) L.racks.push_back(rt::RingRack{std::move(r), true, std::nullopt});  // every ToR INA
  return L;
}

// The runtime's racks: 6 ranks in 3 racks (split_racks' consecutive ranks).
// Nodes: ranks 1..6, ToRs 7, 8, 9, the PS 10. Rack 0's ToR is the root.
TEST(AtpTree, RuntimeRacksAreOneLevelUnderRackZero) {
  rt::RingLayout L = racks_layout({{0, 1}, {2, 3}, {4, 5}});
  L.racks = rt::split_racks(6, 3, {0, 1, 2});  // what `ina run --racks 3` lays out
  ASSERT_EQ(L.racks[1].ranks, (std::vector<uint16_t>{2, 3}));
  ASSERT_TRUE(L.tree());
  ASSERT_EQ(L.tor_id(0), 7);
  ASSERT_EQ(L.ps_id(), 10);
  const AtpTree t = L.atp_tree();
  EXPECT_EQ(t.ps, 10);
  EXPECT_EQ(t.first, (std::vector<NodeId>{7, 7, 8, 8, 9, 9}));
  EXPECT_EQ(t.switches, (std::vector<NodeId>{7, 8, 9}));
  EXPECT_EQ(t.children(10), std::vector<NodeId>{7});
  EXPECT_EQ(t.direct(10), 0u);
  EXPECT_EQ(t.parent(7), 10);
  EXPECT_EQ(t.children(7), (std::vector<NodeId>{8, 9}));
  EXPECT_EQ(t.subtree(7), 0b111111u);
  EXPECT_EQ(t.direct(7), 0b000011u);
  EXPECT_EQ(t.parent(8), 7);
  EXPECT_EQ(t.subtree(8), 0b001100u);
  EXPECT_EQ(t.direct(8), 0b001100u);
  EXPECT_TRUE(t.children(8).empty());
  EXPECT_EQ(t.parent(9), 7);
  EXPECT_EQ(t.subtree(9), 0b110000u);
  EXPECT_EQ(t.direct(9), 0b110000u);

  // Each ToR's job-table entry is its entry of the tree.
  const auto root = L.tree_job(0);
  EXPECT_EQ(root.parent, 10);
  EXPECT_EQ(root.agg_mask, 0b111111u);
  EXPECT_EQ(root.direct_mask, 0b000011u);
  EXPECT_EQ(root.children, (std::vector<NodeId>{8, 9}));
  const auto leaf = L.tree_job(2);
  EXPECT_EQ(leaf.parent, 7);
  EXPECT_EQ(leaf.agg_mask, 0b110000u);
  EXPECT_EQ(leaf.direct_mask, 0b110000u);
  EXPECT_TRUE(leaf.children.empty());
  EXPECT_THROW(L.tree_job(3), std::out_of_range);
}

// Racks in ring order need not hold ascending ranks: the root's children
// follow the racks' order (1, 2), not the ranks'.
TEST(AtpTree, RuntimeRootChildrenFollowTheRackOrder) {
  const rt::RingLayout L = racks_layout({{2, 3}, {4, 5}, {0, 1}});
  const auto root = L.tree_job(0);
  EXPECT_EQ(root.parent, L.ps_id());
  EXPECT_EQ(root.agg_mask, 0b111111u);
  EXPECT_EQ(root.direct_mask, 0b001100u);
  EXPECT_EQ(root.children, (std::vector<NodeId>{L.tor_id(1), L.tor_id(2)}));
  EXPECT_EQ(L.tree_job(2).direct_mask, 0b000011u);
  EXPECT_EQ(L.tree_job(2).parent, L.tor_id(0));
  EXPECT_EQ(L.atp_tree().first, (std::vector<NodeId>{L.tor_id(2), L.tor_id(2), L.tor_id(0), L.tor_id(0), L.tor_id(1),
                                                     L.tor_id(1)}));
}

}  // namespace
}  // namespace ina
