#include "topo/graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/ecmp.hpp"
#include "core/rng.hpp"

namespace ina::topo {

// ---- Graph ---------------------------------------------------------------

NodeId Graph::add_node(Node n) {
  if (n.name.empty()) throw TopologyError("node name must not be empty");
  if (by_name_.contains(n.name)) throw TopologyError(fmt::format("duplicate node name '{}'", n.name));
  const auto id = static_cast<NodeId>(nodes_.size());
  by_name_.emplace(n.name, id);
  nodes_.push_back(std::move(n));
  adj_.emplace_back();
  return id;
}

NodeId Graph::add_host(std::string node_name) { return add_node({std::move(node_name), NodeKind::Host}); }

NodeId Graph::add_switch(std::string node_name, bool ina, double capacity_gbps) {
  const NodeId id = add_node({std::move(node_name), NodeKind::Switch});
  set_ina(id, ina, capacity_gbps);
  return id;
}

void Graph::set_ina(NodeId sw, bool ina, double capacity_gbps) {
  Node& n = nodes_.at(sw);
  if (n.kind != NodeKind::Switch) throw TopologyError(fmt::format("'{}' is a host, not a switch", n.name));
  if (ina && !(capacity_gbps > 0 && std::isfinite(capacity_gbps)))
    throw TopologyError(fmt::format("switch '{}': processing capacity must be > 0 Gbps, got {}", n.name, capacity_gbps));
  n.ina = ina;
  n.capacity_gbps = ina ? capacity_gbps : 0;
}

ArcId Graph::add_link(NodeId a, NodeId b, double gbps) {
  const std::string& na = nodes_.at(a).name;
  const std::string& nb = nodes_.at(b).name;
  if (a == b) throw TopologyError(fmt::format("link {}-{}: a node cannot link to itself", na, nb));
  if (!(gbps > 0 && std::isfinite(gbps)))
    throw TopologyError(fmt::format("link {}-{}: capacity must be > 0 Gbps, got {}", na, nb, gbps));
  for (const Adjacent& e : adj_[a])
    if (e.peer == b) throw TopologyError(fmt::format("duplicate link {}-{}", na, nb));
  const auto l = static_cast<ArcId>(links_.size());
  links_.push_back({a, b, gbps});
  adj_[a].push_back({b, 2 * l});
  adj_[b].push_back({a, 2 * l + 1});
  return 2 * l;
}

std::optional<NodeId> Graph::find(std::string_view node_name) const {
  auto it = by_name_.find(std::string(node_name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

NodeId Graph::at(std::string_view node_name, std::string_view what) const {
  if (auto id = find(node_name)) return *id;
  throw TopologyError(fmt::format("{}: unknown node '{}'", what, node_name));
}

std::string Graph::arc_name(ArcId arc) const {
  return fmt::format("{}->{}", nodes_.at(arc_from(arc)).name, nodes_.at(arc_to(arc)).name);
}

std::vector<NodeId> Graph::hosts() const {
  std::vector<NodeId> out;
  for (NodeId i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == NodeKind::Host) out.push_back(i);
  return out;
}

std::vector<NodeId> Graph::switches() const {
  std::vector<NodeId> out;
  for (NodeId i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == NodeKind::Switch) out.push_back(i);
  return out;
}

std::vector<NodeId> Graph::ina_switches() const {
  std::vector<NodeId> out;
  for (NodeId i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].ina) out.push_back(i);
  return out;
}

std::vector<NodeId> Graph::tor_switches() const {
  std::vector<NodeId> out;
  for (NodeId i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].kind != NodeKind::Switch) continue;
    const auto& nb = adj_[i];
    if (std::any_of(nb.begin(), nb.end(), [&](const Adjacent& e) { return is_host(e.peer); })) out.push_back(i);
  }
  return out;
}

double Graph::ingress_gbps(NodeId id) const {
  double sum = 0;
  for (const Adjacent& e : adj_.at(id)) sum += links_[e.arc / 2].gbps;
  return sum;
}

// ---- Routing -------------------------------------------------------------

namespace {

// Hop distance of every node to `to`, over arcs with allowed[arc] (all if
// empty). Hosts other than `to` are reached but not expanded: they do not
// forward.
std::vector<int> bfs_to(const Graph& g, NodeId to, const std::vector<bool>& allowed) {
  std::vector<int> dist(g.num_nodes(), Routing::kUnreachable);
  std::vector<NodeId> queue;  // every node enters once: [head, end) is the queue
  queue.reserve(g.num_nodes());
  queue.push_back(to);
  dist[to] = 0;
  for (size_t head = 0; head < queue.size(); ++head) {
    const NodeId v = queue[head];
    if (v != to && g.is_host(v)) continue;
    for (const Graph::Adjacent& e : g.neighbors(v)) {
      // e.arc leaves v; the arc into v from e.peer is its twin.
      const ArcId into_v = e.arc ^ 1u;
      if (!allowed.empty() && !allowed[into_v]) continue;
      if (dist[e.peer] != Routing::kUnreachable) continue;
      dist[e.peer] = dist[v] + 1;
      queue.push_back(e.peer);
    }
  }
  return dist;
}

// Walks down a BFS distance field from `from` to `to`, calling visit(arc)
// for each arc taken until it returns true; among equal-cost next hops (in
// adjacency order), picks one by a hash of (from, to, node): ecmp_index,
// the simulator's choice too; or, with `first`, the first of them (the
// simulator's multicast tree).
template <class Visit>
void walk(const Graph& g, const std::vector<int>& dist, NodeId from, NodeId to, const std::vector<bool>& allowed,
          bool first, Visit&& visit) {
  for (NodeId v = from; v != to;) {
    const auto candidate = [&](const Graph::Adjacent& e) {
      return (allowed.empty() || allowed[e.arc]) && dist[e.peer] == dist[v] - 1 && (e.peer == to || !g.is_host(e.peer));
    };
    size_t count = 0;
    for (const Graph::Adjacent& e : g.neighbors(v)) count += candidate(e);
    size_t pick = first ? 0 : ecmp_index(from, to, v, count);
    ArcId arc = 0;
    for (const Graph::Adjacent& e : g.neighbors(v))
      if (candidate(e) && pick-- == 0) {
        arc = e.arc;
        break;
      }
    if (visit(arc)) return;
    v = g.arc_to(arc);
  }
}

std::vector<ArcId> walk(const Graph& g, const std::vector<int>& dist, NodeId from, NodeId to,
                        const std::vector<bool>& allowed, bool first = false) {
  std::vector<ArcId> path;
  walk(g, dist, from, to, allowed, first, [&](ArcId a) {
    path.push_back(a);
    return false;
  });
  return path;
}

}  // namespace

const std::vector<int>& Routing::dist_to(NodeId to) const {
  auto it = dist_.find(to);
  if (it == dist_.end()) it = dist_.emplace(to, bfs_to(*g_, to, {})).first;
  return it->second;
}

int Routing::hops(NodeId from, NodeId to) const { return dist_to(to).at(from); }

const std::vector<int>& Routing::dist_from(NodeId from, NodeId to) const {
  const auto& dist = dist_to(to);
  if (dist.at(from) == kUnreachable)
    throw TopologyError(
        fmt::format("no path from '{}' to '{}'", g_->node(from).name, g_->node(to).name));
  return dist;
}

std::vector<ArcId> Routing::walk_to(NodeId from, NodeId to, bool first) const {
  return walk(*g_, dist_from(from, to), from, to, {}, first);
}

std::vector<ArcId> Routing::path(NodeId from, NodeId to) const { return walk_to(from, to, false); }

NodeId Routing::first_in(NodeId from, NodeId to, const std::vector<bool>& in) const {
  NodeId found = to;
  walk(*g_, dist_from(from, to), from, to, {}, false, [&](ArcId a) {
    const NodeId v = g_->arc_to(a);
    if (v == to || !in[v]) return false;
    found = v;
    return true;
  });
  return found;
}

std::vector<ArcId> Routing::tree_path(NodeId from, NodeId to) const { return walk_to(from, to, true); }

std::optional<std::vector<ArcId>> Routing::path_within(NodeId from, NodeId to, const std::vector<bool>& allowed) const {
  const auto dist = bfs_to(*g_, to, allowed);
  if (dist.at(from) == kUnreachable) return std::nullopt;
  return walk(*g_, dist, from, to, allowed);
}

// ---- Jobs ----------------------------------------------------------------

void validate_job(const Graph& g, const Job& job, const std::string& origin) {
  if (!g.is_host(job.ps)) throw TopologyError(fmt::format("{}: PS '{}' must be a host", origin, g.node(job.ps).name));
  if (job.workers.empty()) throw TopologyError(fmt::format("{}: a job needs at least one worker", origin));
  std::vector<bool> seen(g.num_nodes(), false);
  const Routing routing(g);
  for (const NodeId w : job.workers) {
    const std::string& name = g.node(w).name;
    if (!g.is_host(w)) throw TopologyError(fmt::format("{}: worker '{}' must be a host", origin, name));
    if (w == job.ps) throw TopologyError(fmt::format("{}: worker '{}' is also the PS", origin, name));
    if (seen[w]) throw TopologyError(fmt::format("{}: worker '{}' is listed twice", origin, name));
    seen[w] = true;
    if (!routing.reachable(w, job.ps))
      throw TopologyError(fmt::format("{}: PS '{}' is unreachable from worker '{}'", origin,
                                      g.node(job.ps).name, name));
  }
}

Job resolve_job(const Graph& g, const JobSpec& spec, const std::string& origin) {
  Job job;
  job.ps = g.at(spec.ps, origin + ": PS");
  for (const auto& w : spec.workers) job.workers.push_back(g.at(w, origin + ": worker"));
  validate_job(g, job, origin);
  return job;
}

std::vector<NodeId> place_workers(const Graph& g, NodeId ps, int n, Placement placement, uint64_t seed) {
  std::vector<NodeId> pool;
  for (const NodeId h : g.hosts())
    if (h != ps) pool.push_back(h);
  if (n < 1 || static_cast<size_t>(n) > pool.size())
    throw TopologyError(fmt::format("{}: cannot place {} workers on {} hosts besides the PS", g.name, n, pool.size()));
  if (placement == Placement::Random) {
    Rng rng(mix(seed, 0x776f726b657273ULL));  // "workers"
    for (size_t i = 0; i < static_cast<size_t>(n); ++i)
      std::swap(pool[i], pool[i + rng.below(pool.size() - i)]);
    pool.resize(static_cast<size_t>(n));
    std::sort(pool.begin(), pool.end());
  }
  pool.resize(static_cast<size_t>(n));
  return pool;
}

}  // namespace ina::topo
