// The independent schedule validator of P4INC-AOI: every constraint of §IV-B
// checked on a schedule, and the metrics recomputed from it alone. It shares
// only the model's definitions (aoi.hpp: Eq. 4's flows, Eq. 5's load, Eq.
// 11's update time) with the planners, none of their state.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "control/aoi.hpp"

namespace ina::control::aoi {
namespace {

constexpr double kTol = 1e-6;  // relative slack for rounding in sums of rates and volumes

using Pair = std::pair<unsigned, unsigned>;
Pair pair_of(unsigned a, unsigned b) { return {std::min(a, b), std::max(a, b)}; }

}  // namespace

Check check_schedule(const Instance& inst, const Schedule& s) {
  Check c;
  const Odcn& net = inst.net;
  const unsigned n = net.size();
  const double dt = net.ts_s;
  auto err = [&](std::string line) {
    c.ok = false;
    if (c.errors.size() < 200) c.errors.push_back(std::move(line));
  };

  // ---- one plan per job, each well-formed -------------------------------------
  std::vector<const JobPlan*> plan(inst.jobs.size(), nullptr);
  for (const JobPlan& p : s.jobs) {
    if (p.job >= inst.jobs.size()) {
      err(fmt::format("a plan names job {}, the instance has {} jobs", p.job, inst.jobs.size()));
      continue;
    }
    if (plan[p.job]) err(fmt::format("job {} is planned twice", p.job));
    plan[p.job] = &p;
  }
  // The jobs as they ran: a queued job where its plan placed it.
  std::vector<Job> jobs = inst.jobs;
  unsigned last = 0;
  for (Job& j : jobs) {
    const JobPlan* p = plan[j.id];
    if (!p) { err(fmt::format("job {} ({}) has no plan", j.id, j.name)); continue; }
    if (j.queued) {
      unsigned w = 0, prev = 0;
      bool ok = true;
      for (size_t k = 0; k < p->workers.size(); ++k) {
        const auto [v, c] = p->workers[k];
        ok = ok && v < n && c > 0 && (k == 0 || v > prev);
        prev = v;
        w += c;
      }
      if (!ok || w != j.queued || p->ps_unit >= n) {
        err(fmt::format("job {}: the plan places {} workers (units ascending, each in the ODCN) and its PS in unit {}; "
                        "it asks for {} workers in an ODCN of {} units",
                        j.id, w, p->ps_unit, j.queued, n));
        continue;
      }
      j.workers = p->workers;
      j.ps_unit = p->ps_unit;
      if (p->admitted < j.first_ts(dt) || p->admitted > p->first_ts)
        err(fmt::format("job {}: admitted in TS {}; it arrives in TS {} and first transfers in TS {}", j.id,
                        p->admitted, j.first_ts(dt), p->first_ts));
    } else if (!p->workers.empty() || p->admitted) {
      err(fmt::format("job {}: the plan places a job the scenario placed", j.id));
    }
    if (p->rate_gbps.empty()) err(fmt::format("job {}: no TS with bandwidth (it never transfers)", j.id));
    if (p->first_ts < j.first_ts(dt))
      err(fmt::format("job {}: starts in TS {}, before it arrives (at {:.3f} s, TS {})", j.id, p->first_ts, j.arrival_s,
                      j.first_ts(dt)));
    for (size_t k = 0; k < p->rate_gbps.size(); ++k) {
      const double b = p->rate_gbps[k];
      if (!(b > 0)) err(fmt::format("job {}: no bandwidth in TS {} between its first and last (Eq. 11: one duration)", j.id, p->first_ts + k));
      if (const double cap = rate_cap(net, j, p->inc_unit); b > cap * (1 + kTol))
        err(fmt::format("job {}: {} Gbps per worker in TS {} exceeds {} {} Gbps", j.id, b, p->first_ts + k,
                        cap < net.worker_gbps ? "its share of its PS's NIC," : "the worker's", cap));
    }
    if (p->inc_unit) {
      const unsigned v = *p->inc_unit;
      if (!s.inc) err(fmt::format("job {}: uses INC in unit {} in a schedule without INC", j.id, v));
      if (v >= n) err(fmt::format("job {}: INC unit {} does not exist", j.id, v));
      else if (!inc_allowed(net, j, v))
        err(fmt::format("job {}: INC in unit {} is not allowed ({})", j.id, v,
                        j.workers_in(v) == 0 ? "no worker there, Eq. 2" : "its workers are not all there, §VI-A"));
      else if (!p->segment)
        err(fmt::format("job {}: INC in unit {} without an aggregator segment", j.id, v));
      else if (p->segment->size == 0 || p->segment->mem_id + uint64_t{p->segment->size} > net.units[v].aggregators)
        err(fmt::format("job {}: segment <{}, {}> is outside unit {}'s {} aggregators", j.id, p->segment->mem_id,
                        p->segment->size, v, net.units[v].aggregators));
    } else if (p->segment) {
      err(fmt::format("job {}: has an aggregator segment but no INC unit", j.id));
    }
    if (!p->rate_gbps.empty()) last = std::max(last, p->last_ts());
  }
  if (!c.ok) return c;
  c.last_ts = last;

  // ---- the AOI per TS ---------------------------------------------------------------
  // P[i][pair] for i = 0 (before TS 1) .. last.
  std::vector<std::map<Pair, int>> P(last + 1);
  auto check_ports = [&](const std::map<Pair, int>& m, const std::string& when) {
    std::vector<int> used(n, 0);
    for (const auto& [pr, k] : m) {
      if (k < 0) err(fmt::format("{}: units {} and {} have {} connections", when, pr.first, pr.second, k));
      used[pr.first] += k;
      used[pr.second] += k;
    }
    for (unsigned v = 0; v < n; ++v)
      if (used[v] > static_cast<int>(net.units[v].optical_ports))
        err(fmt::format("{}: unit {} uses {} optical ports, it has {} (Eq. 6)", when, v, used[v],
                        net.units[v].optical_ports));
  };
  // Connections that count as free are NoRecon's fixed AOI only; every other
  // schedule starts from an empty AOI, so its first connections count.
  if (!s.preconfigured.empty() && !s.no_recon)
    err(fmt::format("{} preconfigured connections in a schedule that may reconfigure the AOI (only a NoRecon "
                    "schedule starts from a fixed AOI; the others start empty, so their first connections count)",
                    s.preconfigured.size()));
  for (const Connection& k : s.preconfigured) {
    if (k.u >= n || k.v >= n || k.u == k.v) {
      err(fmt::format("preconfigured connection {}-{}: not a pair of distinct units", k.u, k.v));
      continue;
    }
    P[0][pair_of(k.u, k.v)] += static_cast<int>(k.count);
  }
  check_ports(P[0], "the preconfigured AOI");
  std::vector<std::map<Pair, int>> delta(last + 2);
  for (const AoiChange& ch : s.changes) {
    const double ts = ch.at_s / dt;
    const long i = std::lround(ts);
    if (std::abs(ts - static_cast<double>(i)) > 1e-9 * std::max(1.0, ts))
      err(fmt::format("AOI change {}-{} at {} s: inside TS {} (the AOI changes only at TS boundaries, every {} s)", ch.u,
                      ch.v, ch.at_s, static_cast<long>(std::floor(ts)) + 1, dt));
    else if (s.no_recon)
      err(fmt::format("AOI change {}-{} at {} s in a schedule that may not reconfigure the AOI", ch.u, ch.v, ch.at_s));
    else if (ch.u >= n || ch.v >= n || ch.u == ch.v)
      err(fmt::format("AOI change at {} s: {}-{} is not a pair of distinct units", ch.at_s, ch.u, ch.v));
    else if (i < 0 || i > static_cast<long>(last))
      err(fmt::format("AOI change {}-{} at {} s: after the last TS ({})", ch.u, ch.v, ch.at_s, last));
    else
      delta[i + 1][pair_of(ch.u, ch.v)] += ch.count;  // at (i)·Δt: holds from TS i+1
  }
  if (!c.ok) return c;
  // added[i][pair]: new connections in TS i (the ε loss of Eq. 10 applies there).
  std::vector<std::map<Pair, int>> added(last + 1);
  for (unsigned i = 1; i <= last; ++i) {
    P[i] = P[i - 1];
    bool any = false;
    for (const auto& [pr, d] : delta[i]) {
      if (d == 0) continue;
      P[i][pr] += d;
      if (d > 0) {
        added[i][pr] = d;
        c.reconfigured += static_cast<unsigned>(d);
        any = true;
      }
    }
    if (any) ++c.reconfig_ts;
    check_ports(P[i], fmt::format("TS {}", i));
  }

  // ---- per TS: slots of the queued jobs, INC capacity, unit bandwidth, port capacity ------
  std::vector<std::vector<unsigned>> held(last + 1, std::vector<unsigned>(n, 0)), held_ps = held;
  for (const Job& j : jobs) {
    if (!j.queued) continue;
    const JobPlan& p = *plan[j.id];
    for (unsigned i = p.admitted; i <= p.last_ts(); ++i) {
      for (const auto& [v, w] : j.workers) held[i][v] += w;
      ++held_ps[i][j.ps_unit];
    }
  }
  for (unsigned i = 1; i <= last; ++i)
    for (unsigned v = 0; v < n; ++v) {
      if (held[i][v] > net.units[v].worker_slots)
        err(fmt::format("TS {}: unit {} holds {} workers of queued jobs, it has {} worker slots", i, v, held[i][v],
                        net.units[v].worker_slots));
      if (held_ps[i][v] > net.units[v].ps_slots)
        err(fmt::format("TS {}: unit {} holds {} PS' of queued jobs, it has {} PS slots", i, v, held_ps[i][v],
                        net.units[v].ps_slots));
    }
  std::vector<std::vector<double>> load(last + 1, std::vector<double>(n, 0.0));
  std::vector<std::map<Pair, double>> pair_gbps(last + 1);
  std::vector<std::vector<unsigned>> inc(last + 1, std::vector<unsigned>(n, 0));
  struct Busy { unsigned from, to, mem, size, job; };
  std::vector<std::vector<Busy>> segs(n);
  for (const Job& j : jobs) {
    const JobPlan& p = *plan[j.id];
    const auto flows = inter_unit_flows(j, p.inc_unit);
    for (unsigned i = p.first_ts; i <= p.last_ts(); ++i) {
      const double b = p.rate_gbps[i - p.first_ts];
      for (unsigned v = 0; v < n; ++v) {
        const double m = unit_load_mult(j, p.inc_unit, v);
        if (m > 0) load[i][v] += m * b;
      }
      for (const Flow& f : flows) pair_gbps[i][pair_of(f.from, f.to)] += f.mult * b;
      if (p.inc_unit) ++inc[i][*p.inc_unit];
    }
    if (p.inc_unit) segs[*p.inc_unit].push_back({p.first_ts, p.last_ts(), p.segment->mem_id, p.segment->size, j.id});
  }
  for (unsigned i = 1; i <= last; ++i) {
    for (unsigned v = 0; v < n; ++v) {
      if (load[i][v] > net.units[v].pdp_gbps * (1 + kTol))
        err(fmt::format("TS {}: unit {} carries {:.3f} Gbps, its switch has {} (Eq. 5)", i, v, load[i][v],
                        net.units[v].pdp_gbps));
      if (inc[i][v] > net.units[v].inc_jobs)
        err(fmt::format("TS {}: unit {} aggregates {} INC jobs, its INC capacity is {} (Eq. 3)", i, v, inc[i][v],
                        net.units[v].inc_jobs));
    }
    for (const auto& [pr, g] : pair_gbps[i]) {
      const auto it = P[i].find(pr);
      const int ports = it == P[i].end() ? 0 : it->second;
      if (g > ports * net.port_gbps * (1 + kTol))
        err(fmt::format("TS {}: units {}-{} carry {:.3f} Gbps over {} connections of {} Gbps (Eq. 6)", i, pr.first,
                        pr.second, g, ports, net.port_gbps));
    }
  }
  for (unsigned v = 0; v < n; ++v)
    for (size_t a = 0; a < segs[v].size(); ++a)
      for (size_t b = a + 1; b < segs[v].size(); ++b) {
        const Busy& x = segs[v][a];
        const Busy& y = segs[v][b];
        const bool time = x.from <= y.to && y.from <= x.to;
        const bool mem = x.mem < y.mem + y.size && y.mem < x.mem + x.size;
        if (time && mem)
          err(fmt::format("unit {}: jobs {} and {} share aggregators (segments <{}, {}> and <{}, {}>) while both run",
                          v, x.job, y.job, x.mem, x.size, y.mem, y.size));
      }

  // ---- data: every flow completes, exactly in the last TS (Eqs. 8-10) ------------
  for (const Job& j : jobs) {
    const JobPlan& p = *plan[j.id];
    CheckedJob cj;
    cj.job = j.id;
    cj.first_ts = p.first_ts;
    cj.inc = p.inc_unit.has_value();
    // The workers' push (d~ each) and each inter-unit flow (mult · d~).
    struct Stream { double need, sent = 0; std::optional<Pair> pair; double mult; unsigned done = 0; };
    std::vector<Stream> st;
    st.push_back({j.gb_per_worker, 0, std::nullopt, 1.0});
    for (const Flow& f : inter_unit_flows(j, p.inc_unit)) st.push_back({f.mult * j.gb_per_worker, 0, pair_of(f.from, f.to), f.mult});
    for (unsigned i = p.first_ts; i <= p.last_ts(); ++i) {
      const double b = data_gbps(j, p.inc_unit, p.rate_gbps[i - p.first_ts]);
      const double prev = i > p.first_ts ? data_gbps(j, p.inc_unit, p.rate_gbps[i - 1 - p.first_ts]) : 0.0;
      for (Stream& x : st) {
        double sent = x.mult * b * dt;
        if (x.pair && added[i].count(*x.pair)) sent -= net.reconfig_s * x.mult * std::max(0.0, b - prev);
        if (x.pair) cj.aoi_gb += std::clamp(x.need - x.sent, 0.0, std::max(0.0, sent));  // data, not spare rate
        x.sent += sent;
        if (!x.done && x.sent >= x.need * (1 - kDataTol)) x.done = i;
      }
    }
    unsigned done = 0;
    for (const Stream& x : st) {
      if (!x.done) {
        err(fmt::format("job {}: {} sends {:.4f} of {:.4f} Gb by its last TS {}", j.id,
                        x.pair ? fmt::format("flow {}->{}", x.pair->first, x.pair->second) : std::string("a worker"),
                        x.sent, x.need, p.last_ts()));
        done = 0;
        break;
      }
      done = std::max(done, x.done);
    }
    if (done && done < p.last_ts())
      err(fmt::format("job {}: its data is sent in TS {} but it keeps bandwidth until TS {}", j.id, done, p.last_ts()));
    cj.last_ts = p.last_ts();
    cj.ict_s = cj.last_ts * dt + final_update(j, p.inc_unit);
    cj.jct_s = cj.ict_s - j.arrival_s;
    cj.wait_s = std::max(0.0, (cj.first_ts - 1) * dt - j.arrival_s);
    c.total_jct_s += cj.jct_s;
    c.avg_wait_s += cj.wait_s / static_cast<double>(jobs.size());
    c.ct_bti_s = std::max(c.ct_bti_s, cj.ict_s);
    c.aoi_gb += cj.aoi_gb;
    c.jobs.push_back(cj);
  }
  c.avg_jct_s = jobs.empty() ? 0 : c.total_jct_s / static_cast<double>(jobs.size());
  return c;
}

}  // namespace ina::control::aoi
