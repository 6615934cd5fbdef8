// P4INC-AOI's planners: TW (Algorithms 1-3, §V) and FCFS (§VII-A), with and
// without INC, and TW-NoRecon. Both run Algorithm 1's loop: per TS they
// decide INC, give bandwidth in steps of δB, set up AOI connections when a
// step needs one, then send a TS of data. They differ in how they decide:
//  - TW: INC by weighted bipartite matching (units x jobs, weight = the
//    inter-unit traffic INC removes; Hungarian algorithm, in rounds up to the
//    INC capacity, Algorithm 2 lines 1-14); bandwidth port by port in
//    descending order of the ports' ideal active windows (Algorithm 3), each
//    δB step to the job whose projected ICT is the longest (lines 17-32).
//  - FCFS: jobs one by one in arrival order; a job takes INC if its unit has
//    room, then as many δB steps as fit (fcfs_strict: a job that cannot
//    start holds back the later ones).
// Both keep a job's INC decision from its first TS of transfer on (k is per
// job in the MILP) and give a job that has started at least one step every
// TS until it is done (its TSs are one duration τ, Eq. 11). Connections stay
// up until their ports are needed elsewhere (an idle connection is torn down
// only to free a port), so a later job between the same units reuses them.
// Queued jobs (§VII-B's testbed) are placed at the start of the first TS in
// which their workers fit, first in, first out, and give their slots back
// when done. The schedule is then checked by check_schedule (aoi_check.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "control/aoi.hpp"

namespace ina::control::aoi {
namespace {

constexpr double kEps = 1e-9;

}  // namespace

// The Hungarian algorithm on the cost -w (non-positive weights count as 0:
// no edge), the columns padded to at least the rows.
std::vector<int> max_weight_assignment(const std::vector<std::vector<double>>& w) {
  const size_t rows = w.size();
  if (rows == 0) return {};
  const size_t cols = std::max(rows, w[0].size());
  const double inf = std::numeric_limits<double>::infinity();
  // 1-based arrays as in the classic formulation.
  std::vector<double> u(rows + 1, 0), v(cols + 1, 0), minv(cols + 1);
  std::vector<size_t> p(cols + 1, 0), way(cols + 1, 0);
  std::vector<char> used(cols + 1);
  auto cost = [&](size_t i, size_t j) { return j < w[i].size() ? -std::max(0.0, w[i][j]) : 0.0; };
  for (size_t i = 1; i <= rows; ++i) {
    p[0] = i;
    size_t j0 = 0;
    std::fill(minv.begin(), minv.end(), inf);
    std::fill(used.begin(), used.end(), 0);
    do {
      used[j0] = 1;
      const size_t i0 = p[j0];
      double delta = inf;
      size_t j1 = 0;
      for (size_t j = 1; j <= cols; ++j) {
        if (used[j]) continue;
        const double cur = cost(i0 - 1, j - 1) - u[i0] - v[j];
        if (cur < minv[j]) { minv[j] = cur; way[j] = j0; }
        if (minv[j] < delta) { delta = minv[j]; j1 = j; }
      }
      for (size_t j = 0; j <= cols; ++j) {
        if (used[j]) { u[p[j]] += delta; v[j] -= delta; }
        else minv[j] -= delta;
      }
      j0 = j1;
    } while (p[j0] != 0);
    do {
      const size_t j1 = way[j0];
      p[j0] = p[j1];
      j0 = j1;
    } while (j0);
  }
  std::vector<int> out(rows, -1);
  for (size_t j = 1; j <= cols; ++j)
    if (p[j] && j - 1 < w[p[j] - 1].size() && w[p[j] - 1][j - 1] > 0) out[p[j] - 1] = static_cast<int>(j - 1);
  return out;
}

namespace {

struct JobState {
  const Job* job = nullptr;
  bool placed = true;  // false while it waits in the scheduling queue
  bool started = false, done = false;
  std::optional<unsigned> inc;
  std::vector<Flow> flows;
  std::vector<std::pair<unsigned, double>> load;  // (unit, Eq. 5 multiplier)
  double rem_push = 0;                             // per worker, Gb
  std::vector<double> rem_flow;                    // per flow, Gb
  double rate = 0, prev = 0;                       // this TS's and the last TS's B_j
  double delta = 0;                                // its step: δB, or δB/2^k if δB cannot fit it even alone
  JobPlan plan;

