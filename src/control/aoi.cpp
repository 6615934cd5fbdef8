// P4INC-AOI's model: jobs, units, the generators of §VII-C and the scenario
// file (docs/p4inc-aoi.md). The validator is in aoi_check.cpp, the planners
// in aoi_tw.cpp and aoi_milp.cpp.
#include "control/aoi.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "core/rng.hpp"
#include "core/set_override.hpp"
#include "core/toml_reader.hpp"
#include "workload/coflow.hpp"

namespace ina::control::aoi {

const char* to_string(JobKind k) { return k == JobKind::Dml ? "dml" : "mapreduce"; }

unsigned Job::num_workers() const {
  if (workers.empty()) return queued;
  unsigned n = 0;
  for (const auto& [v, w] : workers) n += w;
  return n;
}

unsigned Job::workers_in(unsigned v) const {
  for (const auto& [u, w] : workers)
    if (u == v) return w;
  return 0;
}

std::optional<unsigned> Job::local_unit() const {
  if (workers.size() == 1) return workers[0].first;
  return std::nullopt;
}

unsigned Job::first_ts(double ts_s) const {
  return static_cast<unsigned>(std::floor(arrival_s / ts_s + 1e-12)) + 1;
}

std::vector<Flow> inter_unit_flows(const Job& j, std::optional<unsigned> inc_unit) {
  std::vector<Flow> out;
  const bool local = j.local_unit().has_value();
  for (const auto& [v, w] : j.workers) {
    if (v == j.ps_unit) continue;
    const double mult = (inc_unit && *inc_unit == v) ? (local ? 0.0 : 1.0) : static_cast<double>(w);
    if (mult > 0) out.push_back({v, j.ps_unit, mult});
  }
  return out;
}

double unit_load_mult(const Job& j, std::optional<unsigned> inc_unit, unsigned v) {
  // Eq. 5: W_v·B (the workers' uplink) + Σ_u B_{u,v} (inter-unit flows into
  // the PS's unit) + (1 - k_v)·W_v·PS_v·B (local workers to a local PS).
  const double w = j.workers_in(v);
  double load = w;
  if (v == j.ps_unit) {
    for (const Flow& f : inter_unit_flows(j, inc_unit)) load += f.mult;
    if (!(inc_unit && *inc_unit == v)) load += w;
  }
  return load;
}

bool inc_allowed(const Odcn& net, const Job& j, unsigned v) {
  if (j.workers_in(v) == 0) return false;                   // Eq. 2: k_v <= L_v
  if (net.inc_requires_local) return j.local_unit() == v;  // §VI-A
  return true;
}

double update_time(const Job& j, std::optional<unsigned> inc_unit) {
  // Eq. 11: a_j·[(1 - Σk) + Σk·(1 - ΣE)]: no update time only with INC in
  // the unit that holds every worker (the switch returns the aggregate).
  if (inc_unit && j.local_unit() == inc_unit) return 0;
  return j.update_s;
}

namespace {
bool one_iteration(const Job& j) { return j.iterations <= 1 && j.compute_s == 0; }
// Seconds of an iteration that carry no push: its compute, and for a
// training job its update.
double overhead_s(const Job& j, std::optional<unsigned> inc_unit) {
  return j.compute_s + (j.iterations > 1 ? update_time(j, inc_unit) : 0.0);
}
}  // namespace

double final_update(const Job& j, std::optional<unsigned> inc_unit) {
  return j.iterations > 1 ? 0.0 : update_time(j, inc_unit);
}

namespace {
// The most a worker of j can send: its PS's NIC shared by what reaches it.
double send_cap(const Odcn& net, const Job& j, std::optional<unsigned> inc_unit) {
  const double m = net.ps_gbps > 0 ? ps_in_mult(j, inc_unit) : 0.0;
  return m > 0 ? net.ps_gbps / m : std::numeric_limits<double>::infinity();
}
}  // namespace

double rate_cap(const Odcn& net, const Job& j, std::optional<unsigned> inc_unit) {
  return std::min(net.worker_gbps, send_cap(net, j, inc_unit));
}

double data_gbps(const Job& j, std::optional<unsigned> inc_unit, double b) {
  if (one_iteration(j) || b <= 0) return b;
  const double d = j.gb_per_worker / std::max(1u, j.iterations);
  return d / (overhead_s(j, inc_unit) + d / b);
}

double rate_for_data_gbps(const Job& j, std::optional<unsigned> inc_unit, double x) {
  if (one_iteration(j) || x <= 0) return x;
  const double d = j.gb_per_worker / std::max(1u, j.iterations);
  const double push_s = d / x - overhead_s(j, inc_unit);  // d/B = d/x - overhead
  return push_s > 0 ? d / push_s : std::numeric_limits<double>::infinity();
}

double ps_in_mult(const Job& j, std::optional<unsigned> inc_unit) {
  const bool local = j.local_unit().has_value();
  double m = 0;
  for (const auto& [v, w] : j.workers)
    m += (inc_unit && *inc_unit == v) ? (local ? 0.0 : 1.0) : static_cast<double>(w);
  return m;
}

// ---- validation -----------------------------------------------------------------

namespace {

[[noreturn]] void fail(const std::string& origin, const std::string& field, const std::string& what) {
  throw AoiError(fmt::format("{}: {}: {}", origin, field, what));
}

void positive(const std::string& origin, const std::string& field, double x) {
  if (!(x > 0) || !std::isfinite(x)) fail(origin, field, fmt::format("must be a positive number, got {}", x));
}

}  // namespace

void validate(const Instance& inst) {
  const std::string& o = inst.origin;
  const Odcn& net = inst.net;
  if (net.units.empty()) fail(o, "net.units", "an ODCN needs at least one unit, got 0");
  positive(o, "net.port_gbps", net.port_gbps);
  positive(o, "net.ts_s", net.ts_s);
  positive(o, "net.worker_gbps", net.worker_gbps);
  positive(o, "net.delta_gbps", net.delta_gbps);
  if (!(net.reconfig_s >= 0) || !(net.reconfig_s < net.ts_s))
    fail(o, "net.reconfig_ms",
         fmt::format("must be >= 0 and shorter than the TS ({} s), got {} ms", net.ts_s, net.reconfig_s * 1e3));
  uint64_t slots = 0, ps_slots = 0;
  for (size_t v = 0; v < net.units.size(); ++v) {
    const Unit& u = net.units[v];
    const std::string f = fmt::format("unit {}", v);
    positive(o, f + " pdp_gbps", u.pdp_gbps);
    if (u.optical_ports == 0 && net.units.size() > 1)
      fail(o, f + " optical_ports", "must be at least 1 (a unit with zero ports is cut off from the AOI), got 0");
    if (u.inc_jobs > 0 && u.aggregators < u.inc_jobs)
      fail(o, f + " aggregators",
           fmt::format("{} aggregators cannot be split into {} segments (inc_jobs)", u.aggregators, u.inc_jobs));
    slots += u.worker_slots;
    ps_slots += u.ps_slots;
  }
  if (slots == 0) fail(o, "net.worker_slots", "the cluster has no worker slot");
  if (!(net.ps_gbps >= 0) || !std::isfinite(net.ps_gbps))
    fail(o, "net.ps_gbps", fmt::format("must be >= 0 (0: no limit), got {}", net.ps_gbps));
  std::vector<uint64_t> used(net.units.size(), 0), used_ps(net.units.size(), 0);
  const bool queued = !inst.jobs.empty() && inst.jobs.front().queued > 0;
  for (const Job& j : inst.jobs) {
    const std::string f = fmt::format("job {} ({})", j.id, j.name);
    if (j.num_workers() > slots)
      fail(o, f + " workers",
           fmt::format("{} workers is larger than the cluster ({} worker slots in {} units)", j.num_workers(), slots,
                       net.units.size()));
    if (j.iterations == 0) fail(o, f + " iterations", "must be at least 1, got 0");
    if (!(j.compute_s >= 0) || !std::isfinite(j.compute_s))
      fail(o, f + " compute_ms", fmt::format("must be >= 0, got {}", j.compute_s * 1e3));
    if ((j.queued > 0) != queued)
      fail(o, f + " queued",
           "either every job waits in the scheduling queue or none does (a queued job takes free slots; the "
           "placed jobs' slots would be taken for the whole run)");
    if (queued) {
      if (!j.workers.empty()) fail(o, f + " workers", "a queued job is placed by the planner, not by the scenario");
      if (ps_slots == 0) fail(o, "net.ps_slots", "the cluster has no PS slot for the queued jobs");
      positive(o, f + " mb_per_worker", j.gb_per_worker);
      if (!(j.update_s >= 0) || !std::isfinite(j.update_s))
        fail(o, f + " update_s", fmt::format("must be >= 0, got {}", j.update_s));
      if (!(j.arrival_s >= 0) || !(j.arrival_s / net.ts_s < 1e9))
        fail(o, f + " arrival_s", fmt::format("must be >= 0 and under 10^9 TSs, got {}", j.arrival_s));
      continue;
    }
    if (j.workers.empty()) fail(o, f + " workers", "a job needs at least one worker, got 0");
    unsigned prev = 0;
    for (size_t k = 0; k < j.workers.size(); ++k) {
      const auto [v, w] = j.workers[k];
      if (v >= net.units.size())
        fail(o, f + " workers", fmt::format("unit {} does not exist (the ODCN has {} units)", v, net.units.size()));
      if (w == 0) fail(o, f + " workers", fmt::format("unit {} is listed with 0 workers", v));
      if (k > 0 && v <= prev) fail(o, f + " workers", fmt::format("unit {} is listed twice or out of order", v));
      prev = v;
      used[v] += w;
    }
    if (j.ps_unit >= net.units.size())
      fail(o, f + " ps_unit", fmt::format("unit {} does not exist (the ODCN has {} units)", j.ps_unit, net.units.size()));
    ++used_ps[j.ps_unit];
    positive(o, f + " mb_per_worker", j.gb_per_worker);
    if (!(j.update_s >= 0) || !std::isfinite(j.update_s))
      fail(o, f + " update_s", fmt::format("must be >= 0, got {}", j.update_s));
    if (!(j.arrival_s >= 0) || !(j.arrival_s / net.ts_s < 1e9))
      fail(o, f + " arrival_s", fmt::format("must be >= 0 and under 10^9 TSs, got {}", j.arrival_s));
  }
  for (size_t v = 0; v < net.units.size(); ++v) {
    if (used[v] > net.units[v].worker_slots)
      fail(o, fmt::format("unit {} worker_slots", v),
           fmt::format("its jobs place {} workers there, it has {} slots", used[v], net.units[v].worker_slots));
    if (used_ps[v] > net.units[v].ps_slots)
      fail(o, fmt::format("unit {} ps_slots", v),
           fmt::format("its jobs place {} PS' there, it has {} PS slots", used_ps[v], net.units[v].ps_slots));
  }
}

// ---- generators -------------------------------------------------------------------

Odcn make_odcn(unsigned units) {
  Odcn net;
  net.units.assign(units, Unit{});
  return net;
}

Placer::Placer(const Odcn& net, uint64_t seed) : net_(net), state_(mix(seed, 0xA01)) {
  for (const Unit& u : net.units) {
    free_workers_.push_back(u.worker_slots);
    free_ps_.push_back(u.ps_slots);
    total_workers_ += u.worker_slots;
  }
}

uint64_t Placer::next() { return state_ = splitmix64(state_); }

bool Placer::try_place(Job& job, unsigned workers) {
  uint64_t free = 0;
  for (unsigned f : free_workers_) free += f;
  const bool ps = std::any_of(free_ps_.begin(), free_ps_.end(), [](unsigned f) { return f > 0; });
  if (workers > free || !ps) return false;
  place(job, workers);
  return true;
}

void Placer::release(const Job& job) {
  for (const auto& [v, w] : job.workers) free_workers_[v] += w;
  ++free_ps_[job.ps_unit];
}

void Placer::place(Job& job, unsigned workers) {
  const unsigned n = static_cast<unsigned>(free_workers_.size());
  if (workers > total_workers_)
    throw AoiError(fmt::format("placement: {}: {} workers is larger than the cluster ({} worker slots in {} units)",
                               job.name, workers, total_workers_, n));
  job.workers.clear();
  std::vector<unsigned> fits;
  for (unsigned v = 0; v < n; ++v)
    if (free_workers_[v] >= workers) fits.push_back(v);
  if (!fits.empty()) {
    const unsigned v = fits[next() % fits.size()];
    free_workers_[v] -= workers;
    job.workers.push_back({v, workers});
  } else {
    // No unit holds it whole: as few units as possible, the emptiest first.
    std::vector<unsigned> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(),
                     [&](unsigned a, unsigned b) { return free_workers_[a] > free_workers_[b]; });
    unsigned left = workers;
    for (unsigned v : order) {
      if (left == 0) break;
      const unsigned take = std::min(left, free_workers_[v]);
      if (take == 0) continue;
      free_workers_[v] -= take;
      left -= take;
      job.workers.push_back({v, take});
    }
    if (left > 0)
      throw AoiError(fmt::format("placement: {} ({} workers) does not fit: the cluster's worker slots are full",
                                 job.name, workers));
    std::sort(job.workers.begin(), job.workers.end());
  }
  if (job.ps_with_workers) {
    // The unit holding most of its workers, the lowest on a tie, with a free PS slot.
    std::optional<std::pair<unsigned, unsigned>> best;  // (workers, unit)
    for (const auto& [v, w] : job.workers)
      if (free_ps_[v] > 0 && (!best || w > best->first)) best = std::pair{w, v};
    if (best) {
      job.ps_unit = best->second;
      --free_ps_[job.ps_unit];
      return;
    }
  }
  std::vector<unsigned> ps;
  for (unsigned v = 0; v < n; ++v)
    if (free_ps_[v] > 0) ps.push_back(v);
  if (ps.empty()) throw AoiError(fmt::format("placement: {}: every PS slot of the cluster is taken", job.name));
  job.ps_unit = ps[next() % ps.size()];
  --free_ps_[job.ps_unit];
}

