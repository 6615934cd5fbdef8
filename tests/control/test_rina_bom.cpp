// Rina (paper: ../shared/papers/rina.md): the
// Bandwidth-Occupation Model (§III-B) for PS-based INA and for Rina, the
// §IV-D deployment order, and `ina plan rina`. Every expected value is
// derived by hand in the comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "control/rina_bom.hpp"
#include "topo/graph.hpp"

namespace rina = ina::control::rina;
using ina::topo::Graph;
using ina::topo::NodeId;

namespace {

std::vector<NodeId> ids(const Graph& g, const std::vector<std::string>& names) {
  std::vector<NodeId> out;
  for (const auto& n : names) out.push_back(g.at(n, "test"));
  return out;
}

std::vector<std::string> names(const Graph& g, const std::vector<NodeId>& v) {
  std::vector<std::string> out;
  for (const NodeId id : v) out.push_back(g.node(id).name);
  return out;
}

std::vector<NodeId> hosts_from(const Graph& g, size_t first) {
  const auto h = g.hosts();
  return {h.begin() + static_cast<std::ptrdiff_t>(first), h.end()};
}

}  // namespace

// ---- BOM: PS-based INA -----------------------------------------------------

// The paper's Fig. 4: PS - S4; S4's children: INA switch S3 and worker W6;
// S3's children: workers W1, W2 and switch S2 (T1's outbound switch); T1:
// S2 - {S0a - {W3, W4}, S0b - {W5, W7}}, 4 workers, no INA. All links B0 = 100.
Graph fig4() {
  Graph g;
  const NodeId ps = g.add_host("PS");
  const NodeId s4 = g.add_switch("S4"), s3 = g.add_switch("S3"), s2 = g.add_switch("S2");
  const NodeId s0a = g.add_switch("S0a"), s0b = g.add_switch("S0b");
  g.add_link(ps, s4, 100);
  g.add_link(s4, s3, 100);
  g.add_link(g.add_host("W6"), s4, 100);
  g.add_link(g.add_host("W1"), s3, 100);
  g.add_link(g.add_host("W2"), s3, 100);
  g.add_link(s3, s2, 100);
  g.add_link(s2, s0a, 100);
  g.add_link(s2, s0b, 100);
  g.add_link(g.add_host("W3"), s0a, 100);
  g.add_link(g.add_host("W4"), s0a, 100);
  g.add_link(g.add_host("W5"), s0b, 100);
  g.add_link(g.add_host("W7"), s0b, 100);
  return g;
}

TEST(RinaBom, Fig4WorkedExampleIsAQuarterOfB0) {
  const Graph g = fig4();
  const auto workers = ids(g, {"W1", "W2", "W3", "W4", "W5", "W6", "W7"});
  // S3 INA: S4's uplink carries S3 (one worker, Lemma 2) + W6 = 2 -> B0/2;
  // S2's uplink carries T1's 4 workers -> B0/4 (Lemma 1); minimum B0/4 = 25.
  const auto r = rina::ps_ina_throughput(g, workers, ids(g, {"S3"}));
  EXPECT_EQ(g.node(r.ps).name, "PS");
  EXPECT_DOUBLE_EQ(r.gbps, 25.0);
  EXPECT_EQ(g.arc_name(r.bottleneck), "S2->S3");
  EXPECT_EQ(r.flows, 4);
  // No INA: S4's uplink carries all 7 workers -> 100/7 (Lemma 1: 1/W).
  const auto none = rina::ps_ina_throughput(g, workers, {});
  EXPECT_DOUBLE_EQ(none.gbps, 100.0 / 7);
  EXPECT_EQ(g.arc_name(none.bottleneck), "S4->PS");
  // S2 INA too: S4 2 flows, S3 1, S2 1, S0a/S0b 2 each -> B0/2 = 50.
  EXPECT_DOUBLE_EQ(rina::ps_ina_throughput(g, workers, ids(g, {"S3", "S2"})).gbps, 50.0);
  // Every switch INA: every uplink carries one flow -> B0.
  EXPECT_DOUBLE_EQ(rina::ps_ina_throughput(g, workers, ids(g, {"S4", "S3", "S2", "S0a", "S0b"})).gbps, 100.0);
}