  void set_inc(std::optional<unsigned> v, unsigned units) {
    inc = v;
    flows = inter_unit_flows(*job, v);
    load.clear();
    for (unsigned u = 0; u < units; ++u)
      if (const double m = unit_load_mult(*job, v, u); m > 0) load.push_back({u, m});
    rem_push = job->gb_per_worker;
    rem_flow.clear();
    for (const Flow& f : flows) rem_flow.push_back(f.mult * job->gb_per_worker);
  }
  // Per-worker data left (the slowest stream).
  double left() const {
    double r = rem_push;
    for (size_t k = 0; k < flows.size(); ++k) r = std::max(r, rem_flow[k] / flows[k].mult);
    return r;
  }
};

class Planner {
 public:
  Planner(const Instance& inst, const PlanOptions& o, bool tw)
      : inst_(inst), net_(inst.net), o_(o), tw_(tw), n_(inst.net.size()), own_(inst.jobs), placer_(inst.net, inst.seed) {
    P_.assign(n_ * n_, 0);
    used_.assign(n_, 0);
    pair_load_.assign(n_ * n_, 0);
    delta_.assign(n_ * n_, 0);
    unit_load_.assign(n_, 0);
    inc_held_.assign(n_, 0);
    s_.algo = std::string(tw ? "tw" : "fcfs") + (o.no_recon ? "-norecon" : "") + (!tw && o.fcfs_strict ? "-strict" : "") +
              (o.stop_at_need ? "-need" : "");
    s_.inc = o.inc;
    s_.no_recon = o.no_recon;
    if (o.no_recon) {
      s_.preconfigured = uniform_aoi(net_);
      for (const Connection& c : s_.preconfigured) {
        P_[idx(c.u, c.v)] += static_cast<int>(c.count);
        used_[c.u] += c.count;
        used_[c.v] += c.count;
      }
    }
    for (const Job& j : own_) {
      JobState st;
      st.job = &j;
      st.placed = j.queued == 0;
      st.set_inc(std::nullopt, n_);
      st.plan.job = j.id;
      if (st.placed) {
        check_uniform_aoi(st);
        st.delta = solo_step(st);
      }
      jobs_.push_back(std::move(st));
    }
    order_.resize(jobs_.size());
    std::iota(order_.begin(), order_.end(), size_t{0});
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
      return inst.jobs[a].arrival_s < inst.jobs[b].arrival_s;
    });
  }

  // TW-NoRecon: every pair a job needs must be in the uniform AOI.
  void check_uniform_aoi(const JobState& st) const {
    if (!o_.no_recon) return;
    for (const Flow& f : st.flows)
      if (P_[idx(f.from, f.to)] == 0)
        throw AoiError(fmt::format(
            "{}: {} needs units {} and {} connected, and the uniform AOI of {} units with {} ports does not "
            "connect them (TW-NoRecon has no multi-hop path; it needs units <= ports + 1)",
            inst_.origin, st.job->name, f.from, f.to, n_, net_.units[f.from].optical_ports));
  }

  // A job so wide that one δB step per worker exceeds what the ODCN could
  // give it even empty (e.g. a coflow of 147 mappers through one unit's 24
  // ports) steps by δB/2, δB/4, ... (ours: the paper's δB loop would never
  // start it). With or without INC, the widest case is the no-INC one.
  double solo_step(const JobState& j) const {
    for (double d = net_.delta_gbps; d >= net_.delta_gbps / 1024; d /= 2) {
      bool fits = d <= rate_cap(net_, *j.job, std::nullopt);
      for (const auto& [v, m] : j.load) fits = fits && m * d <= net_.units[v].pdp_gbps;
      for (const Flow& f : j.flows) {
        const unsigned ports = std::min(net_.units[f.from].optical_ports, net_.units[f.to].optical_ports);
        fits = fits && f.mult * d <= ports * net_.port_gbps;
      }
      if (fits) return d;
    }
    return net_.delta_gbps;  // nothing fits: the stall check names it
  }

  Schedule run() {
    const auto t0 = std::chrono::steady_clock::now();
    size_t finished = 0;
    for (unsigned ts = 1; finished < jobs_.size(); ++ts) {
      if (ts > o_.max_ts)
        throw AoiError(fmt::format("{}: {} jobs still run after TS {} (max_ts)", inst_.origin,
                                   jobs_.size() - finished, o_.max_ts));
      ts_ = ts;
      begin_ts();
      if (tw_) allocate_tw(); else allocate_fcfs();
      const size_t done = end_ts();
      finished += done;
      stall_check();
      if (o_.progress) o_.progress(ts, finished, jobs_.size(), o_.progress_ctx);
    }
    for (JobState& j : jobs_) s_.jobs.push_back(std::move(j.plan));
    assign_segments(inst_, s_);
    s_.solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s_;
  }

