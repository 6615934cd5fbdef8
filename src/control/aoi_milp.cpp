// The MILP of P4INC-AOI (§IV-B, Eqs. 1-11, linearized as Appendix A) over
// the model of aoi.hpp, solved with COIN-OR CBC. docs/p4inc-aoi.md ("The
// MILP (§IV-B)") says the same in prose.
//
// TSs i = 1..T; job j may use TSs r_j (its arrival TS) .. T_j (see the
// horizon below). C_j = {none} ∪ {v : inc_allowed(v), N_INC,v > 0}: its INC
// choices. Variables, per job j:
//   k_c^j    binary, c in C_j \ {none}; Σ_c k_c <= 1                          (Eq. 2)
//   x_j^i    binary: TS i carries data of j;  B_j^i in [0, worker_gbps] with
//            m·x <= B <= worker_gbps·x, m = 1e-3·worker_gbps (the validator
//            rejects a zero rate inside a plan)
//   s_j^i    binary start indicators: Σ_i s = 1, s^i <= x^i,
//            x^i <= x^{i-1} + s^i (x^{r_j - 1} = 0). This replaces the paper's
//            set 𝒯 of durations (O(T^2) z variables) with a linear-size
//            formulation of the same set of x vectors: one contiguous run.
//   y_c^{j,i} = k_c·B (Eq. 13, all four inequalities: y has coefficients of
//            both signs below)
//   z_c^{j,i} >= k_c + x - 1, z >= 0: k·x of Eq. 3 (Eq. 12; z ≤ k and z ≤ x
//            are left out: z only appears on the left of "<= N_INC", where a
//            larger z only tightens). Only where N_INC,v could bind.
// Every quantity that Eq. 4/5/8 makes depend on the INC choice is
// Q(c)·B = Q(none)·B + Σ_c (Q(c) - Q(none))·y_c (exact because Σ k <= 1),
// with Q taken from the model's own functions: inter_unit_flows (Eq. 4's
// per-pair flow multiplier q_v(c) for each worker unit v != PS) and
// unit_load_mult (Eq. 5's L_v(c)).
// Per unit pair {u, v} that some flow may use, per TS:
//   P^i      integer in [0, min(P_oxc,u, P_oxc,v)], P^0 = 0 (the MILP starts
//            from an empty AOI, so connections of TS 1 count as reconfigured,
//            as check_schedule counts them); Σ_u P_{v,u} <= P_oxc,v;
//            Σ flows on the pair <= B_port·P                         (Eq. 6)
//   n^i >= P^i - P^{i-1}, n >= 0: connections set up in TS i;
//   α^i binary, n <= M·α (M = the pair's max ports)                (Eq. 7)
// Eq. 5: Σ_j L_v·B <= B_PDP,v per unit and TS (only where it could bind).
// Eq. 3: Σ_j z_v^{j,i} <= N_INC,v.
// Data (Eqs. 8-10): the worker push Σ_i Δt·B^i >= d~_j, and for each
// inter-unit flow f (pair {v, PS}) Σ_i (Δt·B^i - λ_f^i) >= d~_j, where
//   λ_f^i >= ε·(B^i - B^{i-1}) - ε·w·(1 - α^i_pair) - ε·w·Σ_{c: q_v(c)=0} k_c,
//   λ >= 0 (w = worker_gbps: the largest possible rate step).
// That is Eq. 10's loss divided by the flow's multiplier q (its rate is q·B
// and its volume q·d~, so the loss ε·q·max(0, ΔB) on a TS whose pair gained
// connections becomes ε·max(0, ΔB) per unit of q); the last term lifts the
// row for a choice under which the flow does not exist (INC at a local
// job's unit). Eq. 9's β is not needed: max(0, ΔB) is what λ >= 0 and the
// first inequality give at the optimum (λ only costs data).
// Objective (Eqs. 1, 11): minimize t, with
//   t >= (i·Δt + a(none))·x^i + Σ_c (a(c) - a(none))·k_c for all j, i,
// where a(c) = update_time(j, c) (0 only with INC at the all-local unit).
// Among schedules of equal CT-BTI the MILP also minimizes reconfigured
// connections (Σ n), as the paper's MILP does in Table I: lexicographically,
// by two CBC runs: phase 1 min t (up to 80 % of the time limit), phase 2
// min Σ n with t <= phase 1's value, warm-started from phase 1's solution.
// (A single run on t + ω·Σ n needs ω below the smallest CT-BTI step over
// the connection count; near-equal a_j pushed ω to 1e-7, inside CBC's
// tolerances, and it stopped with needless reconfigurations.)
// Every CT-BTI is in the finite set S = {i·Δt + a} (a in {0} ∪ {a_j}), so
// phase 1's bound, rounded up to the next element of S, bounds CT-BTI.
// Valid inequalities: t >= (r_j - 1 + ⌈d~_j / (worker_gbps·Δt)⌉)·Δt + min_c a(c);
// and end indicators e_j^i in [0, 1] (1 at the run's last TS): Σ_i e = 1,
// e^i >= x^i - x^{i+1}, e^i <= x^i, x^{i+1} + Σ_{i'<=i} e^{i'} <= 1, and
// t >= Σ_i (i·Δt + a(none))·e^i + Σ_c (a(c) - a(none))·k_c. Exact for
// integral x; in the LP they stop a job from ending early with a trickle of
// data after its end, which t >= i·Δt·x^i alone allows for fractional x.
// Strengthening rows (add_valid_inequalities, each family switched by its
// MilpOptions flag), L_c^j = the fewest TSs j can
// take under choice c (its rate at most worker_gbps, q·B within the pair's
// ports, L_v·B within B_PDP) and L_j = min_c L_c:
//   run length: x^i >= Σ_{i-L_j < i' <= i} s^{i'} and
//     Σ_{i' <= i} e^{i'} <= Σ_{i' <= i-L_j+1} s^{i'} (a run started at i0
//     carries d~ at most at that rate per TS: it covers i0 .. i0+L_j-1);
//   makespan: u^i in [0, 1] per TS, u^i >= Σ_{i' >= i} e_j^{i'} for every
//     job (1 for i < r_j), t >= Δt·Σ_i u^i (u^i = [some run ends at or
//     after TS i] satisfies them: Δt·Σ u is the end of the last TS used,
//     and the job that uses it has an ICT no earlier). The LP otherwise
//     bounds t only by each job's own mix of early and late runs; u takes
//     the latest tail over all jobs;
//   cutoff (with an incumbent of CT-BTI U inside the horizon): a choice c
//     with (r_j - 1 + L_c)·Δt + a(c) > U gives an ICT above U, so no
//     schedule better than the incumbent uses it: k_c = 0, or Σ_c k_c >= 1
//     for c = none. The incumbent satisfies all of them (warm start intact).
// (Raising Σ_i z >= k to L_c·k, adding z <= k and z <= x with t rows in z,
// per-job t >= (r_j - 1 + L_c)·Δt + a(c) by k, or x^i <= Σ_{c: i·Δt + a(c)
// <= U} k_c moved neither the LP bound nor CBC's times measurably on
// scenarios/aoi/table1_derived.toml: they are left out.)
//
// Horizon. With an incumbent (the best of o.incumbent and, unless
// !o.own_incumbents, the plans below) of CT-BTI U, no better schedule has a
// TS after ⌊U/Δt⌋, so T =
// max(the incumbent's last TS, ⌊U/Δt⌋) loses no optimum (the incumbent's
// last TS alone would: a job with a_j > Δt can end earlier than one without
// an update time). Likewise job j may end no later than ⌊(U - min_c a(c))/Δt⌋.
// The candidates are o.incumbent, plan_list (a list schedule) and
// plan_serial (one job at a time); without o.incumbent the two plans are
// always tried, so T is always bounded by a feasible schedule's CT-BTI. A
// tighter U shrinks T and every job's last TS, which tightens the LP far
// more than any inequality below.
// horizon_ts overrides T (the incumbent is then used only if it fits).
//
// From the solution to a Schedule: k, x, P are rounded, B kept; AOI changes
// at TS boundaries ((i-1)·Δt for TS i); a plan that carries data beyond the
// TS its data completes in (a job off the critical path has slack in the
// MILP, the validator forbids it) is cut at that TS; changes after the last
// TS are dropped; assign_segments gives the INC jobs their aggregators, and
// check_schedule must pass (a failure is a bug, std::logic_error).
#include "control/aoi_milp.hpp"

