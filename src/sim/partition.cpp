#include "sim/partition.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/core.h>

namespace ina::sim {

namespace {

// The split over what it reads: which nodes are switches, each host's
// uplink peer (kNoNode: none), and every directed link (both ways).
std::vector<uint16_t> split(const std::vector<bool>& is_switch, const std::vector<NodeId>& up,
                            const std::vector<std::pair<NodeId, NodeId>>& links, unsigned parts,
                            std::span<const NodeId> busy) {
  if (parts == 0 || parts > 65535) throw std::invalid_argument("partition_by_racks: parts must be in [1, 65535]");
  const size_t n = is_switch.size();
  constexpr uint16_t kNone = UINT16_MAX;
  std::vector<uint16_t> part(n, kNone);
  if (parts == 1 || n == 0) return std::vector<uint16_t>(n, 0);
  // Racks: hosts by the node their uplink reaches, in that node's id order.
  std::map<NodeId, std::vector<NodeId>> racks;
  for (NodeId v = 0; v < n; ++v)
    if (!is_switch[v] && up[v] != kNoNode) racks[up[v]].push_back(v);
  // What a rack weighs: its busy hosts (all of its hosts without `busy`).
  std::vector<bool> counts(n, busy.empty());
  for (const NodeId h : busy) {
    if (h >= n || is_switch[h]) throw std::invalid_argument(fmt::format("partition_by_racks: busy node {} is not a host", h));
    counts[h] = true;
  }
  const auto weight = [&](const std::vector<NodeId>& members) {
    return static_cast<size_t>(std::count_if(members.begin(), members.end(), [&](NodeId h) { return counts[h]; }));
  };
  size_t hosts = 0;
  for (const auto& [tor, members] : racks) hosts += weight(members);
  const unsigned used = static_cast<unsigned>(std::min<size_t>(parts, std::max<size_t>(1, racks.size())));
  std::vector<size_t> size(used, 0);
  const auto place = [&](NodeId tor, const std::vector<NodeId>& members, unsigned p) {
    for (const NodeId h : members) part[h] = static_cast<uint16_t>(p);
    if (is_switch[tor] && part[tor] == kNone) part[tor] = static_cast<uint16_t>(p);
    size[p] += members.size() + 1;
  };
  size_t placed = 0;
  unsigned p = 0;
  for (const auto& [tor, members] : racks) {
    const size_t w = weight(members);
    if (w == 0) continue;
    // Move on once this partition holds its share of the hosts.
    if (p + 1 < used && placed >= (p + 1) * hosts / used) ++p;
    place(tor, members, p);
    placed += w;
  }
  // Racks of idle hosts (only with `busy`) carry no events but hold their
  // nodes' state (a ToR's registers): each goes where the fewest nodes are
  // so far, so that every process holds about as much.
  for (const auto& [tor, members] : racks) {
    if (weight(members) > 0) continue;
    place(tor, members, static_cast<unsigned>(std::min_element(size.begin(), size.end()) - size.begin()));
  }
  // The rest, nearest to the placed nodes first: each round places every
  // node with a placed neighbour, by its neighbours' majority.
  std::vector<std::vector<NodeId>> adj(n);
  for (const auto& [from, to] : links) adj[from].push_back(to);
  for (bool more = true; more;) {
    more = false;
    std::vector<std::pair<NodeId, uint16_t>> round;
    for (NodeId v = 0; v < n; ++v) {
      if (part[v] != kNone) continue;
      std::vector<unsigned> votes(used, 0);
      bool any = false;
      for (const NodeId u : adj[v])
        if (part[u] != kNone) {
          ++votes[part[u]];
          any = true;
        }
      if (!any) continue;
      unsigned best = 0;
      for (unsigned q = 1; q < used; ++q)
        if (votes[q] > votes[best] || (votes[q] == votes[best] && size[q] < size[best])) best = q;
      round.emplace_back(v, static_cast<uint16_t>(best));
      ++size[best];  // the next tie in this round sees it
    }
    for (const auto& [v, q] : round) part[v] = q;
    more = !round.empty();
  }
  for (auto& q : part)
    if (q == kNone) q = 0;  // unconnected
  return part;
}

}  // namespace

std::vector<uint16_t> partition_by_racks(Simulator& sim, unsigned parts, std::span<const NodeId> busy) {
  const size_t n = sim.node_count();
  std::vector<bool> is_switch(n);
  std::vector<NodeId> up(n, kNoNode);
  std::vector<std::pair<NodeId, NodeId>> links;
  for (NodeId v = 0; v < n; ++v) {
    is_switch[v] = sim.is_switch(v);
    if (!is_switch[v] && sim.uplink(v) != UINT32_MAX) up[v] = sim.link(sim.uplink(v)).to;
  }
  for (size_t l = 0; l < sim.link_count(); ++l) links.emplace_back(sim.link(static_cast<uint32_t>(l)).from, sim.link(static_cast<uint32_t>(l)).to);
  return split(is_switch, up, links, parts, busy);
}

std::vector<uint16_t> partition_by_racks(const topo::Graph& g, unsigned parts, std::span<const NodeId> busy) {
  const size_t n = g.num_nodes();
  std::vector<bool> is_switch(n);
  std::vector<NodeId> up(n, kNoNode);
  std::vector<std::pair<NodeId, NodeId>> links;
  for (topo::NodeId v = 0; v < n; ++v) {
    is_switch[v] = !g.is_host(v);
    if (g.is_host(v) && !g.neighbors(v).empty()) up[v] = static_cast<NodeId>(g.neighbors(v).front().peer);
  }
  for (const auto& l : g.links()) {
    links.emplace_back(static_cast<NodeId>(l.a), static_cast<NodeId>(l.b));
    links.emplace_back(static_cast<NodeId>(l.b), static_cast<NodeId>(l.a));
  }
  return split(is_switch, up, links, parts, busy);
}

std::vector<bool> local_nodes(const std::vector<uint16_t>& part_of, const Ranks* ranks) {
  if (!ranks || ranks->size() <= 1 || part_of.empty()) return std::vector<bool>(part_of.size(), true);
  const size_t parts = size_t{*std::max_element(part_of.begin(), part_of.end())} + 1;
  std::vector<bool> out(part_of.size());
  for (size_t v = 0; v < part_of.size(); ++v)
    out[v] = Simulator::rank_of_partition(part_of[v], parts, ranks->size()) == ranks->rank();
  return out;
}

}  // namespace ina::sim
