// GRIA (Eq. (1) of the GRID paper): its LP relaxation solved with COIN-OR
// CLP and Algorithm 1's randomized rounding (R-GRIA); and, for small
// instances, the integral problem itself solved with CBC.
#include <coin/CbcModel.hpp>
#include <coin/ClpSimplex.hpp>
#include <coin/CoinPackedMatrix.hpp>
#include <coin/OsiClpSolverInterface.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "control/grid.hpp"
#include "core/rng.hpp"

namespace ina::control::grid {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Builds the LP column by column and row by row (triplets), then hands it to
// CLP in one piece.
struct LpBuilder {
  std::vector<double> col_lo, col_hi, obj;
  std::vector<double> row_lo, row_hi;
  std::vector<int> el_row, el_col;
  std::vector<double> el_val;

  int column(double lo, double hi, double cost) {
    col_lo.push_back(lo);
    col_hi.push_back(hi);
    obj.push_back(cost);
    return static_cast<int>(obj.size()) - 1;
  }
  int row(double lo, double hi) {
    row_lo.push_back(lo);
    row_hi.push_back(hi);
    return static_cast<int>(row_lo.size()) - 1;
  }
  void set(int r, int c, double v) {
    el_row.push_back(r);
    el_col.push_back(c);
    el_val.push_back(v);
  }
};

// Eq. (1) as an LP (x relaxed to [0, 1]): the builder and the column of
// every variable (-1: no such column).
struct GriaModel {
  LpBuilder lp;
  int lambda = -1;
  std::vector<int> y;                  // [s]
  std::vector<std::vector<int>> x, r;  // [n][a]
};

GriaModel build_gria(const Instance& inst, const LpOptions& opt) {
  const topo::Graph& g = inst.graph();
  const size_t N = inst.num_workers();
  const size_t S = inst.num_switches();
  const size_t A = inst.num_nodes();  // S u {alpha}; index S is alpha
  const size_t PS = inst.ps_index();
  const double T = inst.max_rate();
  if (opt.fixed) {
    if (opt.fixed->size() != N) throw PlanError("solve_gria_lp: the fixed assignment needs one node per worker");
    for (size_t n = 0; n < N; ++n)
      if ((*opt.fixed)[n] >= A || !inst.route(n, (*opt.fixed)[n]))
        throw PlanError(fmt::format("solve_gria_lp: worker '{}' cannot be pinned to node index {}",
                                    g.node(inst.worker(n)).name, (*opt.fixed)[n]));
  }

  // Eq. (1) relaxed, as numbered there:
  //  (1a) sum_{s in S u {alpha}} x_n^s = 1            for every worker n
  //  (1b) r_n^s <= x_n^s * T                          for every n, s in S u {alpha}
  //  (1c) r_n^s <= y_s                                for every n, s in S
  //  (1d) lambda <= sum_{s in S u {alpha}} r_n^s      for every n
  //  (1e) sum_n r_n^s <= C_s                          for every s in S
  //  (1f) sum_n r_n^alpha + sum_s y_s <= B_alpha
  //  (1g) x_n^s in [0, 1] (relaxing {0, 1}); r_n^s, y_s >= 0
  //  objective: max lambda
  // Projected form (the default): x appears only in (1a) and (1b), and for
  // r >= 0 some x in [0, 1] satisfies both iff sum_s r_n^s <= T (sum (1b)
  // over s and use (1a); conversely x_n^s = r_n^s / T with the remaining
  // 1 - sum_s r_n^s / T added to x_n^alpha satisfies both). So the x columns
  // and the |N|(|S|+1) rows (1b) are replaced by |N| rows
  //  (1ab) sum_s r_n^s <= T,
  // which has the same optimum and the same r, y, lambda; it solves about
  // 5x faster (500-server leaf-spine, 100 workers: 0.2 s instead of 1 s).
  // LpOptions::literal builds (1a) and (1b) verbatim.
  // The published variant (LpOptions::published) needs the x columns: its PS
  // row counts x_n^alpha. Its normalised bounds r, y in [0, 1] are r, y <= T.
  const bool published = opt.published;
  const bool literal = opt.literal || published;
  const double rate_hi = published ? T : kInf;
  GriaModel m;
  LpBuilder& lp = m.lp;
  const int lambda = m.lambda = lp.column(0, kInf, 1.0);  // objective: max lambda
  auto& y = m.y;
  y.resize(S);
  for (size_t s = 0; s < S; ++s) y[s] = lp.column(0, rate_hi, 0);
  // A pair (n, s) whose node s is unreachable from worker n has no columns
  // (x_n^s = r_n^s = 0); a pinned worker's other nodes have r_n^s = 0.
  auto& x = m.x;
  auto& r = m.r;
  x.assign(N, std::vector<int>(A, -1));
  r.assign(N, std::vector<int>(A, -1));
  for (size_t n = 0; n < N; ++n)
    for (size_t a = 0; a < A; ++a) {
      if (!inst.route(n, a)) continue;
      const bool off = opt.fixed && (*opt.fixed)[n] != a;
      if (literal) x[n][a] = opt.fixed ? lp.column(off ? 0 : 1, off ? 0 : 1, 0) : lp.column(0, 1, 0);
      r[n][a] = lp.column(0, off ? 0 : rate_hi, 0);
    }

  for (size_t n = 0; n < N; ++n) {
    const int agg = literal ? lp.row(1, 1) : lp.row(-kInf, T);  // (1a), or (1ab)
    const int minrate = lp.row(-kInf, 0);                        // (1d): lambda - sum_s r_n^s <= 0
    lp.set(minrate, lambda, 1);
    for (size_t a = 0; a < A; ++a) {
      if (r[n][a] < 0) continue;
      lp.set(minrate, r[n][a], -1);
      if (literal) {
        lp.set(agg, x[n][a], 1);
        const int cap = lp.row(-kInf, 0);  // (1b): r_n^s - T x_n^s <= 0
        lp.set(cap, r[n][a], 1);
        lp.set(cap, x[n][a], -T);
      } else {
        lp.set(agg, r[n][a], 1);
      }
      if (a != PS) {  // (1c): r_n^s - y_s <= 0
        const int node = lp.row(-kInf, 0);
        lp.set(node, r[n][a], 1);
        lp.set(node, y[a], -1);
      }
    }
  }
  for (size_t s = 0; s < S; ++s) {  // (1e)
    const int proc = lp.row(-kInf, inst.capacity(s));
    for (size_t n = 0; n < N; ++n)
      if (r[n][s] >= 0) lp.set(proc, r[n][s], 1);
  }
  const int bw = lp.row(-kInf, inst.ps_ingress());  // (1f)
  for (size_t n = 0; n < N; ++n) {
    if (published) lp.set(bw, x[n][PS], T);  // published: T * x_n^alpha (T = 1 there, normalised)
    else lp.set(bw, r[n][PS], 1);
  }
  for (size_t s = 0; s < S; ++s) lp.set(bw, y[s], 1);
  // Extension (GridModel::enforce_links), not in Eq. (1): for every directed
  // link e, the r_n^s whose route crosses e plus the y_s whose uplink crosses
  // e sum to at most c_e.
  if (inst.model().enforce_links) {
    std::vector<int> link_row(g.num_arcs(), -1);
    auto use = [&](ArcId arc, int col) {
      if (link_row[arc] < 0) link_row[arc] = lp.row(-kInf, g.arc_gbps(arc));
      lp.set(link_row[arc], col, 1);
    };
    for (size_t n = 0; n < N; ++n)
      for (size_t a = 0; a < A; ++a)
        if (r[n][a] >= 0)
          for (const ArcId arc : *inst.route(n, a)) use(arc, r[n][a]);
    for (size_t s = 0; s < S; ++s)
      for (const ArcId arc : inst.uplink(s)) use(arc, y[s]);
    // Extension (GridModel::multicast_results): the results at rate lambda
    // on every arc of the multicast tree.
    if (inst.model().multicast_results)
      for (const ArcId arc : inst.multicast_tree()) use(arc, lambda);
  }
  return m;
}

// Draws an aggregation node with probability proportional to weight[a],
// ignoring weights at or below `noise`; a PlanError from `caller` naming the
// worker and `what` the weights are if none is above it.
size_t draw(const Instance& inst, size_t n, const std::vector<double>& weight, double noise, Rng& rng,
            const char* caller, const char* what) {
  double total = 0;
  for (const double w : weight)
    if (w > noise) total += w;
  if (!(total > 0))
    throw PlanError(fmt::format("{}: worker '{}' has no positive {} in the LP solution", caller,
                                inst.graph().node(inst.worker(n)).name, what));
  const double u = rng.uniform() * total;
  size_t chosen = weight.size();
  double acc = 0;
  for (size_t a = 0; a < weight.size(); ++a) {
    if (!(weight[a] > noise)) continue;
    chosen = a;  // the last eligible node absorbs rounding at the top of the range
    acc += weight[a];
    if (u < acc) break;
  }
  return chosen;
}

CoinPackedMatrix matrix_of(const LpBuilder& lp) {
  return CoinPackedMatrix(true, lp.el_row.data(), lp.el_col.data(), lp.el_val.data(),
                          static_cast<CoinBigIndex>(lp.el_val.size()));
}

}  // namespace