 private:
  size_t idx(unsigned a, unsigned b) const { return std::min(a, b) * n_ + std::max(a, b); }
  double now() const { return (ts_ - 1) * net_.ts_s; }
  bool active(const JobState& j) const { return !j.done && j.placed && j.job->first_ts(net_.ts_s) <= ts_; }

  // The scheduling queue: jobs that have arrived take free slots in arrival
  // order, the first that does not fit holding back the ones behind it.
  void admit() {
    for (size_t k : order_) {
      JobState& j = jobs_[k];
      if (j.placed) continue;
      if (j.job->first_ts(net_.ts_s) > ts_) return;
      Job& job = own_[k];
      if (!placer_.try_place(job, job.queued)) return;
      j.placed = true;
      j.set_inc(std::nullopt, n_);
      check_uniform_aoi(j);
      j.delta = solo_step(j);
      j.plan.workers = job.workers;
      j.plan.ps_unit = job.ps_unit;
      j.plan.admitted = ts_;
    }
  }

  void begin_ts() {
    admit();
    std::fill(pair_load_.begin(), pair_load_.end(), 0.0);
    std::fill(delta_.begin(), delta_.end(), 0);
    std::fill(unit_load_.begin(), unit_load_.end(), 0.0);
    for (JobState& j : jobs_) {
      j.prev = j.rate;
      j.rate = 0;
      if (!j.started && !j.done && j.inc) j.set_inc(std::nullopt, n_);  // undecided until it starts
    }
  }

  // ---- INC -------------------------------------------------------------------------
  // Free INC slots of unit v (the started INC jobs hold theirs).
  unsigned inc_free(unsigned v) const { return net_.units[v].inc_jobs - inc_held_[v]; }

  // What INC at v saves (Algorithm 2's weight d~_{v,j}): the inter-unit traffic
  // it removes, plus a hundredth of the switch load it removes, so that a job
  // with a local PS still takes a free slot.
  double inc_weight(const JobState& j, unsigned v) const {
    auto aoi = [&](std::optional<unsigned> k) {
      double g = 0;
      for (const Flow& f : inter_unit_flows(*j.job, k)) g += f.mult;
      return g;
    };
    auto sw = [&](std::optional<unsigned> k) {
      double g = 0;
      for (unsigned u = 0; u < n_; ++u) g += unit_load_mult(*j.job, k, u);
      return g;
    };
    const double d = j.job->gb_per_worker;
    return d * (aoi(std::nullopt) - aoi(v)) + 0.01 * d * (sw(std::nullopt) - sw(v)) + kEps;
  }

  void match_inc() {
    std::vector<size_t> cand;
    for (size_t k : order_)
      if (active(jobs_[k]) && !jobs_[k].started) cand.push_back(k);
    std::vector<unsigned> cap(n_);
    unsigned rounds = 0;
    for (unsigned v = 0; v < n_; ++v) rounds = std::max(rounds, cap[v] = inc_free(v));
    std::vector<char> taken(jobs_.size(), 0);
    for (unsigned r = 0; r < rounds; ++r) {
      std::vector<unsigned> units;
      for (unsigned v = 0; v < n_; ++v)
        if (cap[v] > 0) units.push_back(v);
      std::vector<size_t> cols;
      for (size_t k : cand)
        if (!taken[k]) cols.push_back(k);
      if (units.empty() || cols.empty()) break;
      std::vector<std::vector<double>> w(units.size(), std::vector<double>(cols.size(), 0.0));
      bool any = false;
      for (size_t a = 0; a < units.size(); ++a)
        for (size_t b = 0; b < cols.size(); ++b)
          if (inc_allowed(net_, *jobs_[cols[b]].job, units[a])) {
            w[a][b] = inc_weight(jobs_[cols[b]], units[a]);
            any = true;
          }
      if (!any) break;
      const std::vector<int> m = max_weight_assignment(w);
      bool matched = false;
      for (size_t a = 0; a < units.size(); ++a) {
        if (m[a] < 0) continue;
        const size_t k = cols[m[a]];
        jobs_[k].set_inc(units[a], n_);
        taken[k] = 1;
        --cap[units[a]];
        matched = true;
      }
      if (!matched) break;
    }
  }

