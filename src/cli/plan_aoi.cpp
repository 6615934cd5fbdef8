// `ina plan aoi`: P4INC-AOI's schedulers on one scenario (TW, FCFS, the MILP;
// with or without INC; TW-NoRecon), every schedule checked by the
// independent validator; `ina plan aoi-sweep`: the paper's experiments (a
// scenario file with a [sweep] table), JSON/CSV/PNG. docs/p4inc-aoi.md.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/checks.hpp"
#include "cli/commands.hpp"
#include "control/aoi.hpp"
#include "control/aoi_milp.hpp"
#include "core/counted.hpp"
#include "experiment/aoi_unit.hpp"
#include "experiment/results.hpp"
#include "core/set_override.hpp"
#include "core/toml_reader.hpp"

namespace ina::cli {
namespace {

namespace aoi = control::aoi;

// A planner variant: the algorithm and its switches.
struct Variant {
  std::string algo = "tw";  // tw | fcfs | milp
  bool inc = true;
  bool no_recon = false;
  bool stop_at_need = false; // tw/fcfs: steps stop at the TS's need, not at the NIC (ours)
  bool strict = false;       // fcfs: strictly in arrival order (head-of-line; ours)
  double time_limit_s = 60;  // milp
  bool plain = false;        // milp: no own incumbents, no strengthening rows (to compare)

