#pragma once
// General network topology: hosts and switches joined by full-duplex links.
//
// A switch may be programmable ("INA"): it can aggregate gradients at up to
// its processing capacity C_s (Gbps). Links carry `gbps` in each direction;
// a directed use of a link is an arc. Only switches forward traffic: a host is
// the first or last node of a path, never an intermediate one.
//
// Construction validates as it goes (duplicate names, self-loops, duplicate
// links, non-positive or non-finite capacities) and throws TopologyError.
// Generators for the topologies of the GRID paper live here too, and the JSON
// format for custom topologies (load_topology_file) is documented below.
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ina::topo {

struct TopologyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using NodeId = uint32_t;
using ArcId = uint32_t;  // arc 2*l is link l from a to b, arc 2*l+1 from b to a
inline constexpr NodeId kNoNode = std::numeric_limits<NodeId>::max();

enum class NodeKind { Host, Switch };

struct Node {
  std::string name;
  NodeKind kind = NodeKind::Host;
  bool ina = false;          // programmable switch: can aggregate gradients
  double capacity_gbps = 0;  // C_s: aggregation processing capacity (INA switches only)
};

struct Link {
  NodeId a = kNoNode;
  NodeId b = kNoNode;
  double gbps = 0;  // per direction
};

class Graph {
 public:
  struct Adjacent {
    NodeId peer;
    ArcId arc;  // the arc leaving this node towards peer
  };

  std::string name;  // e.g. "fat-tree-paper" or the file's "name"

  NodeId add_host(std::string node_name);
  // ina = true requires capacity_gbps > 0.
  NodeId add_switch(std::string node_name, bool ina = false, double capacity_gbps = 0);
  ArcId add_link(NodeId a, NodeId b, double gbps);  // returns the arc a -> b
  // Makes a switch programmable with capacity C_s (> 0), or not (capacity ignored).
  void set_ina(NodeId sw, bool ina, double capacity_gbps = 0);

  size_t num_nodes() const { return nodes_.size(); }
  size_t num_arcs() const { return 2 * links_.size(); }
  const Node& node(NodeId id) const { return nodes_.at(id); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Link>& links() const { return links_; }
  bool is_host(NodeId id) const { return nodes_.at(id).kind == NodeKind::Host; }
  bool is_ina(NodeId id) const { return nodes_.at(id).ina; }
  std::span<const Adjacent> neighbors(NodeId id) const { return adj_.at(id); }

  std::optional<NodeId> find(std::string_view node_name) const;
  // Like find(), but an unknown name is a TopologyError "<what>: unknown node '<name>'".
  NodeId at(std::string_view node_name, std::string_view what) const;

  NodeId arc_from(ArcId arc) const { return arc % 2 == 0 ? links_.at(arc / 2).a : links_.at(arc / 2).b; }
  NodeId arc_to(ArcId arc) const { return arc % 2 == 0 ? links_.at(arc / 2).b : links_.at(arc / 2).a; }
  double arc_gbps(ArcId arc) const { return links_.at(arc / 2).gbps; }
  std::string arc_name(ArcId arc) const;  // "A->B"

  std::vector<NodeId> hosts() const;
  std::vector<NodeId> switches() const;
  std::vector<NodeId> ina_switches() const;
  // Switches with at least one host attached (top-of-rack / leaf switches).
  std::vector<NodeId> tor_switches() const;
  // Total capacity of the links into a node (a PS's ingress bandwidth B_alpha).
  double ingress_gbps(NodeId id) const;

 private:
  NodeId add_node(Node n);
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<std::vector<Adjacent>> adj_;
  std::unordered_map<std::string, NodeId> by_name_;
};

// Shortest paths by hop count. Equal-cost next hops are chosen per flow by a
// hash of (source, destination, current node), like ECMP, so paths spread
// over a fat-tree's cores yet are a pure function of the graph. The hash is
// ina::ecmp_index (core/ecmp.hpp), which the packet simulator's routes use
// too: a simulator built from the graph sends packets along path(). BFS trees
// towards each destination are computed on first use and cached (a Routing
// is therefore not safe for concurrent use). The graph must outlive it and
// must not change while it is in use.
class Routing {
 public:
  static constexpr int kUnreachable = -1;

  explicit Routing(const Graph& g) : g_(&g) {}

  const Graph& graph() const { return *g_; }
  // Hops from `from` to `to`, or kUnreachable.
  int hops(NodeId from, NodeId to) const;
  bool reachable(NodeId from, NodeId to) const { return hops(from, to) != kUnreachable; }
  // The path from `from` to `to` as arcs (empty if from == to). Throws
  // TopologyError if `to` is unreachable.
  std::vector<ArcId> path(NodeId from, NodeId to) const;
  // The first node after `from` on path(from, to) with in[node] set, or
  // `to` if there is none (path()'s hops, without building the path).
  // Throws TopologyError if `to` is unreachable.
  NodeId first_in(NodeId from, NodeId to, const std::vector<bool>& in) const;
  // The path a multicast copy takes from `from` to `to`: the first
  // equal-cost next hop (in adjacency order) at every node, as the packet
  // simulator's multicast tree replicates (sim::Simulator::multicast_from).
  std::vector<ArcId> tree_path(NodeId from, NodeId to) const;
  // Shortest path using only arcs with allowed[arc] (same tie-breaking);
  // std::nullopt if there is none.
  std::optional<std::vector<ArcId>> path_within(NodeId from, NodeId to, const std::vector<bool>& allowed) const;

 private:
  const std::vector<int>& dist_to(NodeId to) const;
  // dist_to(to), or TopologyError if `from` does not reach `to`.
  const std::vector<int>& dist_from(NodeId from, NodeId to) const;
  // path (first = false) or tree_path (first = true).
  std::vector<ArcId> walk_to(NodeId from, NodeId to, bool first) const;
  const Graph* g_;
  mutable std::unordered_map<NodeId, std::vector<int>> dist_;
};

// ---- Generators --------------------------------------------------------
// Every generated switch starts non-programmable; see deploy_ina. Hosts are
// named h0, h1, ... in rack order (all hosts of the first ToR, then the next).

// k-ary fat-tree (Al-Fares et al.): k pods of k/2 edge ("edge<i>") and k/2
// aggregation ("agg<i>") switches, (k/2)^2 cores ("core<i>"), and
// hosts_per_edge hosts per edge switch (k/2 in the canonical fat-tree).
Graph fat_tree(int k, int hosts_per_edge = 0, double link_gbps = 100);
// The GRID paper's fat-tree (§6.3): 80 switches (32 edge, 32 aggregation,
// 16 core; i.e. k = 8) and 192 servers (6 per edge switch), 100 Gbps links.
Graph fat_tree_paper();
// Leaf-spine: every leaf ("leaf<i>") linked to every spine ("spine<i>");
// hosts spread over leaves as evenly as possible, in order (the first
// hosts % leaves leaves get one more).
Graph leaf_spine(int spines, int leaves, int hosts, double link_gbps = 100);
// The GRID paper's leaf-spine (§6.3): 30 spines, 30 leaves, 500 servers,
// 100 Gbps links.
Graph leaf_spine_paper();

// Dragonfly (Kim et al., ISCA 2008): g groups of a routers ("g<G>r<R>"),
// the routers of a group fully connected by local links, h global ports per
// router, and hosts_per_router hosts on every router. Every pair of groups is
// joined by exactly one global link, so a * h >= g - 1 is required (the
// balanced, largest dragonfly has g = a * h + 1; the Rina paper's a = 4,
// g = 9, h = 2 is one). Group i's global links, in order of the peer group
// (ascending, skipping i), use router k / h for its k-th link: router r of a
// group has min(h, g - 1 - r * h) global links (h each when g = a * h + 1).
// Requires a >= 1, 2 <= g, h >= 1, hosts_per_router >= 1 and at most 4096
// routers; otherwise a TopologyError names the parameter and its value.
Graph dragonfly(int a, int g, int h, int hosts_per_router, double link_gbps = 100);

// The Rina paper's testbed (§VI-A, Fig. 12): two ToR switches "tor0" and
// "tor1" joined by one link, four hosts on each (h0-h3 on tor0, h4-h7 on
// tor1), every link `link_gbps`.
Graph rina_testbed(double link_gbps = 100);

// Which switches are programmable, and their capacities C_s ~ U(min, max)
// (the paper's §6.3: U(100 Gbps, 3.2 Tbps)). Scenario (a): the ToR/leaf
// switches; scenario (b): 20 % of all switches, chosen at random.
struct InaDeployment {
  enum class Where { Tor, All, Random };
  Where where = Where::Tor;
  double fraction = 0.2;  // Where::Random: round(fraction * #switches) switches (at least 1)
  double min_gbps = 100;
  double max_gbps = 3200;
};
// Resets every switch, then makes the chosen ones programmable. Draws from
// `seed` only: the same seed gives the same switches and capacities.
void deploy_ina(Graph& g, const InaDeployment& d, uint64_t seed);
// Parses "tor", "all" or "random:F" (0 < F <= 1) into d.where / d.fraction.
void parse_ina_where(std::string_view text, InaDeployment& d);

// Builds "fat-tree:K", "fat-tree-paper", "leaf-spine-paper", "rina-testbed" or
// "dragonfly:A,G,H" (hosts per router p = max(1, A / 2): Kim et al.'s balanced
// dragonfly has a = 2p = 2h, so the Rina paper's a = 4, g = 9, h = 2 gets
// p = 2, 72 hosts); nullopt for any other text (the caller may then treat it
// as a file name).
std::optional<Graph> generate(std::string_view spec);

// ---- JSON topology files -----------------------------------------------
// {
//   "name": "grid-fig1",                  optional; defaults to the file stem
//   "description": "...",                 optional free text
//   "link_gbps": 100,                     optional default for links without "gbps"
//   "nodes": [                            required, non-empty
//     {"name": "S1", "kind": "switch", "ina": true, "capacity_gbps": 9},
//     {"name": "W1", "kind": "host"}
//   ],
//   "links": [{"a": "W1", "b": "S1", "gbps": 3}],   required
//   "job": {"ps": "PS", "workers": ["W1", "W2"]}    optional default job
// }
// Node "kind" is "host" or "switch"; "ina" (default false) and
// "capacity_gbps" (required and > 0 iff ina) apply to switches only. Every
// object is strict: an unknown key, a wrong type, a duplicate or unknown node
// name, a capacity <= 0, a duplicate link, or (with "job") a worker that
// cannot reach the PS is a TopologyError naming the file, the field (e.g.
// "links[3].b") and the value. A document nested deeper than
// kMaxJsonDepth (64, core/json_depth.hpp) is refused before it is parsed.
struct JobSpec {
  std::string ps;
  std::vector<std::string> workers;
};

struct TopologyFile {
  Graph graph;
  std::string description;
  std::optional<JobSpec> job;
};

TopologyFile parse_topology_json(const std::string& text, const std::string& origin);
TopologyFile load_topology_file(const std::string& path);

// A PS and its workers resolved against a graph. Throws TopologyError (with
// `origin` and the offending name) unless the PS and every worker are
// distinct hosts and every worker can reach the PS.
struct Job {
  NodeId ps = kNoNode;
  std::vector<NodeId> workers;
};
Job resolve_job(const Graph& g, const JobSpec& spec, const std::string& origin);
void validate_job(const Graph& g, const Job& job, const std::string& origin);

// Worker hosts for n workers (the PS excluded): "packed" takes hosts in rack
// order (h0, h1, ...), "random" draws n distinct hosts from `seed`.
enum class Placement { Packed, Random };
std::vector<NodeId> place_workers(const Graph& g, NodeId ps, int n, Placement placement, uint64_t seed);

}  // namespace ina::topo
