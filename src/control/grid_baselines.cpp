// Baselines of the GRID paper (§6.1) on the GRIA model. Each turns the
// scheme's routing rule into per-worker targets and lets max_min_fill find
// the rates, so they respect every capacity by construction.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <queue>

#include "control/grid.hpp"

namespace ina::control::grid {
namespace {

// The programmable switches on worker n's default path to the PS, in path
// order, each with the path prefix that reaches it; then the PS itself.
std::vector<Target> default_path_targets(const Instance& inst, size_t n) {
  const std::vector<ArcId>& path = *inst.route(n, inst.ps_index());
  std::vector<Target> out;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    if (auto a = inst.index_of(inst.graph().arc_to(path[i])))
      out.push_back({*a, std::vector<ArcId>(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(i) + 1)});
  }
  out.push_back({inst.ps_index(), path});
  return out;
}

// Largest bottleneck min_e width[e] over paths from `from` to `to` that do
// not pass through hosts (a max-min Dijkstra).
double widest_bottleneck(const topo::Graph& g, NodeId from, NodeId to, const std::vector<double>& width) {
  std::vector<double> best(g.num_nodes(), -1.0);
  std::priority_queue<std::pair<double, NodeId>> pq;
  best[from] = std::numeric_limits<double>::infinity();
  pq.push({best[from], from});
  while (!pq.empty()) {
    const auto [b, v] = pq.top();
    pq.pop();
    if (b < best[v]) continue;
    if (v == to) return b;
    if (v != from && g.is_host(v)) continue;
    for (const auto& e : g.neighbors(v)) {
      if (e.peer != to && g.is_host(e.peer)) continue;
      const double nb = std::min(b, width[e.arc]);
      if (nb > best[e.peer]) {
        best[e.peer] = nb;
        pq.push({nb, e.peer});
      }
    }
  }
  return best[to];
}

}  // namespace

// Geryon: no INA; every gradient goes to the PS. Flows are placed one by one
// (in worker order) on the path with the largest fair share
// min_e c_e / (flows on e + 1), the shortest such path on ties; rates are
// then max-min fair. In Fig. 1 this is what moves W4 off the congested L1.
Plan plan_geryon(const Instance& inst) {
  const topo::Graph& g = inst.graph();
  const size_t PS = inst.ps_index();
  std::vector<std::vector<Target>> targets(inst.num_workers());
  std::vector<int> flows_on(g.num_arcs(), 0);
  std::vector<double> width(g.num_arcs());
  std::vector<bool> allowed(g.num_arcs());
  for (size_t n = 0; n < inst.num_workers(); ++n) {
    std::vector<ArcId> path = *inst.route(n, PS);
    if (inst.model().enforce_links) {
      for (ArcId a = 0; a < g.num_arcs(); ++a) width[a] = g.arc_gbps(a) / (flows_on[a] + 1);
      const double best = widest_bottleneck(g, inst.worker(n), inst.ps(), width);
      for (ArcId a = 0; a < g.num_arcs(); ++a) allowed[a] = width[a] >= best * (1 - 1e-12);
      path = *inst.routing().path_within(inst.worker(n), inst.ps(), allowed);
      for (const ArcId a : path) ++flows_on[a];
    }
    targets[n].push_back({PS, std::move(path)});
  }
  return evaluate(inst, "geryon", max_min_fill(inst, targets));
}

// ATP: along the default path, a gradient is aggregated by the first
// programmable switch with spare processing capacity; what no switch can take
// goes on to the PS.
Plan plan_atp(const Instance& inst) {
  std::vector<std::vector<Target>> targets(inst.num_workers());
  for (size_t n = 0; n < inst.num_workers(); ++n) targets[n] = default_path_targets(inst, n);
  return evaluate(inst, "atp", max_min_fill(inst, targets));
}

// SwitchML: the worker's ToR switch (first hop of its default path)
// aggregates, and its result goes to the PS; a worker whose ToR is not
// programmable sends to the PS. No overflow: the ToR's capacity bounds the rate.
Plan plan_switchml(const Instance& inst) {
  std::vector<std::vector<Target>> targets(inst.num_workers());
  for (size_t n = 0; n < inst.num_workers(); ++n) {
    const std::vector<ArcId>& path = *inst.route(n, inst.ps_index());
    const auto tor = inst.index_of(inst.graph().arc_to(path.front()));
    if (tor && *tor != inst.ps_index()) targets[n].push_back({*tor, {path.front()}});
    else targets[n].push_back({inst.ps_index(), path});
  }
  return evaluate(inst, "switchml", max_min_fill(inst, targets));
}

}  // namespace ina::control::grid
