// `ina plan`: control-plane planners. Subcommands are added per planner.
//
//   ina plan grid        GRID / ATP / SwitchML / Geryon plan for one job
//   ina plan grid-sweep  the GRID paper's large-scale experiments (a TOML file)
//   ina plan rina        Rina's BOM: PS-based INA vs Rina throughput, deployment order
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/checks.hpp"
#include "cli/commands.hpp"
#include "experiment/grid_sim.hpp"
#include "control/grid.hpp"
#include "control/rina_bom.hpp"
#include "control/rina_time.hpp"
#include "experiment/collective.hpp"
#include "experiment/results.hpp"
#include "experiment/set_override.hpp"
#include "schemes/registry.hpp"
#include "topo/graph.hpp"

namespace ina::cli {
namespace {

namespace fs = std::filesystem;
namespace grid = ina::control::grid;
using ojson = nlohmann::ordered_json;

// A user error in a plan command: reported as "error: ..." with exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `--workers N` given as one whole number: that count (at least `min`); -1
// when the flag names hosts instead.
int worker_count(const std::vector<std::string>& workers, int min) {
  if (workers.size() != 1) return -1;
  const std::string& w = workers[0];
  int n = 0;
  const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), n);
  if (ec != std::errc() || end != w.data() + w.size()) return -1;
  if (n < min)
    throw UsageError(fmt::format("--workers: need at least {} worker{}, got {}", min, min == 1 ? "" : "s", w));
  return n;
}

// ---- Topology and job ------------------------------------------------------

struct TopologyChoice {
  topo::Graph graph;
  bool generated = false;
  std::optional<topo::JobSpec> job;  // a file's default job
};

// A generator spec, deployed with programmable switches per `d` drawn from
// `seed`, or a JSON topology file (whose switches set "ina" and
// "capacity_gbps" themselves). `what` names the option or field in errors.
TopologyChoice load_topology(const std::string& spec, const topo::InaDeployment& d, uint64_t seed,
                             const std::string& what) {
  if (auto g = topo::generate(spec)) {
    topo::deploy_ina(*g, d, seed);
    return {std::move(*g), true, std::nullopt};
  }
  if (!fs::exists(spec))
    throw UsageError(fmt::format("{}: no such file '{}' (or use fat-tree:K, fat-tree-paper, leaf-spine-paper, dragonfly:A,G,H)", what, spec));
  auto file = topo::load_topology_file(spec);
  return {std::move(file.graph), false, std::move(file.job)};
}

// "GBPS" or "MIN:MAX" into d.min_gbps / d.max_gbps.
void parse_capacity(const std::string& text, topo::InaDeployment& d) {
  auto number = [&](std::string_view part) {
    double v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc() || end != part.data() + part.size() || !(v > 0) || !std::isfinite(v))
      throw UsageError(fmt::format("--capacity: expected GBPS or MIN:MAX with positive numbers, got '{}'", text));
    return v;
  };
  const auto colon = text.find(':');
  d.min_gbps = number(std::string_view(text).substr(0, colon));
  d.max_gbps = colon == std::string::npos ? d.min_gbps : number(std::string_view(text).substr(colon + 1));
  if (d.min_gbps > d.max_gbps) throw UsageError(fmt::format("--capacity: MIN > MAX in '{}'", text));
}

// ---- Output ------------------------------------------------------------------

std::string node_name(const grid::Instance& inst, topo::NodeId id) { return inst.graph().node(id).name; }

// (Not fmt::join: with strings it trips a GCC 12 false -Wstringop-overflow in fmt 9.)
std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : std::string(sep)) + parts[i];
  return out;
}

// Rates are reported to 1 bps (1e-9 Gbps): the LP solver's ~1e-11 noise
// would otherwise show as 2.999999999991 for 3.
double gbps(double v) { return std::round(v * 1e9) / 1e9; }

ojson plan_json(const grid::Instance& inst, const grid::Plan& p, uint64_t seed, const grid::Plan* feasible) {
  ojson j;
  j["scheme"] = p.scheme;
  j["topology"] = inst.graph().name;
  j["ps"] = node_name(inst, inst.ps());
  j["seed"] = seed;
  j["links_enforced"] = inst.model().enforce_links;
  if (inst.model().multicast_results) j["multicast_results"] = true;
  j["max_rate_gbps"] = gbps(inst.max_rate());
  j["lambda_gbps"] = gbps(p.lambda_gbps);
  if (p.lp_lambda_gbps) j["lp_lambda_gbps"] = gbps(*p.lp_lambda_gbps);
  if (p.lambda_bound_gbps) j["lambda_bound_gbps"] = gbps(*p.lambda_bound_gbps);
  j["avg_rate_gbps"] = gbps(p.avg_rate_gbps);
  j["switch_agg_gbps"] = gbps(p.switch_agg_gbps);
  j["ps_agg_gbps"] = gbps(p.ps_load_gbps);
  ojson workers = ojson::array();
  for (const auto& w : p.workers) {
    ojson shares = ojson::array();
    for (const auto& s : w.shares) shares.push_back({{"node", node_name(inst, s.node)}, {"rate_gbps", gbps(s.gbps)}});
    workers.push_back({{"worker", node_name(inst, w.worker)},
                       {"node", node_name(inst, w.node)},
                       {"rate_gbps", gbps(w.rate_gbps)},
                       {"shares", shares}});
  }
  j["workers"] = workers;
  ojson switches = ojson::array();
  for (const auto& s : p.switches)
    switches.push_back({{"switch", node_name(inst, s.sw)},
                        {"capacity_gbps", gbps(s.capacity_gbps)},
                        {"load_gbps", gbps(s.load_gbps)},
                        {"y_gbps", gbps(s.y_gbps)},
                        {"factor", s.factor}});
  j["switches"] = switches;
  j["ps_ingress"] = {{"load_gbps", gbps(p.ps_load_gbps)}, {"capacity_gbps", gbps(p.ps_capacity_gbps)}, {"factor", p.ps_factor}};
  j["max_factor"] = {{"switch", p.max_switch_factor}, {"ps", p.ps_factor}, {"link", p.max_link_factor}};
  ojson violations = ojson::array();
  for (const auto& v : p.violations)
    violations.push_back({{"kind", grid::kind_name(v.kind)},
                          {"name", v.name},
                          {"load_gbps", gbps(v.load_gbps)},
                          {"capacity_gbps", gbps(v.capacity_gbps)},
                          {"factor", v.factor}});
  j["violations"] = violations;
  if (feasible) {
    ojson rates = ojson::array();
    for (const auto& w : feasible->workers)
      rates.push_back({{"worker", node_name(inst, w.worker)}, {"rate_gbps", gbps(w.rate_gbps)}});
    j["feasible"] = {{"lambda_gbps", gbps(feasible->lambda_gbps)},
                     {"avg_rate_gbps", gbps(feasible->avg_rate_gbps)},
                     {"workers", rates}};
  }
  return j;
}