std::vector<Job> generate_jobs(const Odcn& net, const WorkloadOptions& w, uint64_t seed) {
  struct Draft {
    Job job;
    unsigned workers = 0;
  };
  std::vector<Draft> drafts;
  auto arrivals = [&](Rng& rng, unsigned count, double per_ts, const char* what) {
    if (!(per_ts > 0)) throw AoiError(fmt::format("{}.jobs_per_ts: must be positive, got {}", what, per_ts));
    std::vector<double> t;
    double now = 0;
    const double rate = per_ts / net.ts_s;
    for (unsigned k = 0; k < count; ++k) {
      if (k > 0) now += -std::log(1.0 - rng.uniform()) / rate;
      t.push_back(now);
    }
    return t;
  };
  if (w.dml) {
    const DmlJobOptions& o = *w.dml;
    if (o.worker_choices.empty()) throw AoiError("dml.workers: the list of worker counts is empty");
    if (!(o.min_mb > 0) || !(o.max_mb >= o.min_mb))
      throw AoiError(fmt::format("dml.min_mb/max_mb: need 0 < min <= max, got {} and {}", o.min_mb, o.max_mb));
    Rng rng(mix(seed, 0xD11));
    const auto t = arrivals(rng, o.count, o.jobs_per_ts, "dml");
    for (unsigned k = 0; k < o.count; ++k) {
      Draft d;
      d.job.kind = JobKind::Dml;
      d.job.name = fmt::format("dml {}", k);
      d.job.arrival_s = t[k];
      d.workers = o.worker_choices[rng.below(o.worker_choices.size())];
      const double gb = (o.min_mb + (o.max_mb - o.min_mb) * rng.uniform()) * 0.008;  // one iteration's push
      d.job.gb_per_worker = gb * o.iterations;
      d.job.update_s = d.workers * gb / o.ps_update_gbps;
      d.job.iterations = o.iterations;
      d.job.compute_s = o.compute_ms / 1e3;
      d.job.queued = o.queued ? d.workers : 0;
      d.job.ps_with_workers = o.ps_with_workers;
      drafts.push_back(std::move(d));
    }
  }
  if (w.mapreduce) {
    const MapReduceJobOptions& o = *w.mapreduce;
    const workload::CoflowTrace trace = workload::load_coflow_trace(w.trace_path);
    if (trace.coflows.empty()) throw AoiError(fmt::format("{}: the trace has no coflow", w.trace_path));
    Rng rng(mix(seed, 0xC0F));
    const auto t = arrivals(rng, o.count, o.jobs_per_ts, "mapreduce");
    for (unsigned k = 0; k < o.count; ++k) {
      const workload::Coflow& c = trace.coflows[k % trace.coflows.size()];
      Draft d;
      d.job.kind = JobKind::MapReduce;
      d.job.name = fmt::format("coflow {}", c.id);
      d.job.arrival_s = t[k];
      d.workers = static_cast<unsigned>(c.mappers.size());
      // A coflow that shuffles nothing still has its mappers report: at least 1 MB.
      d.job.gb_per_worker = std::max(1.0, c.shuffle_mb() / d.workers) * 0.008;
      d.job.update_s = d.workers * d.job.gb_per_worker / o.ps_update_gbps;
      drafts.push_back(std::move(d));
    }
  }
  std::stable_sort(drafts.begin(), drafts.end(),
                   [](const Draft& a, const Draft& b) { return a.job.arrival_s < b.job.arrival_s; });
  Placer placer(net, seed);
  std::vector<Job> jobs;
  for (Draft& d : drafts) {
    d.job.id = static_cast<unsigned>(jobs.size());
    if (d.job.queued == 0) placer.place(d.job, d.workers);
    jobs.push_back(std::move(d.job));
  }
  return jobs;
}