#include <coin/CbcHeuristic.hpp>
#include <coin/CbcHeuristicFPump.hpp>
#include <coin/CbcHeuristicLocal.hpp>
#include <coin/CbcHeuristicRINS.hpp>
#include <coin/CbcModel.hpp>
#include <coin/CglClique.hpp>
#include <coin/CglFlowCover.hpp>
#include <coin/CglGomory.hpp>
#include <coin/CglKnapsackCover.hpp>
#include <coin/CglMixedIntegerRounding2.hpp>
#include <coin/CglProbing.hpp>
#include <coin/CoinPackedMatrix.hpp>
#include <coin/OsiClpSolverInterface.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

namespace ina::control::aoi {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kDoneTol = 1e-6;      // check_schedule's: a stream is complete at need·(1 - this)
constexpr double kMinRateFrac = 1e-3;  // m = this · worker_gbps

using Pair = std::pair<unsigned, unsigned>;
Pair pair_of(unsigned a, unsigned b) { return {std::min(a, b), std::max(a, b)}; }

// Columns and triplet rows, loaded into CBC in one piece.
struct Model {
  std::vector<double> lo, hi, cost;
  std::vector<char> integer;
  std::vector<double> row_lo, row_hi;
  std::vector<int> el_row, el_col;
  std::vector<double> el_val;

  int col(double l, double h, double c, bool is_int) {
    lo.push_back(l);
    hi.push_back(h);
    cost.push_back(c);
    integer.push_back(is_int);
    return static_cast<int>(cost.size()) - 1;
  }
  int binary() { return col(0, 1, 0, true); }
  // A row lo <= Σ coef·col <= hi from (col, coef) terms; col < 0 is skipped.
  void row(double l, double h, std::initializer_list<std::pair<int, double>> terms) {
    const int r = new_row(l, h);
    for (const auto& [c, v] : terms) add(r, c, v);
  }
  int new_row(double l, double h) {
    row_lo.push_back(l);
    row_hi.push_back(h);
    return static_cast<int>(row_lo.size()) - 1;
  }
  void add(int r, int c, double v) {
    if (c < 0 || v == 0) return;
    el_row.push_back(r);
    el_col.push_back(c);
    el_val.push_back(v);
  }
};

// Which AOI connections are new in each TS (the ε loss of Eq. 10 applies
// there), from a per-TS port count per pair.
using PortsByTs = std::vector<std::map<Pair, int>>;  // [i] for i = 0..T

// The AOI state per TS 0..last of a schedule (preconfigured + changes), as
// check_schedule builds it.
PortsByTs aoi_state(const Instance& inst, const Schedule& s, unsigned last) {
  PortsByTs P(last + 1);
  for (const Connection& c : s.preconfigured) P[0][pair_of(c.u, c.v)] += static_cast<int>(c.count);
  std::vector<std::map<Pair, int>> delta(last + 2);
  for (const AoiChange& ch : s.changes) {
    const long i = std::lround(ch.at_s / inst.net.ts_s);
    if (i >= 0 && i <= static_cast<long>(last)) delta[i + 1][pair_of(ch.u, ch.v)] += ch.count;
  }
  for (unsigned i = 1; i <= last; ++i) {
    P[i] = P[i - 1];
    for (const auto& [pr, d] : delta[i]) P[i][pr] += d;
  }
  return P;
}

bool gained(const PortsByTs& P, unsigned i, const Pair& pr) {
  auto at = [&](unsigned t) {
    const auto it = P[t].find(pr);
    return it == P[t].end() ? 0 : it->second;
  };
  return i >= 1 && i < P.size() && at(i) > at(i - 1);
}

// The TS (absolute) in which job j's data completes under plan p, with the
// AOI P, computed as check_schedule does; 0 if it never does.
unsigned completion_ts(const Instance& inst, const Job& j, const JobPlan& p, const PortsByTs& P) {
  struct Stream { double need, sent = 0, mult; std::optional<Pair> pair; bool done = false; };
  std::vector<Stream> st{{j.gb_per_worker, 0, 1.0, std::nullopt}};
  for (const Flow& f : inter_unit_flows(j, p.inc_unit)) st.push_back({f.mult * j.gb_per_worker, 0, f.mult, pair_of(f.from, f.to)});
  const double dt = inst.net.ts_s;
  for (unsigned i = p.first_ts; i <= p.last_ts(); ++i) {
    const double b = p.rate_gbps[i - p.first_ts];
    const double prev = i > p.first_ts ? p.rate_gbps[i - 1 - p.first_ts] : 0.0;
    bool all = true;
    for (Stream& x : st) {
      double sent = x.mult * b * dt;
      if (x.pair && gained(P, i, *x.pair)) sent -= inst.net.reconfig_s * x.mult * std::max(0.0, b - prev);
      x.sent += sent;
      if (x.sent >= x.need * (1 - kDoneTol)) x.done = true;
      all = all && x.done;
    }
    if (all) return i;
  }
  return 0;
}

// How many TSs job j needs at a constant rate b from p.first_ts (with
// p.inc_unit), with the AOI P: the smallest count after which
// completion_ts says its data is sent. 0 if none below 10^7.
unsigned ts_needed(const Instance& inst, const Job& j, JobPlan p, double b, const PortsByTs& P) {
  for (unsigned n = 1; n < 10'000'000; n *= 2) {
    p.rate_gbps.assign(n, b);
    if (const unsigned done = completion_ts(inst, j, p, P)) return done - p.first_ts + 1;
  }
  return 0;
}

std::vector<std::optional<unsigned>> choices_of(const Instance& inst, const Job& j, bool inc) {
  std::vector<std::optional<unsigned>> c{std::nullopt};
  if (inc)
    for (unsigned v = 0; v < inst.net.size(); ++v)
      if (inst.net.units[v].inc_jobs > 0 && inc_allowed(inst.net, j, v)) c.push_back(v);
  return c;
}

double min_update(const Instance& inst, const Job& j, bool inc) {
  double a = update_time(j, std::nullopt);
  for (const auto& c : choices_of(inst, j, inc)) a = std::min(a, update_time(j, c));
  return a;
}

unsigned floor_ts(double t, double dt) { return static_cast<unsigned>(std::floor(t / dt + 1e-9)); }

// Jobs one at a time (plan_serial): the largest per-worker rate for choice
// c with the job alone in the network, and the ports each flow then needs.
struct Alone {
  double rate = 0;  // 0: impossible
  std::map<Pair, int> ports;
};

Alone alone(const Instance& inst, const Job& j, std::optional<unsigned> c) {
  const Odcn& net = inst.net;
  const auto flows = inter_unit_flows(j, c);
  double top = net.worker_gbps;
  for (unsigned v = 0; v < net.size(); ++v) {
    const double l = unit_load_mult(j, c, v);
    if (l > 0) top = std::min(top, net.units[v].pdp_gbps / l);
  }
  auto ports_for = [&](double b) {
    std::map<Pair, int> m;
    for (const Flow& f : flows) m[pair_of(f.from, f.to)] = static_cast<int>(std::ceil(f.mult * b / net.port_gbps - 1e-9));
    return m;
  };
  auto fits = [&](const std::map<Pair, int>& m) {
    std::vector<int> used(net.size(), 0);
    for (const auto& [pr, k] : m) {
      used[pr.first] += k;
      used[pr.second] += k;
    }
    for (unsigned v = 0; v < net.size(); ++v)
      if (used[v] > static_cast<int>(net.units[v].optical_ports)) return false;
    return true;
  };
  // The port counts change only at b = p·B_port/q: try those below `top`, largest first.
  std::vector<double> cand{top};
  for (const Flow& f : flows)
    for (unsigned p = 1; p <= net.units[f.to].optical_ports; ++p) {
      const double b = p * net.port_gbps / f.mult;
      if (b < top) cand.push_back(b);
    }
  std::sort(cand.rbegin(), cand.rend());
  for (const double b : cand) {
    auto m = ports_for(b);
    if (b > 0 && fits(m)) return {b, std::move(m)};
  }
  return {};
}

}  // namespace