TEST(RinaBom, LeafSpineTestbedPsIna) {
  // The Fig. 12 testbed shape: 2 racks x 4 hosts, 2 spines. Workers h1..h7,
  // PS h0 (the first host that is not a worker). BFS from h0: leaf0 -> spine0
  // -> leaf1 (spine1 reaches nothing new).
  const Graph g = ina::topo::leaf_spine(2, 2, 8, 100);
  const auto workers = hosts_from(g, 1);
  const auto none = rina::ps_ina_throughput(g, workers, {});
  EXPECT_EQ(g.node(none.ps).name, "h0");
  EXPECT_DOUBLE_EQ(none.gbps, 100.0 / 7);  // leaf0 -> h0 carries h1..h3 + h4..h7
  // leaf1 INA: leaf0 -> h0 carries h1, h2, h3 and leaf1 = 4 -> 25.
  EXPECT_DOUBLE_EQ(rina::ps_ina_throughput(g, workers, ids(g, {"leaf1"})).gbps, 25.0);
  // leaf0 INA only: leaf1 -> spine0 and spine0 -> leaf0 still carry 4 -> 25;
  // the arc reported is the first in BFS order (nearest the PS).
  const auto l0 = rina::ps_ina_throughput(g, workers, ids(g, {"leaf0"}));
  EXPECT_DOUBLE_EQ(l0.gbps, 25.0);
  EXPECT_EQ(g.arc_name(l0.bottleneck), "spine0->leaf0");
  EXPECT_EQ(l0.flows, 4);
  EXPECT_DOUBLE_EQ(rina::ps_ina_throughput(g, workers, ids(g, {"leaf0", "leaf1"})).gbps, 100.0);
  // An explicit PS that is itself a worker: h4 aggregates its own gradient
  // locally; leaf1 -> h4 carries h5..h7 + h1..h3 (h0 does not work) = 6.
  const auto at_h4 = rina::ps_ina_throughput(g, workers, {}, g.at("h4", "t"));
  EXPECT_DOUBLE_EQ(at_h4.gbps, 100.0 / 6);
}

TEST(RinaBom, FatTreePsInaNeedsNearlyAllSwitches) {
  // Fat-tree k=4 (20 switches), workers h1..h15, PS h0. BFS tree from h0:
  // edge0 <- agg0 <- {edge1, core0 <- {agg2 <- {edge2, edge3}, agg4 <- .., agg6 <- ..}}.
  const Graph g = ina::topo::fat_tree(4);
  const auto workers = hosts_from(g, 1);
  // 0 %: edge0 -> h0 carries 15 workers.
  EXPECT_DOUBLE_EQ(rina::ps_ina_throughput(g, workers, {}).gbps, 100.0 / 15);
  // 40 % (the 8 edges): agg0 -> edge0 carries edge1 + (core0: 3 aggs x 2 edges) = 7.
  const auto edges = ids(g, {"edge0", "edge1", "edge2", "edge3", "edge4", "edge5", "edge6", "edge7"});
  EXPECT_DOUBLE_EQ(rina::ps_ina_throughput(g, workers, edges).gbps, 100.0 / 7);
  // 90 % (all but core0 and agg2): core0 -> agg0 carries agg2's 2 edges + agg4 + agg6 = 4 -> 25.
  std::vector<NodeId> most;
  for (const NodeId s : g.switches())
    if (g.node(s).name != "core0" && g.node(s).name != "agg2") most.push_back(s);
  ASSERT_EQ(most.size(), 18u);
  const auto r90 = rina::ps_ina_throughput(g, workers, most);
  EXPECT_DOUBLE_EQ(r90.gbps, 25.0);
  EXPECT_EQ(g.arc_name(r90.bottleneck), "core0->agg0");
  // 100 %: B0.
  EXPECT_DOUBLE_EQ(rina::ps_ina_throughput(g, workers, g.switches()).gbps, 100.0);
}