  // ---- bandwidth steps ----------------------------------------------------------------
  struct Undo {
    std::vector<std::pair<size_t, int>> ports;  // (pair, count added)
  };

  // Per-worker rate at which j's data completes in this TS (the ε loss of a
  // stream whose pair gains connections this TS included).
  double finish_rate(const JobState& j) const {
    const double dt = net_.ts_s, eps = net_.reconfig_s;
    const double prev = data_gbps(*j.job, j.inc, j.prev);
    double x = j.rem_push / dt;  // the data rate needed
    for (size_t k = 0; k < j.flows.size(); ++k) {
      const double need = j.rem_flow[k] / j.flows[k].mult;
      const bool lossy = delta_[idx(j.flows[k].from, j.flows[k].to)] > 0;
      x = std::max(x, lossy ? std::max(need / dt, (need - eps * prev) / (dt - eps)) : need / dt);
    }
    return rate_for_data_gbps(*j.job, j.inc, x);
  }

  // The step j would take now (0 if none is useful).
  double step_of(const JobState& j) const {
    const double cap = rate_cap(net_, *j.job, j.inc);
    const double want = o_.stop_at_need ? std::min(cap, finish_rate(j) * (1 + 1e-12)) : cap;
    return std::max(0.0, std::min(j.delta, want - j.rate));
  }

  // Frees one port of unit u by tearing down a connection that carries
  // nothing this TS beyond its other ports. On one of job j's own pairs the
  // pending step d (not in pair_load_ yet) counts as load: a spare port there
  // may go to j's other pair.
  bool free_port(unsigned u, const JobState& j, double d, Undo& undo) {
    for (unsigned w = 0; w < n_; ++w) {
      if (w == u) continue;
      const size_t p = idx(u, w);
      if (P_[p] == 0) continue;
      double load = pair_load_[p];
      for (const Flow& f : j.flows)
        if (idx(f.from, f.to) == p) load += f.mult * d;
      if ((P_[p] - 1) * net_.port_gbps + kEps >= load) {
        add_ports(p, u, w, -1, undo);
        return true;
      }
    }
    return false;
  }

  void add_ports(size_t p, unsigned u, unsigned w, int c, Undo& undo) {
    P_[p] += c;
    delta_[p] += c;
    used_[u] += c;
    used_[w] += c;
    undo.ports.push_back({p, c});
  }

  void rollback(Undo& undo) {
    for (auto it = undo.ports.rbegin(); it != undo.ports.rend(); ++it) {
      const size_t p = it->first;
      const unsigned u = static_cast<unsigned>(p / n_), w = static_cast<unsigned>(p % n_);
      P_[p] -= it->second;
      delta_[p] -= it->second;
      used_[u] -= it->second;
      used_[w] -= it->second;
    }
    undo.ports.clear();
  }

  // Tries to raise j's rate by d: unit loads (Eq. 5), pairs (Eq. 6) with new
  // connections if ports are free or can be freed. Applies it (returns true)
  // or leaves everything as it was; with commit = false it only says whether it could.
  bool raise(JobState& j, double d, bool commit = true) {
    if (d <= kEps) return false;
    for (const auto& [v, m] : j.load)
      if (unit_load_[v] + m * d > net_.units[v].pdp_gbps * (1 + 1e-12)) return false;
    Undo undo;
    for (const Flow& f : j.flows) {
      const size_t p = idx(f.from, f.to);
      const double need = pair_load_[p] + f.mult * d;
      while (P_[p] * net_.port_gbps < need * (1 - 1e-12)) {
        if (o_.no_recon) { rollback(undo); return false; }
        bool ok = true;
        for (unsigned e : {f.from, f.to})
          if (used_[e] >= static_cast<int>(net_.units[e].optical_ports) && !free_port(e, j, d, undo)) ok = false;
        if (!ok) { rollback(undo); return false; }
        add_ports(p, f.from, f.to, 1, undo);
      }
    }
    if (!commit) {
      rollback(undo);
      return true;
    }
    for (const auto& [v, m] : j.load) unit_load_[v] += m * d;
    for (const Flow& f : j.flows) pair_load_[idx(f.from, f.to)] += f.mult * d;
    j.rate += d;
    return true;
  }

  // Projected ICT after a step of d (continuous: when its data would be sent at that rate, plus a_j).
  double projected_ict(const JobState& j, double d) const {
    const double r = data_gbps(*j.job, j.inc, j.rate + d);
    return now() + j.left() / r + final_update(*j.job, j.inc);
  }