void print_plan(const grid::Instance& inst, const grid::Plan& p, const grid::Plan* feasible) {
  fmt::print("{} on {}: PS {} (ingress {:g} Gbps), {} workers, {} programmable switches, links {}\n", p.scheme,
             inst.graph().name, node_name(inst, inst.ps()), inst.ps_ingress(), inst.num_workers(),
             inst.num_switches(), inst.model().enforce_links ? "enforced" : "ignored (paper's assumption)");
  if (inst.model().multicast_results)
    fmt::print("result multicast planned: lambda on each of the {} arcs of the tree from the PS\n",
               inst.multicast_tree().size());
  fmt::print("lambda (minimum sending rate) {:.4f} Gbps", p.lambda_gbps);
  if (p.lp_lambda_gbps) fmt::print(" (LP relaxation {:.4f})", *p.lp_lambda_gbps);
  if (p.lambda_bound_gbps && gbps(*p.lambda_bound_gbps) <= gbps(p.lambda_gbps)) fmt::print(" (proven optimal)");
  else if (p.lambda_bound_gbps) fmt::print(" (node limit hit; CBC upper bound {:.4f})", *p.lambda_bound_gbps);
  fmt::print(", average {:.4f} Gbps\n\n", p.avg_rate_gbps);
  fmt::print("{:<12} {:<12} {:>10}  {}\n", "worker", "node", "rate_gbps", "shares");
  for (const auto& w : p.workers) {
    std::vector<std::string> shares;
    if (w.shares.size() > 1)
      for (const auto& s : w.shares) shares.push_back(fmt::format("{}={:.4f}", node_name(inst, s.node), s.gbps));
    fmt::print("{:<12} {:<12} {:>10.4f}  {}\n", node_name(inst, w.worker), node_name(inst, w.node), w.rate_gbps,
               join(shares, " "));
  }
  fmt::print("\n{:<12} {:>12} {:>10} {:>10} {:>8}\n", "switch", "capacity", "load", "y", "factor");
  for (const auto& s : p.switches)
    if (s.load_gbps > 0)
      fmt::print("{:<12} {:>12.4f} {:>10.4f} {:>10.4f} {:>8.3f}\n", node_name(inst, s.sw), s.capacity_gbps,
                 s.load_gbps, s.y_gbps, s.factor);
  const size_t idle = static_cast<size_t>(std::count_if(p.switches.begin(), p.switches.end(),
                                                        [](const auto& s) { return s.load_gbps <= 0; }));
  if (idle > 0) fmt::print("(idle programmable switches, not listed: {})\n", idle);
  fmt::print("PS ingress {:.4f} / {:g} Gbps (factor {:.3f}); aggregation rate of switches {:.4f} Gbps\n",
             p.ps_load_gbps, p.ps_capacity_gbps, p.ps_factor, p.switch_agg_gbps);
  fmt::print("max load/capacity: switch {:.3f}, PS {:.3f}, link {:.3f}\n", p.max_switch_factor, p.ps_factor,
             p.max_link_factor);
  if (p.violations.empty()) {
    fmt::print("violations: none\n");
  } else {
    fmt::print("violations ({}):\n", p.violations.size());
    for (const auto& v : p.violations)
      fmt::print("  {:<6} {:<20} load {:.4f} > capacity {:.4f} Gbps (x{:.3f})\n", grid::kind_name(v.kind), v.name,
                 v.load_gbps, v.capacity_gbps, v.factor);
  }
  if (feasible && !p.violations.empty())
    fmt::print("feasible rates for these aggregation nodes (max-min fair): lambda {:.4f} Gbps, average {:.4f} Gbps\n",
               feasible->lambda_gbps, feasible->avg_rate_gbps);
}

// ---- ina plan grid -----------------------------------------------------------

struct GridArgs {
  std::string topology;
  std::string ps;
  std::vector<std::string> workers;
  int random = 0;
  uint64_t seed = 1;
  std::string scheme = "grid";
  bool json = false;
  bool ignore_links = false;
  bool multicast_results = false;
  int max_nodes = 2000;
  std::string programmable;
  std::string capacity;
  double simulate_mb = 0;  // > 0: run the plan in the simulator with this gradient per worker
};

