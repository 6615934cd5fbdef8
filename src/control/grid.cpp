// GRID control plane: the instance, plan evaluation and the max-min fill
// shared by the baselines and by feasible_rates.
#include "control/grid.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ina::control::grid {
namespace {

// Relative tolerance for "a resource is full" and "a plan exceeds capacity".
constexpr double kFullTol = 1e-9;
constexpr double kViolationTol = 1e-6;

double slack(double capacity) { return kFullTol * std::max(1.0, capacity); }

}  // namespace

// ---- Instance ------------------------------------------------------------

Instance::Instance(const topo::Graph& g, const topo::Job& job, GridModel model)
    : g_(&g), routing_(g), model_(model), ps_(job.ps), workers_(job.workers) {
  topo::validate_job(g, job, g.name);
  for (const NodeId s : g.ina_switches())
    if (routing_.reachable(s, ps_)) switches_.push_back(s);
  ps_ingress_ = g.ingress_gbps(ps_);
  if (model_.max_rate_gbps < 0 || !std::isfinite(model_.max_rate_gbps))
    throw PlanError(fmt::format("maximum sending rate T must be > 0 Gbps, got {}", model_.max_rate_gbps));
  max_rate_ = model_.max_rate_gbps > 0 ? model_.max_rate_gbps : ps_ingress_;
  routes_.resize(workers_.size());
  for (size_t n = 0; n < workers_.size(); ++n) {
    routes_[n].resize(num_nodes());
    for (size_t a = 0; a < num_nodes(); ++a)
      if (routing_.reachable(workers_[n], node(a))) routes_[n][a] = routing_.path(workers_[n], node(a));
  }
  for (const NodeId s : switches_) uplinks_.push_back(routing_.path(s, ps_));
  for (const NodeId w : workers_)
    for (const ArcId a : routing_.path(ps_, w)) tree_.push_back(a);
  std::sort(tree_.begin(), tree_.end());
  tree_.erase(std::unique(tree_.begin(), tree_.end()), tree_.end());
  index_.assign(g.num_nodes(), SIZE_MAX);
  for (size_t a = 0; a < num_nodes(); ++a) index_[node(a)] = a;
}

std::optional<size_t> Instance::index_of(NodeId id) const {
  if (id >= index_.size() || index_[id] == SIZE_MAX) return std::nullopt;
  return index_[id];
}

const std::vector<ArcId>* Instance::route(size_t n, size_t a) const {
  const auto& r = routes_.at(n).at(a);
  return r ? &*r : nullptr;
}

// ---- Evaluation ------------------------------------------------------------

const char* kind_name(Violation::Kind k) {
  switch (k) {
    case Violation::Kind::Switch: return "switch";
    case Violation::Kind::Ps: return "ps";
    case Violation::Kind::Link: return "link";
  }
  return "?";
}

Plan evaluate(const Instance& inst, const std::string& scheme, const Allocation& alloc) {
  const topo::Graph& g = inst.graph();
  const size_t S = inst.num_switches();
  if (alloc.y.size() != S) throw PlanError(fmt::format("{}: allocation has {} y values for {} switches", scheme, alloc.y.size(), S));

  Plan p;
  p.scheme = scheme;
  p.ps_capacity_gbps = inst.ps_ingress();
  std::vector<double> load(S, 0.0);
  std::vector<double> arc_load(g.num_arcs(), 0.0);
  std::vector<std::vector<Share>> shares(inst.num_workers());
  for (const Flow& f : alloc.flows) {
    if (f.node == inst.ps_index()) p.ps_load_gbps += f.gbps;
    else load.at(f.node) += f.gbps;
    for (const ArcId a : f.path) arc_load[a] += f.gbps;
    auto& ws = shares.at(f.worker);
    const NodeId id = inst.node(f.node);
    auto it = std::find_if(ws.begin(), ws.end(), [&](const Share& s) { return s.node == id; });
    if (it == ws.end()) ws.push_back({id, f.gbps});
    else it->gbps += f.gbps;
  }
  for (size_t s = 0; s < S; ++s) {
    p.ps_load_gbps += alloc.y[s];
    for (const ArcId a : inst.uplink(s)) arc_load[a] += alloc.y[s];
  }

  p.lambda_gbps = std::numeric_limits<double>::infinity();
  double total = 0;
  for (size_t n = 0; n < inst.num_workers(); ++n) {
    if (shares[n].empty()) throw PlanError(fmt::format("{}: worker '{}' has no aggregation node", scheme, g.node(inst.worker(n)).name));
    WorkerPlan w{inst.worker(n), shares[n].front().node, 0, shares[n]};
    double best = -1;
    for (const Share& s : w.shares) {
      w.rate_gbps += s.gbps;
      if (s.gbps > best) {
        best = s.gbps;
        w.node = s.node;
      }
    }
    p.lambda_gbps = std::min(p.lambda_gbps, w.rate_gbps);
    total += w.rate_gbps;
    p.workers.push_back(std::move(w));
  }
  p.avg_rate_gbps = total / static_cast<double>(inst.num_workers());

  for (size_t s = 0; s < S; ++s) {
    const double cap = inst.capacity(s);
    p.switches.push_back({inst.node(s), cap, load[s], alloc.y[s], load[s] / cap});
    p.switch_agg_gbps += load[s];
    p.max_switch_factor = std::max(p.max_switch_factor, load[s] / cap);
    if (load[s] / cap > 1 + kViolationTol)
      p.violations.push_back({Violation::Kind::Switch, inst.node_name(s), load[s], cap, load[s] / cap});
  }
  if (inst.model().multicast_results)  // the results, at the job's rate, on every arc of the tree
    for (const ArcId a : inst.multicast_tree()) arc_load[a] += p.lambda_gbps;
  p.ps_factor = p.ps_load_gbps / p.ps_capacity_gbps;
  if (p.ps_factor > 1 + kViolationTol)
    p.violations.push_back({Violation::Kind::Ps, "PS " + inst.node_name(inst.ps_index()), p.ps_load_gbps,
                            p.ps_capacity_gbps, p.ps_factor});
  for (ArcId a = 0; a < g.num_arcs(); ++a) {
    const double f = arc_load[a] / g.arc_gbps(a);
    p.max_link_factor = std::max(p.max_link_factor, f);
    if (inst.model().enforce_links && f > 1 + kViolationTol)
      p.violations.push_back({Violation::Kind::Link, g.arc_name(a), arc_load[a], g.arc_gbps(a), f});
  }
  p.arc_load_gbps = std::move(arc_load);
  return p;
}