LpSolution solve_gria_lp(const Instance& inst, const LpOptions& opt) {
  const size_t N = inst.num_workers();
  const size_t S = inst.num_switches();
  const size_t A = inst.num_nodes();
  const size_t PS = inst.ps_index();
  const double T = inst.max_rate();
  const bool literal = opt.literal || opt.published;
  GriaModel m = build_gria(inst, opt);
  const LpBuilder& lp = m.lp;
  const int num_cols = static_cast<int>(lp.obj.size());
  const int num_rows = static_cast<int>(lp.row_lo.size());
  ClpSimplex model;
  model.setLogLevel(0);
  model.loadProblem(matrix_of(lp), lp.col_lo.data(), lp.col_hi.data(), lp.obj.data(), lp.row_lo.data(), lp.row_hi.data());
  model.setOptimizationDirection(-1);  // maximize
  // Dual simplex: on these degenerate max-min LPs it beats CLP's automatic
  // choice (presolve + primal) several times over. The published variant
  // keeps the automatic choice, as CBC (PuLP's default) does for an LP; the
  // vertex it lands on decides the rounding probabilities x.
  if (opt.published) model.initialSolve();
  else model.dual();
  if (opt.published && model.isProvenPrimalInfeasible())
    throw PlanError(fmt::format("published GRIA LP is infeasible: its PS row T * sum_n x_n^alpha + sum_s y_s <= B_alpha "
                                "({} workers, T = {:g}, B_alpha = {:g} Gbps, {} programmable switches)",
                                N, T, inst.ps_ingress(), S));
  if (!model.isProvenOptimal())
    throw PlanError(fmt::format("GRIA LP ({} rows, {} columns) not solved to optimality: CLP status {}, secondary {}",
                                num_rows, num_cols, model.status(), model.secondaryStatus()));

  const double* sol = model.getColSolution();
  auto value = [&](int col) { return col < 0 ? 0.0 : std::max(0.0, sol[col]); };
  LpSolution out;
  out.lambda = value(m.lambda);
  out.y.resize(S);
  for (size_t s = 0; s < S; ++s) out.y[s] = value(m.y[s]);
  out.x.assign(N, std::vector<double>(A, 0.0));
  out.r.assign(N, std::vector<double>(A, 0.0));
  for (size_t n = 0; n < N; ++n) {
    double sum_x = 0;
    for (size_t a = 0; a < A; ++a) {
      out.r[n][a] = value(m.r[n][a]);
      out.x[n][a] = literal ? value(m.x[n][a]) : out.r[n][a] / T;
      sum_x += out.x[n][a];
    }
    if (!literal) out.x[n][PS] += std::max(0.0, 1 - sum_x);  // the completion described above
  }
  out.rows = num_rows;
  out.columns = num_cols;
  out.iterations = model.numberIterations();
  return out;
}