int run_grid(const GridArgs& a, const CLI::App& cmd) {
  auto given = [&](const char* opt) { return cmd.count(opt) > 0; };
  if (given("--workers") && given("--random")) throw UsageError("give either --workers or --random, not both");
  const auto& names = grid::scheme_names();
  if (std::find(names.begin(), names.end(), a.scheme) == names.end())
    throw UsageError(fmt::format("--scheme: unknown scheme '{}' (schemes: {})", a.scheme, join(names, ", ")));
  topo::InaDeployment deployment;
  if (given("--programmable")) topo::parse_ina_where(a.programmable, deployment);
  if (given("--capacity")) parse_capacity(a.capacity, deployment);
  TopologyChoice topo_choice = load_topology(a.topology, deployment, a.seed, "--topology");
  if (!topo_choice.generated && (given("--programmable") || given("--capacity")))
    throw UsageError(fmt::format("--programmable and --capacity apply to generated topologies; in '{}' the switches "
                                 "set \"ina\" and \"capacity_gbps\" themselves", a.topology));
  const topo::Graph& g = topo_choice.graph;

  // --workers N: a count (the first N hosts besides the PS, in rack order), as in `ina plan rina`.
  const int count = given("--workers") ? worker_count(a.workers, 1) : -1;
  const bool named = given("--workers") && count < 0;
  // The PS: --ps, else the file's job.ps, else the first host that is not a named worker, else the last host
  // (the workers then default to the hosts before it: every host is used).
  topo::JobSpec spec;
  if (given("--ps")) {
    spec.ps = a.ps;
  } else if (topo_choice.job) {
    spec.ps = topo_choice.job->ps;
  } else if (named) {
    for (const topo::NodeId h : g.hosts())
      if (std::find(a.workers.begin(), a.workers.end(), g.node(h).name) == a.workers.end()) {
        spec.ps = g.node(h).name;
        break;
      }
    if (spec.ps.empty()) throw UsageError("--workers names every host: give --ps (the PS is a host of its own)");
  } else {
    if (g.hosts().size() < 2) throw UsageError(fmt::format("{} has fewer than 2 hosts (a PS and a worker)", a.topology));
    spec.ps = g.node(g.hosts().back()).name;
  }
  const topo::NodeId ps = g.at(spec.ps, "--ps");
  if (given("--random")) {
    for (const auto w : topo::place_workers(g, ps, a.random, topo::Placement::Random, a.seed))
      spec.workers.push_back(g.node(w).name);
  } else if (count > 0) {
    for (const auto w : topo::place_workers(g, ps, count, topo::Placement::Packed, a.seed))
      spec.workers.push_back(g.node(w).name);
  } else if (named) {
    spec.workers = a.workers;
  } else if (topo_choice.job) {
    spec.workers = topo_choice.job->workers;
  } else {
    for (const topo::NodeId h : g.hosts())
      if (h != ps) spec.workers.push_back(g.node(h).name);
  }
  const topo::Job job = topo::resolve_job(g, spec, "job");

  grid::GridModel model;
  model.enforce_links = !a.ignore_links;
  model.multicast_results = a.multicast_results;
  const grid::Instance inst(g, job, model);
  const grid::Plan plan = grid::plan_scheme(inst, a.scheme, a.seed, a.max_nodes);
  std::optional<grid::Plan> feasible;
  if (plan.rounded) feasible = grid::feasible_rates(inst, plan);
  std::optional<exp::GridSimResult> sim;
  if (a.simulate_mb > 0) {
    exp::GridSimSettings st;
    st.seed = a.seed;
    st.gradient_mb = a.simulate_mb;
    sim = exp::simulate_plan(g, job, plan, st);
  }
  if (a.json) {
    auto j = plan_json(inst, plan, a.seed, feasible ? &*feasible : nullptr);
    if (sim)
      j["simulated"] = {{"gradient_mb", a.simulate_mb}, {"ok", sim->ok}, {"problems", sim->problems},
                        {"achieved_min_gbps", sim->achieved_min_gbps}, {"achieved_avg_gbps", sim->achieved_avg_gbps},
                        {"comm_time_ms", sim->comm_time_ms}, {"switch_agg_gbps", sim->switch_agg_gbps},
                        {"ps_ingress_gbps", sim->ps_ingress_gbps}, {"rate_syncs", sim->rate_syncs},
                        {"worker_gbps", sim->worker_gbps}};
    std::cout << j.dump(2) << "\n";
  } else {
    print_plan(inst, plan, feasible ? &*feasible : nullptr);
    if (sim)
      fmt::print("\nsimulated ({} MiB per worker, packet level): achieved min {:.3f} Gbps (planned {:.3f}), avg {:.3f}; "
                 "communication {:.3f} ms; switches aggregate {:.2f} Gbps, PS ingress {:.2f} Gbps; {} rate syncs; {}\n",
                 a.simulate_mb, sim->achieved_min_gbps, plan.lambda_gbps, sim->achieved_avg_gbps, sim->comm_time_ms,
                 sim->switch_agg_gbps, sim->ps_ingress_gbps, sim->rate_syncs,
                 sim->ok ? "every result exact" : "FAILED: " + sim->problems);
  }
  return sim && !sim->ok ? 3 : 0;
}

// ---- ina plan rina -----------------------------------------------------------

struct RinaArgs {
  std::string topology;
  std::string ps;
  std::vector<std::string> workers;
  std::vector<std::string> ina;
  int ina_count = 0;
  bool json = false;
  // The time model (control/rina_time.hpp) and the simulator comparison.
  ina::control::rina::TimeParams tp{.gradient_mb = 0};  // gradient_mb 0: the BOM's pure bandwidth only
  uint32_t packet_bytes = 256;
  bool vs_sim = false;
  std::vector<std::string> schemes = {"ps", "atp", "rar", "h-ar", "rina"};
  uint64_t seed = 1;
};

// The time model's prediction beside one simulator run per scheme
// (`--vs-sim`): the simulator gets the same INA switches (their capacity:
// the topology's, else its fastest link) and the same settings.
struct SimRow {
  std::string scheme;
  double bom = 0, sim = 0;
  std::string note;  // a scheme the model or the simulator does not run here
};

std::vector<SimRow> bom_vs_sim(const topo::Graph& g, const std::vector<topo::NodeId>& workers,
                               const std::vector<topo::NodeId>& ina, const RinaArgs& a,
                               const ina::control::rina::TimeParams& tp) {
  namespace rina = ina::control::rina;
  const std::vector<topo::NodeId> hosts = g.hosts();
  if (!std::equal(workers.begin(), workers.end(), hosts.begin()))
    throw UsageError("--vs-sim: the simulator places a job on the first hosts in rack order; give --workers N");
  topo::Graph sg = g;
  double fastest = 0;
  for (topo::ArcId arc = 0; arc < sg.num_arcs(); ++arc) fastest = std::max(fastest, sg.arc_gbps(arc));
  for (const topo::NodeId s : sg.switches()) {
    const bool on = std::find(ina.begin(), ina.end(), s) != ina.end();
    const double cap = g.is_ina(s) ? g.node(s).capacity_gbps : fastest;
    sg.set_ina(s, on, on ? cap : 0);
  }
  exp::CollectiveSettings st;
  st.seed = a.seed;
  st.workers_per_job = {static_cast<int>(workers.size())};
  st.gradient_mb = tp.gradient_mb;
  st.payload_values = static_cast<uint16_t>(tp.payload_values);
  st.header_bytes = tp.header_bytes;
  st.link_delay_us = tp.link_delay_us;
  st.init_window_kb = tp.window_kb;
  st.ina_gbps = tp.ina_gbps;
  st.straggler_sigma_us = tp.straggler_sigma_us;
  st.straggler_k_us = tp.straggler_k_us;
  std::vector<SimRow> rows;
  for (const auto& name : a.schemes) {
    const schemes::Scheme* sc = schemes::lookup(name);
    if (!sc || sc->collective == schemes::Collective::None)
      throw UsageError(fmt::format("--schemes: '{}' is not a scheme with a collective on multi-switch topologies", name));
    SimRow row;
    row.scheme = sc->name;
    try {
      row.bom = rina::allreduce_time(g, workers, ina, sc->collective, tp).gbps;
    } catch (const rina::BomError& e) {
      row.note = e.what();
      rows.push_back(row);
      continue;
    }
    const exp::CollectiveResult r = exp::run_collective(sg, sc->name, st);
    if (!r.ok) row.note = "simulator: " + r.problems;
    row.sim = r.throughput_gbps;
    rows.push_back(row);
  }
  return rows;
}