  // The paper's name: INC-TW, noINC-FCFS, INC-TW-NoRecon, MILP, ...
  std::string label() const {
    if (algo == "milp") return inc ? "MILP" : "noINC-MILP";
    std::string a = algo == "tw" ? "TW" : "FCFS";
    return std::string(inc ? "INC-" : "noINC-") + a + (no_recon ? "-NoRecon" : "") + (strict ? "-strict" : "") +
           (stop_at_need ? "-need" : "");
  }
};

// "inc-tw", "noinc-fcfs", "inc-tw-norecon", "inc-fcfs-strict", "milp", "noinc-milp".
Variant parse_variant(const std::string& s, const std::string& where) {
  Variant v;
  std::string rest = s;
  if (rest.rfind("noinc-", 0) == 0) { v.inc = false; rest = rest.substr(6); }
  else if (rest.rfind("inc-", 0) == 0) rest = rest.substr(4);
  if (rest.size() > 5 && rest.substr(rest.size() - 5) == "-need") {
    v.stop_at_need = true;
    rest = rest.substr(0, rest.size() - 5);
  }
  if (rest.size() > 7 && rest.substr(rest.size() - 7) == "-strict") {
    v.strict = true;
    rest = rest.substr(0, rest.size() - 7);
  }
  if (rest.size() > 8 && rest.substr(rest.size() - 8) == "-norecon") {
    v.no_recon = true;
    rest = rest.substr(0, rest.size() - 8);
  }
  if (rest != "tw" && rest != "fcfs" && rest != "milp")
    throw aoi::AoiError(fmt::format("{}: unknown variant '{}' (inc-tw, inc-fcfs, noinc-tw, noinc-fcfs, "
                                    "inc-tw-norecon, milp, noinc-milp; -strict after fcfs or fcfs-norecon; -need last)",
                                    where, s));
  if (v.strict && rest != "fcfs") throw aoi::AoiError(fmt::format("{}: '{}': -strict is for fcfs", where, s));
  if (rest == "milp" && v.stop_at_need) throw aoi::AoiError(fmt::format("{}: '{}': -need is for tw and fcfs", where, s));
  if (rest == "milp" && v.no_recon) throw aoi::AoiError(fmt::format("{}: '{}': the MILP has no NoRecon variant", where, s));
  v.algo = rest;
  return v;
}

struct Progress {
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  std::string what;
  bool printed = false;
};

void report_progress(unsigned ts, size_t done, size_t total, void* ctx) {
  auto* p = static_cast<Progress*>(ctx);
  const auto t = std::chrono::steady_clock::now();
  // Once a second, and the last line only if earlier ones were printed.
  if (t - p->last < std::chrono::seconds(1) && !(done == total && p->printed)) return;
  p->last = t;
  p->printed = true;
  std::cerr << fmt::format("{}: TS {}, {} of {} jobs done\n", p->what, ts, done, total);
}

aoi::Schedule run_variant(const aoi::Instance& inst, const Variant& v, Progress* progress) {
  aoi::PlanOptions o;
  o.inc = v.inc;
  o.no_recon = v.no_recon;
  o.stop_at_need = v.stop_at_need;
  o.fcfs_strict = v.strict;
  if (progress) {
    o.progress = report_progress;
    o.progress_ctx = progress;
  }
  if (v.algo == "tw") return aoi::plan_tw(inst, o);
  if (v.algo == "fcfs") return aoi::plan_fcfs(inst, o);
  // The MILP starts from the best of TW's schedule and its own list and
  // serial plans (MilpOptions::own_incumbents): the incumbent and horizon.
  const aoi::Schedule start = aoi::plan_tw(inst, o);
  aoi::MilpOptions m;
  m.inc = v.inc;
  m.time_limit_s = v.time_limit_s;
  m.incumbent = &start;
  if (v.plain) m.own_incumbents = m.run_length_rows = m.makespan_rows = m.incumbent_cutoff = false;
  return aoi::plan_milp(inst, m);
}

// Runs the validator; an invalid schedule is a bug of its planner: reported with the reasons.
aoi::Check checked(const aoi::Instance& inst, const aoi::Schedule& s, const std::string& label) {
  aoi::Check c = aoi::check_schedule(inst, s);
  if (!c.ok) {
    std::string lines;
    for (const std::string& e : c.errors) lines += "\n  " + e;
    throw aoi::AoiError(fmt::format("{} on {}: the validator rejects the schedule ({} violations):{}", label,
                                    inst.origin, c.errors.size(), lines));
  }
  return c;
}

nlohmann::json schedule_json(const aoi::Instance& inst, const aoi::Schedule& s, const aoi::Check& c,
                             const std::string& label) {
  nlohmann::json jobs = nlohmann::json::array();
  std::vector<const aoi::JobPlan*> plan(inst.jobs.size());
  for (const auto& p : s.jobs) plan[p.job] = &p;
  for (const aoi::CheckedJob& cj : c.jobs) {
    const aoi::Job& j = inst.jobs[cj.job];
    const aoi::JobPlan& p = *plan[cj.job];
    nlohmann::json w = nlohmann::json::array();
    for (const auto& [v, n] : j.queued ? p.workers : j.workers) w.push_back({v, n});
    jobs.push_back({{"id", j.id},
                    {"name", j.name},
                    {"kind", aoi::to_string(j.kind)},
                    {"arrival_s", j.arrival_s},
                    {"workers", w},
                    {"ps_unit", j.queued ? p.ps_unit : j.ps_unit},
                    {"admitted_ts", p.admitted},
                    {"iterations", j.iterations},
                    {"mb_per_worker", j.gb_per_worker / 0.008},
                    {"update_s", j.update_s},
                    {"inc_unit", p.inc_unit ? nlohmann::json(*p.inc_unit) : nlohmann::json(nullptr)},
                    {"segment", p.segment ? nlohmann::json{p.segment->mem_id, p.segment->size} : nlohmann::json(nullptr)},
                    {"first_ts", cj.first_ts},
                    {"last_ts", cj.last_ts},
                    {"rate_gbps", p.rate_gbps},
                    {"aoi_gb", cj.aoi_gb},
                    {"ict_s", cj.ict_s},
                    {"jct_s", cj.jct_s},
                    {"wait_s", cj.wait_s}});
  }
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& ch : s.changes) changes.push_back({{"at_s", ch.at_s}, {"u", ch.u}, {"v", ch.v}, {"count", ch.count}});
  nlohmann::json pre = nlohmann::json::array();
  for (const auto& k : s.preconfigured) pre.push_back({k.u, k.v, k.count});
  nlohmann::json out = {{"scenario", inst.origin},
                        {"variant", label},
                        {"units", inst.net.size()},
                        {"ts_s", inst.net.ts_s},
                        {"valid", c.ok},
                        {"ct_bti_s", c.ct_bti_s},
                        {"avg_jct_s", c.avg_jct_s},
                        {"total_jct_s", c.total_jct_s},
                        {"avg_wait_s", c.avg_wait_s},
                        {"reconfigurations", c.reconfigured},
                        {"reconfig_ts", c.reconfig_ts},
                        {"last_ts", c.last_ts},
                        {"aoi_tb", c.aoi_gb / 8000},
                        {"solve_s", s.solve_s},
                        {"aoi_preconfigured", pre},
                        {"aoi_changes", changes},
                        {"jobs", jobs}};
  if (s.algo == "milp") {
    out["bound_s"] = s.bound_s;
    out["gap"] = s.gap;
    out["optimal"] = s.optimal;
  }
  return out;
}

struct AoiArgs {
  std::string scenario, algo = "tw", out;
  bool no_inc = false, no_recon = false, stop_at_need = false, strict = false, milp_plain = false, json = false, quiet = false;
  double time_limit_s = 60;
  std::vector<std::string> sets;
  int simulate_unit = -1;      // run this unit's INC jobs in the packet simulator
  double simulate_mb = 1;      // per worker, in the simulator (the schedule's d~ scaled down)
  double simulate_loss = 0;
  uint64_t seed = 1;
};

// §VI on the schedule: the INC jobs of one unit that run together (the TS
// with the most INC jobs there, the first such), in their segments, through
// the p4inc-aoi switch program in the packet simulator.
nlohmann::json simulate_unit(const aoi::Instance& inst, const aoi::Schedule& s, const AoiArgs& a) {
  const auto unit = static_cast<unsigned>(a.simulate_unit);
  if (unit >= inst.net.size())
    throw aoi::AoiError(fmt::format("--simulate-unit {}: the ODCN has {} units", a.simulate_unit, inst.net.size()));
  unsigned best_ts = 0;
  size_t best = 0;
  for (unsigned ts = 1;; ++ts) {
    size_t n = 0;
    bool later = false;
    for (const auto& p : s.jobs) {
      if (!p.inc_unit || *p.inc_unit != unit) continue;
      n += p.first_ts <= ts && ts <= p.last_ts();
      later = later || p.last_ts() > ts;
    }
    if (n > best) { best = n; best_ts = ts; }
    if (!later) break;
  }
  if (best == 0)
    throw aoi::AoiError(fmt::format("--simulate-unit {}: the schedule gives no job INC in unit {}", unit, unit));
  std::vector<exp::AoiUnitJob> jobs;
  for (const auto& p : s.jobs) {
    if (!p.inc_unit || *p.inc_unit != unit || p.first_ts > best_ts || p.last_ts() < best_ts) continue;
    const aoi::Job& j = inst.jobs[p.job];
    if (j.num_workers() > 64)
      throw aoi::AoiError(fmt::format("--simulate-unit {}: {} has {} workers; the data plane's wire bitmap holds 64",
                                      unit, j.name, j.num_workers()));
    jobs.push_back({p.job, static_cast<int>(j.num_workers()), p.segment->mem_id, p.segment->size,
                    static_cast<uint64_t>(a.simulate_mb * 1e6)});
  }
  exp::AoiUnitOptions o;
  o.payload_bytes = 256;
  // The switch gets exactly the unit's aggregator array: memory = aggregators x payload.
  o.memory_mb = inst.net.units[unit].aggregators * 256.0 / (1 << 20);
  o.loss = a.simulate_loss;
  o.seed = a.seed;
  const exp::AoiUnitResult r = exp::run_aoi_unit(jobs, o);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& j : r.jobs)
    rows.push_back({{"job", j.job},
                    {"segment", {j.mem_id, j.size}},
                    {"completion_ms", j.completion_ms},
                    {"values_checked", j.values_checked},
                    {"mismatches", j.mismatches},
                    {"retransmits", j.retransmits},
                    {"timeouts", j.timeouts},
                    {"ecn_notices", j.ecn_notices}});
  return {{"unit", unit},         {"ts", best_ts},
          {"mb_per_worker", a.simulate_mb}, {"loss", a.simulate_loss},
          {"ok", r.ok},           {"problems", r.problems},
          {"async_errors", r.async_errors}, {"shadow_resends", r.shadow_resends},
          {"occupied_after", r.occupied_after}, {"outside_segment", r.outside_segment},
          {"packets_leaked", r.packets_leaked}, {"sim_ms", r.sim_ms},
          {"jobs", rows}};
}

