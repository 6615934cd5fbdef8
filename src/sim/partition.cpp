#include "sim/partition.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace ina::sim {

std::vector<uint16_t> partition_by_racks(Simulator& sim, unsigned parts) {
  if (parts == 0 || parts > 65535) throw std::invalid_argument("partition_by_racks: parts must be in [1, 65535]");
  const size_t n = sim.node_count();
  constexpr uint16_t kNone = UINT16_MAX;
  std::vector<uint16_t> part(n, kNone);
  if (parts == 1 || n == 0) return std::vector<uint16_t>(n, 0);
  // Racks: hosts by the node their uplink reaches, in that node's id order.
  std::map<NodeId, std::vector<NodeId>> racks;
  for (NodeId v = 0; v < n; ++v)
    if (!sim.is_switch(v) && sim.uplink(v) != UINT32_MAX) racks[sim.link(sim.uplink(v)).to].push_back(v);
  size_t hosts = 0;
  for (const auto& [tor, members] : racks) hosts += members.size();
  const unsigned used = static_cast<unsigned>(std::min<size_t>(parts, std::max<size_t>(1, racks.size())));
  std::vector<size_t> size(used, 0);
  size_t placed = 0;
  unsigned p = 0;
  for (const auto& [tor, members] : racks) {
    // Move on once this partition holds its share of the hosts.
    if (p + 1 < used && placed >= (p + 1) * hosts / used) ++p;
    for (const NodeId h : members) part[h] = static_cast<uint16_t>(p);
    if (sim.is_switch(tor) && part[tor] == kNone) part[tor] = static_cast<uint16_t>(p);
    size[p] += members.size() + 1;
    placed += members.size();
  }
  // The rest, nearest to the placed nodes first: each round places every
  // node with a placed neighbour, by its neighbours' majority.
  std::vector<std::vector<NodeId>> adj(n);
  for (size_t l = 0; l < sim.link_count(); ++l) {
    const Link& k = sim.link(static_cast<uint32_t>(l));
    adj[k.from].push_back(k.to);
  }
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

}  // namespace ina::sim