ExactSolution solve_gria_exact(const Instance& inst, int max_nodes) {
  if (max_nodes < 1) throw PlanError(fmt::format("GRIA MILP: the node limit must be >= 1, got {}", max_nodes));
  LpOptions opt;
  opt.literal = true;  // x columns, declared integral below: Eq. (1) exactly
  const GriaModel m = build_gria(inst, opt);
  const LpBuilder& lp = m.lp;
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(matrix_of(lp), lp.col_lo.data(), lp.col_hi.data(), lp.obj.data(), lp.row_lo.data(),
                     lp.row_hi.data());
  for (const auto& xs : m.x)
    for (const int col : xs)
      if (col >= 0) solver.setInteger(col);
  solver.setObjSense(-1);  // maximize
  CbcModel cbc(solver);
  cbc.setLogLevel(0);
  cbc.setMaximumNodes(max_nodes);
  // Incumbent: the best of three integral plans we already have (SwitchML's
  // ToR-or-PS assignment, ATP's main nodes, R-GRIA's rounding), at their
  // max-min fair rates (feasible by construction). CBC then only improves on
  // it; without it, CBC's own heuristics find nothing in time on the paper's
  // topologies.
  const Plan start = [&] {
    Plan best = feasible_rates(inst, plan_switchml(inst));
    for (Plan p : {feasible_rates(inst, plan_atp(inst)), feasible_rates(inst, plan_grid(inst, 1))})
      if (p.lambda_gbps > best.lambda_gbps) best = std::move(p);
    return best;
  }();
  std::vector<double> incumbent(lp.obj.size(), 0.0);
  incumbent[m.lambda] = start.lambda_gbps;
  for (size_t s = 0; s < inst.num_switches(); ++s) incumbent[m.y[s]] = start.switches[s].y_gbps;
  for (size_t n = 0; n < inst.num_workers(); ++n) {
    const size_t a = *inst.index_of(start.workers[n].node);
    incumbent[m.x[n][a]] = 1;
    incumbent[m.r[n][a]] = start.workers[n].rate_gbps;
  }
  cbc.setBestSolution(incumbent.data(), static_cast<int>(incumbent.size()), COIN_DBL_MAX, true);
  cbc.branchAndBound();
  const double* sol = cbc.bestSolution();
  if (!sol)
    throw PlanError(fmt::format("GRIA MILP: CBC found no integral solution within {} branch-and-bound nodes "
                                "(grid-exact is meant for small instances; raise the node limit)", max_nodes));
  ExactSolution out;
  out.lambda = sol[m.lambda];
  out.bound = std::max(out.lambda, cbc.getBestPossibleObjValue());
  out.optimal = cbc.isProvenOptimal();
  for (size_t n = 0; n < inst.num_workers(); ++n) {
    size_t best = inst.ps_index();
    for (size_t a = 0; a < inst.num_nodes(); ++a)
      if (m.x[n][a] >= 0 && sol[m.x[n][a]] > 0.5) best = a;
    out.node.push_back(best);
  }
  return out;
}