// ---- BOM: Rina -------------------------------------------------------------

TEST(RinaBom, LeafSpineRinaGroupsAndRing) {
  const Graph g = ina::topo::leaf_spine(2, 2, 8, 100);
  const auto workers = g.hosts();
  // No INA: 8 autonomous workers, ring h0 .. h7; each arc crossed at most once.
  const auto none = rina::rina_throughput(g, workers, {});
  EXPECT_EQ(none.groups.size(), 8u);
  EXPECT_EQ(none.ring_steps, 14);
  EXPECT_DOUBLE_EQ(none.gbps, 100.0);
  // leaf0 INA: {h0..h3} is one group (agent h0, sender leaf0) + h4..h7 = 5.
  const auto one = rina::rina_throughput(g, workers, ids(g, {"leaf0"}));
  ASSERT_EQ(one.groups.size(), 5u);
  EXPECT_EQ(g.node(one.groups[0].sender).name, "leaf0");
  EXPECT_EQ(g.node(one.groups[0].agent).name, "h0");
  EXPECT_EQ(names(g, one.groups[0].members), (std::vector<std::string>{"h0", "h1", "h2", "h3"}));
  EXPECT_EQ(g.node(one.groups[1].agent).name, "h4");
  EXPECT_EQ(one.ring_steps, 8);
  EXPECT_DOUBLE_EQ(one.gbps, 100.0);
  // Both leaves: G = 2.
  EXPECT_EQ(rina::rina_throughput(g, workers, ids(g, {"leaf0", "leaf1"})).groups.size(), 2u);
  // Spines above regular leaves (§IV-D). BFS tree from h0: leaf0 <- {spine0
  // <- leaf1 <- h4..h7, spine1 (nothing below)}. spine0 has leaf1's 4
  // workers below (Lemma 1: 4 units) and merges them: h0..h3 autonomous +
  // {h4..h7} (sender spine0, agent h4, each member -> spine0 through leaf1)
  // = 5 groups; leaf1 -> spine0 carries the 4 members' shards -> 25.
  const auto spines = rina::rina_throughput(g, workers, ids(g, {"spine0", "spine1"}));
  ASSERT_EQ(spines.groups.size(), 5u);
  EXPECT_EQ(g.node(spines.groups[4].sender).name, "spine0");
  EXPECT_EQ(g.node(spines.groups[4].agent).name, "h4");
  EXPECT_EQ(names(g, spines.groups[4].members), (std::vector<std::string>{"h4", "h5", "h6", "h7"}));
  EXPECT_EQ(spines.groups[4].hops.size(), 4u);
  EXPECT_DOUBLE_EQ(spines.gbps, 25.0);
  EXPECT_EQ(g.arc_name(spines.bottleneck), "leaf1->spine0");
  // The ToR-only grouping (the simulator's data plane) ignores the spines.
  EXPECT_EQ(rina::rina_throughput(g, workers, ids(g, {"spine0", "spine1"}), rina::Aggregation::Tor).groups.size(), 8u);
  // A one-worker rack stays autonomous: workers h0, h4, h5, leaf0 INA -> 3 groups.
  EXPECT_EQ(rina::rina_throughput(g, ids(g, {"h0", "h4", "h5"}), ids(g, {"leaf0"})).groups.size(), 3u);
}