int run_rina(const RinaArgs& a, const CLI::App& cmd) {
  namespace rina = ina::control::rina;
  auto given = [&](const char* opt) { return cmd.count(opt) > 0; };
  if (given("--ina") && given("--ina-count")) throw UsageError("give either --ina or --ina-count, not both");
  std::optional<topo::Graph> generated;
  try {
    generated = topo::generate(a.topology);
  } catch (const topo::TopologyError& e) {
    throw UsageError(fmt::format("--topology '{}': {}", a.topology, e.what()));
  }
  std::optional<topo::JobSpec> file_job;
  if (!generated) {
    if (!fs::exists(a.topology))
      throw UsageError(fmt::format("--topology: no such file '{}' (or use fat-tree:K, fat-tree-paper, "
                                   "leaf-spine-paper, dragonfly:A,G,H)", a.topology));
    auto file = topo::load_topology_file(a.topology);
    generated = std::move(file.graph);
    file_job = std::move(file.job);
  }
  const topo::Graph& g = *generated;
  const std::vector<topo::NodeId> hosts = g.hosts();

  // Workers: names, a count N (the first N hosts in rack order), the file's job, or every host.
  std::vector<topo::NodeId> workers;
  const int count = given("--workers") ? worker_count(a.workers, 2) : -1;
  if (count > 0) {
    if (static_cast<size_t>(count) > hosts.size())
      throw UsageError(fmt::format("--workers: {} workers requested but {} has only {} hosts", count, g.name, hosts.size()));
    workers.assign(hosts.begin(), hosts.begin() + count);
  } else if (given("--workers")) {
    if (a.workers.size() > hosts.size())
      throw UsageError(fmt::format("--workers: {} workers given but {} has only {} hosts", a.workers.size(), g.name, hosts.size()));
    for (const auto& name : a.workers) {
      const topo::NodeId w = g.at(name, "--workers");
      if (!g.is_host(w)) throw UsageError(fmt::format("--workers: '{}' is a switch, not a host", name));
      if (std::find(workers.begin(), workers.end(), w) != workers.end())
        throw UsageError(fmt::format("--workers: '{}' is listed twice", name));
      workers.push_back(w);
    }
  } else if (file_job) {
    for (const auto& name : file_job->workers) workers.push_back(g.at(name, "job.workers"));
  } else {
    workers = hosts;
  }
  if (workers.size() < 2) throw UsageError(fmt::format("--workers: need at least 2 workers, got {}", workers.size()));

  std::optional<topo::NodeId> ps;
  if (given("--ps")) {
    ps = g.at(a.ps, "--ps");
    if (!g.is_host(*ps)) throw UsageError(fmt::format("--ps: '{}' is a switch, not a host", a.ps));
  } else if (file_job) {
    ps = g.at(file_job->ps, "job.ps");
  }

  const std::vector<topo::NodeId> order = rina::deployment_order(g, workers);
  std::vector<topo::NodeId> ina;
  if (given("--ina")) {
    for (const auto& name : a.ina) {
      const auto id = g.find(name);
      if (!id) throw UsageError(fmt::format("--ina: unknown switch '{}' in topology '{}'", name, a.topology));
      if (g.is_host(*id))
        throw UsageError(fmt::format("--ina: '{}' is a host, not a switch, in topology '{}'", name, a.topology));
      ina.push_back(*id);
    }
  } else if (given("--ina-count")) {
    if (a.ina_count < 0 || static_cast<size_t>(a.ina_count) > order.size())
      throw UsageError(fmt::format("--ina-count: expected 0..{} (the number of switches), got {}", order.size(), a.ina_count));
    ina.assign(order.begin(), order.begin() + a.ina_count);
  } else {
    ina = g.ina_switches();
  }

  const rina::PsInaResult psr = rina::ps_ina_throughput(g, workers, ina, ps);
  const rina::RinaResult rr = rina::rina_throughput(g, workers, ina);
  auto names = [&](const std::vector<topo::NodeId>& ids) {
    std::vector<std::string> out;
    for (const auto id : ids) out.push_back(g.node(id).name);
    return out;
  };
  const bool timed = a.tp.gradient_mb > 0;
  if (!timed && a.vs_sim) throw UsageError("--vs-sim needs --gradient-mb");
  if (a.packet_bytes == 0 || a.packet_bytes % 4 != 0 || a.packet_bytes / 4 > 65535)
    throw UsageError(fmt::format("--packet-bytes: expected a positive multiple of 4 up to 262140, got {}", a.packet_bytes));
  rina::TimeParams tp = a.tp;
  tp.payload_values = a.packet_bytes / 4;
  // The time model per collective (H-AR only where every rack has the same number of workers).
  struct Timed {
    const char* key;
    schemes::Collective c;
    std::optional<rina::TimeResult> r;
  };
  std::vector<Timed> times = {{"ps_gbps", schemes::Collective::Ps, {}},
                              {"ps_ina_gbps", schemes::Collective::PsIna, {}},
                              {"rar_gbps", schemes::Collective::Ring, {}},
                              {"h_ar_gbps", schemes::Collective::Hierarchical, {}},
                              {"rina_gbps", schemes::Collective::RingIna, {}}};
  if (timed)
    for (auto& t : times) {
      try {
        t.r = rina::allreduce_time(g, workers, ina, t.c, tp);
      } catch (const rina::BomError& e) {
        if (t.c != schemes::Collective::Hierarchical) throw;
      }
    }
  std::vector<SimRow> rows;
  if (a.vs_sim) rows = bom_vs_sim(g, workers, ina, a, tp);
  if (a.json) {
    ojson j;
    j["topology"] = g.name;
    j["workers"] = workers.size();
    j["switches"] = g.switches().size();
    j["ina"] = names(ina);
    j["ps"] = g.node(psr.ps).name;
    // Pure bandwidth (BOM) under *_bom_gbps; with --gradient-mb, *_gbps add the chain (time model).
    j["ps_ina_bom_gbps"] = gbps(psr.gbps);
    j["ps_ina_bottleneck"] = {{"link", g.arc_name(psr.bottleneck)}, {"flows", psr.flows}};
    j["rina_bom_gbps"] = gbps(rr.gbps);
    j["rina_bottleneck"] = {{"link", g.arc_name(rr.bottleneck)}, {"flows", rr.flows}};
    if (timed) {
      j["gradient_mb"] = tp.gradient_mb;
      for (const auto& t : times) {
        if (!t.r) {
          j[t.key] = nullptr;
          continue;
        }
        j[t.key] = gbps(t.r->gbps);
        const std::string base(t.key, std::string_view(t.key).size() - 5);
        j[base + "_time"] = {{"seconds", t.r->seconds}, {"transfer_s", t.r->transfer_s},
                             {"bandwidth_s", t.r->bandwidth_s}, {"straggler_s", t.r->straggler_s},
                             {"steps", t.r->steps}};
        if (t.c == schemes::Collective::RingIna)
          j[base + "_time"]["sharing_converged"] = t.r->sharing_converged;
      }
    } else {
      j["ps_ina_gbps"] = gbps(psr.gbps);
      j["rina_gbps"] = gbps(rr.gbps);
    }
    j["groups"] = rr.groups.size();
    j["ring_steps"] = rr.ring_steps;
    j["deployment_order"] = names(order);
    if (a.vs_sim) {
      j["vs_sim"] = ojson::array();
      for (const auto& r : rows) {
        ojson o = {{"scheme", r.scheme}, {"bom_gbps", gbps(r.bom)}, {"sim_gbps", gbps(r.sim)}};
        if (r.sim > 0) o["error"] = gbps((r.bom - r.sim) / r.sim);
        if (!r.note.empty()) o["note"] = r.note;
        j["vs_sim"].push_back(o);
      }
    }
    std::cout << j.dump(2) << "\n";
  } else if (a.vs_sim) {
    // One markdown row per scheme: topology, scheme, INA switches, BOM, simulator, error.
    const std::string ina_text = ina.empty() ? "none" : join(names(ina), ",");
    // Per worker: the model's Gbps (BOM with --gradient-mb's chain), the simulator's, (model - sim) / sim.
    fmt::print("| topology | scheme | INA switches | BOM Gbps | sim Gbps | BOM - sim |\n|---|---|---|---|---|---|\n");
    for (const auto& r : rows) {
      if (!r.note.empty()) {
        fmt::print("| {} | {} | {} | {} | {} | {} |\n", g.name, r.scheme, ina_text, r.bom > 0 ? fmt::format("{:.2f}", r.bom) : "-",
                   r.sim > 0 ? fmt::format("{:.2f}", r.sim) : "-", r.note);
        continue;
      }
      fmt::print("| {} | {} | {} | {:.2f} | {:.2f} | {:+.1f} % |\n", g.name, r.scheme, ina_text, r.bom, r.sim,
                 100 * (r.bom - r.sim) / r.sim);
    }
  } else {
    fmt::print("{}: {} workers, {} switches, {} INA: {}\n", g.name, workers.size(), g.switches().size(), ina.size(),
               ina.empty() ? "(none)" : join(names(ina), ","));
    fmt::print("PS-based INA (BOM, PS {}): {:g} Gbps per worker (bottleneck {}: {} senders)\n", g.node(psr.ps).name,
               gbps(psr.gbps), g.arc_name(psr.bottleneck), psr.flows);
    fmt::print("Rina: {:g} Gbps per worker (bottleneck {}: {} flows); {} groups, {} ring steps per allreduce\n",
               gbps(rr.gbps), g.arc_name(rr.bottleneck), rr.flows, rr.groups.size(), rr.ring_steps);
    if (timed) {
      fmt::print("time model, {:g} MiB per worker (Gbps per worker):", tp.gradient_mb);
      for (const auto& t : times)
        if (t.r) fmt::print(" {} {:.3g} ({} steps)", std::string_view(t.key).substr(0, std::string_view(t.key).size() - 5),
                            t.r->gbps, t.r->steps);
      fmt::print("\n");
      for (const auto& t : times)
        if (t.r && !t.r->sharing_converged)
          fmt::print("warning: the Rina time model's link sharing did not converge in {} rounds; its number is the "
                     "last round's\n", t.r->sharing_rounds);
    }
    fmt::print("deployment order (Rina §IV-D): {}\n", join(names(order), ","));
  }
  for (const auto& r : rows)
    if (r.note.starts_with("simulator")) return 3;
  return 0;
}