Plan plan_grid_exact(const Instance& inst, int max_nodes) {
  const ExactSolution e = solve_gria_exact(inst, max_nodes);
  Plan p = pinned_rates(inst, "grid-exact", e.node);
  p.lambda_bound_gbps = e.bound;
  return p;
}

Plan round_gria(const Instance& inst, const LpSolution& lp, uint64_t seed) {
  const size_t N = inst.num_workers();
  const size_t A = inst.num_nodes();
  const size_t PS = inst.ps_index();
  if (lp.r.size() != N || lp.y.size() != inst.num_switches()) throw PlanError("round_gria: LP solution is for another instance");
  // Rates below this are solver noise; they are never chosen as a node.
  const double noise = 1e-9 * inst.max_rate();

  Rng rng(mix(seed, 0x722d67726961ULL));  // "r-gria"
  Allocation alloc;
  alloc.y.assign(inst.num_switches(), 0.0);
  for (size_t n = 0; n < N; ++n) {
    // Line 6: choose s with probability r~_n^s / sum_s r~_n^s.
    // Line 8: the worker sends at r_n^{s_n} = sum_s r~_n^s.
    double rate = 0;
    for (size_t a = 0; a < A; ++a) rate += lp.r[n][a];
    const size_t chosen = draw(inst, n, lp.r[n], noise, rng, "round_gria", "rate");
    alloc.flows.push_back({n, chosen, rate, *inst.route(n, chosen)});
    // Line 11: y^_s = the largest rate among the workers aggregated at s
    // (so each worker's rate <= its node's y, Theorem 3).
    if (chosen != PS) alloc.y[chosen] = std::max(alloc.y[chosen], rate);
  }
  // Line 12: lambda = min_n r_n^{s_n} (evaluate computes it).
  Plan p = evaluate(inst, "grid", alloc);
  p.lp_lambda_gbps = lp.lambda;
  p.rounded = true;
  return p;
}

