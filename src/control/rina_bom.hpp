#pragma once
// Rina's Bandwidth-Occupation Model (BOM, Rina paper §III-B) and its
// incremental deployment order (§IV-D).
//
// Both models give a per-worker throughput in Gbps for one synchronous job
// on a topo::Graph, given the job's worker hosts and the set of INA switches
// (the graph's own "ina" flags are ignored: the set is an argument, so a
// planner can try many). A job needs at least two workers, every worker must
// be a distinct host, and every worker must reach the others; otherwise
// BomError names the offending node.
//
// PS-based INA (ps_ina_throughput), Lemmas 1-3:
//  - the aggregation tree is the BFS tree from the PS (first discovery wins,
//    neighbours in link order; only switches forward), the paper's "exactly
//    one path from all nodes to the PS";
//  - the PS is the given host; by default the first host (node order) that is
//    not a worker, or, if every host is a worker, the first worker (it then
//    aggregates its own gradient locally and sends nothing);
//  - the link from a node to its tree parent carries one flow per "effective
//    sender" below it: a worker is one; an INA switch with any worker below is
//    one (Lemma 2); a regular switch forwards the sum of its children (Lemma 1);
//  - every flow on a link gets capacity / flows, and the job runs at the
//    minimum over the tree's links (Lemma 3: an INA switch is as slow as its
//    worst child). With homogeneous links B0 this is B0 / (the largest number
//    of effective senders behind one regular switch's uplink).
//  The paper's "the farthest INA switch is the PS" (PS-less INA) is not modelled.
//
// Rina (rina_throughput), the agent-worker model (§IV-A/B) with §IV-D's
// abstraction above the ToR:
//  - a rack is a ToR switch (a switch a worker host links to) and the job's
//    workers on it; a rack with >= 2 workers whose ToR is INA is one
//    abstracted worker ("group"), its agent the rack's first worker in job
//    order; every other worker is an autonomous group;
//  - above the ToR (Aggregation::Tree, the default; §IV-D: "treating an INA
//    switch and all its downstream worker nodes as a single worker"): on the
//    workers' tree from the first worker (the BFS tree deployment_order
//    uses), an INA switch that is not a ToR and has >= 2 downstream units (a
//    worker is one, an INA switch with a worker below is one, Lemma 2, so an
//    INA rack is one; a regular switch passes on the sum, Lemma 1) merges
//    every worker of its subtree into one group, its sender; the outermost
//    such switch (nearest the first worker) forms the group, and INA
//    switches inside it aggregate their part first (Lemma 2). Its agent is
//    its first worker in job order. Inside the group every member and every
//    INA switch with a worker below sends its partial to its nearest INA
//    ancestor on the tree (Group::hops), the top switch sends the group's
//    one aggregate on. The ToR of the first worker is the tree's top and
//    can never be below such a switch, so that rack stays its own group.
//    Aggregation::Tor keeps the groups of the ToRs alone (non-ToR INA
//    switches change nothing): the packet simulator's Rina data plane
//    (dataplane/rina.cpp) aggregates at the ToR only, so the time model
//    (rina_time.hpp), set beside the simulator, uses it;
//  - G = number of groups; the ring visits them in order of their first
//    worker in the job's worker list. ScatterReduce traffic: each hop of a
//    group's tree is one flow (an INA rack's member to its ToR: the direct
//    link; a hop to a switch further up: topo::Routing's shortest path, ECMP
//    hash); each ring hop runs from the group's sender (its top INA switch,
//    or the autonomous worker) to the next group's agent along the same
//    routing;
//  - throughput = min over arcs of capacity / (flows crossing the arc), in
//    Gbps. AllGather mirrors this traffic and is not counted twice.
//  The BOM is a bandwidth model: it has no term for RAR's dependency chain
//  (§III-A, Eq. 1, is a separate time model), so the chain is reported, not
//  folded in: `groups` G and `ring_steps` = 2 (G - 1) ring steps per
//  allreduce (ScatterReduce and AllGather, G - 1 each). On a topology where
//  the ring is bottleneck-free (§III-A) Rina's BOM throughput with INA ToRs
//  is the link rate; replacing ToRs then shortens the chain. A group above
//  the ToR funnels its units' shards into one switch: until the INA
//  switches below it aggregate them, its downlinks carry one flow per unit
//  (fat-tree k = 4, tests/control/test_rina_bom.cpp: B0 / 3 right after the
//  first aggregation switch, B0 again once the tree's switches are INA), so
//  Fig. 11's "every replacement helps" holds for the chain, not for the
//  bandwidth at every step.
//  The ring order is not optimised: with shortest-path routing a ring in job
//  order can cross an arc twice (the paper's dragonfly 4,9,2 with rack-order
//  workers: B0/2 at any deployment).
//
// Deployment order (deployment_order), §IV-D, starting from no INA switch:
//  1. ToR switches with >= 2 of the job's workers, most workers first (ties:
//     lower node id);
//  2. then, on the tree of the workers' shortest paths from the first worker
//     (BFS tree from it, pruned to the switches with a worker below; with unit
//     link weights this is the paper's "minimum spanning tree rooted at a
//     worker"), repeatedly the regular switch with the most downstream nodes,
//     an INA switch with any worker below counting as one node (Lemma 2),
//     while that count is >= 2 (ties: smaller depth, then lower node id);
//  3. then every other switch, by node id (they shorten nothing).
//  Every switch of the graph appears exactly once.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "topo/graph.hpp"

namespace ina::control::rina {

struct BomError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct PsInaResult {
  topo::NodeId ps = topo::kNoNode;
  double gbps = 0;        // per-worker throughput
  topo::ArcId bottleneck = 0;  // the first arc in BFS order (nearest the PS) attaining the minimum
  int flows = 0;          // effective senders on it
};

// One ScatterReduce partial inside a group: `from` (a member, or an INA
// switch aggregating part of the group) sends it to `to`, its nearest INA
// ancestor (the group's sender at the top).
struct Hop {
  topo::NodeId from = topo::kNoNode;
  topo::NodeId to = topo::kNoNode;
};

struct Group {
  topo::NodeId sender = topo::kNoNode;  // the top INA switch (ToR or above), or the autonomous worker
  topo::NodeId agent = topo::kNoNode;   // receives the previous group's hop
  std::vector<topo::NodeId> members;    // job order
  std::vector<Hop> hops;                // the group's aggregation tree, leaves first (empty: autonomous)
};

// Which INA switches form groups (see rina_throughput above).
enum class Aggregation : uint8_t { Tor, Tree };

struct RinaResult {
  double gbps = 0;  // per-worker throughput
  std::vector<Group> groups;  // ring order
  int ring_steps = 0;         // 2 (G - 1)
  topo::ArcId bottleneck = 0;  // the lowest-numbered arc attaining the minimum
  int flows = 0;
};

// `ina` lists INA switches (node ids of switches; duplicates allowed).
PsInaResult ps_ina_throughput(const topo::Graph& g, const std::vector<topo::NodeId>& workers,
                              const std::vector<topo::NodeId>& ina, std::optional<topo::NodeId> ps = std::nullopt);
RinaResult rina_throughput(const topo::Graph& g, const std::vector<topo::NodeId>& workers,
                           const std::vector<topo::NodeId>& ina, Aggregation levels = Aggregation::Tree);
std::vector<topo::NodeId> deployment_order(const topo::Graph& g, const std::vector<topo::NodeId>& workers);

}  // namespace ina::control::rina
