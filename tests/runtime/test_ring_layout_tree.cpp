// ATP over racks where only some ToRs are INA, and GRID's planned flat tree
// (runtime/ring_layout.hpp): the tree the runtime's switches, PS and ranks
// are configured from.
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
  // The root relays the PS's packets; each INA ToR relays the other INA racks' ToRs.
  EXPECT_EQ(L.ps_relays(), (std::vector<Endpoint>{*L.racks[0].sw}));
  EXPECT_EQ(L.relay_racks(0), (std::vector<size_t>{2}));
  EXPECT_EQ(L.relay_racks(2), (std::vector<size_t>{0}));
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

// GRID's plan as a layout: ranks 0, 1, 3 aggregate at switch A (node 7),
// rank 2 at switch B (node 8), rank 4 at the PS (rack 2 without INA; node
// 10). 5 ranks, 3 racks: node ids 1-5 ranks, 6-8 racks, 9 the PS.
nlohmann::json grid_layout() {
  return nlohmann::json::parse(R"({"job": 1, "scheme": "grid", "payload": 64, "memory_bytes": 100000,
    "workers": ["10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1", "10.0.0.4:1", "10.0.0.5:1"],
    "racks": [{"ranks": [0, 1, 3], "switch": "10.0.1.1:7700"}, {"ranks": [2], "switch": "10.0.1.2:7700"},
              {"ranks": [4], "ina": false}],
    "ps": "10.0.2.1:7900", "rates_gbps": [0.03, 0.03, 0.02, 0.03, 0.01]})");
}

// Every switch is a child of the PS (GRID 3.4: partials go straight to the
// PS) with exactly its planned ranks; nothing relays another's packets.
TEST(RingLayoutGrid, EverySwitchIsAChildOfThePsWithItsPlannedRanks) {
  const RingLayout L = RingLayout::from_json(grid_layout(), "grid.json", true);
  ASSERT_TRUE(L.tree());
  ASSERT_TRUE(L.routed());
  const auto t = L.atp_tree();
  EXPECT_EQ(t.ps, 9);
  EXPECT_EQ(t.first, (std::vector<NodeId>{6, 6, 7, 6, 9}));
  EXPECT_EQ(t.switches, (std::vector<NodeId>{6, 7}));
  EXPECT_EQ(t.children(9), (std::vector<NodeId>{6, 7}));
  EXPECT_EQ(t.direct(9), ranks({4}));
  const auto a = L.tree_job(0), b = L.tree_job(1);
  EXPECT_EQ(a.parent, 9);
  EXPECT_EQ(a.agg_mask, ranks({0, 1, 3}));
  EXPECT_EQ(a.direct_mask, ranks({0, 1, 3}));
  EXPECT_TRUE(a.children.empty());
  EXPECT_EQ(b.parent, 9);
  EXPECT_EQ(b.agg_mask, ranks({2}));
  EXPECT_TRUE(L.relay_racks(0).empty());
  EXPECT_EQ(L.ps_relays(), (std::vector<Endpoint>{*L.racks[0].sw, *L.racks[1].sw}));
  EXPECT_EQ(L.rates_gbps, (std::vector<double>{0.03, 0.03, 0.02, 0.03, 0.01}));
}

// A switch addresses every node directly (the network routes); the PS
// reaches a rank through its planned switch, the only peer a rank's engine
// hears, and a rank aggregated at the PS directly.
TEST(RingLayoutGrid, ThePsReachesARankThroughItsPlannedSwitch) {
  const RingLayout L = RingLayout::from_json(grid_layout(), "grid.json", true);
  EXPECT_EQ(L.tree_route(0, 3), L.workers[2]);  // switch A to rank 2, planned at B: straight there
  EXPECT_EQ(L.tree_route(1, 1), L.workers[0]);
  EXPECT_EQ(L.tree_route(1, L.ps_id()), *L.ps);
  EXPECT_EQ(L.ps_route(4), *L.racks[0].sw);  // rank 3, planned at A
  EXPECT_EQ(L.ps_route(3), *L.racks[1].sw);  // rank 2, planned at B
  EXPECT_EQ(L.ps_route(5), L.workers[4]);    // rank 4, planned at the PS
  EXPECT_EQ(L.ps_route(7), *L.racks[1].sw);
}

// A plan that aggregates everything at the PS is a layout too (no INA rack).
TEST(RingLayoutGrid, APlanWithoutSwitchesSendsEverythingToThePs) {
  nlohmann::json j = grid_layout();
  for (auto& r : j["racks"]) r["ina"] = false;
  const RingLayout L = RingLayout::from_json(j, "grid.json", true);
  const auto t = L.atp_tree();
  EXPECT_TRUE(t.switches.empty());
  EXPECT_EQ(t.first, (std::vector<NodeId>(5, 9)));
  EXPECT_EQ(t.direct(9), ranks({0, 1, 2, 3, 4}));
}

// Bad rates name the file, the field and the value; a ring has no planned rates.
TEST(RingLayoutGrid, BadRatesNameTheFieldAndValue) {
  auto error = [](const nlohmann::json& j) {
    try {
      (void)RingLayout::from_json(j, "grid.json", true);
    } catch (const ina::rt::RuntimeError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nlohmann::json j = grid_layout();
  j["rates_gbps"] = {0.03, 0.03};
  EXPECT_NE(error(j).find("layout grid.json: field 'rates_gbps' = [0.03,0.03]: expected 5 rates, one per rank"),
            std::string::npos) << error(j);
  j["rates_gbps"] = {0.03, 0.03, -1, 0.03, 0.01};
  EXPECT_NE(error(j).find("field 'rates_gbps[2]' = -1: expected a rate in [1e-06, 10000] Gbit/s"), std::string::npos)
      << error(j);
  j["rates_gbps"] = {0.03, 0.03, 1e-13, 0.03, 0.01};  // a pacing gap beyond the clock's range
  EXPECT_NE(error(j).find("field 'rates_gbps[2]' = 1e-13: expected a rate"), std::string::npos) << error(j);
  const nlohmann::json ring = nlohmann::json::parse(R"({"job": 1, "scheme": "rar", "payload": 64,
    "memory_bytes": 100000, "workers": ["10.0.0.1:1", "10.0.0.2:1"], "racks": [{"ranks": [0, 1]}],
    "rates_gbps": [1, 1]})");
  EXPECT_NE(error(ring).find("field 'rates_gbps' = [1,1]: rar's ring workers pace by their window"), std::string::npos)
      << error(ring);
}

}  // namespace