// ---- Max-min fill ----------------------------------------------------------

Allocation max_min_fill(const Instance& inst, const std::vector<std::vector<Target>>& targets) {
  const topo::Graph& g = inst.graph();
  const size_t N = inst.num_workers();
  const size_t S = inst.num_switches();
  const size_t PS = inst.ps_index();
  const bool links = inst.model().enforce_links;
  const double T = inst.max_rate();
  if (targets.size() != N) throw PlanError("max_min_fill: one target list per worker is required");
  for (size_t n = 0; n < N; ++n) {
    if (targets[n].empty()) throw PlanError(fmt::format("max_min_fill: worker '{}' has no target", g.node(inst.worker(n)).name));
    for (const Target& t : targets[n])
      if (t.node > PS) throw PlanError(fmt::format("max_min_fill: bad aggregation node index {}", t.node));
  }

  // Residual capacities.
  std::vector<double> sw_res(S);
  for (size_t s = 0; s < S; ++s) sw_res[s] = inst.capacity(s);
  double ps_res = inst.ps_ingress();
  std::vector<double> arc_res(g.num_arcs());
  for (ArcId a = 0; a < g.num_arcs(); ++a) arc_res[a] = g.arc_gbps(a);

  auto sw_full = [&](size_t s) { return sw_res[s] <= slack(inst.capacity(s)); };
  auto ps_full = [&] { return ps_res <= slack(inst.ps_ingress()); };
  auto path_full = [&](const std::vector<ArcId>& path) {
    return links && std::any_of(path.begin(), path.end(), [&](ArcId a) { return arc_res[a] <= slack(g.arc_gbps(a)); });
  };

  std::vector<std::vector<double>> r(N);
  for (size_t n = 0; n < N; ++n) r[n].assign(targets[n].size(), 0.0);
  std::vector<double> rate(N, 0.0), y(S, 0.0);
  std::vector<size_t> cur(N, 0);
  std::vector<bool> active(N, true);
  // An increment of worker n at its target t raises y_s (s = the target) iff
  // r_n^s is the switch's maximum.
  auto raises_y = [&](size_t n, size_t t) {
    const size_t a = targets[n][t].node;
    return a != PS && r[n][t] >= y[a] - slack(y[a]);
  };
  auto blocked = [&](size_t n, size_t t) {
    const Target& tg = targets[n][t];
    if (path_full(tg.path)) return true;
    if (tg.node == PS) return ps_full();
    return sw_full(tg.node) || (raises_y(n, t) && (ps_full() || path_full(inst.uplink(tg.node))));
  };

  // Result multicast (GridModel::multicast_results): the tree carries the
  // common rate while every worker is still rising; once one stops, lambda
  // is fixed and so is the tree's load.
  const bool mc = inst.model().multicast_results;
  bool mc_growing = mc;

  std::vector<int> sw_cnt(S), arc_cnt(g.num_arcs());
  std::vector<bool> y_grows(S);
  std::vector<double> max_r(S);
  // Each round either fills a resource, stops a worker or lets a worker
  // catch up with y_s; this bounds the number of rounds.
  size_t rounds_left = 4 * (g.num_arcs() + S + 2);
  for (size_t n = 0; n < N; ++n) rounds_left += 4 * targets[n].size();
  for (;;) {
    bool any = false;
    if (mc_growing && path_full(inst.multicast_tree())) std::fill(active.begin(), active.end(), false);
    for (size_t n = 0; n < N; ++n) {
      if (!active[n]) continue;
      while (cur[n] < targets[n].size() && blocked(n, cur[n])) ++cur[n];
      if (cur[n] == targets[n].size() || rate[n] >= T - slack(T)) active[n] = false;
      any = any || active[n];
    }
    if (!any) break;
    mc_growing = mc_growing && std::all_of(active.begin(), active.end(), [](bool b) { return b; });
    if (rounds_left-- == 0) throw PlanError("max_min_fill: no convergence (internal error)");

    std::fill(sw_cnt.begin(), sw_cnt.end(), 0);
    std::fill(arc_cnt.begin(), arc_cnt.end(), 0);
    if (mc_growing)
      for (const ArcId a : inst.multicast_tree()) ++arc_cnt[a];
    std::fill(y_grows.begin(), y_grows.end(), false);
    std::fill(max_r.begin(), max_r.end(), -1.0);
    int ps_cnt = 0;
    double dt = std::numeric_limits<double>::infinity();
    for (size_t n = 0; n < N; ++n) {
      if (!active[n]) continue;
      const Target& tg = targets[n][cur[n]];
      dt = std::min(dt, T - rate[n]);
      for (const ArcId a : tg.path) ++arc_cnt[a];
      if (tg.node == PS) {
        ++ps_cnt;
        continue;
      }
      ++sw_cnt[tg.node];
      max_r[tg.node] = std::max(max_r[tg.node], r[n][cur[n]]);
      if (raises_y(n, cur[n])) y_grows[tg.node] = true;
    }
    for (size_t s = 0; s < S; ++s) {
      if (y_grows[s]) {
        ++ps_cnt;
        for (const ArcId a : inst.uplink(s)) ++arc_cnt[a];
      } else if (sw_cnt[s] > 0) {
        dt = std::min(dt, y[s] - max_r[s]);  // until the leading worker reaches y_s
      }
      if (sw_cnt[s] > 0) dt = std::min(dt, sw_res[s] / sw_cnt[s]);
    }
    if (ps_cnt > 0) dt = std::min(dt, ps_res / ps_cnt);
    if (links)
      for (ArcId a = 0; a < g.num_arcs(); ++a)
        if (arc_cnt[a] > 0) dt = std::min(dt, arc_res[a] / arc_cnt[a]);
    dt = std::max(dt, 0.0);

    for (size_t n = 0; n < N; ++n) {
      if (!active[n]) continue;
      r[n][cur[n]] += dt;
      rate[n] += dt;
    }
    for (size_t s = 0; s < S; ++s) {
      sw_res[s] -= sw_cnt[s] * dt;
      if (y_grows[s]) y[s] += dt;
    }
    ps_res -= ps_cnt * dt;
    for (ArcId a = 0; a < g.num_arcs(); ++a) arc_res[a] -= arc_cnt[a] * dt;
  }

  Allocation out;
  out.y = std::move(y);
  for (size_t n = 0; n < N; ++n) {
    bool any = false;
    for (size_t t = 0; t < targets[n].size(); ++t) {
      if (r[n][t] <= 0) continue;
      out.flows.push_back({n, targets[n][t].node, r[n][t], targets[n][t].path});
      any = true;
    }
    if (!any) out.flows.push_back({n, targets[n][0].node, 0.0, targets[n][0].path});
  }
  return out;
}