TEST(RinaBom, InterleavedRingIsRelievedByAbstractedWorkers) {
  // One spine, 2 leaves x 4 hosts; job order h0,h4,h1,h5,h2,h6,h3,h7: every
  // ring hop changes rack, so leaf0 -> spine0 carries h0>h4, h1>h5, h2>h6,
  // h3>h7 = 4 flows -> 25.
  const Graph g = ina::topo::leaf_spine(1, 2, 8, 100);
  const auto workers = ids(g, {"h0", "h4", "h1", "h5", "h2", "h6", "h3", "h7"});
  const auto none = rina::rina_throughput(g, workers, {});
  EXPECT_DOUBLE_EQ(none.gbps, 25.0);
  EXPECT_EQ(none.flows, 4);
  // leaf0 INA: ring rack0 -> h4 -> h5 -> h6 -> h7 -> rack0: one crossing per arc.
  const auto one = rina::rina_throughput(g, workers, ids(g, {"leaf0"}));
  EXPECT_EQ(one.groups.size(), 5u);
  EXPECT_DOUBLE_EQ(one.gbps, 100.0);
  // PS-based INA on the same job (PS = h0, the first worker, since every host
  // works): leaf0 -> h0 carries h1..h3 + spine's 4 = 7 -> 100/7.
  EXPECT_DOUBLE_EQ(rina::ps_ina_throughput(g, workers, {}).gbps, 100.0 / 7);
}

TEST(RinaBom, FatTreeRinaChainShrinksWithEachReplacementInPlannerOrder) {
  // Fat-tree k=4, all 16 hosts work; deployment order (FatTreeOrder below):
  // edge0..edge7, agg0, core0, agg2, agg4, agg6, agg1, agg3, agg5, agg7,
  // core1..core3. The workers' tree from h0: edge0 <- {h1, agg0 <- {edge1,
  // core0 <- {agg2 <- {edge2, edge3}, agg4 <- {edge4, edge5}, agg6 <- {edge6,
  // edge7}}}} (agg1, core1..3, agg3/5/7 have no worker below).
  //  n <= 8: each edge merges its rack: G = 16 - n; the ring is
  //    bottleneck-free (§III-A): B0 = 100.
  //  n = 9 (agg0): agg0 is no ToR and has 7 units below (edge1 + core0's 6
  //    INA edges) -> groups {h0, h1} (edge0) and {h2..h15} (agg0, agent h2):
  //    G = 2, 2 ring steps. edge2..edge7 send their racks' partials to agg0
  //    over the shortest paths, which ECMP splits 3 / 3 over core0 and core1:
  //    core0 -> agg0 carries 3 -> 100 / 3.
  //  n = 10 (core0, inside agg0's group: Lemma 2, it aggregates first): the
  //    6 edges send to core0, each pod's 2 edges over its agg: agg2 -> core0
  //    carries 2 -> 50; core0 -> agg0 one. G stays 2 (agg0 is outermost).
  //  n = 11, 12 (agg2, agg4): agg4 -> core0, then agg6 -> core0, carry 2 -> 50.
  //  n = 13 (agg6): every hop of the tree carries one partial -> 100.
  //  n > 13: switches with no worker below: no change.
  // So the chain shrinks with every replacement up to agg0 and then stays;
  // the bandwidth dips at agg0 (a funnel until core0, agg2/4/6 aggregate
  // below it): Fig. 11's "every replacement helps" is not a bandwidth claim.
  const Graph g = ina::topo::fat_tree(4);
  const auto workers = g.hosts();
  const auto order = rina::deployment_order(g, workers);
  ASSERT_EQ(order.size(), 20u);
  auto expected_gbps = [](size_t n) { return n <= 8 ? 100.0 : n == 9 ? 100.0 / 3 : n <= 12 ? 50.0 : 100.0; };
  for (size_t n = 0; n <= order.size(); ++n) {
    const std::vector<NodeId> ina(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n));
    const auto r = rina::rina_throughput(g, workers, ina);
    const size_t G = n <= 8 ? 16 - n : 2u;
    EXPECT_DOUBLE_EQ(r.gbps, expected_gbps(n)) << n;
    EXPECT_EQ(r.groups.size(), G) << n;
    EXPECT_EQ(r.ring_steps, static_cast<int>(2 * (G - 1))) << n;
    // The ToR-only grouping stays at the 8 racks.
    EXPECT_EQ(rina::rina_throughput(g, workers, ina, rina::Aggregation::Tor).groups.size(), n <= 8 ? 16 - n : 8u) << n;
  }
  // PS-based INA along the same order, PS = h0 (a worker; it aggregates
  // locally): edge0 -> h0 carries h1 + agg0's 14 = 15 at 0 switches; at 8
  // (40 %) agg0 -> edge0 carries edge1 + core0's 6 = 7.
  EXPECT_DOUBLE_EQ(rina::ps_ina_throughput(g, workers, {}).gbps, 100.0 / 15);
  EXPECT_DOUBLE_EQ(rina::ps_ina_throughput(g, workers, {order.begin(), order.begin() + 8}).gbps, 100.0 / 7);
}