Schedule plan_serial(const Instance& inst, bool inc) {
  const auto t0 = std::chrono::steady_clock::now();
  const Odcn& net = inst.net;
  const double dt = net.ts_s;
  Schedule s;
  s.algo = "serial";
  s.inc = inc;
  std::vector<const Job*> order;
  for (const Job& j : inst.jobs) order.push_back(&j);
  std::stable_sort(order.begin(), order.end(),
                   [&](const Job* a, const Job* b) { return a->first_ts(dt) < b->first_ts(dt); });
  std::map<Pair, int> cur;  // the AOI now
  unsigned next = 1;
  for (const Job* jp : order) {
    const Job& j = *jp;
    const unsigned start = std::max(j.first_ts(dt), next);
    struct Best { double ict = kInf; std::optional<unsigned> c; Alone a; unsigned len = 0; int ports = 0; } best;
    for (const auto& c : choices_of(inst, j, inc)) {
      Alone a = alone(inst, j, c);
      if (!(a.rate > 0)) continue;
      // TSs until done, as check_schedule counts: the job's pairs that gain
      // connections at its first TS lose ε·(rate) there.
      JobPlan p;
      p.inc_unit = c;
      p.first_ts = start;
      PortsByTs P(start + 1);
      for (const auto& [pr, k] : a.ports) {
        const auto it = cur.find(pr);
        P[start - 1][pr] = it == cur.end() ? 0 : it->second;
        P[start][pr] = k;
      }
      const unsigned len = ts_needed(inst, j, p, a.rate, P);
      int ports = 0;
      for (const auto& [pr, k] : a.ports) ports += k;
      const double ict = (start + len - 1) * dt + update_time(j, c);
      if (len && (ict < best.ict - 1e-12 || (ict <= best.ict + 1e-12 && ports < best.ports)))
        best = {ict, c, std::move(a), len, ports};
    }
    if (best.len == 0)
      throw AoiError(fmt::format("{}: job {} ({}) cannot run even alone: no rate fits its units' ports and switches",
                                 inst.origin, j.id, j.name));
    std::map<Pair, int> target = best.a.ports;
    std::map<Pair, int> all = cur;
    for (const auto& [pr, k] : target) all[pr];
    for (const auto& [pr, was] : all) {
      const auto it = target.find(pr);
      const int want = it == target.end() ? 0 : it->second;
      if (want != was) s.changes.push_back({(start - 1) * dt, pr.first, pr.second, want - was});
    }
    cur = std::move(target);
    JobPlan p;
    p.job = j.id;
    p.inc_unit = best.c;
    p.first_ts = start;
    p.rate_gbps.assign(best.len, best.a.rate);
    s.jobs.push_back(std::move(p));
    next = start + best.len;
  }
  std::sort(s.jobs.begin(), s.jobs.end(), [](const JobPlan& a, const JobPlan& b) { return a.job < b.job; });
  assign_segments(inst, s);
  s.solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

Schedule plan_list(const Instance& inst, bool inc) {
  const auto t0 = std::chrono::steady_clock::now();
  const Odcn& net = inst.net;
  const double dt = net.ts_s, wg = net.worker_gbps, m_rate = kMinRateFrac * wg;
  const unsigned N = net.size();
  struct TsState {
    std::vector<unsigned> inc, ports_used;
    std::vector<double> load;
    std::map<Pair, double> gbps;
    std::map<Pair, int> ports;
  };
  std::vector<TsState> st;  // [TS]; 0 unused
  auto at = [&](unsigned ts) -> TsState& {
    while (st.size() <= ts) st.push_back({std::vector<unsigned>(N, 0), std::vector<unsigned>(N, 0), std::vector<double>(N, 0.0), {}, {}});
    return st[ts];
  };
  auto find0 = [](const auto& m, const Pair& k) -> double {
    const auto it = m.find(k);
    return it == m.end() ? 0 : it->second;
  };
  std::vector<const Job*> order;
  for (const Job& j : inst.jobs) order.push_back(&j);
  std::stable_sort(order.begin(), order.end(),
                   [&](const Job* a, const Job* b) { return a->first_ts(dt) < b->first_ts(dt); });
  Schedule s;
  s.algo = "list";
  s.inc = inc;
  for (const Job* jp : order) {
    const Job& j = *jp;
    struct Option { double ict = kInf; std::optional<unsigned> c; unsigned start = 0, len = 0; double b = 0; } best;
    const unsigned r = j.first_ts(dt);
    unsigned stop = r + 100000;
    for (unsigned start = r; start < stop; ++start) {
      for (const auto& c : choices_of(inst, j, inc)) {
        const auto flows = inter_unit_flows(j, c);
        std::vector<double> L(N);
        for (unsigned v = 0; v < N; ++v) L[v] = unit_load_mult(j, c, v);
        // Does the job fit TSs start..start+len-1 at rate b, next to the jobs placed so far?
        auto fits = [&](double b, unsigned len) {
          if (len == 0) return false;
          for (unsigned ts = start; ts < start + len; ++ts) {
            const TsState& x = at(ts);
            if (c && x.inc[*c] >= net.units[*c].inc_jobs) return false;
            for (unsigned v = 0; v < N; ++v)
              if (L[v] > 0 && x.load[v] + L[v] * b > net.units[v].pdp_gbps) return false;
            std::vector<unsigned> extra(N, 0);
            for (const Flow& f : flows) {
              const Pair pr = pair_of(f.from, f.to);
              const int need = static_cast<int>(std::ceil((find0(x.gbps, pr) + f.mult * b) / net.port_gbps - 1e-9));
              const int have = static_cast<int>(find0(x.ports, pr));
              if (need > have) {
                extra[pr.first] += need - have;
                extra[pr.second] += need - have;
              }
            }
            for (unsigned v = 0; v < N; ++v)
              if (x.ports_used[v] + extra[v] > net.units[v].optical_ports) return false;
          }
          return true;
        };
        // Its TS count at rate b, assuming every flow's pair gains a
        // connection in its first TS (the most ε loss a constant rate can see).
        auto len_of = [&](double b) {
          JobPlan p;
          p.inc_unit = c;
          p.first_ts = 1;
          PortsByTs P(2);
          for (const Flow& f : flows) P[1][pair_of(f.from, f.to)] = 1;
          return ts_needed(inst, j, p, b, P);
        };
        double b = wg;
        unsigned len = len_of(b);
        if (!fits(b, len)) {  // the largest rate that fits, by bisection
          double lo = 0, hi = wg;
          for (int it = 0; it < 30; ++it) {
            const double mid = (lo + hi) / 2;
            if (mid >= m_rate && fits(mid, len_of(mid))) lo = mid;
            else hi = mid;
          }
          b = lo;
          len = b >= m_rate ? len_of(b) : 0;
          if (!fits(b, len)) continue;
        }
        const double ict = (start + len - 1) * dt + update_time(j, c);
        if (ict < best.ict - 1e-12) best = {ict, c, start, len, b};
      }
      if (best.len && stop > start + 3) stop = start + 3;  // look a few TSs further: waiting (for INC) may pay
    }
    if (!best.len)
      throw AoiError(fmt::format("{}: job {} ({}) cannot be placed: no rate fits its units' ports and switches",
                                 inst.origin, j.id, j.name));
    for (unsigned ts = best.start; ts < best.start + best.len; ++ts) {
      TsState& x = at(ts);
      if (best.c) ++x.inc[*best.c];
      for (unsigned v = 0; v < N; ++v) x.load[v] += unit_load_mult(j, best.c, v) * best.b;
      for (const Flow& f : inter_unit_flows(j, best.c)) {
        const Pair pr = pair_of(f.from, f.to);
        const double g = (x.gbps[pr] += f.mult * best.b);
        const int need = static_cast<int>(std::ceil(g / net.port_gbps - 1e-9));
        int& have = x.ports[pr];
        if (need > have) {
          x.ports_used[pr.first] += need - have;
          x.ports_used[pr.second] += need - have;
          have = need;
        }
      }
    }
    JobPlan p;
    p.job = j.id;
    p.inc_unit = best.c;
    p.first_ts = best.start;
    p.rate_gbps.assign(best.len, best.b);
    s.jobs.push_back(std::move(p));
  }
  // The AOI per TS; each plan cut at the TS its data completes in (with less
  // ε loss than assumed it may end sooner).
  PortsByTs P(st.size());
  for (size_t ts = 1; ts < st.size(); ++ts) P[ts] = st[ts].ports;
  unsigned last = 0;
  for (JobPlan& p : s.jobs) {
    const unsigned done = completion_ts(inst, inst.jobs[p.job], p, P);
    if (!done) throw std::logic_error(fmt::format("list plan: job {} does not complete", p.job));
    p.rate_gbps.resize(done - p.first_ts + 1);
    last = std::max(last, done);
  }
  for (unsigned ts = 1; ts <= last; ++ts) {
    std::map<Pair, int> both = P[ts - 1];
    for (const auto& [pr, k] : P[ts]) both[pr];
    for (const auto& [pr, unused] : both) {
      const int d = static_cast<int>(find0(P[ts], pr) - find0(P[ts - 1], pr));
      if (d) s.changes.push_back({(ts - 1) * dt, pr.first, pr.second, d});
    }
  }
  std::sort(s.jobs.begin(), s.jobs.end(), [](const JobPlan& a, const JobPlan& b) { return a.job < b.job; });
  assign_segments(inst, s);
  const Check c = check_schedule(inst, s);
  if (!c.ok) throw std::logic_error(fmt::format("list plan fails the validator: {}", c.errors.front()));
  s.solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

namespace {

// One CBC run on `md` (minimize its costs) from the start `warm` (may be
// empty), with CBC's usual cut generators and heuristics (a bare CbcModel
// has none).
struct CbcRun {
  std::vector<double> sol;  // empty: none found
  double lb = -kInf;        // CBC's bound on the objective
  double root_lp = -kInf;   // the LP relaxation, before cuts
  double root_cuts = -kInf; // the root node's bound after CBC's cuts
  bool proven = false;      // optimal (to within allowable_gap)
  bool warm_ok = false;     // CBC accepted `warm`
};

CbcRun run_cbc(const Model& md, const std::vector<double>& warm, double seconds, unsigned threads, double cutoff_inc,
               double allowable_gap) {
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  const CoinPackedMatrix mat(true, md.el_row.data(), md.el_col.data(), md.el_val.data(),
                             static_cast<CoinBigIndex>(md.el_val.size()));
  solver.loadProblem(mat, md.lo.data(), md.hi.data(), md.cost.data(), md.row_lo.data(), md.row_hi.data());
  for (size_t c = 0; c < md.integer.size(); ++c)
    if (md.integer[c]) solver.setInteger(static_cast<int>(c));
  solver.setDblParam(OsiPrimalTolerance, 1e-9);
  CbcModel cbc(solver);
  cbc.setLogLevel(0);
  cbc.setUseElapsedTime(true);
  cbc.setMaximumSeconds(seconds);
  cbc.setIntegerTolerance(1e-9);
  cbc.setCutoffIncrement(cutoff_inc);
  cbc.setAllowableGap(allowable_gap);
  cbc.setAllowableFractionGap(0);
  if (threads > 1) cbc.setNumberThreads(static_cast<int>(threads));
  CglProbing probing;
  probing.setUsingObjective(true);
  probing.setMaxPass(1);
  probing.setMaxPassRoot(5);
  probing.setMaxProbe(10);
  probing.setMaxProbeRoot(1000);
  probing.setMaxLook(50);
  probing.setMaxLookRoot(500);
  probing.setMaxElements(200);
  probing.setRowCuts(3);
  cbc.addCutGenerator(&probing, -1, "Probing");
  CglGomory gomory;
  gomory.setLimit(300);
  cbc.addCutGenerator(&gomory, -1, "Gomory");
  CglKnapsackCover knapsack;
  cbc.addCutGenerator(&knapsack, -1, "KnapsackCover");
  CglClique clique;
  clique.setStarCliqueReport(false);
  clique.setRowCliqueReport(false);
  cbc.addCutGenerator(&clique, -1, "Clique");
  CglMixedIntegerRounding2 mir;
  cbc.addCutGenerator(&mir, -1, "MixedIntegerRounding2");
  CglFlowCover flow;
  cbc.addCutGenerator(&flow, -1, "FlowCover");
  CbcRounding rounding(cbc);
  cbc.addHeuristic(&rounding);
  CbcHeuristicLocal local(cbc);
  cbc.addHeuristic(&local);
  CbcHeuristicFPump pump(cbc);
  cbc.addHeuristic(&pump);
  CbcHeuristicRINS rins(cbc);
  cbc.addHeuristic(&rins);
  cbc.initialSolve();
  CbcRun out;
  if (!warm.empty()) {
    cbc.setBestSolution(warm.data(), static_cast<int>(warm.size()), COIN_DBL_MAX, true);
    out.warm_ok = cbc.bestSolution() != nullptr;
  }
  cbc.branchAndBound();
  if (const double* s = cbc.bestSolution()) out.sol.assign(s, s + md.cost.size());
  out.lb = cbc.getBestPossibleObjValue();
  // CBC reports ±COIN_DBL_MAX when the root LP cannot beat the warm
  // start's cutoff: its bound is then the incumbent's value.
  auto root = [&](double v) { return std::abs(v) < 1e30 ? v : cbc.getObjValue(); };
  out.root_lp = root(cbc.getContinuousObjective());
  out.root_cuts = root(cbc.rootObjectiveAfterCuts());
  out.proven = cbc.isProvenOptimal();
  return out;
}

// The columns of one job (-1: none). TS-indexed vectors hold TS r + idx.
struct JobCols {
  unsigned r = 1, last = 0;  // TSs r..last are modeled
  std::vector<std::optional<unsigned>> choice;  // [0] = none
  std::vector<int> k;                           // [c], k[0] = -1
  std::vector<int> x, s, e, B;                  // [i - r]
  std::vector<std::vector<int>> y, z;           // [c][i - r]
  struct FlowCols {
    Pair pair;
    std::vector<double> q;  // [c]: the flow's multiplier under choice c
    std::vector<int> lam;   // [i - r]
  };
  std::vector<FlowCols> flows;
  std::vector<double> upd;  // [c]: a(c)
};

struct PairCols {
  unsigned max_ports = 0;
  std::vector<int> P, n, alpha;  // [i], i = 1..T (index 0 unused)
};

}  // namespace

namespace {

// ---- phase 1: the incumbent and the horizon ---------------------------------------------

// The incumbent (the least CT-BTI of o.incumbent, plan_list and
// plan_serial; the plans only without o.incumbent or with o.own_incumbents),
// checked, and the horizon T it bounds (see "Horizon" at the top): every
// later phase models TSs 1..T only.
struct Horizon {
  Schedule start;
  Check sc;          // start's check: its CT-BTI is the upper bound ub
  double ub = 0;
  unsigned T = 0;
  bool use_start = false;  // the incumbent fits in T: warm start and per-job end bounds
};

Horizon choose_horizon(const Instance& inst, const MilpOptions& o) {
  const double dt = inst.net.ts_s;
  Horizon h;
  bool have = o.incumbent != nullptr;
  if (o.incumbent) {
    h.start = *o.incumbent;
    if (!o.inc)
      for (const JobPlan& p : h.start.jobs)
        if (p.inc_unit)
          throw AoiError(fmt::format("milp: the incumbent gives job {} INC, but this MILP is without INC", p.job));
    h.sc = check_schedule(inst, h.start);
    if (!h.sc.ok)
      throw AoiError(fmt::format("milp: the incumbent ({}) is infeasible: {}", h.start.algo, h.sc.errors.front()));
  }
  if (!o.incumbent || o.own_incumbents) {
    // Both plans are feasible by construction; with o.incumbent a plan that
    // cannot place some job is only not a candidate.
    for (Schedule (*plan)(const Instance&, bool) : {plan_list, plan_serial}) {
      std::optional<Schedule> s;
      try {
        s = plan(inst, o.inc);
      } catch (const AoiError&) {
        if (!o.incumbent) throw;
      }
      if (!s) continue;
      Check c = check_schedule(inst, *s);
      if (!have || c.ct_bti_s < h.sc.ct_bti_s - 1e-9) {
        h.start = std::move(*s);
        h.sc = std::move(c);
        have = true;
      }
    }
  }
  h.ub = h.sc.ct_bti_s;
  h.T = o.horizon_ts ? o.horizon_ts : std::max(h.sc.last_ts, floor_ts(h.ub, dt));
  h.use_start = h.sc.last_ts <= h.T;
  return h;
}

// S: every CT-BTI a schedule within the horizon can have ({i·Δt + a}, a in
// {0} ∪ {a_j}), ascending, without duplicates: phase 1's bound is rounded up
// to its next element, and its smallest step sizes CBC's cutoff increment.
std::vector<double> possible_ct_bti(const Instance& inst, unsigned T) {
  const double dt = inst.net.ts_s;
  std::vector<double> S;
  std::vector<double> a{0.0};
  for (const Job& j : inst.jobs) a.push_back(j.update_s);
  for (unsigned i = 1; i <= T; ++i)
    for (const double u : a) S.push_back(i * dt + u);
  std::sort(S.begin(), S.end());
  std::vector<double> uniq;
  for (const double v : S)
    if (uniq.empty() || v > uniq.back() + 1e-9) uniq.push_back(v);
  return uniq;
}

// The MILP under construction: the model and where each variable is.
struct Milp {
  Model md;
  unsigned T = 0;
  int t_col = -1;    // t, the CT-BTI (Eq. 1)
  double t_lb = 0;   // t's valid lower bound
  std::vector<JobCols> J;          // by job id
  std::map<Pair, PairCols> pairs;  // every unit pair some flow may use
  std::vector<int> u;              // [i], i = 1..T: the makespan indicators (o.makespan_rows), else empty
};

// ---- phase 2: the variables ----------------------------------------------------------------

// Every column, in the order CBC sees them: t (bounded below by the valid
// inequality t >= (r_j - 1 + ⌈d~_j / (w·Δt)⌉)·Δt + min_c a(c)); per job
// k_c, then per TS x, s, e, B, then y_c per TS, then λ per flow and TS; then
// per pair and TS P, n, α. The INC products z are added with their rows
// (add_inc_products), only where N_INC can bind.
void add_variables(Milp& m, const Instance& inst, const MilpOptions& o, const Horizon& h) {
  const Odcn& net = inst.net;
  const double dt = net.ts_s, eps = net.reconfig_s, wg = net.worker_gbps;
  const unsigned T = m.T;
  Model& md = m.md;
  double& t_lb = m.t_lb;
  for (const Job& j : inst.jobs) {
    const double need_ts = std::ceil(j.gb_per_worker / (wg * dt) - 1e-9);
    t_lb = std::max(t_lb, (j.first_ts(dt) - 1 + std::max(1.0, need_ts)) * dt + min_update(inst, j, o.inc));
  }
  m.t_col = md.col(t_lb, kInf, 0.0, false);  // its cost: set_ct_bti_objective

  std::vector<JobCols>& J = m.J;
  std::map<Pair, PairCols>& pairs = m.pairs;
  J.assign(inst.jobs.size(), JobCols{});
  for (const Job& j : inst.jobs) {
    JobCols& jc = J[j.id];
    jc.r = j.first_ts(dt);
    jc.last = T;
    if (h.use_start) jc.last = std::min(T, floor_ts(h.ub - min_update(inst, j, o.inc), dt));
    if (jc.last < jc.r)
      throw AoiError(fmt::format("milp: job {} ({}) arrives in TS {}, after the horizon T = {}", j.id, j.name, jc.r, T));
    jc.choice = choices_of(inst, j, o.inc);
    const size_t C = jc.choice.size(), L = jc.last - jc.r + 1;
    jc.k.assign(C, -1);
    for (size_t c = 1; c < C; ++c) jc.k[c] = md.binary();
    for (size_t c = 0; c < C; ++c) jc.upd.push_back(update_time(j, jc.choice[c]));
    for (size_t i = 0; i < L; ++i) {
      jc.x.push_back(md.binary());
      jc.s.push_back(md.binary());
      jc.e.push_back(md.col(0, 1, 0, false));
      jc.B.push_back(md.col(0, wg, 0, false));
    }
    jc.y.assign(C, {});
    jc.z.assign(C, {});
    for (size_t c = 1; c < C; ++c)
      for (size_t i = 0; i < L; ++i) jc.y[c].push_back(md.col(0, wg, 0, false));
    // Eq. 4's flows: one per worker unit v != PS, pair {v, PS}.
    for (const auto& [v, w] : j.workers) {
      if (v == j.ps_unit) continue;
      JobCols::FlowCols f;
      f.pair = pair_of(v, j.ps_unit);
      for (size_t c = 0; c < C; ++c) {
        double q = 0;
        for (const Flow& fl : inter_unit_flows(j, jc.choice[c]))
          if (fl.from == v) q = fl.mult;
        f.q.push_back(q);
      }
      if (eps > 0)
        for (size_t i = 0; i < L; ++i) f.lam.push_back(md.col(0, eps * wg, 0, false));
      jc.flows.push_back(std::move(f));
      pairs[pair_of(v, j.ps_unit)];
    }
  }
  // Per pair: P, n, α.
  for (auto& [pr, pc] : pairs)
    pc.max_ports = std::min(net.units[pr.first].optical_ports, net.units[pr.second].optical_ports);
  for (auto& [pr, pc] : pairs) {
    pc.P.assign(T + 1, -1);
    pc.n.assign(T + 1, -1);
    pc.alpha.assign(T + 1, -1);
    for (unsigned i = 1; i <= T; ++i) {
      pc.P[i] = md.col(0, pc.max_ports, 0, true);
      pc.n[i] = md.col(0, pc.max_ports, 0, false);
      if (eps > 0) pc.alpha[i] = md.binary();
    }
  }
}

// ---- phase 3: the constraints ----------------------------------------------------------------

// The rows of each job, job by job: Eq. 2 (one INC choice), the contiguous
// run (Σ s = 1, s <= x, x^i <= x^{i-1} + s^i), the rate bounds m·x <= B <=
// w·x, the data of Eqs. 8-10 (the push, its split by INC choice, and per
// flow the ε loss λ), y = k·B (Eq. 13), the end indicators, Eq. 11's
// t >= end of the job (the objective's rows, per TS and through e), and a
// connection on the pair of every TS that carries a flow.
void add_job_constraints(Milp& m, const Instance& inst) {
  const Odcn& net = inst.net;
  const double dt = net.ts_s, eps = net.reconfig_s, wg = net.worker_gbps;
  const double m_rate = kMinRateFrac * wg;
  Model& md = m.md;
  const int t_col = m.t_col;
  std::vector<JobCols>& J = m.J;
  const std::map<Pair, PairCols>& pairs = m.pairs;
  for (const Job& j : inst.jobs) {
    JobCols& jc = J[j.id];
    const size_t C = jc.choice.size(), L = jc.last - jc.r + 1;
    if (C > 2) {  // Eq. 2
      const int r = md.new_row(-kInf, 1);
      for (size_t c = 1; c < C; ++c) md.add(r, jc.k[c], 1);
    }
    const int one = md.new_row(1, 1);  // Σ s = 1
    const int one_end = md.new_row(1, 1);  // Σ e = 1
    const int end_obj = md.new_row(0, kInf);  // t >= Σ_i (i·Δt + a(none))·e^i + Σ_c (a(c) - a(none))·k_c
    md.add(end_obj, t_col, 1);
    for (size_t c = 1; c < C; ++c) md.add(end_obj, jc.k[c], -(jc.upd[c] - jc.upd[0]));
    const int push = md.new_row(j.gb_per_worker, kInf);
    // The volume split by INC choice: Σ_i Δt·y_c^i >= d~·k_c, and the rest,
    // Σ_i Δt·(B^i - Σ_c y_c^i) >= d~·(1 - Σ_c k_c). Exact for integral k;
    // in the LP they stop a fractional k from moving all of a small job's
    // data onto INC (y = B is within Eq. 13's bounds when B << worker_gbps).
    std::vector<int> by_choice(C, -1);
    for (size_t c = 0; c < C; ++c) {
      by_choice[c] = md.new_row(c ? 0 : j.gb_per_worker, kInf);
      for (size_t c2 = 1; c2 < C; ++c2) md.add(by_choice[c], jc.k[c2], c == 0 ? j.gb_per_worker : (c2 == c ? -j.gb_per_worker : 0));
    }
    std::vector<int> flow_rows;
    for (size_t f = 0; f < jc.flows.size() && eps > 0; ++f) flow_rows.push_back(md.new_row(j.gb_per_worker, kInf));
    for (size_t i = 0; i < L; ++i) {
      const unsigned ts = jc.r + static_cast<unsigned>(i);
      md.add(one, jc.s[i], 1);
      md.row(-kInf, 0, {{jc.B[i], 1}, {jc.x[i], -wg}});      // B <= w·x
      md.row(0, kInf, {{jc.B[i], 1}, {jc.x[i], -m_rate}});   // B >= m·x
      md.row(-kInf, 0, {{jc.s[i], 1}, {jc.x[i], -1}});       // s <= x
      md.row(-kInf, 0, {{jc.x[i], 1}, {i ? jc.x[i - 1] : -1, -1}, {jc.s[i], -1}});  // x^i <= x^{i-1} + s^i
      md.add(push, jc.B[i], dt);
      md.add(by_choice[0], jc.B[i], dt);
      for (size_t c = 1; c < C; ++c) {
        md.add(by_choice[0], jc.y[c][i], -dt);
        md.add(by_choice[c], jc.y[c][i], dt);
      }
      for (size_t c = 1; c < C; ++c) {  // y = k·B (Eq. 13)
        md.row(-kInf, 0, {{jc.y[c][i], 1}, {jc.k[c], -wg}});
        md.row(-kInf, 0, {{jc.y[c][i], 1}, {jc.B[i], -1}});
        md.row(-wg, kInf, {{jc.y[c][i], 1}, {jc.B[i], -1}, {jc.k[c], -wg}});
      }
      // The end indicator e^i (1 at the run's last TS): e >= x^i - x^{i+1},
      // e <= x^i, x^{i+1} + Σ_{i' <= i} e^{i'} <= 1 (nothing after the end).
      md.add(one_end, jc.e[i], 1);
      md.add(end_obj, jc.e[i], -(ts * dt + jc.upd[0]));
      md.row(0, kInf, {{jc.e[i], 1}, {jc.x[i], -1}, {i + 1 < L ? jc.x[i + 1] : -1, 1}});
      md.row(-kInf, 0, {{jc.e[i], 1}, {jc.x[i], -1}});
      if (i + 1 < L) {
        const int after = md.new_row(-kInf, 1);
        md.add(after, jc.x[i + 1], 1);
        for (size_t k = 0; k <= i; ++k) md.add(after, jc.e[k], 1);
      }
      // t >= (i·Δt + a(none))·x + Σ_c (a(c) - a(none))·k_c (Eq. 11)
      const int obj = md.new_row(0, kInf);
      md.add(obj, t_col, 1);
      md.add(obj, jc.x[i], -(ts * dt + jc.upd[0]));
      for (size_t c = 1; c < C; ++c) md.add(obj, jc.k[c], -(jc.upd[c] - jc.upd[0]));
      // A TS that carries a flow needs a connection on its pair:
      // P^i >= x^i - Σ_{c: q(c)=0} k_c (implied by Eq. 6 for integral values
      // since B >= m·x; in the LP it makes a unit's few ports bind).
      for (const auto& fl : jc.flows) {
        const int r = md.new_row(0, kInf);
        md.add(r, pairs.at(fl.pair).P[ts], 1);
        md.add(r, jc.x[i], -1);
        for (size_t c = 1; c < C; ++c)
          if (fl.q[c] == 0) md.add(r, jc.k[c], 1);
      }
      // Eq. 10 with ε, per flow (normalized by its multiplier).
      for (size_t f = 0; f < flow_rows.size(); ++f) {
        const JobCols::FlowCols& fl = jc.flows[f];
        md.add(flow_rows[f], jc.B[i], dt);
        md.add(flow_rows[f], fl.lam[i], -1);
        const int r = md.new_row(-eps * wg, kInf);
        md.add(r, fl.lam[i], 1);
        md.add(r, jc.B[i], -eps);
        if (i) md.add(r, jc.B[i - 1], eps);
        md.add(r, pairs.at(fl.pair).alpha[ts], -eps * wg);
        for (size_t c = 1; c < C; ++c)
          if (fl.q[c] == 0) md.add(r, jc.k[c], eps * wg);
      }
    }
  }

}

// Eq. 3's products z = k·x, for the units whose INC capacity can bind:
// z >= k + x - 1 (Eq. 12), and Σ_i z >= k (an INC job holds its slot for at
// least one TS; exact for integral values, and in the LP it stops a
// fractional x from making INC free). Columns and rows together, unit by unit.
void add_inc_products(Milp& m, const Instance& inst) {
  const Odcn& net = inst.net;
  const unsigned N = net.size(), T = m.T;
  Model& md = m.md;
  std::vector<JobCols>& J = m.J;
  for (unsigned v = 0; v < N; ++v) {
    std::vector<unsigned> users(T + 2, 0);
    for (const Job& j : inst.jobs)
      for (size_t c = 1; c < J[j.id].choice.size(); ++c)
        if (*J[j.id].choice[c] == v)
          for (unsigned ts = J[j.id].r; ts <= J[j.id].last; ++ts) ++users[ts];
    if (*std::max_element(users.begin(), users.end()) <= net.units[v].inc_jobs) continue;
    for (const Job& j : inst.jobs) {
      JobCols& jc = J[j.id];
      for (size_t c = 1; c < jc.choice.size(); ++c) {
        if (*jc.choice[c] != v) continue;
        jc.z[c].assign(jc.x.size(), -1);
        const int held = md.new_row(0, kInf);
        md.add(held, jc.k[c], -1);
        for (size_t i = 0; i < jc.x.size(); ++i) {
          const int z = jc.z[c][i] = md.col(0, 1, 0, false);
          md.row(-1, kInf, {{z, 1}, {jc.k[c], -1}, {jc.x[i], -1}});
          md.add(held, z, 1);
        }
      }
    }
  }

}

// The fewest TSs job j can take under choice c (L_c at the top): at most
// worker_gbps, q·B within the ports its pair can have, L_v·B within B_PDP
// per TS, and d~ to carry.
unsigned fewest_ts(const Instance& inst, const Job& j, const JobCols& jc, size_t c,
                   const std::map<Pair, PairCols>& pairs) {
  const Odcn& net = inst.net;
  double b = net.worker_gbps;
  for (const auto& fl : jc.flows)
    if (fl.q[c] > 0) b = std::min(b, net.port_gbps * pairs.at(fl.pair).max_ports / fl.q[c]);
  for (unsigned v = 0; v < net.size(); ++v) {
    const double l = unit_load_mult(j, jc.choice[c], v);
    if (l > 0) b = std::min(b, net.units[v].pdp_gbps / l);
  }
  // The validator counts a stream done at (1 - kDoneTol) of its data.
  return static_cast<unsigned>(std::max(1.0, std::ceil(j.gb_per_worker * (1 - kDoneTol) / (b * net.ts_s) - 1e-9)));
}

// The strengthening rows ("Strengthening rows" at the top), the families o enables:
// per job the run length and the cutoff on its INC choices (the latter only
// with an incumbent inside the horizon, of CT-BTI h.ub), then the makespan
// indicators u with their rows.
void add_valid_inequalities(Milp& m, const Instance& inst, const Horizon& h, const MilpOptions& o) {
  const double dt = inst.net.ts_s;
  const unsigned T = m.T;
  Model& md = m.md;
  if (o.makespan_rows) {
    m.u.assign(T + 1, -1);
    for (unsigned i = 1; i <= T; ++i) m.u[i] = md.col(0, 1, 0, false);
    const int makespan = md.new_row(0, kInf);  // t >= Δt·Σ u
    md.add(makespan, m.t_col, 1);
    for (unsigned i = 1; i <= T; ++i) md.add(makespan, m.u[i], -dt);
  }
  for (const Job& j : inst.jobs) {
    const JobCols& jc = m.J[j.id];
    const size_t C = jc.choice.size(), n = jc.x.size();
    std::vector<unsigned> len(C);
    for (size_t c = 0; c < C; ++c) len[c] = fewest_ts(inst, j, jc, c, m.pairs);
    const size_t L = *std::min_element(len.begin(), len.end());
    for (size_t i = 0; o.run_length_rows && i < n && L > 1; ++i) {
      const int on = md.new_row(0, kInf);  // x^i >= Σ_{i-L < i' <= i} s^{i'}
      md.add(on, jc.x[i], 1);
      for (size_t k = i + 1 >= L ? i + 1 - L : 0; k <= i; ++k) md.add(on, jc.s[k], -1);
      const int ended = md.new_row(-kInf, 0);  // Σ_{i' <= i} e^{i'} <= Σ_{i' <= i-L+1} s^{i'}
      for (size_t k = 0; k <= i; ++k) md.add(ended, jc.e[k], 1);
      for (size_t k = 0; k + L <= i + 1; ++k) md.add(ended, jc.s[k], -1);
    }
    if (o.incumbent_cutoff && h.use_start) {
      auto beyond = [&](size_t c) { return (jc.r - 1 + len[c]) * dt + jc.upd[c] > h.ub + 1e-9; };
      for (size_t c = 1; c < C; ++c)
        if (beyond(c)) md.hi[jc.k[c]] = 0;
      if (C > 1 && beyond(0)) {
        const int inc = md.new_row(1, kInf);
        for (size_t c = 1; c < C; ++c) md.add(inc, jc.k[c], 1);
      }
    }
    if (!o.makespan_rows) continue;
    for (unsigned ts = 1; ts < jc.r; ++ts) md.lo[m.u[ts]] = 1;
    for (size_t i = 0; i < n; ++i) {  // u^i >= Σ_{i' >= i} e^{i'}
      const int r = md.new_row(0, kInf);
      md.add(r, m.u[jc.r + i], 1);
      for (size_t k = i; k < n; ++k) md.add(r, jc.e[k], -1);
    }
  }
}

// The rows of each TS: per unit Eq. 5 (switch load, only where it could
// bind) and Eq. 3 (INC jobs at once, only where it could bind); per pair
// Eq. 6 (the flows within B_port·P) and Eq. 7 (n >= P^i - P^{i-1}, n <= M·α);
// per unit Eq. 6's port budget (only where it could bind).
void add_ts_constraints(Milp& m, const Instance& inst) {
  const Odcn& net = inst.net;
  const double eps = net.reconfig_s, wg = net.worker_gbps;
  const unsigned N = net.size(), T = m.T;
  Model& md = m.md;
  std::vector<JobCols>& J = m.J;
  std::map<Pair, PairCols>& pairs = m.pairs;
  for (unsigned ts = 1; ts <= T; ++ts) {
    // Eq. 5 and Eq. 3 per unit.
    for (unsigned v = 0; v < N; ++v) {
      double worst = 0;
      std::vector<std::pair<int, double>> load;
      std::vector<std::tuple<size_t, size_t, size_t>> inc_users;  // (job, c, i)
      for (const Job& j : inst.jobs) {
        JobCols& jc = J[j.id];
        if (ts < jc.r || ts > jc.last) continue;
        const size_t i = ts - jc.r;
        const double l0 = unit_load_mult(j, jc.choice[0], v);
        double lmax = l0;
        load.push_back({jc.B[i], l0});
        for (size_t c = 1; c < jc.choice.size(); ++c) {
          const double lc = unit_load_mult(j, jc.choice[c], v);
          lmax = std::max(lmax, lc);
          load.push_back({jc.y[c][i], lc - l0});
          if (*jc.choice[c] == v) inc_users.push_back({j.id, c, i});
        }
        worst += lmax * wg;
      }
      if (worst > net.units[v].pdp_gbps) {
        const int r = md.new_row(-kInf, net.units[v].pdp_gbps);
        for (const auto& [c, val] : load) md.add(r, c, val);
      }
      if (inc_users.size() > net.units[v].inc_jobs) {
        const int r = md.new_row(-kInf, net.units[v].inc_jobs);
        for (const auto& [jid, c, i] : inc_users) md.add(r, J[jid].z[c][i], 1);
      }
    }
    // Eq. 6: pair capacity, ports per unit; Eq. 7: n and α.
    std::vector<std::vector<int>> at_unit(N);
    for (auto& [pr, pc] : pairs) {
      const int cap = md.new_row(-kInf, 0);
      md.add(cap, pc.P[ts], -net.port_gbps);
      for (const Job& j : inst.jobs) {
        const JobCols& jc = J[j.id];
        if (ts < jc.r || ts > jc.last) continue;
        const size_t i = ts - jc.r;
        for (const auto& fl : jc.flows) {
          if (fl.pair != pr) continue;
          md.add(cap, jc.B[i], fl.q[0]);
          for (size_t c = 1; c < jc.choice.size(); ++c) md.add(cap, jc.y[c][i], fl.q[c] - fl.q[0]);
        }
      }
      at_unit[pr.first].push_back(pc.P[ts]);
      at_unit[pr.second].push_back(pc.P[ts]);
      md.row(0, kInf, {{pc.n[ts], 1}, {pc.P[ts], -1}, {ts > 1 ? pc.P[ts - 1] : -1, 1}});  // n >= P^i - P^{i-1}
      if (eps > 0) md.row(-kInf, 0, {{pc.n[ts], 1}, {pc.alpha[ts], -static_cast<double>(pc.max_ports)}});
    }
    for (unsigned v = 0; v < N; ++v) {
      unsigned most = 0;
      for (const auto& [pr, pc] : pairs)
        if (pr.first == v || pr.second == v) most += pc.max_ports;
      if (most <= net.units[v].optical_ports) continue;
      const int r = md.new_row(-kInf, net.units[v].optical_ports);
      for (const int c : at_unit[v]) md.add(r, c, 1);
    }
  }
}

// ---- phase 4: the objective ----------------------------------------------------------------

// Phase 1's objective: minimize t, the CT-BTI (Eq. 1).
void set_ct_bti_objective(Milp& m) { m.md.cost[m.t_col] = 1.0; }

// Phase 2's model: minimize the connections set up (Σ n) among the
// schedules whose CT-BTI is at most phase 1's `t` (the paper's Table I
// tie-break, lexicographically).
Model reconfiguration_model(const Milp& m, double t) {
  Model md2 = m.md;
  md2.cost[m.t_col] = 0;
  md2.hi[m.t_col] = t + 1e-9;
  for (const auto& [pr, pc] : m.pairs)
    for (unsigned ts = 1; ts <= m.T; ++ts) md2.cost[pc.n[ts]] = 1;
  return md2;
}

// ---- phase 5: solving ------------------------------------------------------------------------

// The incumbent as a solution vector of the model (empty if it does not fit the horizon): CBC's warm start.
std::vector<double> warm_start(const Milp& m, const Instance& inst, const Horizon& h) {
  const double eps = inst.net.reconfig_s;
  const unsigned T = m.T;
  const std::vector<JobCols>& J = m.J;
  const Schedule& start = h.start;
  std::vector<double> warm;
  if (!h.use_start) return warm;
  warm.assign(m.md.cost.size(), 0.0);
  warm[m.t_col] = h.ub;
  const PortsByTs P = aoi_state(inst, start, T);
  for (auto& [pair, pc] : m.pairs)
    for (unsigned ts = 1; ts <= T; ++ts) {
      const auto& pr = pair;  // clang 14 lets no lambda capture a structured binding
      auto at = [&](unsigned t) {
        const auto it = P[t].find(pr);
        return it == P[t].end() ? 0 : it->second;
      };
      warm[pc.P[ts]] = at(ts);
      const int n = std::max(0, at(ts) - (ts > 1 ? at(ts - 1) : 0));
      warm[pc.n[ts]] = n;
      if (eps > 0) warm[pc.alpha[ts]] = n > 0;
    }
  for (const JobPlan& p : start.jobs) {
    const JobCols& jc = J[p.job];
    size_t c = 0;
    for (size_t k = 1; k < jc.choice.size(); ++k)
      if (jc.choice[k] == p.inc_unit) c = k;
    if (c) warm[jc.k[c]] = 1;
    for (unsigned ts = p.first_ts; ts <= p.last_ts(); ++ts) {
      const size_t i = ts - jc.r;
      const double b = p.rate_gbps[ts - p.first_ts];
      const double prev = ts > p.first_ts ? p.rate_gbps[ts - 1 - p.first_ts] : 0.0;
      warm[jc.x[i]] = 1;
      warm[jc.B[i]] = b;
      if (c) warm[jc.y[c][i]] = b;
      if (c && !jc.z[c].empty() && jc.z[c][i] >= 0) warm[jc.z[c][i]] = 1;
      for (const auto& fl : jc.flows)
        if (eps > 0 && fl.q[c] > 0 && gained(P, ts, fl.pair)) warm[fl.lam[i]] = eps * std::max(0.0, b - prev);
    }
    warm[jc.s[p.first_ts - jc.r]] = 1;
    warm[jc.e[p.last_ts() - jc.r]] = 1;
  }
  if (!m.u.empty()) {
    unsigned last = 0;
    for (const JobPlan& p : start.jobs) last = std::max(last, p.last_ts());
    for (unsigned ts = 1; ts <= T; ++ts) warm[m.u[ts]] = ts <= last;
  }
  return warm;
}

// The two CBC runs: phase 1 min t (up to 80 % of the time left), phase 2
// min Σ n with t at phase 1's value, warm-started from phase 1's solution.
struct Solved {
  std::vector<double> sol;  // empty: CBC found nothing
  double lb = 0;            // phase 1's bound on t (at least t_lb)
};

Solved solve_lexicographic(const Milp& m, const std::vector<double>& warm, const MilpOptions& o, double gap_min,
                           const std::function<double()>& elapsed, MilpReport& rep) {
  // Solutions better by less than the smallest CT-BTI step are not worth a node.
  const double step = std::max(1e-9, std::min(1e-5, gap_min / 2));
  // Phase 1 may use 80 % of what is left; phase 2 gets the rest (more if phase 1 ends early).
  CbcRun run = run_cbc(m.md, warm, std::max(0.01, 0.8 * (o.time_limit_s - elapsed())), o.threads, step, step / 2);
  rep.warm_started = run.warm_ok;
  rep.t_optimal = run.proven;
  rep.root_lp_s = run.root_lp;
  rep.root_cuts_s = run.root_cuts;
  Solved out;
  out.lb = std::max(m.t_lb, run.lb);
  if (!run.sol.empty()) rep.objective_s = run.sol[m.t_col];
  if (!run.sol.empty() && o.time_limit_s - elapsed() > 0.01) {
    const Model md2 = reconfiguration_model(m, run.sol[m.t_col]);
    CbcRun run2 = run_cbc(md2, run.sol, o.time_limit_s - elapsed(), o.threads, 0.5, 1 - 1e-6);
    rep.reconfigurations_minimal = run2.proven;
    if (!run2.sol.empty()) run.sol = std::move(run2.sol);
  }
  out.sol = std::move(run.sol);
  return out;
}

// ---- phase 6: the schedule -------------------------------------------------------------------

// CBC's solution as a Schedule ("From the solution to a Schedule"
// at the top): k, x, P rounded, B kept, each plan cut at the TS its data
// completes in, the AOI changes at TS boundaries up to the last TS, the INC
// jobs' segments assigned (solve_milp validates it: a rejection is a bug).
Schedule extract_schedule(const Milp& m, const Instance& inst, const MilpOptions& o, const double* sol) {
  const double dt = inst.net.ts_s, wg = inst.net.worker_gbps;
  const unsigned T = m.T;
  const std::vector<JobCols>& J = m.J;
  const std::map<Pair, PairCols>& pairs = m.pairs;
  Schedule out;
  out.algo = "milp";
  out.inc = o.inc;
  // The AOI per TS.
  PortsByTs P(T + 1);
  for (const auto& [pr, pc] : pairs)
    for (unsigned ts = 1; ts <= T; ++ts) {
      const long k = std::lround(sol[pc.P[ts]]);
      if (k) P[ts][pr] = static_cast<int>(k);
    }
  unsigned last = 0;
  for (const Job& j : inst.jobs) {
    const JobCols& jc = J[j.id];
    JobPlan p;
    p.job = j.id;
    for (size_t c = 1; c < jc.choice.size(); ++c)
      if (sol[jc.k[c]] > 0.5) p.inc_unit = jc.choice[c];
    std::vector<unsigned> on;
    for (size_t i = 0; i < jc.x.size(); ++i)
      if (sol[jc.x[i]] > 0.5) on.push_back(jc.r + static_cast<unsigned>(i));
    if (on.empty() || on.back() - on.front() + 1 != on.size())
      throw std::logic_error(fmt::format("milp: job {}'s TSs are not one contiguous run", j.id));
    p.first_ts = on.front();
    for (const unsigned ts : on) {
      const double b = std::min(wg, sol[jc.B[ts - jc.r]]);
      if (!(b > 0)) throw std::logic_error(fmt::format("milp: job {} has rate {} in its TS {}", j.id, b, ts));
      p.rate_gbps.push_back(b);
    }
    // Cut the plan at the TS its data completes in.
    const unsigned done = completion_ts(inst, j, p, P);
    if (!done)
      throw std::logic_error(fmt::format("milp: job {}'s data does not complete by its last TS {}", j.id, p.last_ts()));
    p.rate_gbps.resize(done - p.first_ts + 1);
    last = std::max(last, p.last_ts());
    out.jobs.push_back(std::move(p));
  }
  for (unsigned ts = 1; ts <= last; ++ts) {
    std::map<Pair, int> both = P[ts - 1];
    for (const auto& [pr, k] : P[ts]) both[pr];
    for (const auto& [pr, was] : both) {
      const auto it = P[ts].find(pr);
      const int now = it == P[ts].end() ? 0 : it->second;
      const auto jt = P[ts - 1].find(pr);
      const int before = jt == P[ts - 1].end() ? 0 : jt->second;
      if (now != before) out.changes.push_back({(ts - 1) * dt, pr.first, pr.second, now - before});
    }
  }
  assign_segments(inst, out);
  return out;
}

}  // namespace

MilpReport solve_milp(const Instance& inst, const MilpOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!(o.time_limit_s > 0)) throw AoiError(fmt::format("milp: the time limit must be positive, got {} s", o.time_limit_s));
  // §IV-B's model: placed one-iteration jobs, no PS NIC limit.
  for (const Job& j : inst.jobs)
    if (j.queued || j.iterations > 1 || j.compute_s > 0)
      throw AoiError(fmt::format(
          "{}: milp: job {} ({}) {}; the MILP of §IV-B plans placed jobs of one iteration (use tw or fcfs)",
          inst.origin, j.id, j.name, j.queued ? "waits in the scheduling queue" : "trains several iterations"));
  if (inst.net.ps_gbps > 0)
    throw AoiError(fmt::format("{}: milp: net.ps_gbps = {} is not in the MILP of §IV-B (use tw or fcfs)", inst.origin,
                               inst.net.ps_gbps));
  const Horizon h = choose_horizon(inst, o);
  MilpReport rep;
  rep.horizon_ts = h.T;

  Milp m;
  m.T = h.T;
  add_variables(m, inst, o, h);
  const std::vector<double> S = possible_ct_bti(inst, h.T);
  double gap_min = inst.net.ts_s;
  for (size_t i = 1; i < S.size(); ++i) gap_min = std::min(gap_min, S[i] - S[i - 1]);
  add_job_constraints(m, inst);
  add_inc_products(m, inst);
  add_valid_inequalities(m, inst, h, o);
  add_ts_constraints(m, inst);
  set_ct_bti_objective(m);
  rep.rows = static_cast<int>(m.md.row_lo.size());
  rep.columns = static_cast<int>(m.md.cost.size());
  for (const char b : m.md.integer) rep.integers += b;

  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const Solved solved = solve_lexicographic(m, warm_start(m, inst, h), o, gap_min, elapsed, rep);

  Schedule out;
  if (!solved.sol.empty()) {
    out = extract_schedule(m, inst, o, solved.sol.data());
    const Check c = check_schedule(inst, out);
    if (!c.ok) throw std::logic_error(fmt::format("milp: CBC's solution fails the validator: {}", c.errors.front()));
    // Keep the incumbent if CBC did not beat it (CT-BTI, then reconfigurations).
    rep.from_solver = !(h.sc.ct_bti_s < c.ct_bti_s - 1e-9 ||
                        (h.sc.ct_bti_s <= c.ct_bti_s + 1e-9 && h.sc.reconfigured < c.reconfigured));
  }
  if (!rep.from_solver) {
    if (!h.use_start)
      throw AoiError(fmt::format("milp: CBC found no schedule within T = {} TSs in {} s", h.T, o.time_limit_s));
    out = h.start;
  }
  out.algo = "milp";
  out.inc = o.inc;
  const double ct = check_schedule(inst, out).ct_bti_s;
  // CT-BTI >= LB, rounded up to the next possible CT-BTI.
  double bound = solved.lb;
  const auto it = std::lower_bound(S.begin(), S.end(), bound - 1e-9);
  if (it != S.end()) bound = std::max(bound, *it);
  out.bound_s = std::min(ct, std::max(bound, m.t_lb));
  out.gap = ct > 0 ? (ct - out.bound_s) / ct : 0.0;
  out.optimal = ct <= out.bound_s + 1e-9;
  out.solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rep.schedule = std::move(out);
  return rep;
}

Schedule plan_milp(const Instance& inst, const MilpOptions& o) { return solve_milp(inst, o).schedule; }

}  // namespace ina::control::aoi