  // Gives every started job its first step (they must transfer every TS until done).
  void keep_started() {
    for (size_t k : order_) {
      JobState& j = jobs_[k];
      if (!j.started || j.done) continue;
      double d = std::max(step_of(j), 4 * kEps);
      while (!raise(j, d)) {
        d /= 2;
        if (d < 1e-6)
          throw AoiError(fmt::format("{}: internal: started {} cannot keep any bandwidth in TS {}", inst_.origin,
                                     j.job->name, ts_));
      }
    }
  }

  // A job's step was sized before a later step added a connection to one of
  // its pairs; that connection makes its rise lossy (ε, Eq. 10), so it may
  // no longer finish in this TS. Top such jobs up, in arrival order, until
  // nothing changes.
  void settle() {
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t k : order_) {
        JobState& j = jobs_[k];
        if (j.rate <= 0 || j.done) continue;
        bool lossy = false;
        for (const Flow& f : j.flows) lossy = lossy || delta_[idx(f.from, f.to)] > 0;
        if (lossy && raise(j, step_of(j))) changed = true;
      }
    }
  }

  void allocate_fcfs() {
    // INC first come, first served.
    if (o_.inc)
      for (size_t k : order_) {
        JobState& j = jobs_[k];
        if (!active(j) || j.started) continue;
        if (const auto v = j.job->local_unit(); v && inc_allowed(net_, *j.job, *v) && inc_free(*v) > 0) {
          j.set_inc(*v, n_);
          ++inc_held_[*v];  // held while tentative; end_ts() keeps it only if the job started
        } else if (!net_.inc_requires_local) {
          for (const auto& [v2, w] : j.job->workers)
            if (inc_free(v2) > 0) { j.set_inc(v2, n_); ++inc_held_[v2]; break; }
        }
      }
    keep_started();
    for (size_t k : order_) {
      JobState& j = jobs_[k];
      if (!active(j)) continue;
      bool got = false;
      while (raise(j, step_of(j))) got = true;
      if (o_.fcfs_strict && !j.started && !got) break;  // head-of-line: no later job takes more
    }
    settle();
  }

  // Algorithm 3: the end of port p's ideal active window, from now. Ports are
  // 2v (unit v's switch to its server pool, capacity B_PDP) and 2v+1 (its AOI
  // side, P_oxc · B_port).
  double window_end(unsigned port, const std::vector<std::pair<size_t, double>>& users) const {
    const unsigned v = port / 2;
    const double cap = port % 2 ? net_.units[v].optical_ports * net_.port_gbps : net_.units[v].pdp_gbps;
    double total = 0, tau = 0;
    for (const auto& [k, d] : users) {
      total += d;
      tau = std::max(tau, update_time(*jobs_[k].job, jobs_[k].inc));
    }
    if (total <= 0 || cap <= 0) return 0;
    double t0 = total / cap, t1 = t0 + tau;
    auto fits = [&](double t) {
      double need = 0;
      for (const auto& [k, d] : users) {
        const double slack = t - update_time(*jobs_[k].job, jobs_[k].inc);
        if (slack <= 0) return false;
        need += d / slack;
      }
      return cap >= need;
    };
    const double th = 1e-3 * net_.ts_s;
    while (t1 - t0 >= th) {
      const double mid = (t0 + t1) / 2;
      if (fits(mid)) t1 = mid; else t0 = mid;
    }
    return t1;
  }

  void allocate_tw() {
    if (o_.inc) match_inc();
    keep_started();
    // Ports and their users, with each job's data through them.
    std::vector<std::vector<std::pair<size_t, double>>> users(2 * n_);
    for (size_t k : order_) {
      const JobState& j = jobs_[k];
      if (!active(j)) continue;
      const double left = j.left();
      for (const auto& [v, m] : j.load) users[2 * v].push_back({k, m * left});
      for (const Flow& f : j.flows) {
        users[2 * f.from + 1].push_back({k, f.mult * left});
        users[2 * f.to + 1].push_back({k, f.mult * left});
      }
    }
    std::vector<std::pair<double, unsigned>> ports;
    for (unsigned p = 0; p < 2 * n_; ++p)
      if (!users[p].empty()) ports.push_back({window_end(p, users[p]), p});
    std::stable_sort(ports.begin(), ports.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [end, p] : ports) {
      std::vector<size_t> jp;
      for (const auto& [k, d] : users[p]) jp.push_back(k);
      while (!jp.empty()) {
        double worst = -1;
        size_t best = 0;
        std::vector<size_t> keep;
        for (size_t k : jp) {
          JobState& j = jobs_[k];
          const double d = step_of(j);
          // Feasible? Try it and take it back: raise() applies or leaves state unchanged.
          if (d <= kEps || !raise(j, d, false)) continue;
          keep.push_back(k);
          const double t = projected_ict(j, d);
          if (t > worst) { worst = t; best = k; }
        }
        jp.swap(keep);
        if (jp.empty()) break;
        raise(jobs_[best], step_of(jobs_[best]));
      }
    }
    settle();
  }

  // A TS in which jobs wait, none has started and none got bandwidth had an
  // empty network: the waiting jobs can never run.
  void stall_check() const {
    if (moved_) return;
    std::string names;
    for (const JobState& j : jobs_)
      if (active(j) && !j.started) names += (names.empty() ? "" : ", ") + j.job->name;
    if (names.empty()) return;
    throw AoiError(fmt::format(
        "{}: TS {}: with the whole ODCN free, no step of {} Gbps per worker fits these jobs: {} (a unit's pdp_gbps, "
        "its optical_ports x port_gbps{}, or the worker rate is too small for them)",
        inst_.origin, ts_, net_.delta_gbps, names, o_.no_recon ? ", the uniform AOI" : ""));
  }

  // Sends a TS of data; returns the jobs that finished.
  size_t end_ts() {
    const double dt = net_.ts_s, eps = net_.reconfig_s;
    // AOI changes of this TS, at its start.
    for (unsigned a = 0; a < n_; ++a)
      for (unsigned b = a + 1; b < n_; ++b)
        if (const int d = delta_[idx(a, b)]; d != 0) s_.changes.push_back({now(), a, b, d});
    size_t finished = 0;
    moved_ = false;
    for (JobState& j : jobs_) {
      moved_ = moved_ || j.rate > 0;
      if (j.rate <= 0) {
        if (!tw_ && j.inc && !j.started && !j.done) --inc_held_[*j.inc];  // FCFS held a slot for nothing
        continue;
      }
      if (!j.started) {
        j.started = true;
        j.plan.first_ts = ts_;
        j.plan.inc_unit = j.inc;
        if (j.inc && tw_) ++inc_held_[*j.inc];
      }
      j.plan.rate_gbps.push_back(j.rate);
      const double g = data_gbps(*j.job, j.inc, j.rate), g0 = data_gbps(*j.job, j.inc, j.prev);
      j.rem_push -= g * dt;
      for (size_t k = 0; k < j.flows.size(); ++k) {
        double sent = j.flows[k].mult * g * dt;
        if (delta_[idx(j.flows[k].from, j.flows[k].to)] > 0) sent -= eps * j.flows[k].mult * std::max(0.0, g - g0);
        j.rem_flow[k] -= sent;
      }
      // The validator's rule: a stream is done once (1 - kDataTol) of its data is sent.
      bool done = j.rem_push <= j.job->gb_per_worker * kDataTol;
      for (size_t k = 0; k < j.flows.size(); ++k)
        done = done && j.rem_flow[k] <= j.flows[k].mult * j.job->gb_per_worker * kDataTol;
      if (done) {
        j.done = true;
        j.rate = 0;
        if (j.inc) --inc_held_[*j.inc];
        if (j.job->queued) placer_.release(*j.job);
        ++finished;
      }
    }
    return finished;
  }

  const Instance& inst_;
  const Odcn& net_;
  PlanOptions o_;
  bool tw_;
  unsigned n_;
  unsigned ts_ = 0;
  bool moved_ = false;  // some job got bandwidth in this TS
  std::vector<Job> own_;  // the instance's jobs, a queued one placed here when admitted
  Placer placer_;         // the worker and PS slots of the queued jobs
  std::vector<JobState> jobs_;
  std::vector<size_t> order_;  // by arrival
  std::vector<int> P_, used_, delta_;
  std::vector<double> pair_load_, unit_load_;
  std::vector<unsigned> inc_held_;
  Schedule s_;
};

}  // namespace

Schedule plan_tw(const Instance& inst, const PlanOptions& o) { return Planner(inst, o, true).run(); }
Schedule plan_fcfs(const Instance& inst, const PlanOptions& o) { return Planner(inst, o, false).run(); }

}  // namespace ina::control::aoi