// ---- ina plan grid-sweep -----------------------------------------------------
//
// [scenario] name, title
// [topology] kind = "fat-tree-paper" | "leaf-spine-paper" | "fat-tree:K" | JSON file (relative to the TOML file)
//            programmable = "tor" | "all" | "random:F"     (generated topologies)
//            capacity_gbps = [MIN, MAX]                      C_s ~ U(MIN, MAX) per seed
//            links = true                                    enforce link capacities
//            multicast_results = false                       also plan the result multicast (--multicast-results)
// [job]      ps = "last" | "first" | host name               placement = "packed" | "random"
// [run]      schemes = [...], seeds = [...], exact_max_nodes = 2000 (grid-exact)
// [sweep]    workers = [...], label = "..."
// [output]   metrics = [...], y_label = "..."
// [[series]] name = "...", plus any "topology.*" / "job.*" key

struct SweepError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct SweepSettings {
  std::string kind = "fat-tree-paper";
  std::string programmable = "tor";
  double cap_min = 100, cap_max = 3200;
  bool links = true;
  bool multicast_results = false;
  std::string ps = "last";
  std::string placement = "packed";
};

struct Sweep {
  std::string file;
  std::string name, title;
  SweepSettings base;
  std::vector<std::pair<std::string, SweepSettings>> series;
  std::vector<std::string> schemes = {"grid", "atp", "switchml", "geryon"};
  std::vector<uint64_t> seeds = {1};
  int exact_max_nodes = 2000;  // grid-exact
  std::vector<int> workers;
  std::string x_label = "number of workers";
  std::vector<std::string> metrics = {"avg_rate_gbps", "switch_agg_gbps", "ps_agg_gbps"};
  std::string y_label = "Gbps";
};

// Every metric a sweep record carries.
const std::vector<std::string>& sweep_metrics() {
  static const std::vector<std::string> m = {
      "min_rate_gbps", "avg_rate_gbps", "switch_agg_gbps", "ps_agg_gbps", "max_switch_factor", "ps_factor",
      "max_link_factor", "feasible_min_rate_gbps", "feasible_avg_rate_gbps", "feasible_switch_agg_gbps",
      "feasible_ps_agg_gbps", "lp_lambda_gbps", "lambda_bound_gbps"};
  return m;
}

struct Bad {
  std::string what;
};

std::string show(const toml::node& n) {
  std::ostringstream os;
  n.visit([&os](const auto& v) { os << v; });
  return os.str();
}

std::string read_string(const toml::node& n) {
  if (auto v = n.value_exact<std::string>(); v && !v->empty()) return *v;
  throw Bad{"expected a non-empty string"};
}

template <class T>
std::vector<T> read_list(const toml::node& n, const char* what) {
  const auto* arr = n.as_array();
  if (!arr || arr->empty()) throw Bad{fmt::format("expected a non-empty array of {}", what)};
  std::vector<T> out;
  for (const auto& e : *arr) {
    if constexpr (std::is_same_v<T, std::string>) {
      out.push_back(read_string(e));
    } else {
      auto v = e.value_exact<int64_t>();
      if (!v || *v < 0 || *v > std::numeric_limits<int>::max()) throw Bad{fmt::format("expected {}", what)};
      out.push_back(static_cast<T>(*v));
    }
  }
  return out;
}

