// `ina plan rina`: Rina's BOM (control/rina_bom.hpp) and time model
// (control/rina_time.hpp): PS-based INA vs Rina throughput, the incremental
// deployment order, and optionally the packet simulator beside the model.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/checks.hpp"
#include "cli/plan_common.hpp"
#include "control/rina_bom.hpp"
#include "control/rina_time.hpp"
#include "core/counted.hpp"
#include "experiment/collective.hpp"
#include "schemes/registry.hpp"
#include "topo/graph.hpp"

namespace ina::cli::plancmd {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

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
  std::string atp_pool = "hashed";  // --vs-sim: PS-based INA's pool (exp::CollectiveSettings::atp_pool)
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
  st.ecn_kb = tp.ecn_kb;
  st.ina_gbps = tp.ina_gbps;
  st.rina_transport = tp.rina_transport == host::RinaTransport::Aimd ? "aimd" : "paper";
  st.atp_pool = a.atp_pool;
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
        if (t.c == schemes::Collective::RingIna) {
          j[base + "_time"]["sharing_converged"] = t.r->sharing_converged;
          j[base + "_time"]["sharing_rounds"] = t.r->sharing_rounds;
          j[base + "_time"]["sharing_spread"] = t.r->sharing_spread;
          j[base + "_time"]["sharing_mean_rounds"] = t.r->sharing_mean_rounds;
        }
      }
    } else {
      j["ps_ina_gbps"] = gbps(psr.gbps);
      j["rina_gbps"] = gbps(rr.gbps);
    }
    j["groups"] = rr.groups.size();
    j["ring_steps"] = rr.ring_steps;
    // Each group in ring order: its top switch (or the autonomous worker), agent and members (§IV-D above the ToR).
    j["group_list"] = ojson::array();
    for (const auto& grp : rr.groups)
      j["group_list"].push_back({{"sender", g.node(grp.sender).name}, {"agent", g.node(grp.agent).name},
                                 {"members", names(grp.members)}});
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
    fmt::print("PS-based INA (BOM, PS {}): {:g} Gbps per worker (bottleneck {}: {})\n", g.node(psr.ps).name,
               gbps(psr.gbps), g.arc_name(psr.bottleneck), counted(psr.flows, "sender"));
    fmt::print("Rina: {:g} Gbps per worker (bottleneck {}: {}); {}, {} per allreduce\n", gbps(rr.gbps),
               g.arc_name(rr.bottleneck), counted(rr.flows, "flow"), counted(rr.groups.size(), "group"),
               counted(rr.ring_steps, "ring step"));
    if (timed) {
      fmt::print("time model, {:g} MiB per worker (Gbps per worker):", tp.gradient_mb);
      for (const auto& t : times)
        if (t.r) fmt::print(" {} {:.3g} ({} steps)", std::string_view(t.key).substr(0, std::string_view(t.key).size() - 5),
                            t.r->gbps, t.r->steps);
      fmt::print("\n");
      for (const auto& t : times)
        if (t.r && !t.r->sharing_converged)
          fmt::print("warning: the Rina time model's link sharing did not converge in {} rounds; its number comes "
                     "from each worker's mean completion over its last {} (the last 8 rounds' times spread over {:.2g} %)\n",
                     t.r->sharing_rounds, t.r->sharing_mean_rounds, 100 * t.r->sharing_spread);
    }
    fmt::print("deployment order (Rina §IV-D): {}\n", join(names(order), ","));
  }
  for (const auto& r : rows)
    if (r.note.starts_with("simulator")) return 3;
  return 0;
}

}  // namespace

Runner register_plan_rina(CLI::App& plan) {
  auto rargs = std::make_shared<RinaArgs>();
  auto* r = plan.add_subcommand("rina", "Rina's BOM: PS-based INA vs Rina throughput and the incremental deployment order");
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
  r->add_option("--ecn-kb", rargs->tp.ecn_kb,
                "a switch port marks ECN above this backlog, KB (default 100, the scenarios' topology.ecn_kb; 0: "
                "never): the model's Rina and ring queues, and --vs-sim's simulator")
      ->check(Finite(0, 1e6, false, "KB"));
  r->add_option("--window-kb", rargs->tp.window_kb, "transport window (default 60, the ring's initial window)")
      ->check(Finite(0, 1e6, true, "KB"));
  r->add_option("--ina-gbps", rargs->tp.ina_gbps,
                "Rina: members' rate to an INA ToR (default 0: 20, the paper's full speed, with --rina-transport "
                "paper; not paced with aimd); PS-based INA: each host's rate over the aggregation trees (0: not paced)")
      ->check(Finite(0, 1e6, false, "Gbps"));
  // (A string, not the enum: CLI11 prints a uint8_t enum's values as raw bytes.)
  r->add_option_function<std::string>(
       "--rina-transport",
       [rargs](const std::string& v) {
         rargs->tp.rina_transport = CLI::detail::to_lower(v) == "aimd" ? host::RinaTransport::Aimd
                                                                        : host::RinaTransport::Paper;
       },
       "Rina's transport: paper (default; §IV-C: paced ScatterReduce, AllGather from one packet) or aimd "
       "(the plain ring AIMD, unpaced unless --ina-gbps)")
      ->check(CLI::IsMember({"paper", "aimd"}, CLI::ignore_case))
      ->type_name("paper|aimd");
  r->add_option("--straggler-sigma-us", rargs->tp.straggler_sigma_us, "Eq. 1: per-send delay ~ N(k/N, sigma^2), sigma")
      ->check(Finite(0, 1e6, false, "microseconds"));
  r->add_option("--straggler-k-us", rargs->tp.straggler_k_us, "Eq. 1: its k")->check(Finite(0, 1e9, false, "microseconds"));
  r->add_flag("--vs-sim", rargs->vs_sim,
              "also run each scheme in the packet simulator (same INA switches and settings) and print "
              "model vs simulator (a markdown table, or vs_sim in --json)");
  r->add_option("--schemes", rargs->schemes, "--vs-sim: schemes to compare (default ps,atp,rar,h-ar,rina)")
      ->delimiter(',');
  r->add_option("--seed", rargs->seed, "--vs-sim: simulator seed (default 1)");
  r->add_option("--atp-pool", rargs->atp_pool,
                "--vs-sim: ATP's aggregator pool, hashed (default: Hash(job, PSN), shards collide) or contiguous "
                "(a region per PS shard, the Rina paper's no-memory-bottleneck setting)")
      ->check(CLI::IsMember({"hashed", "contiguous"}));
  return [r, rargs] { return r->parsed() ? guarded([&] { return run_rina(*rargs, *r); }) : -1; };
}

}  // namespace ina::cli::plancmd
