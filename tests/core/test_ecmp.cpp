// ECMP in the packet simulator on a k = 4 fat-tree (src/sim/engine.cpp):
// the candidate next hops of edge, aggregation and core switches, one path
// per flow, flows spread over the cores, the same paths as topo::Routing
// (so GRID's planner and its packet simulation agree), and multicast trees
// that stay trees (the first candidate everywhere).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "sim/engine.hpp"
#include "topo/graph.hpp"

namespace ina::test {
namespace {

// A node of the fat-tree. At start it sends one packet per entry of `sends`
// (and, with `group`, multicasts one packet to that group). A switch forwards
// what it receives (a multicast copy by multicast) unless it is addressed to
// it; a host keeps it.
class Endpoint final : public Node {
 public:
  struct Send {
    NodeId dst;
    uint16_t job;
    uint32_t psn;
  };
  struct Rx {
    NodeId src;
    uint16_t job;
    uint32_t psn;
  };
  explicit Endpoint(bool is_switch) : switch_(is_switch) {}

  void on_start(Time, Effects& fx) override {
    for (const Send& s : sends) {
      Packet* p = fx.alloc();
      p->h.src = id();
      p->h.dst = s.dst;
      p->h.job = s.job;
      p->h.psn = s.psn;
      fx.send(p);
    }
    if (group) {
      Packet* p = fx.alloc();
      p->h.src = id();
      p->h.dst = kMulticast;
      p->h.job = group;
      ASSERT_TRUE(fx.multicast(p));
    }
  }
  void on_packet(Packet* p, Time, Effects& fx) override {
    if (!switch_ || p->h.dst == id()) {
      got.push_back({p->h.src, p->h.job, p->h.psn});
      fx.free(p);
    } else if (p->h.dst == kMulticast) {
      ASSERT_TRUE(fx.multicast(p));
    } else {
      fx.send(p);
    }
  }
  void on_timer(uint64_t, Time, Effects&) override {}

  std::vector<Send> sends;
  uint16_t group = 0;
  std::vector<Rx> got;

 private:
  bool switch_;
};

// The simulator built from a topo::Graph as exp::simulate_plan builds it:
// node v is graph node v, and the graph's links are connected in order, so
// simulator link id == topo arc id.
struct FatTree {
  explicit FatTree(int k = 4, int hosts_per_edge = 2) : g(topo::fat_tree(k, hosts_per_edge)), sim(1, 64) {
    for (topo::NodeId v = 0; v < g.num_nodes(); ++v) {
      auto n = std::make_unique<Endpoint>(!g.is_host(v));
      nodes.push_back(n.get());
      sim.add_node(std::move(n), !g.is_host(v));
    }
    sim::LinkParams lp;
    for (const auto& l : g.links()) sim.connect(static_cast<NodeId>(l.a), static_cast<NodeId>(l.b), lp, lp);
    sim.build_routes();
    sim.set_trace(&trace);
  }
  NodeId id(const char* name) const { return static_cast<NodeId>(g.at(name, "test")); }
  // The nodes each packet visited (key: src, dst, job, psn), in order.
  std::map<std::tuple<NodeId, NodeId, uint16_t, uint32_t>, std::vector<NodeId>> visits() const {
    std::map<std::tuple<NodeId, NodeId, uint16_t, uint32_t>, std::vector<NodeId>> out;
    for (const auto& r : trace)
      if (!r.timer) out[{r.src, r.dst, r.job, r.psn}].push_back(r.node);
    return out;
  }
  // Where the links out of `sw` towards `dst` go.
  std::vector<NodeId> candidates(NodeId sw, NodeId dst) {
    std::vector<NodeId> to;
    for (const uint32_t li : sim.next_hops(sw, dst)) to.push_back(sim.link(li).to);
    return to;
  }
  // topo::Routing's path from `from` to `to` as the nodes after `from`.
  std::vector<NodeId> planned(const topo::Routing& r, NodeId from, NodeId to) const {
    std::vector<NodeId> nodes_on;
    for (const topo::ArcId a : r.path(from, to)) nodes_on.push_back(static_cast<NodeId>(g.arc_to(a)));
    return nodes_on;
  }