// `--out DIR` (a directory, as every command's --out): made and probed
// before anything runs, so an unwritable place fails before a long solve.
void prepare_out_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw aoi::AoiError(fmt::format("--out '{}': not a directory (--out names a directory; the schedule is written "
                                    "to DIR/schedule.json)", dir));
  fs::create_directories(dir, ec);
  if (ec) throw aoi::AoiError(fmt::format("--out '{}': cannot create the directory: {}", dir, ec.message()));
  const fs::path probe = fs::path(dir) / ".ina-write-probe";
  const bool ok = static_cast<bool>(std::ofstream(probe) << "probe\n");
  fs::remove(probe, ec);
  if (!ok) throw aoi::AoiError(fmt::format("--out '{}': cannot write files in the directory", dir));
}

int run_aoi(const AoiArgs& a) {
  if (a.scenario.empty()) throw aoi::AoiError("give the scenario file: ina plan aoi FILE (or --scenario FILE)");
  if (!a.out.empty()) prepare_out_dir(a.out);
  const aoi::Instance inst = aoi::load_scenario(a.scenario, a.sets);
  Variant v;
  v.algo = a.algo;
  v.inc = !a.no_inc;
  v.no_recon = a.no_recon;
  v.stop_at_need = a.stop_at_need;
  v.strict = a.strict;
  v.time_limit_s = a.time_limit_s;
  v.plain = a.milp_plain;
  if (v.plain && v.algo != "milp") throw aoi::AoiError("--milp-plain: for --algo milp");
  if (v.no_recon && v.algo == "milp") throw aoi::AoiError("--no-recon: the MILP has no NoRecon variant (use --algo tw)");
  if (v.stop_at_need && v.algo == "milp") throw aoi::AoiError("--stop-at-need: for --algo tw or fcfs, not the MILP");
  if (v.strict && v.algo != "fcfs")
    throw aoi::AoiError(fmt::format("--strict-fcfs: for --algo fcfs, not --algo {}", v.algo));
  Progress progress{std::chrono::steady_clock::now(), v.label()};
  const aoi::Schedule s = run_variant(inst, v, a.quiet ? nullptr : &progress);
  const aoi::Check c = checked(inst, s, v.label());
  nlohmann::json j = schedule_json(inst, s, c, v.label());
  if (a.simulate_unit >= 0) {
    try {
      j["simulation"] = simulate_unit(inst, s, a);
    } catch (const std::invalid_argument& e) {
      throw aoi::AoiError(fmt::format("--simulate-unit {}: {}", a.simulate_unit, e.what()));
    }
  }
  if (!a.out.empty()) {
    const std::string f = a.out + "/schedule.json";
    std::ofstream(f) << j.dump(1) << "\n";
    if (!a.json) std::cout << "wrote " << f << "\n";
  }
  if (a.json) {
    std::cout << j.dump() << "\n";
    return 0;
  }
  unsigned inc_jobs = 0;
  for (const auto& p : s.jobs) inc_jobs += p.inc_unit.has_value();
  std::cout << fmt::format(
      "{}: {} on {}, {} ({} with INC)\nCT-BTI {:.3f} s (last TS {}), reconfigured connections {} "
      "(in {}), {:.3f} TB through the AOI, solve {:.3f} s; the validator accepts it\n",
      inst.origin, v.label(), counted(inst.net.size(), "unit"), counted(inst.jobs.size(), "job"), inc_jobs, c.ct_bti_s,
      c.last_ts, c.reconfigured,
      counted(c.reconfig_ts, "TS", "TSs"), c.aoi_gb / 8000, s.solve_s);
  if (s.algo == "milp")
    std::cout << fmt::format("MILP: bound {:.3f} s, gap {:.1f} %, {}\n", s.bound_s, 100 * s.gap,
                             s.optimal ? "optimal" : "time limit reached");
  std::cout << fmt::format("JCT: total {:.3f} s, average {:.3f} s, average wait {:.3f} s\n", c.total_jct_s,
                           c.avg_jct_s, c.avg_wait_s);
  std::cout << "| job | name | workers (unit:count) | PS unit | INC unit | TSs | ICT (s) | JCT (s) |\n"
               "|---|---|---|---|---|---|---|---|\n";
  std::vector<const aoi::JobPlan*> plan(inst.jobs.size());
  for (const auto& p : s.jobs) plan[p.job] = &p;
  for (const aoi::CheckedJob& cj : c.jobs) {
    const aoi::Job& jb = inst.jobs[cj.job];
    std::string w;
    const auto* p = plan[cj.job];
    for (const auto& [u, n] : jb.queued ? p->workers : jb.workers) w += fmt::format("{}{}:{}", w.empty() ? "" : " ", u, n);
    std::cout << fmt::format("| {} | {} | {} | {} | {} | {}-{} | {:.3f} | {:.3f} |\n", jb.id, jb.name, w,
                             jb.queued ? p->ps_unit : jb.ps_unit, p->inc_unit ? std::to_string(*p->inc_unit) : "-",
                             cj.first_ts, cj.last_ts, cj.ict_s, cj.jct_s);
  }
  if (j.contains("simulation")) {
    const auto& m = j["simulation"];
    std::cout << fmt::format(
        "\nunit {}'s INC jobs of TS {} in the packet simulator ({} MB a worker, loss {}): {}; {} asynchronous "
        "errors, {} shadow-copy resends, {} aggregators occupied after, {} touched outside a segment\n",
        m["unit"].get<unsigned>(), m["ts"].get<unsigned>(), a.simulate_mb, a.simulate_loss,
        m["ok"].get<bool>() ? "exact" : "FAILED: " + m["problems"].get<std::string>(),
        m["async_errors"].get<uint64_t>(), m["shadow_resends"].get<uint64_t>(), m["occupied_after"].get<size_t>(),
        m["outside_segment"].get<uint64_t>());
    std::cout << "| job | segment | completion (ms) | retransmits | timeouts | ECN notices |\n|---|---|---|---|---|---|\n";
    for (const auto& r : m["jobs"])
      std::cout << fmt::format("| {} | <{}, {}> | {:.3f} | {} | {} | {} |\n", r["job"].get<unsigned>(),
                               r["segment"][0].get<unsigned>(), r["segment"][1].get<unsigned>(),
                               r["completion_ms"].get<double>(), r["retransmits"].get<uint64_t>(),
                               r["timeouts"].get<uint64_t>(), r["ecn_notices"].get<uint64_t>());
    if (!m["ok"].get<bool>()) return 1;
  }
  return 0;
}