// Keys of SweepSettings ([topology] and [job], also allowed in [[series]]).
using SettingReader = void (*)(SweepSettings&, const toml::node&);
const std::vector<std::pair<std::string_view, SettingReader>>& setting_keys() {
  static const std::vector<std::pair<std::string_view, SettingReader>> keys = {
      {"topology.kind", [](SweepSettings& s, const toml::node& n) { s.kind = read_string(n); }},
      {"topology.programmable",
       [](SweepSettings& s, const toml::node& n) {
         s.programmable = read_string(n);
         topo::InaDeployment d;
         try {
           topo::parse_ina_where(s.programmable, d);
         } catch (const topo::TopologyError& e) {
           throw Bad{e.what()};
         }
       }},
      {"topology.capacity_gbps",
       [](SweepSettings& s, const toml::node& n) {
         const auto* arr = n.as_array();
         if (!arr || arr->size() != 2) throw Bad{"expected [MIN, MAX] in Gbps"};
         double v[2];
         for (int i = 0; i < 2; ++i) {
           auto x = (*arr)[static_cast<size_t>(i)].value<double>();
           if (!x || !(*x > 0) || !std::isfinite(*x)) throw Bad{"expected [MIN, MAX] with 0 < MIN <= MAX"};
           v[i] = *x;
         }
         if (v[0] > v[1]) throw Bad{"expected [MIN, MAX] with 0 < MIN <= MAX"};
         s.cap_min = v[0];
         s.cap_max = v[1];
       }},
      {"topology.links",
       [](SweepSettings& s, const toml::node& n) {
         auto v = n.value_exact<bool>();
         if (!v) throw Bad{"expected true or false"};
         s.links = *v;
       }},
      {"topology.multicast_results",
       [](SweepSettings& s, const toml::node& n) {
         auto v = n.value_exact<bool>();
         if (!v) throw Bad{"expected true or false"};
         s.multicast_results = *v;
       }},
      {"job.ps", [](SweepSettings& s, const toml::node& n) { s.ps = read_string(n); }},
      {"job.placement",
       [](SweepSettings& s, const toml::node& n) {
         s.placement = read_string(n);
         if (s.placement != "packed" && s.placement != "random") throw Bad{"expected \"packed\" or \"random\""};
       }},
  };
  return keys;
}

[[noreturn]] void sweep_fail(const std::string& origin, const std::string& key, const std::string& what,
                             const std::string& value) {
  throw SweepError(fmt::format("{}: field '{}': {} (value: {})", origin, key, what, value));
}

std::string known_keys(std::string_view section) {
  std::vector<std::string> out;
  for (const auto& [k, r] : setting_keys())
    if (section.empty() || k.starts_with(std::string(section) + ".")) out.emplace_back(k);
  return join(out, ", ");
}

void read_setting(SweepSettings& s, const std::string& origin, const std::string& key, const toml::node& n) {
  for (const auto& [k, reader] : setting_keys()) {
    if (k != key) continue;
    try {
      reader(s, n);
    } catch (const Bad& b) {
      sweep_fail(origin, key, b.what, show(n));
    }
    return;
  }
  const std::string section = key.substr(0, key.find('.'));
  sweep_fail(origin, key, fmt::format("unknown key (known: {})", known_keys(section == key ? "" : section)), show(n));
}

void flatten(const toml::table& t, const std::string& prefix, std::vector<std::pair<std::string, const toml::node*>>& out) {
  for (const auto& [k, v] : t) {
    const std::string key = prefix + std::string(k.str());
    if (const auto* sub = v.as_table()) flatten(*sub, key + ".", out);
    else out.emplace_back(key, &v);
  }
}

// How `--set` reads a key of a sweep file (exp::apply_sets): its arrays and its strings.
exp::SetShape sweep_set_shape(std::string_view key) {
  for (std::string_view k : {"run.schemes", "run.seeds", "sweep.workers", "output.metrics", "topology.capacity_gbps"})
    if (key == k) return exp::SetShape::Array;
  for (std::string_view k : {"scenario.name", "scenario.title", "topology.kind", "topology.programmable", "job.ps",
                             "job.placement", "sweep.label", "output.y_label"})
    if (key == k) return exp::SetShape::String;
  return exp::SetShape::Value;
}

Sweep read_sweep(const toml::table& root, const std::string& path);

// The sweep file with `--set key=value` overrides written into it before it is read.
Sweep load_sweep(const std::string& path, const std::vector<std::string>& sets) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    if (!fs::exists(path)) throw SweepError(fmt::format("{}: cannot open sweep file", path));
    throw SweepError(fmt::format("{}:{}:{}: TOML syntax error: {}", path, e.source().begin.line,
                                 e.source().begin.column, e.description()));
  }
  try {
    exp::apply_sets(root, sets, sweep_set_shape);
  } catch (const exp::ScenarioError& e) {
    throw SweepError(e.what());
  }
  try {
    return read_sweep(root, path);
  } catch (const SweepError& e) {
    if (sets.empty()) throw;
    throw SweepError(e.what() + exp::sets_note(sets));
  }
}

Sweep read_sweep(const toml::table& root, const std::string& path) {
  Sweep sw;
  sw.file = path;
  sw.name = fs::path(path).stem().string();
  std::vector<const toml::node*> series_nodes;
  for (const auto& [sec_key, node] : root) {
    const std::string sec(sec_key.str());
    if (sec == "series") {
      const auto* arr = node.as_array();
      if (!arr || !arr->is_array_of_tables()) sweep_fail(path, "series", "expected [[series]] tables", show(node));
      for (const auto& e : *arr) series_nodes.push_back(&e);
      continue;
    }
    const auto* tbl = node.as_table();
    if (!tbl) sweep_fail(path, sec, "expected a table", show(node));
    for (const auto& [k, v] : *tbl) {
      const std::string key = sec + "." + std::string(k.str());
      try {
        if (sec == "topology" || sec == "job") {
          read_setting(sw.base, path, key, v);
        } else if (key == "scenario.name") {
          sw.name = read_string(v);
        } else if (key == "scenario.title") {
          sw.title = read_string(v);
        } else if (key == "run.schemes") {
          sw.schemes = read_list<std::string>(v, "scheme names");
          for (const auto& s : sw.schemes)
            if (std::find(grid::scheme_names().begin(), grid::scheme_names().end(), s) == grid::scheme_names().end())
              throw Bad{fmt::format("unknown scheme '{}' (schemes: {})", s, join(grid::scheme_names(), ", "))};
        } else if (key == "run.exact_max_nodes") {
          auto t = v.value_exact<int64_t>();
          if (!t || *t < 1 || *t > 100'000'000) throw Bad{"expected an integer in [1, 100000000]"};
          sw.exact_max_nodes = static_cast<int>(*t);
        } else if (key == "run.seeds") {
          sw.seeds = read_list<uint64_t>(v, "non-negative integer seeds");
        } else if (key == "sweep.workers") {
          sw.workers = read_list<int>(v, "positive integer worker counts");
          for (const int w : sw.workers)
            if (w < 1) throw Bad{fmt::format("worker counts must be >= 1, got {}", w)};
        } else if (key == "sweep.label") {
          sw.x_label = read_string(v);
        } else if (key == "output.metrics") {
          sw.metrics = read_list<std::string>(v, "metric names");
          for (const auto& m : sw.metrics)
            if (std::find(sweep_metrics().begin(), sweep_metrics().end(), m) == sweep_metrics().end())
              throw Bad{fmt::format("unknown metric '{}' (metrics: {})", m, join(sweep_metrics(), ", "))};
        } else if (key == "output.y_label") {
          sw.y_label = read_string(v);
        } else {
          static const std::string known =
              "scenario.name, scenario.title, " + known_keys("") +
              ", run.schemes, run.seeds, run.exact_max_nodes, sweep.workers, sweep.label, output.metrics, output.y_label, [[series]]";
          throw Bad{fmt::format("unknown key (known: {})", known)};
        }
      } catch (const Bad& b) {
        sweep_fail(path, key, b.what, show(v));
      }
    }
  }
  if (sw.workers.empty()) sweep_fail(path, "sweep.workers", "required", "(missing)");
  if (sw.title.empty()) sw.title = sw.name;
  for (const toml::node* n : series_nodes) {
    const auto& tbl = *n->as_table();
    auto name = tbl["name"].value_exact<std::string>();
    if (!name || name->empty()) sweep_fail(path, "series.name", "every [[series]] needs a non-empty name", show(*n));
    for (const auto& [other, s] : sw.series)
      if (other == *name) sweep_fail(path, "series.name", "duplicate series name", *name);
    SweepSettings s = sw.base;
    std::vector<std::pair<std::string, const toml::node*>> entries;
    flatten(tbl, "", entries);
    for (const auto& [key, node] : entries)
      if (key != "name") read_setting(s, fmt::format("{} [series '{}']", path, *name), key, *node);
    sw.series.emplace_back(*name, s);
  }
  if (sw.series.empty()) sw.series.emplace_back("", sw.base);
  return sw;
}

