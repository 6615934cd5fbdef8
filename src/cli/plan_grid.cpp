// `ina plan grid`: GRID / ATP / SwitchML / Geryon plan for one training job
// (control/grid.hpp), printed or as JSON, optionally run in the simulator.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/checks.hpp"
#include "cli/plan_common.hpp"
#include "control/grid.hpp"
#include "experiment/grid_sim.hpp"
#include "topo/graph.hpp"

namespace ina::cli::plancmd {
namespace {

namespace grid = ina::control::grid;
using ojson = nlohmann::ordered_json;

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
  // A worker whose rate is split over several aggregation nodes lists the
  // split (node=Gbps); the column is left out when no worker's is.
  const bool split = std::any_of(p.workers.begin(), p.workers.end(), [](const auto& w) { return w.shares.size() > 1; });
  fmt::print("{:<12} {:<12} {:>10}{}\n", "worker", "node", "rate_gbps", split ? "  shares" : "");
  for (const auto& w : p.workers) {
    std::vector<std::string> shares;
    if (w.shares.size() > 1)
      for (const auto& s : w.shares) shares.push_back(fmt::format("{}={:.4f}", node_name(inst, s.node), s.gbps));
    fmt::print("{:<12} {:<12} {:>10.4f}{}\n", node_name(inst, w.worker), node_name(inst, w.node), w.rate_gbps,
               split ? "  " + join(shares, " ") : "");
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

}  // namespace

Runner register_plan_grid(CLI::App& plan) {
  auto args = std::make_shared<GridArgs>();
  auto* g = plan.add_subcommand("grid", "GRID gradient routing (R-GRIA) or a baseline for one training job");
  g->add_option("--topology", args->topology,
                "topology: a JSON file (see scenarios/grid/fig1.json), fat-tree:K, fat-tree-paper, leaf-spine-paper or dragonfly:A,G,H")
      ->required();
  g->add_option("--ps", args->ps,
                "PS host (default: the topology file's job.ps, else the first host not named in --workers, else the "
                "last host)");
  g->add_option("--workers", args->workers,
                "worker hosts, comma-separated, or a count N (the first N hosts besides the PS); default: the file's "
                "job.workers, else every host but the PS")
      ->delimiter(',');
  g->add_option("--random", args->random, "N workers drawn at random from the hosts (seeded)")
      ->check(CLI::Range(1, 1 << 20));
  g->add_option("--seed", args->seed, "seed for rounding, --random and generated INA deployments (default 1)");
  g->add_option("--scheme", args->scheme, grid::planner_help());
  g->add_option("--max-nodes", args->max_nodes,
                 "grid-exact: CBC branch-and-bound node limit (default 2000; deterministic, unlike a time limit)")
      ->check(CLI::Range(1, 1 << 30));
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
  return [g, args] { return g->parsed() ? guarded([&] { return run_grid(*args, *g); }) : -1; };
}

}  // namespace ina::cli::plancmd