// ---- ina plan aoi-sweep ------------------------------------------------------------

struct SweepArgs {
  std::string file, out;
  std::vector<std::string> sets;
  bool quiet = false;
  unsigned threads = 1;
};

// How `--set` reads the keys aoi-sweep itself reads (the others go to aoi::load_scenario with each point).
ina::SetShape sweep_set_shape(std::string_view key) {
  for (std::string_view k : {"sweep.values", "sweep.variants", "sweep.seeds", "sweep.series_values", "dml.workers"})
    if (key == k) return ina::SetShape::Array;
  for (std::string_view k : {"name", "title", "sweep.key", "sweep.label", "sweep.series_key", "sweep.series_label"})
    if (key == k) return ina::SetShape::String;
  return ina::SetShape::Value;
}

// The MILP runs one at a time even with -j: CBC is not run from several threads here.
std::mutex milp_mutex;

int run_aoi_sweep(const SweepArgs& a) {
  const std::string& file = a.file;
  const std::string& out_dir = a.out;
  const bool quiet = a.quiet;
  toml::table root;
  try {
    root = parse_toml(read_settings_file(file, "sweep"), file);
    ina::apply_sets(root, a.sets, sweep_set_shape);
  } catch (const ConfigError& e) {
    throw aoi::AoiError(e.what());
  }
  const std::string note = ina::sets_note(a.sets);
  const toml::table* sw_table = root["sweep"].as_table();
  if (!sw_table)
    throw aoi::AoiError(fmt::format("{}: sweep: missing the [sweep] table (key, values, variants){}", file, note));
  // [sweep] is read strictly: an unknown key or a value of the wrong type is an error naming it.
  const TomlTable sw(*sw_table, file, "sweep");
  exp::Scenario sc;
  std::string key, series_key, series_label;
  std::vector<std::pair<std::string, double>> values;  // the x values: numbers (the plots' axis), applied as key=value
  std::vector<Variant> variants;
  double milp_x_max = 0;
  std::vector<std::string> series_values = {""};
  std::vector<int64_t> seeds;
  try {
    sw.only({"key", "label", "values", "variants", "seeds", "milp_time_limit_s", "milp_x_max", "series_key",
             "series_label", "series_values"});
    sc.file = file;
    sc.name = root["name"].value_or(std::filesystem::path(file).stem().string());
    sc.title = root["title"].value_or(sc.name);
    key = sw.string("key", "");
    sc.sweep_key = key;
    sc.x_label = sw.string("label", key);
    sw.read("values", [&](const toml::node& n) {
      for (const auto& e : read_array(n)) {
        if (!(e.is_integer() || e.is_floating_point()))
          throw TomlProblem{"must be numbers (the x axis)", toml_text(e)};
        values.push_back({toml_literal(e), read_number(e)});
      }
    });
    if (!key.empty() && values.empty()) sw.fail("values", fmt::format("required with key '{}'", key), "(missing)");
    if (key.empty()) values = {{"", 0.0}};
    if (!sw.contains("variants")) sw.fail("variants", "required (the planners to run)", "(missing)");
    sw.read("variants", [&](const toml::node& n) {
      for (const std::string& v : read_strings(n)) variants.push_back(parse_variant(v, file + ": sweep.variants"));
    });
    const double limit = sw.number("milp_time_limit_s", 60.0, Range{.lo = 0, .lo_open = true});
    // The MILP only up to this x (Table I: 40-60 jobs; the paper has no MILP beyond).
    milp_x_max = sw.number("milp_x_max", std::numeric_limits<double>::infinity(), Range{.lo = 0, .lo_open = true});
    for (Variant& v : variants) v.time_limit_s = limit;
    // Optional series: one panel per value of a second key (e.g. the arrival rate).
    series_key = sw.string("series_key", "");
    series_label = sw.string("series_label", series_key);
    if (!series_key.empty()) {
      series_values.clear();
      sw.read("series_values", [&](const toml::node& n) {
        for (const auto& e : read_array(n)) series_values.push_back(toml_literal(e));
      });
      if (series_values.empty())
        sw.fail("series_values", fmt::format("required with series_key '{}'", series_key), "(missing)");
      for (const std::string& v : series_values) sc.series.push_back({fmt::format("{} {}", v, series_label), {}});
    }
    sw.read("seeds", [&](const toml::node& n) {
      for (const uint64_t v : read_seeds(n)) seeds.push_back(static_cast<int64_t>(v));
    });
  } catch (const ConfigError& e) {
    throw aoi::AoiError(e.what() + note);
  }
  if (seeds.empty()) seeds = {root["seed"].value_or(int64_t{1})};
  // Each point sets these keys itself: a --set of one would be silently overwritten.
  for (const auto& kv : a.sets) {
    const std::string k = ina::set_key(kv);
    if ((!key.empty() && k == key) || (!series_key.empty() && k == series_key))
      throw aoi::AoiError(fmt::format("--set {}: {} is the sweep's {} key, set at every point; give its values with "
                                      "--set sweep.{}=V1,V2,...",
                                      kv, k, k == key ? "x" : "series", k == key ? "values" : "series_values"));
    if (k == "seed" && sw.contains("seeds"))
      throw aoi::AoiError(fmt::format("--set {}: the sweep's seeds are sweep.seeds; give them with --set sweep.seeds=S1,S2,...", kv));
  }

  // The points (series, x, seed), in output order; each runs every variant.
  struct Point {
    std::string sv, x;
    double x_value;
    int64_t seed;
    std::vector<exp::Record> records;
    nlohmann::json runs = nlohmann::json::array();
  };
  std::vector<Point> points;
  size_t total = 0;
  for (const std::string& sv : series_values)
    for (const auto& [x, x_value] : values)
      for (int64_t seed : seeds) {
        points.push_back({sv, x, x_value, seed, {}, nlohmann::json::array()});
        for (const Variant& v : variants) total += !(v.algo == "milp" && !key.empty() && x_value > milp_x_max);
      }
  std::mutex print_mutex;
  size_t done = 0;
  std::atomic<bool> training{false};  // training jobs: their JCTs are the metric (§VII-B)
  auto run_point = [&](Point& pt) {
    std::vector<std::string> sets = a.sets;
    sets.push_back(fmt::format("seed={}", pt.seed));
    if (!key.empty()) sets.push_back(key + "=" + pt.x);
    if (!series_key.empty()) sets.push_back(series_key + "=" + pt.sv);
    const aoi::Instance inst = aoi::load_scenario(file, sets);
    for (const Variant& v : variants) {
      if (v.algo == "milp" && !key.empty() && pt.x_value > milp_x_max) continue;
      Progress progress{std::chrono::steady_clock::now(), fmt::format("{} {}={} seed {}", v.label(), key, pt.x, pt.seed)};
      std::unique_lock<std::mutex> milp_lock(milp_mutex, std::defer_lock);
      if (v.algo == "milp") milp_lock.lock();
      const aoi::Schedule s = run_variant(inst, v, quiet ? nullptr : &progress);
      if (milp_lock.owns_lock()) milp_lock.unlock();
      const aoi::Check c = checked(inst, s, v.label());
      unsigned inc_jobs = 0;
      for (const auto& p : s.jobs) inc_jobs += p.inc_unit.has_value();
      exp::Record r;
      r.series = series_key.empty() ? "" : fmt::format("{} {}", pt.sv, series_label);
      r.scheme = v.label();
      r.x = pt.x_value;
      r.metrics = {{"ct_bti_s", c.ct_bti_s},     {"reconfigurations", c.reconfigured},
                   {"reconfig_ts", c.reconfig_ts}, {"solve_s", s.solve_s},
                   {"aoi_tb", c.aoi_gb / 8000},  {"inc_jobs", inc_jobs},
                   {"jobs", inst.jobs.size()},   {"avg_jct_s", c.avg_jct_s},
                   {"total_jct_s", c.total_jct_s}, {"avg_wait_s", c.avg_wait_s}};
      if (!inst.jobs.empty() && (inst.jobs[0].queued || inst.jobs[0].iterations > 1)) training = true;
      if (s.algo == "milp") {
        r.metrics["bound_s"] = s.bound_s;
        r.metrics["gap"] = s.gap;
        r.metrics["optimal"] = s.optimal;
      }
      {
        std::lock_guard<std::mutex> g(print_mutex);
        ++done;
        if (!quiet)
          std::cerr << fmt::format("[{}/{}] {}{} = {}, seed {}: {}: CT-BTI {:.3f} s, {} reconfigured connections, "
                                   "{:.3f} s\n",
                                   done, total, r.series.empty() ? "" : r.series + ", ", key, pt.x, pt.seed, v.label(),
                                   c.ct_bti_s, c.reconfigured, s.solve_s);
      }
      nlohmann::json run = {{"series", r.series}, {"x", r.x}, {"seed", pt.seed}, {"variant", r.scheme}, {"valid", c.ok}};
      for (const auto& [k, val] : r.metrics) run[k] = val;
      pt.runs.push_back(run);
      pt.records.push_back(std::move(r));
    }
  };
  // -j: independent points at once; the output is in point order whatever finishes first.
  {
    std::atomic<size_t> next{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto worker = [&] {
      for (size_t i = next++; i < points.size(); i = next++) {
        try {
          run_point(points[i]);
        } catch (...) {
          std::lock_guard<std::mutex> g(error_mutex);
          if (!error) error = std::current_exception();
          next = points.size();  // start no further point
        }
      }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < std::min<size_t>(a.threads, points.size()); ++t) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
    if (error) std::rethrow_exception(error);
  }
  std::vector<exp::Record> records;
  nlohmann::json runs = nlohmann::json::array();
  for (Point& pt : points) {
    records.insert(records.end(), pt.records.begin(), pt.records.end());
    for (auto& run : pt.runs) runs.push_back(std::move(run));
  }
  const auto avg = exp::average_over_seeds(records);
  std::filesystem::create_directories(out_dir);
  sc.metrics = {};
  // results.json and .csv hold what the schedules are, so a rerun leaves
  // them unchanged; the solvers' wall time is in runs.json and the table.
  auto timeless = avg;
  for (auto& r : timeless) r.metrics.erase("solve_s");
  exp::write_results(out_dir, sc, timeless);
  std::ofstream(out_dir + "/runs.json") << runs.dump(1) << "\n";
  std::vector<std::pair<const char*, const char*>> plots = {{"ct_bti_s", "CT-BTI (s)"},
                                                            {"reconfigurations", "reconfigured AOI connections"}};
  if (training) plots.push_back({"total_jct_s", "total JCT (s)"});
  std::string names;
  for (const auto& [m, label] : plots) {
    exp::Scenario p = sc;
    p.y_label = label;  // plot_metric's title adds the metric's label (plot_style.hpp) to sc.title
    exp::plot_metric(out_dir + "/" + m + ".png", p, avg, m);
    names += fmt::format(",{}.png", m);
  }
  std::vector<std::string> shown = {"ct_bti_s", "reconfigurations", "solve_s"};
  if (training) shown = {"total_jct_s", "avg_jct_s", "avg_wait_s", "reconfigurations", "ct_bti_s", "solve_s"};
  std::cout << exp::format_tables(avg, shown, sc.x_label) << "\n";
  std::cout << "wrote " << out_dir << "/{results.json,results.csv,runs.json" << names << "}\n";
  return 0;
}

int guarded_aoi(const std::function<int()>& body) {
  try {
    return body();
  } catch (const aoi::AoiError& e) {
    std::cerr << "error: " << e.what() << "\n";
  } catch (const exp::ScenarioError& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  return 2;
}

// The scenario file, given as the positional FILE or as --scenario FILE
// (one of them, once): two options, so that help marks neither REQUIRED.
void add_scenario_file(CLI::App* c, std::string& file, const std::string& what) {
  auto* pos = c->add_option("file", file, what + " (or --scenario FILE)");
  auto* opt = c->add_option("--scenario", file, "the scenario file, as FILE");
  c->parse_complete_callback([pos, opt] {
    if (pos->count() + opt->count() != 1)
      throw CLI::ValidationError("FILE", "give the scenario file once, as FILE or as --scenario FILE");
  });
}

}  // namespace

Runner register_plan_aoi(CLI::App& plan) {
  auto a = std::make_shared<AoiArgs>();
  auto* c = plan.add_subcommand("aoi", "P4INC-AOI: schedule DML/MapReduce jobs on an optical DCN with INC (TW, FCFS "
                                       "or the MILP), checked by the independent validator");
  add_scenario_file(c, a->scenario, "scenario file (TOML; docs/p4inc-aoi.md)");
  c->add_option("--algo", a->algo, "tw (Algorithms 1-3), fcfs or milp (CBC, small instances)")
      ->check(CLI::IsMember({"tw", "fcfs", "milp"}))
      ->capture_default_str();
  c->add_flag("--no-inc", a->no_inc, "the ODCN without INC (noINC-TW, noINC-FCFS)");
  c->add_flag("--no-recon", a->no_recon, "TW-NoRecon: a uniform pre-configured AOI that never changes");
  c->add_flag("--stop-at-need", a->stop_at_need,
              "tw/fcfs (ours): stop a job's steps at the rate that completes it within the TS, instead of Algorithm "
              "2's \"until no more bandwidth can be allocated\" (up to the worker's NIC)");
  c->add_flag("--strict-fcfs", a->strict,
              "fcfs (ours): strictly in arrival order: a job that cannot start in a TS holds back every later job "
              "in that TS (head-of-line), where plain FCFS goes on to later jobs that fit");
  c->add_option("--time-limit", a->time_limit_s, "MILP: CBC's time limit (s)")
      ->capture_default_str()->check(Finite(0, 1e6, true, "seconds"));
  c->add_flag("--milp-plain", a->milp_plain,
              "MILP: start from TW's schedule alone and leave out the strengthening rows (run length, makespan, "
              "cutoff), to compare");
  c->add_option("--set", a->sets,
                "override any key of the file before it is read (repeatable), e.g. --set dml.count=60; arrays as a "
                "comma list or TOML array (--set dml.workers=4,8)");
  c->add_option("--out", a->out, "also write the schedule and its check as JSON to DIR/schedule.json");
  c->add_flag("--json", a->json, "print one JSON object (ct_bti_s, reconfigurations, solve_s, jobs[], ...)");
  c->add_flag("--quiet", a->quiet, "no progress lines on stderr");
  c->add_option("--simulate-unit", a->simulate_unit,
                "run this unit's INC jobs (those of the TS with the most there) in their segments through the "
                "p4inc-aoi data plane in the packet simulator")
      ->check(CLI::Range(0, 1 << 20));
  c->add_option("--simulate-mb", a->simulate_mb, "--simulate-unit: MB each worker pushes (the schedule's sizes scaled down)")
      ->check(CLI::Range(0.001, 1000.0))
      ->capture_default_str();
  c->add_option("--simulate-loss", a->simulate_loss, "--simulate-unit: packet loss on every link")
      ->check(CLI::Range(0.0, 0.2))
      ->capture_default_str();
  c->add_option("--seed", a->seed, "--simulate-unit: simulator seed")->capture_default_str();
  auto sa = std::make_shared<SweepArgs>();
  auto* s = plan.add_subcommand("aoi-sweep", "P4INC-AOI's experiments: a scenario file with a [sweep] table "
                                             "(Table I, Figs. 8-12); JSON/CSV/PNG");
  add_scenario_file(s, sa->file, "scenario file with [sweep] key, values, variants, seeds");
  s->add_option("--out", sa->out, "output directory")->required();
  s->add_option("--set", sa->sets,
                "override any key of the file before it is read (repeatable): the sweep itself "
                "(--set sweep.values=20,40 --set sweep.seeds=1 --set sweep.variants=inc-tw) or the scenario's "
                "values at every point (--set dml.jobs_per_ts=50)");
  s->add_option("-j,--jobs", sa->threads,
                "points (series, x, seed) to plan at once (results do not depend on it; MILP variants still run one "
                "at a time)")
      ->check(CLI::Range(1u, 256u));
  s->add_flag("--quiet", sa->quiet, "no progress lines on stderr");
  return [c, s, a, sa] {
    if (c->parsed()) return guarded_aoi([&] { return run_aoi(*a); });
    if (s->parsed()) return guarded_aoi([&] { return run_aoi_sweep(*sa); });
    return -1;
  };
}

}  // namespace ina::cli