TEST(RinaBom, FatTreeGroupAboveTheTorsAndItsTree) {
  const Graph g = ina::topo::fat_tree(4);
  const auto workers = g.hosts();
  const auto edges = ids(g, {"edge0", "edge1", "edge2", "edge3", "edge4", "edge5", "edge6", "edge7"});
  auto with = [&](std::vector<std::string> more) {
    auto ina = edges;
    for (const NodeId s : ids(g, more)) ina.push_back(s);
    return rina::rina_throughput(g, workers, ina);
  };
  // agg0: the ring is edge0's rack (agent h0) -> agg0's group (agent h2).
  // Its tree: 14 members -> their edges, edge1..edge7 -> agg0 = 21 hops.
  const auto a = with({"agg0"});
  ASSERT_EQ(a.groups.size(), 2u);
  EXPECT_EQ(g.node(a.groups[0].sender).name, "edge0");
  EXPECT_EQ(names(g, a.groups[0].members), (std::vector<std::string>{"h0", "h1"}));
  EXPECT_EQ(g.node(a.groups[1].sender).name, "agg0");
  EXPECT_EQ(g.node(a.groups[1].agent).name, "h2");
  EXPECT_EQ(a.groups[1].members.size(), 14u);
  EXPECT_EQ(a.groups[1].hops.size(), 21u);
  int to_agg0 = 0;
  for (const auto& h : a.groups[1].hops) to_agg0 += g.node(h.to).name == "agg0";
  EXPECT_EQ(to_agg0, 7);
  // + core0: the 6 edges of pods 1-3 send to core0, core0 to agg0 (22 hops).
  const auto c = with({"agg0", "core0"});
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.groups[1].hops.size(), 22u);
  std::map<std::string, int> into;
  for (const auto& h : c.groups[1].hops)
    if (!g.is_host(h.from)) ++into[g.node(h.to).name];
  EXPECT_EQ(into, (std::map<std::string, int>{{"agg0", 2}, {"core0", 6}}));
  // core0 alone above the edges: it is the outermost, with 6 units: groups
  // edge0 {h0,h1}, edge1 {h2,h3}, core0 {h4..h15} (agent h4) -> G = 3.
  const auto k = with({"core0"});
  ASSERT_EQ(k.groups.size(), 3u);
  EXPECT_EQ(g.node(k.groups[2].sender).name, "core0");
  EXPECT_EQ(g.node(k.groups[2].agent).name, "h4");
  EXPECT_EQ(k.ring_steps, 4);
  // agg2 alone: pod 1's two INA edges are 2 units -> one group {h4..h7}: G = 7.
  const auto p = with({"agg2"});
  ASSERT_EQ(p.groups.size(), 7u);
  EXPECT_EQ(g.node(p.groups[2].sender).name, "agg2");
  EXPECT_EQ(names(g, p.groups[2].members), (std::vector<std::string>{"h4", "h5", "h6", "h7"}));
  // Without INA edges, agg2 has pod 1's 4 workers below (regular edges pass
  // them on, Lemma 1): one group of 4 members, each sending through its edge.
  const auto bare = rina::rina_throughput(g, workers, ids(g, {"agg2"}));
  ASSERT_EQ(bare.groups.size(), 13u);
  EXPECT_EQ(bare.groups[4].members.size(), 4u);
  EXPECT_EQ(bare.groups[4].hops.size(), 4u);
  EXPECT_DOUBLE_EQ(bare.gbps, 50.0);  // edge2 -> agg2 carries h4's and h5's shards
}

