#include "sim/network.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace ina::sim {

void Forwarder::on_packet(Packet* p, Time, Effects& fx) {
  if (p->h.dst == kMulticast) {
    ++forwarded_;
    if (!fx.multicast(p)) {
      ++dropped_;
      fx.free(p);
    }
    return;
  }
  if (p->h.dst == id()) {
    ++dropped_;
    fx.free(p);
    return;
  }
  ++forwarded_;
  fx.send(p);
}

std::vector<Rack> racks(const topo::Graph& g) {
  std::vector<Rack> out;
  std::vector<int> index(g.num_nodes(), -1);
  for (topo::NodeId v = 0; v < g.num_nodes(); ++v) {
    if (!g.is_host(v)) continue;
    const auto nb = g.neighbors(v);
    if (nb.size() != 1 || g.is_host(nb[0].peer))
      throw std::invalid_argument(fmt::format(
          "host '{}' must be on exactly one link, to a switch (it has {} links)", g.node(v).name, nb.size()));
    const topo::NodeId tor = nb[0].peer;
    if (index[tor] < 0) {
      index[tor] = static_cast<int>(out.size());
      out.push_back({tor, {}});
    }
    out[static_cast<size_t>(index[tor])].hosts.push_back(v);
  }
  return out;
}

Placement place_rack_packed(const topo::Graph& g, const std::vector<int>& workers_per_job) {
  const auto rs = racks(g);
  Placement pl;
  pl.rack_of.assign(g.num_nodes(), -1);
  std::vector<topo::NodeId> order;
  for (size_t r = 0; r < rs.size(); ++r)
    for (topo::NodeId h : rs[r].hosts) {
      order.push_back(h);
      pl.rack_of[h] = static_cast<int>(r);
    }
  size_t next = 0;
  for (size_t j = 0; j < workers_per_job.size(); ++j) {
    const int n = workers_per_job[j];
    if (n < 1)
      throw std::invalid_argument(fmt::format("job {} has {} workers (at least 1 is needed)", j, n));
    if (static_cast<size_t>(n) > order.size() - next)
      throw std::invalid_argument(fmt::format("job {} needs {} workers but topology '{}' has {} free hosts", j, n,
                                              g.name, order.size() - next));
    pl.jobs.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(next),
                         order.begin() + static_cast<std::ptrdiff_t>(next + static_cast<size_t>(n)));
    next += static_cast<size_t>(n);
  }
  return pl;
}

Placement place_jobs(const topo::Graph& g, const std::vector<int>& workers_per_job, const std::string& policy) {
  return policy == "interleaved" ? place_interleaved(g, workers_per_job) : place_rack_packed(g, workers_per_job);
}

Placement place_interleaved(const topo::Graph& g, const std::vector<int>& workers_per_job) {
  Placement pl = place_rack_packed(g, workers_per_job);  // checks the sizes, sets rack_of
  std::vector<size_t> want;
  for (const int n : workers_per_job) want.push_back(static_cast<size_t>(n));
  for (auto& j : pl.jobs) j.clear();
  size_t turn = 0;
  for (const Rack& r : racks(g))
    for (topo::NodeId h : r.hosts) {
      size_t k = 0;
      while (k < want.size() && pl.jobs[(turn + k) % want.size()].size() == want[(turn + k) % want.size()]) ++k;
      if (k == want.size()) return pl;
      const size_t j = (turn + k) % want.size();
      pl.jobs[j].push_back(h);
      turn = j + 1;
    }
  return pl;
}

void build_network(Simulator& sim, const topo::Graph& g,
                   const std::function<std::unique_ptr<Node>(topo::NodeId)>& make_node, const LinkParams& link,
                   bool host_ecn) {
  if (sim.node_count() != 0) throw std::logic_error("build_network: the simulator must be empty");
  sim.set_host_ecn(host_ecn);
  if (g.num_nodes() >= kMulticast)
    throw std::invalid_argument(fmt::format("topology '{}' has {} nodes, more than the simulator's {}", g.name,
                                            g.num_nodes(), kMulticast - 1));
  for (topo::NodeId v = 0; v < g.num_nodes(); ++v) {
    auto n = make_node(v);
    if (!n) throw std::logic_error("build_network: make_node returned nothing");
    sim.add_node(std::move(n), !g.is_host(v));
  }
  for (const auto& l : g.links()) {
    LinkParams p = link;
    p.gbps = l.gbps;
    sim.connect(static_cast<NodeId>(l.a), static_cast<NodeId>(l.b), p, p);
  }
  sim.build_routes();
}

}  // namespace ina::sim