// ---- schedules: segments and the uniform AOI ---------------------------------------

void assign_segments(const Instance& inst, Schedule& s) {
  // Per unit, the TS range each segment is busy until.
  std::vector<std::vector<unsigned>> busy_until(inst.net.size());
  for (size_t v = 0; v < inst.net.size(); ++v) busy_until[v].assign(inst.net.units[v].inc_jobs, 0);
  std::vector<JobPlan*> order;
  for (JobPlan& p : s.jobs)
    if (p.inc_unit) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const JobPlan* a, const JobPlan* b) {
    return a->first_ts < b->first_ts;
  });
  for (JobPlan* p : order) {
    const unsigned v = *p->inc_unit;
    if (v >= inst.net.size()) throw AoiError(fmt::format("job {}: INC unit {} does not exist", p->job, v));
    const Unit& u = inst.net.units[v];
    auto& segs = busy_until[v];
    auto it = std::find_if(segs.begin(), segs.end(), [&](unsigned until) { return until < p->first_ts; });
    if (it == segs.end())
      throw AoiError(fmt::format("job {}: no free aggregator segment in unit {} from TS {} ({} segments)", p->job, v,
                                 p->first_ts, u.inc_jobs));
    *it = p->last_ts();
    const unsigned size = u.aggregators / u.inc_jobs;
    p->segment = Segment{static_cast<unsigned>(it - segs.begin()) * size, size};
  }
}