// ---- Schemes -------------------------------------------------------------

Plan pinned_rates(const Instance& inst, const std::string& scheme, const std::vector<size_t>& node) {
  if (node.size() != inst.num_workers()) throw PlanError("pinned_rates: one aggregation node per worker is required");
  std::vector<std::vector<Target>> targets(inst.num_workers());
  for (size_t n = 0; n < inst.num_workers(); ++n) {
    const auto* path = node[n] < inst.num_nodes() ? inst.route(n, node[n]) : nullptr;
    if (!path)
      throw PlanError(fmt::format("{}: aggregation node index {} is not reachable from worker '{}'", scheme, node[n],
                                  inst.graph().node(inst.worker(n)).name));
    targets[n].push_back({node[n], *path});
  }
  return evaluate(inst, scheme, max_min_fill(inst, targets));
}

Plan feasible_rates(const Instance& inst, const Plan& plan) {
  if (plan.workers.size() != inst.num_workers()) throw PlanError("feasible_rates: plan is for another instance");
  std::vector<size_t> node;
  for (const WorkerPlan& w : plan.workers) {
    const auto a = inst.index_of(w.node);
    if (!a) throw PlanError(fmt::format("feasible_rates: '{}' is not an aggregation node", inst.graph().node(w.node).name));
    node.push_back(*a);
  }
  Plan p = pinned_rates(inst, plan.scheme + "-feasible", node);
  p.lp_lambda_gbps = plan.lp_lambda_gbps;
  return p;
}

}  // namespace ina::control::grid
