// ATP over racks where only some ToRs are INA (runtime/ring_layout.hpp): the
// tree the runtime's ToRs, PS and ranks are configured from.
#include <gtest/gtest.h>

#include "runtime/ring_layout.hpp"

namespace {

using ina::NodeId;
using ina::RankBits;
using ina::rt::Endpoint;
using ina::rt::RingLayout;

// 6 ranks in 3 racks of 2; `ina` says which racks have an INA ToR (with an address).
RingLayout layout(std::vector<bool> ina) {
  nlohmann::json racks = nlohmann::json::array();
  for (size_t q = 0; q < ina.size(); ++q) {
    nlohmann::json r = {{"ranks", {2 * q, 2 * q + 1}}, {"ina", static_cast<bool>(ina[q])}};
    if (ina[q]) r["switch"] = "127.0.0.1:" + std::to_string(7700 + q);
    racks.push_back(r);
  }
  nlohmann::json workers = nlohmann::json::array();
  for (int r = 0; r < 6; ++r) workers.push_back("127.0.0.1:" + std::to_string(7800 + r));
  return RingLayout::from_json({{"job", 1u}, {"scheme", "atp"}, {"payload", 64u}, {"memory_bytes", 100000u},
                                {"workers", workers}, {"racks", racks}, {"ps", "127.0.0.1:7900"}},
                               "test", true);
}

RankBits ranks(std::initializer_list<unsigned> rs) {
  RankBits b;
  for (unsigned r : rs) b |= RankBits::bit(r);
  return b;
}

// Racks 0 and 2 INA, rack 1 not: rack 0's ToR (node 7) is the root under the
// PS (node 10), rack 2's (node 9) its child; ranks 2 and 3 go straight to
// the PS, which passes results to the root and to them.
TEST(RingLayoutTree, RanksOfANonInaRackGoStraightToThePs) {
  const RingLayout L = layout({true, false, true});
  EXPECT_EQ(L.root_rack(), 0u);
  EXPECT_TRUE(L.serving_tor(0));
  EXPECT_FALSE(L.serving_tor(1));
  EXPECT_TRUE(L.serving_tor(2));
  const auto t = L.atp_tree();
  EXPECT_EQ(t.ps, 10);
  EXPECT_EQ(t.first, (std::vector<NodeId>{7, 7, 10, 10, 9, 9}));
  EXPECT_EQ(t.switches, (std::vector<NodeId>{7, 9}));
  EXPECT_EQ(t.direct(10), ranks({2, 3}));
  EXPECT_EQ(t.children(10), (std::vector<NodeId>{7}));
  const auto root = L.tree_job(0), leaf = L.tree_job(2);
  EXPECT_EQ(root.parent, 10);
  EXPECT_EQ(root.agg_mask, ranks({0, 1, 4, 5}));
  EXPECT_EQ(root.direct_mask, ranks({0, 1}));
  EXPECT_EQ(root.children, (std::vector<NodeId>{9}));
  EXPECT_EQ(leaf.parent, 7);
  EXPECT_EQ(leaf.agg_mask, ranks({4, 5}));
  EXPECT_TRUE(leaf.children.empty());
  EXPECT_THROW((void)L.tree_job(1), ina::rt::RuntimeError);
  // The PS: straight to ranks 2 and 3, everything else through the root.
  EXPECT_EQ(L.ps_route(3), L.workers[2]);
  EXPECT_EQ(L.ps_route(4), L.workers[3]);
  EXPECT_EQ(L.ps_route(1), *L.racks[0].sw);
  EXPECT_EQ(L.ps_route(5), *L.racks[0].sw);
  EXPECT_EQ(L.ps_route(9), *L.racks[0].sw);
  // Rack 2's ToR: the PS through the root; the root's: the PS directly.
  EXPECT_EQ(L.tree_route(2, L.ps_id()), *L.racks[0].sw);
  EXPECT_EQ(L.tree_route(0, L.ps_id()), *L.ps);
  EXPECT_EQ(L.tree_route(0, 5), *L.racks[2].sw);
  EXPECT_EQ(L.tree_route(2, 5), L.workers[4]);
}

// The first INA rack is the root wherever it is: here rack 1 (node 8), with
// rack 0's ranks straight to the PS.
TEST(RingLayoutTree, TheFirstInaRackIsTheRoot) {
  const RingLayout L = layout({false, true, false});
  EXPECT_EQ(L.root_rack(), 1u);
  const auto t = L.atp_tree();
  EXPECT_EQ(t.first, (std::vector<NodeId>{10, 10, 8, 8, 10, 10}));
  EXPECT_EQ(t.switches, (std::vector<NodeId>{8}));
  EXPECT_EQ(t.direct(10), ranks({0, 1, 4, 5}));
  const auto root = L.tree_job(1);
  EXPECT_EQ(root.parent, 10);
  EXPECT_EQ(root.agg_mask, ranks({2, 3}));
  EXPECT_EQ(root.direct_mask, ranks({2, 3}));
  EXPECT_TRUE(root.children.empty());
  EXPECT_EQ(L.tree_route(1, L.ps_id()), *L.ps);
}

}  // namespace