std::vector<Connection> uniform_aoi(const Odcn& net) {
  const unsigned n = net.size();
  std::map<std::pair<unsigned, unsigned>, unsigned> count;
  std::vector<unsigned> left;
  for (const Unit& u : net.units) left.push_back(u.optical_ports);
  if (n < 2) return {};
  // Offsets d = 1 .. n/2 in turn; offset d links v with v+d (mod n) for every
  // v: two ports a unit, one if d = n/2 with n even. Stop when a round adds nothing.
  for (bool added = true; added;) {
    added = false;
    for (unsigned d = 1; d <= n / 2; ++d) {
      const unsigned need = (2 * d == n) ? 1 : 2;
      bool all = true;
      for (unsigned v = 0; v < n; ++v) all = all && left[v] >= need;
      if (!all) continue;
      for (unsigned v = 0; v < n; ++v) {
        const unsigned u = (v + d) % n;
        if (2 * d == n && u < v) continue;  // that pair is v's partner's
        ++count[{std::min(u, v), std::max(u, v)}];
        --left[v];
        --left[u];
      }
      added = true;
    }
  }
  std::vector<Connection> out;
  for (const auto& [k, c] : count) out.push_back({k.first, k.second, c});
  return out;
}

// ---- the scenario file ----------------------------------------------------------------