// One (series, worker count, seed): the topology with its INA deployment,
// the job, and every scheme's plan as a result record.
std::vector<exp::Record> run_sweep_point(const Sweep& sw, const std::string& series, const SweepSettings& s,
                                         int workers, uint64_t seed) {
  const std::string origin = series.empty() ? sw.file : fmt::format("{} [series '{}']", sw.file, series);
  topo::InaDeployment d;
  topo::parse_ina_where(s.programmable, d);
  d.min_gbps = s.cap_min;
  d.max_gbps = s.cap_max;
  std::string kind = s.kind;
  if (!topo::generate(kind)) kind = (fs::path(sw.file).parent_path() / kind).string();
  TopologyChoice t = load_topology(kind, d, seed, origin + ": field 'topology.kind'");
  const topo::Graph& g = t.graph;
  const auto hosts = g.hosts();
  topo::NodeId ps = topo::kNoNode;
  if (s.ps == "first") ps = hosts.front();
  else if (s.ps == "last") ps = hosts.back();
  else ps = g.at(s.ps, origin + ": field 'job.ps'");
  topo::Job job;
  job.ps = ps;
  job.workers = topo::place_workers(
      g, ps, workers, s.placement == "random" ? topo::Placement::Random : topo::Placement::Packed, seed);
  grid::GridModel model;
  model.enforce_links = s.links;
  model.multicast_results = s.multicast_results;
  const grid::Instance inst(g, job, model);

  std::vector<exp::Record> out;
  for (const auto& scheme : sw.schemes) {
    const grid::Plan p = grid::plan_scheme(inst, scheme, seed, sw.exact_max_nodes);
    const grid::Plan f = p.rounded ? grid::feasible_rates(inst, p) : p;
    exp::Record r;
    r.series = series;
    r.scheme = scheme;
    r.x = workers;
    r.metrics = {{"min_rate_gbps", p.lambda_gbps},
                 {"avg_rate_gbps", p.avg_rate_gbps},
                 {"switch_agg_gbps", p.switch_agg_gbps},
                 {"ps_agg_gbps", p.ps_load_gbps},
                 {"max_switch_factor", p.max_switch_factor},
                 {"ps_factor", p.ps_factor},
                 {"max_link_factor", p.max_link_factor},
                 {"feasible_min_rate_gbps", f.lambda_gbps},
                 {"feasible_avg_rate_gbps", f.avg_rate_gbps},
                 {"feasible_switch_agg_gbps", f.switch_agg_gbps},
                 {"feasible_ps_agg_gbps", f.ps_load_gbps}};
    if (p.lp_lambda_gbps) r.metrics["lp_lambda_gbps"] = *p.lp_lambda_gbps;
    if (p.lambda_bound_gbps) r.metrics["lambda_bound_gbps"] = *p.lambda_bound_gbps;
    out.push_back(std::move(r));
  }
  return out;
}

int run_grid_sweep(const std::string& file, const std::string& out_dir, const std::vector<std::string>& sets) {
  const Sweep sw = load_sweep(file, sets);
  std::vector<exp::Record> per_seed;
  const size_t total = sw.series.size() * sw.workers.size() * sw.seeds.size();
  size_t done = 0;
  for (const auto& [series, s] : sw.series)
    for (const int w : sw.workers)
      for (const uint64_t seed : sw.seeds) {
        const auto start = std::chrono::steady_clock::now();
        auto recs = run_sweep_point(sw, series, s, w, seed);
        per_seed.insert(per_seed.end(), recs.begin(), recs.end());
        fmt::print(stderr, "[{}/{}] {}{}{} workers, seed {}: {:.2f} s\n", ++done, total, series, series.empty() ? "" : ", ",
                   w, seed, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
  const auto records = exp::average_over_seeds(per_seed);

  exp::Scenario sc;
  sc.file = sw.file;
  sc.name = sw.name;
  sc.title = sw.title;
  sc.schemes = sw.schemes;
  sc.seeds = sw.seeds;
  sc.sweep_key = "workers";
  for (const int w : sw.workers) sc.sweep_values.push_back(std::to_string(w));
  sc.x_label = sw.x_label;
  for (const auto& [series, s] : sw.series)
    if (!series.empty()) sc.series.push_back({series, {}});
  sc.metrics = sw.metrics;
  sc.y_label = sw.y_label;

  fmt::print("{}\n", sw.title);
  fmt::print("\n{}", exp::format_tables(records, sw.metrics, "workers"));
  if (!out_dir.empty())
    for (const auto& f : exp::write_results(out_dir, sc, records)) fmt::print("wrote {}\n", f);
  return 0;
}

// Runs a plan command: user errors exit 2 with "error: ...".
int guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::cerr << "error: " << e.what() << "\n";
  } catch (const topo::TopologyError& e) {
    std::cerr << "error: " << e.what() << "\n";
  } catch (const grid::PlanError& e) {
    std::cerr << "error: " << e.what() << "\n";
  } catch (const SweepError& e) {
    std::cerr << "error: " << e.what() << "\n";
  } catch (const ina::control::rina::BomError& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  return 2;
}

}  // namespace

