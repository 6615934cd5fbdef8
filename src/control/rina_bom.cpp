// Rina's BOM and deployment order; the model is documented in rina_bom.hpp.
#include "control/rina_bom.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <limits>

namespace ina::control::rina {
namespace {

using topo::ArcId;
using topo::Graph;
using topo::NodeId;

constexpr ArcId kNoArc = std::numeric_limits<ArcId>::max();

void check_job(const Graph& g, const std::vector<NodeId>& workers) {
  if (workers.size() < 2) throw BomError(fmt::format("a job needs at least 2 workers, got {}", workers.size()));
  std::vector<bool> seen(g.num_nodes(), false);
  for (const NodeId w : workers) {
    if (w >= g.num_nodes()) throw BomError(fmt::format("worker: no node with id {}", w));
    if (!g.is_host(w)) throw BomError(fmt::format("worker '{}' is a switch, not a host", g.node(w).name));
    if (seen[w]) throw BomError(fmt::format("worker '{}' is listed twice", g.node(w).name));
    seen[w] = true;
  }
}

std::vector<bool> ina_mask(const Graph& g, const std::vector<NodeId>& ina) {
  std::vector<bool> m(g.num_nodes(), false);
  for (const NodeId s : ina) {
    if (s >= g.num_nodes()) throw BomError(fmt::format("INA switch: no node with id {}", s));
    if (g.is_host(s)) throw BomError(fmt::format("INA switch '{}' is a host, not a switch", g.node(s).name));
    m[s] = true;
  }
  return m;
}

// BFS tree from `root`: first discovery wins, neighbours in link order, only
// the root and switches forward.
struct Tree {
  std::vector<NodeId> parent;
  std::vector<ArcId> up;  // arc node -> parent
  std::vector<int> depth;
  std::vector<NodeId> order;  // BFS order, root first
};

Tree bfs_tree(const Graph& g, NodeId root) {
  Tree t;
  t.parent.assign(g.num_nodes(), topo::kNoNode);
  t.up.assign(g.num_nodes(), kNoArc);
  t.depth.assign(g.num_nodes(), -1);
  t.depth[root] = 0;
  std::deque<NodeId> q{root};
  while (!q.empty()) {
    const NodeId v = q.front();
    q.pop_front();
    t.order.push_back(v);
    if (v != root && g.is_host(v)) continue;
    for (const auto& e : g.neighbors(v)) {
      if (t.depth[e.peer] >= 0) continue;
      t.depth[e.peer] = t.depth[v] + 1;
      t.parent[e.peer] = v;
      t.up[e.peer] = e.arc ^ 1u;  // the reverse arc: peer -> v
      q.push_back(e.peer);
    }
  }
  return t;
}

void check_reach(const Graph& g, const Tree& t, const std::vector<NodeId>& workers, NodeId root) {
  for (const NodeId w : workers)
    if (t.depth[w] < 0)
      throw BomError(fmt::format("worker '{}' cannot reach '{}'", g.node(w).name, g.node(root).name));
}

// Effective senders on each node's uplink (Lemmas 1 and 2): a worker is one,
// an INA switch with a sender below is one, a regular switch the sum below.
std::vector<int> uplink_flows(const Graph& g, const Tree& t, const std::vector<bool>& is_worker,
                              const std::vector<bool>& ina, NodeId root) {
  std::vector<int> below(g.num_nodes(), 0);
  std::vector<int> flows(g.num_nodes(), 0);
  for (auto it = t.order.rbegin(); it != t.order.rend(); ++it) {
    const NodeId v = *it;
    if (v == root) continue;
    if (g.is_host(v)) flows[v] = is_worker[v] ? 1 : 0;
    else flows[v] = ina[v] && below[v] > 0 ? 1 : below[v];
    below[t.parent[v]] += flows[v];
  }
  return flows;
}

}  // namespace

PsInaResult ps_ina_throughput(const Graph& g, const std::vector<NodeId>& workers, const std::vector<NodeId>& ina,
                              std::optional<NodeId> ps) {
  check_job(g, workers);
  const std::vector<bool> mask = ina_mask(g, ina);
  std::vector<bool> is_worker(g.num_nodes(), false);
  for (const NodeId w : workers) is_worker[w] = true;
  NodeId root = topo::kNoNode;
  if (ps) {
    if (*ps >= g.num_nodes() || !g.is_host(*ps))
      throw BomError(fmt::format("PS '{}' is not a host", *ps < g.num_nodes() ? g.node(*ps).name : std::to_string(*ps)));
    root = *ps;
  } else {
    for (const NodeId h : g.hosts())
      if (!is_worker[h]) {
        root = h;
        break;
      }
    if (root == topo::kNoNode) root = workers.front();
  }
  const Tree t = bfs_tree(g, root);
  check_reach(g, t, workers, root);
  const std::vector<int> flows = uplink_flows(g, t, is_worker, mask, root);
  PsInaResult r;
  r.ps = root;
  r.gbps = std::numeric_limits<double>::infinity();
  for (const NodeId v : t.order) {
    if (v == root || flows[v] == 0) continue;
    const double share = g.arc_gbps(t.up[v]) / flows[v];
    if (share < r.gbps) {
      r.gbps = share;
      r.bottleneck = t.up[v];
      r.flows = flows[v];
    }
  }
  return r;
}

RinaResult rina_throughput(const Graph& g, const std::vector<NodeId>& workers, const std::vector<NodeId>& ina,
                           Aggregation levels) {
  check_job(g, workers);
  const std::vector<bool> mask = ina_mask(g, ina);
  const NodeId root = workers.front();
  const Tree t = bfs_tree(g, root);
  check_reach(g, t, workers, root);
  // Each worker's ToR: its first switch neighbour.
  auto tor_of = [&](NodeId w) {
    for (const auto& e : g.neighbors(w))
      if (!g.is_host(e.peer)) return e.peer;
    throw BomError(fmt::format("worker '{}' is not attached to a switch", g.node(w).name));
  };
  std::vector<int> rack_workers(g.num_nodes(), 0);
  for (const NodeId w : workers) ++rack_workers[tor_of(w)];

  // Above the ToR: each worker's top switch, the outermost non-ToR INA
  // switch with >= 2 downstream units on the tree (kNoNode: none).
  std::vector<NodeId> top(g.num_nodes(), topo::kNoNode);
  std::vector<bool> is_worker(g.num_nodes(), false);
  for (const NodeId w : workers) is_worker[w] = true;
  std::vector<int> flows;
  if (levels == Aggregation::Tree) {
    flows = uplink_flows(g, t, is_worker, mask, root);
    std::vector<int> below(g.num_nodes(), 0);
    for (const NodeId v : t.order)
      if (v != root) below[t.parent[v]] += flows[v];
    for (const NodeId v : t.order) {  // BFS order: a parent before its children
      if (v == root) continue;
      const NodeId p = t.parent[v];
      if (p != root && top[p] != topo::kNoNode) top[v] = top[p];
      else if (!g.is_host(v) && mask[v] && rack_workers[v] == 0 && below[v] >= 2) top[v] = v;
    }
  }
  // The nearest INA ancestor of v on the tree, inside the group topped at `up`.
  auto ina_above = [&](NodeId v, NodeId up) {
    NodeId a = t.parent[v];
    while (a != up && !mask[a]) a = t.parent[a];
    return a;
  };

  std::vector<int> group_of(g.num_nodes(), -1);  // by top switch or ToR
  RinaResult r;
  for (const NodeId w : workers) {
    const NodeId tor = tor_of(w);
    NodeId key = topo::kNoNode;
    if (top[w] != topo::kNoNode) key = top[w];
    else if (mask[tor] && rack_workers[tor] >= 2) key = tor;
    if (key == topo::kNoNode) {
      r.groups.push_back({w, w, {w}, {}});
      continue;
    }
    if (group_of[key] < 0) {
      group_of[key] = static_cast<int>(r.groups.size());
      r.groups.push_back({key, w, {}, {}});
    }
    Group& grp = r.groups[group_of[key]];
    grp.members.push_back(w);
    if (key == tor && top[w] == topo::kNoNode) grp.hops.push_back({w, tor});
  }
  // A group above the ToR: every member and every INA switch with a worker
  // below sends to its nearest INA ancestor, leaves first (reverse BFS order).
  for (auto it = t.order.rbegin(); it != t.order.rend(); ++it) {
    const NodeId v = *it;
    if (v == root || top[v] == topo::kNoNode || top[v] == v) continue;
    const bool unit = g.is_host(v) ? is_worker[v] : mask[v] && flows[v] > 0;
    if (unit) r.groups[group_of[top[v]]].hops.push_back({v, ina_above(v, top[v])});
  }
  const size_t G = r.groups.size();
  r.ring_steps = 2 * static_cast<int>(G - 1);
  std::vector<int> crossings(g.num_arcs(), 0);
  const topo::Routing routing(g);
  for (const Group& grp : r.groups)
    for (const Hop& h : grp.hops) {
      bool adjacent = false;
      for (const auto& e : g.neighbors(h.from))
        if (e.peer == h.to) {
          ++crossings[e.arc];
          adjacent = true;
        }
      if (!adjacent)
        for (const ArcId a : routing.path(h.from, h.to)) ++crossings[a];
    }
  if (G > 1)
    for (size_t i = 0; i < G; ++i)
      for (const ArcId a : routing.path(r.groups[i].sender, r.groups[(i + 1) % G].agent)) ++crossings[a];
  r.gbps = std::numeric_limits<double>::infinity();
  for (ArcId a = 0; a < g.num_arcs(); ++a) {
    if (crossings[a] == 0) continue;
    const double share = g.arc_gbps(a) / crossings[a];
    if (share < r.gbps) {
      r.gbps = share;
      r.bottleneck = a;
      r.flows = crossings[a];
    }
  }
  return r;
}

std::vector<NodeId> deployment_order(const Graph& g, const std::vector<NodeId>& workers) {
  check_job(g, workers);
  std::vector<bool> is_worker(g.num_nodes(), false);
  for (const NodeId w : workers) is_worker[w] = true;
  std::vector<NodeId> order;
  std::vector<bool> ina(g.num_nodes(), false);

  // 1. ToRs with >= 2 workers, most workers first.
  std::vector<std::pair<int, NodeId>> tors;
  for (const NodeId s : g.switches()) {
    int n = 0;
    for (const auto& e : g.neighbors(s)) n += is_worker[e.peer] ? 1 : 0;
    if (n >= 2) tors.push_back({-n, s});
  }
  std::sort(tors.begin(), tors.end());
  for (const auto& [neg, s] : tors) {
    order.push_back(s);
    ina[s] = true;
  }

  // 2. Along the workers' tree from the first worker.
  const NodeId root = workers.front();
  const Tree t = bfs_tree(g, root);
  check_reach(g, t, workers, root);
  for (;;) {
    // Downstream nodes of each switch, INA switches below counting as one.
    const std::vector<int> flows = uplink_flows(g, t, is_worker, ina, root);
    std::vector<int> below(g.num_nodes(), 0);
    for (const NodeId v : t.order)
      if (v != root) below[t.parent[v]] += flows[v];
    NodeId best = topo::kNoNode;
    for (const NodeId v : t.order) {
      if (v == root || g.is_host(v) || ina[v] || below[v] < 2) continue;
      if (best == topo::kNoNode || below[v] > below[best] ||
          (below[v] == below[best] && (t.depth[v] < t.depth[best] || (t.depth[v] == t.depth[best] && v < best))))
        best = v;
    }
    if (best == topo::kNoNode) break;
    order.push_back(best);
    ina[best] = true;
  }

  // 3. The rest, by node id.
  for (const NodeId s : g.switches())
    if (!ina[s]) order.push_back(s);
  return order;
}

}  // namespace ina::control::rina