namespace {

// A count of the file (units, slots, jobs): a whole number from 0 to 10^6.
unsigned count_of(const TomlTable& t, std::string_view key, unsigned def) {
  return static_cast<unsigned>(t.integer(key, def, between(0, 1'000'000)));
}

Unit read_unit(const TomlTable& t, const Unit& def) {
  t.only({"pdp_gbps", "inc_jobs", "optical_ports", "worker_slots", "ps_slots", "aggregators", "units"});
  Unit u;
  u.pdp_gbps = t.number("pdp_gbps", def.pdp_gbps);
  u.inc_jobs = count_of(t, "inc_jobs", def.inc_jobs);
  u.optical_ports = count_of(t, "optical_ports", def.optical_ports);
  u.worker_slots = count_of(t, "worker_slots", def.worker_slots);
  u.ps_slots = count_of(t, "ps_slots", def.ps_slots);
  u.aggregators = count_of(t, "aggregators", def.aggregators);
  return u;
}

// jobs_per_ts, or jobs_per_s (the same arrivals whatever the TS length: Fig. 12).
double arrival_rate(const TomlTable& t, double ts_s, double def) {
  if (t.contains("jobs_per_s") && t.contains("jobs_per_ts")) t.fail("jobs_per_s", "give jobs_per_ts or jobs_per_s, not both");
  if (t.contains("jobs_per_s")) return t.number("jobs_per_s", 0) * ts_s;
  return t.number("jobs_per_ts", def);
}

// How `--set` reads a key of the scenario file (ina::apply_sets): its arrays
// take a comma list (--set dml.workers=4,8), its strings the text as is.
ina::SetShape set_shape(std::string_view key) {
  for (std::string_view k : {"dml.workers", "sweep.values", "sweep.variants", "sweep.seeds", "sweep.series_values"})
    if (key == k) return ina::SetShape::Array;
  for (std::string_view k : {"name", "title", "mapreduce.trace", "sweep.key", "sweep.label", "sweep.series_key",
                             "sweep.series_label"})
    if (key == k) return ina::SetShape::String;
  return ina::SetShape::Value;
}

}  // namespace