Runner register_plan(CLI::App& app) {
  auto* plan = app.add_subcommand("plan", "Control-plane planners (routing, placement, schedules)");
  plan->require_subcommand(1);

  auto args = std::make_shared<GridArgs>();
  auto* g = plan->add_subcommand("grid", "GRID gradient routing (R-GRIA) or a baseline for one training job");
  g->add_option("--topology", args->topology,
                "topology: a JSON file (see scenarios/grid/fig1.json), fat-tree:K, fat-tree-paper or leaf-spine-paper")
      ->required();
  g->add_option("--ps", args->ps,
                "PS host (default: the topology file's job.ps, else the first host not named in --workers, else the "
                "last host)");
  g->add_option("--workers", args->workers,
                "worker hosts, comma-separated, or a count N (the first N hosts besides the PS); default: the file's "
                "job.workers, else every host but the PS")
      ->delimiter(',');
  g->add_option("--random", args->random, "N workers drawn at random from the hosts (seeded)");
  g->add_option("--seed", args->seed, "seed for rounding, --random and generated INA deployments (default 1)");
  g->add_option("--scheme", args->scheme,
                "grid (R-GRIA), atp, switchml, geryon, grid-exact (Eq. (1) solved by CBC; small instances), or "
                "grid-published (the authors' published planner: PS row with x, rounding by x, rates r/x)");
  g->add_option("--max-nodes", args->max_nodes,
                 "grid-exact: CBC branch-and-bound node limit (default 2000; deterministic, unlike a time limit)");
  g->add_flag("--json", args->json, "print one JSON object");
  g->add_option("--simulate", args->simulate_mb,
                "run the plan in the packet-level simulator with this many MiB of gradient per worker "
                "(GRID data plane; reports achieved vs planned rates)")
      ->check(Finite(0, 1024, false, "MiB"));
  g->add_flag("--ignore-links", args->ignore_links,
              "do not enforce link capacities (the paper's Eq. (1) exactly: links assumed sufficient)");
  g->add_flag("--multicast-results", args->multicast_results,
              "also plan the result multicast: the results at rate lambda on every arc of the tree from the PS to "
              "the workers (not in the paper's model; binds only where links are enforced)");
  g->add_option("--programmable", args->programmable,
                "generated topologies: programmable switches tor (default), all or random:F");
  g->add_option("--capacity", args->capacity,
                "generated topologies: switch capacity GBPS or MIN:MAX drawn uniformly (default 100:3200)");

  auto sweep_file = std::make_shared<std::string>();
  auto sweep_out = std::make_shared<std::string>();
  auto sweep_sets = std::make_shared<std::vector<std::string>>();
  auto* s = plan->add_subcommand("grid-sweep", "GRID's large-scale experiments (Figs. 11-16) from a TOML file");
  s->add_option("file", *sweep_file, "sweep TOML file (see scenarios/grid/)")->required();
  s->add_option("--out", *sweep_out, "write results.json, results.csv and PNG plots here");
  s->add_option("--set", *sweep_sets,
                "override any key of the file before it is read (repeatable), arrays as a comma list or TOML array: "
                "--set sweep.workers=8,16 --set run.seeds=1 --set run.schemes=grid,atp");
  s->footer("Points run one at a time (no -j): the GRID planners (grid, grid-published, grid-exact) solve their LPs "
            "and MILPs with COIN-OR CLP/CBC, which ina does not call from several threads at once. To use more "
            "cores, run parts of a sweep as parallel processes, e.g. one per --set sweep.workers=N --out DIR_N.");

  auto rargs = std::make_shared<RinaArgs>();
  auto* r = plan->add_subcommand("rina", "Rina's BOM: PS-based INA vs Rina throughput and the incremental deployment order");
  r->add_option("--topology", rargs->topology,
                "topology: a JSON file, fat-tree:K, fat-tree-paper, leaf-spine-paper or dragonfly:A,G,H")
      ->required();
  r->add_option("--workers", rargs->workers,
                "worker hosts, comma-separated, or a count N (the first N hosts); default: the file's job.workers, "
                "else every host")
      ->delimiter(',');
  r->add_option("--ps", rargs->ps,
                "PS host for PS-based INA (default: the file's job.ps, else the first non-worker host, else the first worker)");
  r->add_option("--ina", rargs->ina, "INA switches, comma-separated names (default: the topology's programmable switches)")
      ->delimiter(',');
  r->add_option("--ina-count", rargs->ina_count, "the first N switches of the deployment order are INA");
  r->add_flag("--json", rargs->json, "print one JSON object");
  r->add_option("--gradient-mb", rargs->tp.gradient_mb,
                "time model (dependency chain + bandwidth) for one allreduce of this many MiB per worker; "
                "rina_gbps and ps_ina_gbps then include the chain (the pure BOM stays in *_bom_gbps)")
      ->check(Finite(0, 1024, true, "MiB"));
  r->add_option("--packet-bytes", rargs->packet_bytes, "payload bytes per packet (default 256)")->capture_default_str();
  r->add_option("--header-bytes", rargs->tp.header_bytes, "header bytes per packet (default 50)")->capture_default_str();
  r->add_option("--link-delay-us", rargs->tp.link_delay_us, "propagation delay per link (default 1)")
      ->check(Finite(0, 1e6, false, "microseconds"));
  r->add_option("--window-kb", rargs->tp.window_kb, "transport window (default 60, the ring's initial window)")
      ->check(Finite(0, 1e6, true, "KB"));
  r->add_option("--ina-gbps", rargs->tp.ina_gbps, "Rina: members' rate to an INA ToR (default 0: line rate)")
      ->check(Finite(0, 1e6, false, "Gbps"));
  r->add_option("--straggler-sigma-us", rargs->tp.straggler_sigma_us, "Eq. 1: per-send delay ~ N(k/N, sigma^2), sigma")
      ->check(Finite(0, 1e6, false, "microseconds"));
  r->add_option("--straggler-k-us", rargs->tp.straggler_k_us, "Eq. 1: its k")->check(Finite(0, 1e9, false, "microseconds"));
  r->add_flag("--vs-sim", rargs->vs_sim,
              "also run each scheme in the packet simulator (same INA switches and settings) and print "
              "model vs simulator (a markdown table, or vs_sim in --json)");
  r->add_option("--schemes", rargs->schemes, "--vs-sim: schemes to compare (default ps,atp,rar,h-ar,rina)")
      ->delimiter(',');
  r->add_option("--seed", rargs->seed, "--vs-sim: simulator seed (default 1)");

  const Runner zebra = register_plan_zebra(*plan);
  const Runner aoi = register_plan_aoi(*plan);

  return [plan, g, s, r, args, rargs, sweep_file, sweep_out, sweep_sets, zebra, aoi] {
    if (const int z = zebra(); z >= 0) return z;
    if (const int z = aoi(); z >= 0) return z;
    if (g->parsed()) return guarded([&] { return run_grid(*args, *g); });
    if (r->parsed()) return guarded([&] { return run_rina(*rargs, *r); });
    if (s->parsed()) return guarded([&] { return run_grid_sweep(*sweep_file, *sweep_out, *sweep_sets); });
    return 0;
  };
}

}  // namespace ina::cli