TEST(RinaBom, AnInaSwitchAboveOneUnitFormsNoGroup) {
  // One spine, leaves with 3, 2, 2 hosts; workers h0 (leaf0) and h5 (leaf2):
  // spine0 has one unit below (h5): no group, G = 2.
  const Graph g = ina::topo::leaf_spine(1, 3, 7, 100);
  const auto r = rina::rina_throughput(g, ids(g, {"h0", "h5"}), ids(g, {"spine0"}));
  EXPECT_EQ(r.groups.size(), 2u);
  EXPECT_TRUE(r.groups[1].hops.empty());
}

// ---- Deployment order --------------------------------------------------------

TEST(RinaDeployment, FatTreeOrder) {
  // Phase 1: the 8 edges (2 workers each, ties by id). Phase 2 on the BFS tree
  // from h0: agg0 has 7 downstream nodes (edge1 + core0's 6), then core0 (6),
  // then agg2, agg4, agg6 (2 each, depth 4, by id). Phase 3: the rest by id.
  const Graph g = ina::topo::fat_tree(4);
  EXPECT_EQ(names(g, rina::deployment_order(g, g.hosts())),
            (std::vector<std::string>{"edge0", "edge1", "edge2", "edge3", "edge4", "edge5", "edge6", "edge7", "agg0",
                                      "core0", "agg2", "agg4", "agg6", "agg1", "agg3", "agg5", "agg7", "core1", "core2",
                                      "core3"}));
}

TEST(RinaDeployment, MostAttachedWorkersFirstThenTheTree) {
  // One spine, leaves with 3, 2, 2 hosts (ids: spine0 0, leaf0 1, leaf1 2, leaf2 3).
  const Graph g = ina::topo::leaf_spine(1, 3, 7, 100);
  // All hosts: leaf0 (3) first, then leaf1, leaf2 (2, by id); then spine0 (2 INA leaves below).
  EXPECT_EQ(names(g, rina::deployment_order(g, g.hosts())),
            (std::vector<std::string>{"leaf0", "leaf1", "leaf2", "spine0"}));
  // Workers h0 (alone on leaf0), h3, h4 (leaf1), h5, h6 (leaf2): phase 1 leaf1,
  // leaf2; from root h0, leaf0 and spine0 both have 2 downstream nodes, leaf0
  // is shallower; then spine0 still has 2.
  EXPECT_EQ(names(g, rina::deployment_order(g, ids(g, {"h0", "h3", "h4", "h5", "h6"}))),
            (std::vector<std::string>{"leaf1", "leaf2", "leaf0", "spine0"}));
  // Workers h0 (leaf0) and h5 (leaf2): no ToR has 2; from root h0 the tree is
  // leaf0 <- spine0 <- leaf2 <- h5, one downstream node each, so nothing
  // qualifies in phase 2; every switch by id.
  EXPECT_EQ(names(g, rina::deployment_order(g, ids(g, {"h0", "h5"}))),
            (std::vector<std::string>{"spine0", "leaf0", "leaf1", "leaf2"}));
}

TEST(RinaBom, BadJobsAreRejected) {
  const Graph g = ina::topo::leaf_spine(1, 2, 4, 100);
  EXPECT_THROW((void)rina::rina_throughput(g, ids(g, {"h0"}), {}), rina::BomError);
  EXPECT_THROW((void)rina::ps_ina_throughput(g, ids(g, {"h0", "h0"}), {}), rina::BomError);
  EXPECT_THROW((void)rina::ps_ina_throughput(g, ids(g, {"h0", "leaf0"}), {}), rina::BomError);
  EXPECT_THROW((void)rina::rina_throughput(g, ids(g, {"h0", "h1"}), ids(g, {"h2"})), rina::BomError);
}