  topo::Graph g;
  sim::Simulator sim;
  std::vector<Endpoint*> nodes;
  std::vector<sim::TraceRecord> trace;
};

using Ids = std::vector<NodeId>;

// k = 4, 2 hosts per edge switch: pod p has edge2p, edge2p+1, agg2p,
// agg2p+1; local aggregation switch j of every pod links to cores 2j, 2j+1;
// h0, h1 hang off edge0, h2, h3 off edge1 (pod 0), h4, h5 off edge2 (pod 1).
TEST(Ecmp, FatTreeCandidatesAreEveryShortestNextHop) {
  FatTree f;
  const NodeId h1 = f.id("h1"), h2 = f.id("h2"), h4 = f.id("h4");
  // Edge switch to another pod: both aggregation uplinks (k/2 = 2).
  EXPECT_EQ(f.candidates(f.id("edge0"), h4), (Ids{f.id("agg0"), f.id("agg1")}));
  // Aggregation switch to another pod: both of its cores (k/2 = 2).
  EXPECT_EQ(f.candidates(f.id("agg0"), h4), (Ids{f.id("core0"), f.id("core1")}));
  EXPECT_EQ(f.candidates(f.id("agg1"), h4), (Ids{f.id("core2"), f.id("core3")}));
  // Within a pod, an edge switch reaches the other edge switch over either aggregation switch.
  EXPECT_EQ(f.candidates(f.id("edge0"), h2), (Ids{f.id("agg0"), f.id("agg1")}));
  // One way down: the host's own port, a core's one link into the pod, the
  // aggregation switch's one link to the host's edge switch.
  EXPECT_EQ(f.candidates(f.id("edge0"), h1), (Ids{h1}));
  EXPECT_EQ(f.candidates(f.id("core1"), h4), (Ids{f.id("agg2")}));
  EXPECT_EQ(f.candidates(f.id("agg2"), h4), (Ids{f.id("edge2")}));
  EXPECT_EQ(f.candidates(f.id("agg0"), h1), (Ids{f.id("edge0")}));
  // Switches as destinations (GRID addresses fragments to them).
  EXPECT_EQ(f.candidates(f.id("edge0"), f.id("edge2")), (Ids{f.id("agg0"), f.id("agg1")}));
  EXPECT_EQ(f.candidates(f.id("edge0"), f.id("core3")), (Ids{f.id("agg1")}));
  // No route: to itself, from a host.
  EXPECT_TRUE(f.sim.next_hops(f.id("edge0"), f.id("edge0")).empty());
  EXPECT_TRUE(f.sim.next_hops(h1, h4).empty());
}

// Two flows h0 -> h12 (jobs 1 and 2, 64 packets each, interleaved): every
// packet takes the same 5-switch path, so each job's packets arrive in order.
TEST(Ecmp, OneFlowOnePath) {
  FatTree f;
  const NodeId h0 = f.id("h0"), h12 = f.id("h12");
  for (uint32_t psn = 0; psn < 64; ++psn)
    for (uint16_t job : {1, 2}) f.nodes[h0]->sends.push_back({h12, job, psn});
  f.sim.run();
  ASSERT_EQ(f.nodes[h12]->got.size(), 128u);
  const auto visits = f.visits();
  ASSERT_EQ(visits.size(), 128u);
  const Ids& first = visits.begin()->second;
  ASSERT_EQ(first.size(), 6u) << "edge, agg, core, agg, edge, host";
  for (const auto& [key, path] : visits) EXPECT_EQ(path, first);
  uint32_t next[3] = {0, 0, 0};
  for (const auto& rx : f.nodes[h12]->got) EXPECT_EQ(rx.psn, next[rx.job]++) << "job " << rx.job;
  EXPECT_EQ(f.sim.misrouted(), 0u);
}

// One packet for every ordered host pair (16 hosts: 240 flows). Each of the
// 16 * 12 = 192 flows between pods crosses exactly one core, the 48 others
// none; the hash spreads the 192 over the 4 cores (48 each if even: 53, 45,
// 43, 51), and each core carries exactly the flows topo::Routing puts on it.
TEST(Ecmp, AllPairsSpreadOverEveryCore) {
  FatTree f;
  const auto hosts = f.g.hosts();
  for (const auto a : hosts)
    for (const auto b : hosts)
      if (a != b) f.nodes[a]->sends.push_back({static_cast<NodeId>(b), 1, 0});
  f.sim.run();
  const auto visits = f.visits();
  ASSERT_EQ(visits.size(), 240u);
  const topo::Routing routing(f.g);
  std::map<NodeId, int> crossed, planned;
  int via_core = 0;
  for (const auto& [key, path] : visits) {
    const auto [src, dst, job, psn] = key;
    for (const NodeId v : path)
      if (f.g.node(v).name.starts_with("core")) ++crossed[v];
    for (const NodeId v : f.planned(routing, src, dst))
      if (f.g.node(v).name.starts_with("core")) ++planned[v];
    via_core += std::any_of(path.begin(), path.end(), [&](NodeId v) { return f.g.node(v).name.starts_with("core"); });
  }
  EXPECT_EQ(via_core, 192);
  ASSERT_EQ(crossed.size(), 4u) << "every core carries traffic";
  int total = 0;
  for (const auto& [core, n] : crossed) {
    total += n;
    EXPECT_GE(n, 32) << f.g.node(core).name << ": within a third of the even share (48)";
    EXPECT_LE(n, 64) << f.g.node(core).name;
  }
  EXPECT_EQ(total, 192) << "a flow crosses one core at most";
  EXPECT_EQ(crossed, planned);
  // Pinned, not derived: the counts this hash gives. A change of ecmp_index
  // (which moves GRID's planned paths too) shows up here.
  EXPECT_EQ(crossed, (std::map<NodeId, int>{{f.id("core0"), 53}, {f.id("core1"), 45}, {f.id("core2"), 43}, {f.id("core3"), 51}}));
  for (const auto h : hosts) EXPECT_EQ(f.nodes[h]->got.size(), 15u);
}

// The path a packet takes in the simulator is topo::Routing::path for its
// (src, dst): from every host to every host, and from every switch to a few
// hosts (GRID's partial aggregates: switch -> PS).
TEST(Ecmp, SimulatorPathIsTopoRoutingPath) {
  FatTree f;
  const auto hosts = f.g.hosts();
  const auto switches = f.g.switches();
  const NodeId ps = f.id("h15"), other = f.id("h6");
  for (const auto a : hosts)
    for (const auto b : hosts)
      if (a != b) f.nodes[a]->sends.push_back({static_cast<NodeId>(b), 1, 0});
  for (const auto s : switches) {
    f.nodes[s]->sends.push_back({ps, 2, 0});
    f.nodes[s]->sends.push_back({other, 2, 0});
    if (s != f.id("core2")) f.nodes[s]->sends.push_back({f.id("core2"), 3, 0});
  }
  f.sim.run();
  const topo::Routing routing(f.g);
  const auto visits = f.visits();
  ASSERT_EQ(visits.size(), 240u + 3 * switches.size() - 1) << "core2 does not send to itself";
  size_t inter_pod = 0;
  for (const auto& [key, path] : visits) {
    const auto [src, dst, job, psn] = key;
    EXPECT_EQ(path, f.planned(routing, src, dst)) << f.g.node(src).name << " -> " << f.g.node(dst).name;
    inter_pod += job == 1 && path.size() == 6;
  }
  EXPECT_EQ(inter_pod, 192u) << "the 192 inter-pod host pairs (two equal-cost choices each) are among them";
  EXPECT_EQ(f.sim.misrouted(), 0u);
}

// edge0 multicasts to all 16 hosts. The tree takes the first candidate (the
// lowest link id) at every switch: edge0 -> agg0 -> core0 -> agg2/agg4/agg6,
// down to every edge switch and host: 29 nodes, 28 link crossings, one copy
// per host, nothing over agg1 or any other core; topo::Routing::tree_path
// gives each copy's way.
TEST(Ecmp, MulticastIsTheFirstCandidateTree) {
  FatTree f;
  std::vector<NodeId> members;
  for (const auto h : f.g.hosts()) members.push_back(static_cast<NodeId>(h));
  f.sim.set_multicast_group(1, members);
  f.nodes[f.id("edge0")]->group = 1;
  f.sim.run();
  for (const NodeId h : members) EXPECT_EQ(f.nodes[h]->got.size(), 1u) << f.g.node(h).name;
  uint64_t crossings = 0;
  for (size_t li = 0; li < f.sim.link_count(); ++li) crossings += f.sim.link(static_cast<uint32_t>(li)).st.packets;
  EXPECT_EQ(crossings, 28u);
  std::map<NodeId, int> reached;
  for (const auto& r : f.trace) ++reached[r.node];
  for (const char* unused : {"agg1", "core1", "core2", "core3", "agg3", "agg5", "agg7"})
    EXPECT_FALSE(reached.contains(f.id(unused))) << unused;
  for (const char* used : {"agg0", "core0", "agg2", "agg4", "agg6"}) EXPECT_EQ(reached[f.id(used)], 1) << used;
  EXPECT_EQ(f.sim.packets_in_use(), 0u);
  // topo::Routing::tree_path is a copy's way: the union of tree_path(edge0,
  // h) over the members is this tree, link by link.
  const topo::Routing routing(f.g);
  std::set<std::pair<NodeId, NodeId>> tree;
  for (const NodeId h : members)
    for (const topo::ArcId a : routing.tree_path(f.id("edge0"), h))
      tree.emplace(static_cast<NodeId>(f.g.arc_from(a)), static_cast<NodeId>(f.g.arc_to(a)));
  EXPECT_EQ(tree.size(), 28u);
  for (size_t li = 0; li < f.sim.link_count(); ++li) {
    const auto& l = f.sim.link(static_cast<uint32_t>(li));
    EXPECT_EQ(l.st.packets, tree.contains({l.from, l.to}) ? 1u : 0u) << f.g.node(l.from).name << " -> " << f.g.node(l.to).name;
  }
}

}  // namespace
}  // namespace ina::test