static Instance read_instance(const toml::table& root, const std::string& path);

Instance load_scenario(const std::string& path) { return load_scenario(path, {}); }

Instance load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  try {
    toml::table root = parse_toml(read_settings_file(path, "scenario"), path);
    // A job generator is there because the file has its table: a --set
    // into a generator the file does not have would add its jobs (with
    // default counts) to the workload unasked.
    for (const char* gen : {"dml", "mapreduce"})
      if (!root.contains(gen))
        for (const std::string& kv : overrides)
          if (const std::string key = ina::set_key(kv); key.rfind(std::string(gen) + ".", 0) == 0)
            throw ConfigError(fmt::format("{}: field '{}': --set would add a [{}] job generator that the file does not "
                                          "have (value: {}); add the table to the file to mix its jobs in",
                                          path, key, gen, kv.substr(kv.find('=') + 1)));
    ina::apply_sets(root, overrides, set_shape);
    try {
      return read_instance(root, path);
    } catch (const ConfigError& e) {
      if (overrides.empty()) throw;
      throw ConfigError(e.what() + ina::sets_note(overrides));
    } catch (const AoiError& e) {
      if (overrides.empty()) throw;
      throw AoiError(e.what() + ina::sets_note(overrides));
    }
  } catch (const ConfigError& e) {
    throw AoiError(e.what());
  }
}