// ---- ina plan rina ---------------------------------------------------------

TEST(RinaCli, JsonReportsBothThroughputsAndTheOrder) {
  const auto r = ina_test::run_ina("plan rina --topology fat-tree:4 --ina-count 8 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  // Same numbers as FatTreeRinaChainShrinksWithEachReplacementInPlannerOrder.
  EXPECT_DOUBLE_EQ(j.at("rina_gbps").get<double>(), 100.0);
  EXPECT_NEAR(j.at("ps_ina_gbps").get<double>(), 100.0 / 7, 1e-9);
  EXPECT_EQ(j.at("groups").get<int>(), 8);
  EXPECT_EQ(j.at("ps").get<std::string>(), "h0");
  EXPECT_EQ(j.at("deployment_order").size(), 20u);
  EXPECT_EQ(j.at("deployment_order")[8].get<std::string>(), "agg0");
  EXPECT_EQ(j.at("ina").size(), 8u);
  EXPECT_EQ(j.at("group_list").size(), 8u);
  EXPECT_EQ(j.at("group_list")[1].at("sender").get<std::string>(), "edge1");
  EXPECT_EQ(j.at("group_list")[1].at("members"), (nlohmann::json{"h2", "h3"}));

  // One switch more (agg0, above the other 7 racks): edge0's rack and agg0's group of 14.
  const auto nine = nlohmann::json::parse(ina_test::run_ina("plan rina --topology fat-tree:4 --ina-count 9 --json").output);
  EXPECT_EQ(nine.at("groups").get<int>(), 2);
  EXPECT_EQ(nine.at("ring_steps").get<int>(), 2);
  EXPECT_EQ(nine.at("group_list")[1].at("sender").get<std::string>(), "agg0");
  EXPECT_EQ(nine.at("group_list")[1].at("agent").get<std::string>(), "h2");
  EXPECT_EQ(nine.at("group_list")[1].at("members").size(), 14u);
  EXPECT_NEAR(nine.at("rina_bom_gbps").get<double>(), 100.0 / 3, 1e-6);

  const auto named = ina_test::run_ina("plan rina --topology fat-tree:4 --workers 8 --ina edge0,edge1 --json");
  ASSERT_EQ(named.status, 0) << named.output;
  const auto k = nlohmann::json::parse(named.output);
  // h0..h7 work (pod 0 and 1), edge0, edge1 INA: groups {h0,h1}, {h2,h3}, h4..h7 = 6.
  EXPECT_EQ(k.at("groups").get<int>(), 6);
  EXPECT_EQ(k.at("ps").get<std::string>(), "h8");  // first host that does not work

  const auto df = ina_test::run_ina("plan rina --topology dragonfly:4,9,2");
  ASSERT_EQ(df.status, 0) << df.output;
  EXPECT_NE(df.output.find("dragonfly:4,9,2: 72 workers, 36 switches"), std::string::npos) << df.output;
  EXPECT_NE(df.output.find("72 groups"), std::string::npos) << df.output;
}

TEST(RinaCli, BadInputNamesTheFlagAndValue) {
  auto fails_with = [](const std::string& args, std::vector<std::string> parts) {
    const auto r = ina_test::run_ina(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
    for (const auto& p : parts) EXPECT_NE(r.output.find(p), std::string::npos) << args << "\n" << r.output;
  };
  fails_with("plan rina --topology fat-tree:4 --ina edge0,nosuch", {"--ina", "nosuch"});
  fails_with("plan rina --topology fat-tree:4 --ina h3", {"--ina", "h3", "host"});
  // A topology file: the error names the file as well as the flag and value.
  const std::string testbed = std::string(INA_SOURCE_DIR) + "/scenarios/rina/testbed.json";
  fails_with("plan rina --topology " + testbed + " --ina tor0,nosuch", {"--ina", "nosuch", testbed});
  fails_with("plan rina --topology " + testbed + " --ina h5", {"--ina", "h5", "host", testbed});
  fails_with("plan rina --topology dragonfly:2,9,1", {"--topology", "dragonfly:2,9,1", "g=9", "a*h"});
  fails_with("plan rina --topology dragonfly:4,9", {"--topology", "dragonfly:A,G,H"});
  fails_with("plan rina --topology fat-tree:4 --workers 17", {"--workers", "17", "16 hosts"});
  fails_with("plan rina --topology fat-tree:4 --workers h0,h99", {"--workers", "h99"});
  fails_with("plan rina --topology fat-tree:4 --ina-count 21", {"--ina-count", "21"});
  fails_with("plan rina --topology fat-tree:4 --ina edge0 --ina-count 2", {"--ina", "--ina-count"});
}

// scenarios/rina/variant/dragonfly-4-9-2-ring-order.json
// (scripts/dragonfly-ring-order 4 9 2 2) is dragonfly:4,9,2 with its hosts
// listed in another order: the same router links, two hosts per router.
// In the generated order group 0's ring enters at g0r3 (its global link to
// group 8: peer index 7, router 7 / 2 = 3) and leaves from g0r0 (to group
// 1: index 0), so g0r3 -> g0r0 carries rack g0r3's flow out and the flow
// into h0: 2 flows -> 50, at any INA count (the ring between agents keeps
// both). The file's order runs each group from the router it enters at to
// the one it leaves from: one flow per arc -> 100, with INA ToRs too. The
// committed file is byte for byte what the script writes.
TEST(RinaBom, DragonflyRingOrderFileCrossesEachArcOnce) {
  const Graph gen = *ina::topo::generate("dragonfly:4,9,2");
  const Graph file =
      ina::topo::load_topology_file(std::string(INA_SOURCE_DIR) + "/scenarios/rina/variant/dragonfly-4-9-2-ring-order.json")
          .graph;
  // The same routers and router links; each router with two hosts of its own.
  std::set<std::pair<std::string, std::string>> gen_links, file_links;
  for (const auto* gr : {&gen, &file})
    for (const auto& l : gr->links())
      if (!gr->is_host(l.a) && !gr->is_host(l.b))
        (gr == &gen ? gen_links : file_links).insert(std::minmax(gr->node(l.a).name, gr->node(l.b).name));
  EXPECT_EQ(gen_links.size(), 36u * 3 / 2 + 36u);  // 9 groups x 6 local links + 36 global links
  EXPECT_EQ(file_links, gen_links);
  ASSERT_EQ(file.hosts().size(), 72u);
  for (const NodeId r : file.switches()) {
    const auto nb = file.neighbors(r);
    EXPECT_EQ(std::count_if(nb.begin(), nb.end(), [&](const auto& n) { return file.is_host(n.peer); }), 2)
        << file.node(r).name;
  }
  const auto gen_none = rina::rina_throughput(gen, gen.hosts(), {});
  EXPECT_EQ(gen_none.flows, 2);
  EXPECT_EQ(gen.arc_name(gen_none.bottleneck), "g0r3->g0r0");
  EXPECT_EQ(rina::rina_throughput(gen, gen.hosts(), gen.switches()).flows, 2);
  const auto file_none = rina::rina_throughput(file, file.hosts(), {});
  EXPECT_EQ(file_none.flows, 1);
  EXPECT_DOUBLE_EQ(file_none.gbps, 100.0);
  const auto file_all = rina::rina_throughput(file, file.hosts(), file.switches());
  EXPECT_EQ(file_all.groups.size(), 36u);
  EXPECT_EQ(file_all.flows, 1);
  // The committed file is what its generator writes.
  const std::string dir = std::string(INA_SOURCE_DIR);
  const auto gen_out = ina_test::run_command(dir + "/scripts/dragonfly-ring-order 4 9 2 2");
  ASSERT_EQ(gen_out.status, 0) << gen_out.output;
  std::ifstream in(dir + "/scenarios/rina/variant/dragonfly-4-9-2-ring-order.json");
  const std::string committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(gen_out.output, committed);
}