Plan round_gria_published(const Instance& inst, const LpSolution& lp, uint64_t seed) {
  const size_t N = inst.num_workers();
  const size_t S = inst.num_switches();
  const size_t PS = inst.ps_index();
  if (lp.r.size() != N || lp.x.size() != N || lp.y.size() != S)
    throw PlanError("round_gria_published: LP solution is for another instance");
  // Probabilities below this are solver noise; such a node is never chosen
  // (its r / x would be noise divided by noise).
  constexpr double kNoise = 1e-9;

  // Per switch, over every worker (as published): max_n r~_n^s and sum_n x~_n^s.
  std::vector<double> max_r(S, 0.0), sum_x(S, 0.0);
  for (size_t n = 0; n < N; ++n)
    for (size_t s = 0; s < S; ++s) {
      max_r[s] = std::max(max_r[s], lp.r[n][s]);
      sum_x[s] += lp.x[n][s];
    }

  Rng rng(mix(seed, 0x677269642d707562ULL));  // "grid-pub"
  Allocation alloc;
  alloc.y.assign(S, 0.0);
  for (size_t n = 0; n < N; ++n) {
    // Choose node a with probability x~_n^a (the x sum to 1 by (1a)).
    const size_t chosen = draw(inst, n, lp.x[n], kNoise, rng, "round_gria_published", "x");
    // The chosen worker sends at r~_n^a / x~_n^a (<= T by (1b)). The
    // published code divides by the last worker's choice here (a loop
    // variable reused from the loop above); the evident intent, used here,
    // is the worker's own choice.
    alloc.flows.push_back({n, chosen, lp.r[n][chosen] / lp.x[n][chosen], *inst.route(n, chosen)});
    // A chosen switch sends max_n r~_n^s / sum_n x~_n^s.
    if (chosen != PS) alloc.y[chosen] = max_r[chosen] / sum_x[chosen];
  }
  Plan p = evaluate(inst, "grid-published", alloc);
  p.lp_lambda_gbps = lp.lambda;
  p.rounded = true;
  return p;
}

Plan plan_grid_published(const Instance& inst, uint64_t seed) {
  LpOptions opt;
  opt.published = true;
  return round_gria_published(inst, solve_gria_lp(inst, opt), seed);
}

Plan plan_grid(const Instance& inst, uint64_t seed) { return round_gria(inst, solve_gria_lp(inst), seed); }

}  // namespace ina::control::grid