static Instance read_instance(const toml::table& doc, const std::string& path) {
  const TomlTable root(doc, path);
  root.only({"name", "title", "seed", "net", "dml", "mapreduce", "job", "sweep"});
  Instance inst;
  inst.origin = path;
  const uint64_t seed = count_of(root, "seed", 1);
  inst.seed = seed;
  const std::optional<TomlTable> nt = root.table("net");
  if (!nt) fail_field(path, "net", "missing: the ODCN's [net] table", "(missing)");
  nt->only({"units", "pdp_gbps", "inc_jobs", "optical_ports", "worker_slots", "ps_slots", "aggregators", "port_gbps",
            "reconfig_ms", "ts_s", "worker_gbps", "delta_gbps", "inc_requires_local", "ps_gbps", "unit"});
  Odcn& net = inst.net;
  // The unit defaults: [net]'s unit keys (the others are the network's).
  toml::table unit_keys = nt->table();
  for (const char* k :
       {"port_gbps", "reconfig_ms", "ts_s", "worker_gbps", "delta_gbps", "inc_requires_local", "ps_gbps", "unit"})
    unit_keys.erase(k);
  const Unit def = read_unit(TomlTable(unit_keys, path, "net"), Unit{});
  net.port_gbps = nt->number("port_gbps", net.port_gbps);
  net.reconfig_s = nt->number("reconfig_ms", net.reconfig_s * 1e3) / 1e3;
  net.ts_s = nt->number("ts_s", net.ts_s);
  net.worker_gbps = nt->number("worker_gbps", net.worker_gbps);
  net.delta_gbps = nt->number("delta_gbps", net.delta_gbps);
  net.inc_requires_local = nt->boolean("inc_requires_local", net.inc_requires_local);
  net.ps_gbps = nt->number("ps_gbps", net.ps_gbps);
  if (const toml::node* un = nt->get("unit")) {
    const toml::array* arr = un->as_array();
    if (!arr) nt->fail("unit", "expected an array of tables ([[net.unit]])");
    for (size_t k = 0; k < arr->size(); ++k) {
      const toml::table* t = (*arr)[k].as_table();
      const std::string at = fmt::format("net.unit[{}]", k);
      if (!t) fail_value(path, at, TomlProblem{fmt::format("expected a table, got {}", toml_type((*arr)[k]))}, (*arr)[k]);
      net.units.push_back(read_unit(TomlTable(*t, path, at), def));
    }
    if (nt->contains("units") && count_of(*nt, "units", 0) != net.units.size())
      nt->fail("units", fmt::format("does not match the {} [[net.unit]] tables", net.units.size()));
  } else {
    net.units.assign(count_of(*nt, "units", 0), def);  // none: validate() says so
  }
  // Validate the net before generating jobs on it.
  validate(Instance{path, net, {}});
  WorkloadOptions w;
  if (const std::optional<TomlTable> d = root.table("dml")) {
    d->only({"count", "jobs_per_ts", "jobs_per_s", "workers", "min_mb", "max_mb", "ps_update_gbps", "iterations",
             "compute_ms", "queued", "ps_with_workers"});
    DmlJobOptions o;
    o.iterations = count_of(*d, "iterations", o.iterations);
    if (o.iterations == 0) d->fail("iterations", "must be at least 1", "0");
    o.compute_ms = d->number("compute_ms", o.compute_ms);
    if (!(o.compute_ms >= 0) || !std::isfinite(o.compute_ms))
      d->fail("compute_ms", "must be >= 0 (milliseconds of compute per iteration)", fmt::format("{}", o.compute_ms));
    o.queued = d->boolean("queued", o.queued);
    o.ps_with_workers = d->boolean("ps_with_workers", o.ps_with_workers);
    o.count = count_of(*d, "count", o.count);
    o.jobs_per_ts = arrival_rate(*d, net.ts_s, o.jobs_per_ts);
    o.min_mb = d->number("min_mb", o.min_mb);
    o.max_mb = d->number("max_mb", o.max_mb);
    o.ps_update_gbps = d->number("ps_update_gbps", o.ps_update_gbps);
    positive(path, "dml.jobs_per_ts", o.jobs_per_ts);
    positive(path, "dml.ps_update_gbps", o.ps_update_gbps);
    d->read("workers", [&](const toml::node& n) {
      o.worker_choices.clear();
      for (const int64_t v : read_integers(n, Range{.lo = 1})) o.worker_choices.push_back(static_cast<unsigned>(v));
    });
    w.dml = o;
  }
  if (const std::optional<TomlTable> m = root.table("mapreduce")) {
    m->only({"count", "jobs_per_ts", "jobs_per_s", "trace", "ps_update_gbps"});
    MapReduceJobOptions o;
    o.count = count_of(*m, "count", o.count);
    o.jobs_per_ts = arrival_rate(*m, net.ts_s, o.jobs_per_ts);
    o.ps_update_gbps = m->number("ps_update_gbps", o.ps_update_gbps);
    positive(path, "mapreduce.jobs_per_ts", o.jobs_per_ts);
    positive(path, "mapreduce.ps_update_gbps", o.ps_update_gbps);
    if (!m->contains("trace")) m->fail("trace", "missing: the path of the coflow trace");
    const std::string trace = m->string("trace", "");
    // Relative to the working directory, else to the scenario's directory.
    std::filesystem::path tp = trace;
    if (tp.is_relative() && !std::filesystem::exists(tp)) {
      const auto beside = std::filesystem::path(path).parent_path() / tp;
      if (std::filesystem::exists(beside)) tp = beside;
    }
    if (!std::filesystem::exists(tp))
      m->fail("trace", fmt::format("'{}' not found (from the working directory or the scenario's)", trace));
    w.trace_path = tp.string();
    w.mapreduce = o;
  }
  try {
    inst.jobs = generate_jobs(net, w, seed);
  } catch (const AoiError& e) {
    throw AoiError(fmt::format("{}: {}", path, e.what()));
  } catch (const workload::CoflowTraceError& e) {
    throw AoiError(fmt::format("{}: mapreduce.trace: {}", path, e.what()));
  }
  if (const toml::node* jn = root.get("job")) {
    const toml::array* arr = jn->as_array();
    if (!arr) root.fail("job", "expected an array of tables ([[job]])");
    for (size_t k = 0; k < arr->size(); ++k) {
      const std::string at = fmt::format("job[{}]", k);
      const toml::table* tt = (*arr)[k].as_table();
      if (!tt) fail_value(path, at, TomlProblem{fmt::format("expected a table, got {}", toml_type((*arr)[k]))}, (*arr)[k]);
      const TomlTable t(*tt, path, at);
      t.only({"name", "kind", "arrival_s", "workers", "ps_unit", "mb_per_worker", "update_s"});
      Job j;
      j.id = static_cast<unsigned>(inst.jobs.size());
      j.name = t.string("name", at);
      j.kind = t.string("kind", "dml", {"dml", "mapreduce"}) == "dml" ? JobKind::Dml : JobKind::MapReduce;
      j.arrival_s = t.number("arrival_s", 0);
      j.ps_unit = count_of(t, "ps_unit", 0);
      j.gb_per_worker = t.number("mb_per_worker", 0) * 0.008;
      j.update_s = t.number("update_s", 0);
      const toml::node* wn = t.get("workers");
      if (!wn) t.fail("workers", "missing: [[unit, count], ...]");
      const toml::array* wa = wn->as_array();
      if (!wa) t.fail("workers", fmt::format("expected [[unit, count], ...], got {}", toml_type(*wn)));
      for (const auto& e : *wa) {
        const toml::array* pair = e.as_array();
        auto v = pair && pair->size() == 2 ? (*pair)[0].value_exact<int64_t>() : std::nullopt;
        auto c = pair && pair->size() == 2 ? (*pair)[1].value_exact<int64_t>() : std::nullopt;
        if (!v || !c || *v < 0 || *c < 0 || *v > 1'000'000 || *c > 1'000'000)
          t.fail("workers", "entries are [unit, count] with whole numbers from 0 to 10^6", toml_text(e));
        j.workers.push_back({static_cast<unsigned>(*v), static_cast<unsigned>(*c)});
      }
      std::sort(j.workers.begin(), j.workers.end());
      inst.jobs.push_back(std::move(j));
    }
  }
  if (inst.jobs.empty()) fail_field(path, "job", "the scenario has no job ([dml], [mapreduce] or [[job]])", "(none)");
  validate(inst);
  return inst;
}

}  // namespace ina::control::aoi
