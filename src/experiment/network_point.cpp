#include "experiment/network_point.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "control/rina_bom.hpp"
#include "experiment/queue_trace.hpp"
#include "sim/network.hpp"
#include "wire/packet.hpp"
#include "workload/model.hpp"

namespace ina::exp {
namespace {

[[noreturn]] void fail(const std::string& origin, std::string_view key, std::string_view what, std::string_view value) {
  throw ScenarioError(fmt::format("{}: field '{}': {} (value: {})", origin, key, what, value));
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  for (size_t at = 0;;) {
    const size_t next = text.find(sep, at);
    std::string_view part = text.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    out.push_back(part);
    if (next == std::string_view::npos) return out;
    at = next + 1;
  }
}

template <class T>
bool parse_num(std::string_view text, T& v) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  return !text.empty() && ec == std::errc{} && p == end;
}

std::vector<topo::NodeId> first_of(const std::vector<topo::NodeId>& order, size_t n) {
  return {order.begin(), order.begin() + static_cast<std::ptrdiff_t>(std::min(n, order.size()))};
}

// D of the percent rule (network_point.hpp).
size_t helping_switches(const topo::Graph& g, const std::vector<topo::NodeId>& workers,
                        const std::vector<topo::NodeId>& order, const schemes::Scheme& scheme) {
  namespace rina = control::rina;
  if (scheme.collective == schemes::Collective::RingIna) {
    size_t tors = 0;
    std::vector<bool> is_worker(g.num_nodes(), false);
    for (const auto w : workers) is_worker[w] = true;
    for (const auto sw : g.switches()) {
      int n = 0;
      for (const auto& e : g.neighbors(sw)) n += is_worker[e.peer] ? 1 : 0;
      tors += n >= 2 ? 1 : 0;
    }
    return tors;
  }
  const double full = rina::ps_ina_throughput(g, workers, order).gbps;
  for (size_t n = 0; n < order.size(); ++n)
    if (rina::ps_ina_throughput(g, workers, first_of(order, n)).gbps >= full) return n;
  return order.size();
}

}  // namespace

bool is_network(const Settings& s) { return s.topology_kind != "star"; }

std::vector<std::pair<std::string, std::string>> collective_settings_set(const Settings& s) {
  const Settings d;
  std::vector<std::pair<std::string, std::string>> set;
  if (s.rina_ag_relay != d.rina_ag_relay) set.emplace_back("workload.rina_ag_relay", s.rina_ag_relay);
  if (s.rina_allgather_start != d.rina_allgather_start)
    set.emplace_back("workload.rina_allgather_start", s.rina_allgather_start);
  if (s.rina_transport != d.rina_transport) set.emplace_back("workload.rina_transport", s.rina_transport);
  if (s.ring_min_rto_us != d.ring_min_rto_us)
    set.emplace_back("transport.ring_min_rto_us", fmt::format("{}", s.ring_min_rto_us));
  if (!s.step_records.empty()) set.emplace_back("run.step_records", s.step_records);
  if (!s.queue_trace.empty()) set.emplace_back("run.queue_trace", s.queue_trace);
  if (!s.queue_trace_links.empty()) set.emplace_back("run.queue_trace_links", s.queue_trace_links);
  if (s.queue_trace_from_ms != 0) set.emplace_back("run.queue_trace_from_ms", fmt::format("{}", s.queue_trace_from_ms));
  if (s.queue_trace_to_ms != 0) set.emplace_back("run.queue_trace_to_ms", fmt::format("{}", s.queue_trace_to_ms));
  return set;
}

topo::Graph build_topology(const Settings& s, const std::string& origin) {
  const std::string& kind = s.topology_kind;
  try {
    if (kind == "fat-tree") return topo::fat_tree(s.k, s.hosts_per_edge, s.link_gbps);
    if (kind == "leaf-spine") return topo::leaf_spine(s.spines, s.leaves, s.hosts, s.link_gbps);
    if (kind == "testbed") return topo::rina_testbed(s.link_gbps);
  } catch (const topo::TopologyError& e) {
    fail(origin, "topology.kind", e.what(), kind);
  }
  if (kind == "dragonfly") {
    const auto parts = split(s.dragonfly, ',');
    int v[3] = {0, 0, 0};
    if (parts.size() != 3 || !parse_num(parts[0], v[0]) || !parse_num(parts[1], v[1]) || !parse_num(parts[2], v[2]))
      fail(origin, "topology.dragonfly", "expected \"a,g,h\": three integers", s.dragonfly);
    try {
      return topo::dragonfly(v[0], v[1], v[2], std::max(1, v[0] / 2), s.link_gbps);
    } catch (const topo::TopologyError& e) {
      fail(origin, "topology.dragonfly", e.what(), s.dragonfly);
    }
  }
  if (kind == "file") {
    if (s.topology_file.empty()) fail(origin, "topology.file", "topology.kind = \"file\" needs a JSON topology file", "\"\"");
    std::filesystem::path path(s.topology_file);
    if (path.is_relative() && !s.scenario_dir.empty()) path = std::filesystem::path(s.scenario_dir) / path;
    try {
      return topo::load_topology_file(path.string()).graph;
    } catch (const topo::TopologyError& e) {
      fail(origin, "topology.file", e.what(), s.topology_file);
    }
  }
  fail(origin, "topology.kind", "not a multi-switch topology", kind);
}

namespace {

// Workers per job: workload.workers, or 0 = every host (one job) / the hosts shared equally (several).
int workers_per_job(const Settings& s, const topo::Graph& g, const std::string& origin) {
  const int hosts = static_cast<int>(g.hosts().size());
  const int jobs = std::max(1, s.jobs);
  const int n = s.workers == 0 ? hosts / jobs : s.workers;
  if (static_cast<int64_t>(n) * jobs > hosts)
    fail(origin, "workload.workers",
         jobs == 1 ? fmt::format("the job is larger than the {} hosts of {}", hosts, g.name)
                   : fmt::format("{} jobs of {} workers need more than the {} hosts of {}", jobs, n, hosts, g.name),
         std::to_string(s.workers));
  if (n < 2) fail(origin, "workload.workers", fmt::format("a collective needs at least 2 workers ({} has {} hosts)", g.name, hosts), std::to_string(n));
  return n;
}

}  // namespace

std::vector<topo::NodeId> job_workers(const Settings& s, const topo::Graph& g, const std::string& origin) {
  const int n = workers_per_job(s, g, origin);
  const std::vector<int> sizes(static_cast<size_t>(std::max(1, s.jobs)), n);
  try {
    const auto pl = sim::place_jobs(g, sizes, s.placement);
    std::vector<topo::NodeId> all;
    for (const auto& j : pl.jobs) all.insert(all.end(), j.begin(), j.end());
    return all;
  } catch (const std::invalid_argument& e) {
    fail(origin, "topology.kind", e.what(), s.topology_kind);
  }
}

std::vector<topo::NodeId> select_ina(const Settings& s, const topo::Graph& g, const std::vector<topo::NodeId>& workers,
                                     const schemes::Scheme& scheme, const std::string& origin) {
  if ((s.ina_count >= 0) + (s.ina_percent >= 0) + (s.ina != "topology") > 1)
    fail(origin, "switch.ina", "give one of switch.ina, switch.ina_count and switch.ina_percent",
         fmt::format("{}, ina_count = {}, ina_percent = {}", s.ina, s.ina_count, s.ina_percent));
  const std::string v = s.ina_count >= 0     ? fmt::format("planner:{}", s.ina_count)
                        : s.ina_percent >= 0 ? fmt::format("percent:{}", s.ina_percent)
                                             : s.ina;
  const std::string_view key = s.ina_count >= 0     ? "switch.ina_count"
                               : s.ina_percent >= 0 ? "switch.ina_percent"
                                                    : "switch.ina";
  if (v == "topology") return g.ina_switches();
  if (v == "none") return {};
  if (v == "all") return g.switches();
  if (v == "tors") return g.tor_switches();
  const std::vector<topo::NodeId> order = control::rina::deployment_order(g, workers);
  if (v.starts_with("planner:")) {
    int n = -1;
    if (!parse_num(std::string_view(v).substr(8), n) || n < 0 || static_cast<size_t>(n) > order.size())
      fail(origin, key, fmt::format("planner:N needs 0 <= N <= {} (the switches of {})", order.size(), g.name), v);
    return first_of(order, static_cast<size_t>(n));
  }
  if (v.starts_with("percent:")) {
    double p = -1;
    if (!parse_num(std::string_view(v).substr(8), p) || !(p >= 0 && p <= 100))
      fail(origin, key, "percent:P needs 0 <= P <= 100", v);
    if (p == 100) return g.switches();
    const auto d = static_cast<double>(helping_switches(g, workers, order, scheme));
    return first_of(order, static_cast<size_t>(std::floor(p * d / 100 + 1e-9)));
  }
  std::vector<topo::NodeId> out;
  for (const auto name : split(v, ',')) {
    const auto id = g.find(name);
    if (!id) fail(origin, "switch.ina", fmt::format("unknown switch '{}' in {}", name, g.name), v);
    if (g.is_host(*id)) fail(origin, "switch.ina", fmt::format("'{}' is a host, not a switch", name), v);
    out.push_back(*id);
  }
  return out;
}

double gradient_mb(const Settings& s) {
  const workload::DnnModel* m = workload::find_dnn_model(s.model);
  return (s.gradient_mb > 0 ? s.gradient_mb : m ? m->gradient_mib() : 0) * s.gradient_scale;
}

double compute_ms(const Settings& s) {
  const workload::DnnModel* m = workload::find_dnn_model(s.model);
  return s.compute_ms > 0 ? s.compute_ms : m ? m->compute_ms : 0;
}

NetworkRun network_run(const Settings& s, const schemes::Scheme& scheme, uint64_t seed, const std::string& origin) {
  NetworkRun run{build_topology(s, origin), {}, {}};
  topo::Graph& g = run.graph;
  const std::vector<topo::NodeId> workers = job_workers(s, g, origin);
  run.ina = select_ina(s, g, workers, scheme, origin);
  for (const auto sw : g.switches()) g.set_ina(sw, false);
  const double cap = s.ina_gbps > 0 ? s.ina_gbps : s.link_gbps;
  for (const auto sw : run.ina) g.set_ina(sw, true, cap);

  CollectiveSettings& c = run.settings;
  c.seed = seed;
  c.workers_per_job.assign(static_cast<size_t>(std::max(1, s.jobs)), workers_per_job(s, g, origin));
  c.placement = s.placement;
  c.ring_memory = s.ring_memory;
  c.pool_policy = s.pool_policy;
  c.atp_pool = s.atp_pool;
  if (!s.job_priorities.empty()) {
    for (auto v : split(s.job_priorities, ',')) {
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
      uint32_t p = 0;
      if (!parse_num(v, p))
        fail(origin, "workload.job_priorities", fmt::format("expected comma-separated integers, got '{}'", v),
             s.job_priorities);
      c.job_priority.push_back(p);
    }
    if (c.job_priority.size() != c.workers_per_job.size())
      fail(origin, "workload.job_priorities",
           fmt::format("{} priorities for workload.jobs = {}", c.job_priority.size(), c.workers_per_job.size()),
           s.job_priorities);
  }
  c.gradient_mb = gradient_mb(s);
  c.iterations = s.iterations;
  c.compute_ms = compute_ms(s);
  c.payload_values = static_cast<uint16_t>(s.payload_bytes / 4);
  c.header_bytes = static_cast<uint32_t>(s.header_bytes);
  c.link_delay_us = s.rtt_us / 4;  // topology.rtt_us is host-switch-host, 4 propagation delays (as on the star)
  c.queue_kb = s.queue_kb;
  c.ecn_kb = s.ecn_kb;
  c.host_ecn = s.host_ecn;
  c.loss = s.loss;
  c.dup = s.dup;
  c.reorder = s.reorder;
  c.reorder_delay_us = s.reorder_delay_us;
  c.memory_mb = s.memory_mb;
  c.ina_gbps = s.ina_gbps;
  c.init_window_kb = s.init_window_kb;
  c.ring_min_rto_us = s.ring_min_rto_us;
  c.straggler_sigma_us = s.straggler_sigma_us;
  c.straggler_k_us = s.straggler_k_us;
  c.step_overhead_us = s.step_overhead_us;
  c.step_barrier = s.step_barrier;
  c.rina_allgather_start = s.rina_allgather_start;
  c.rina_transport = s.rina_transport;
  c.rina_ag_relay = s.rina_ag_relay;
  c.step_records = s.step_records;
  c.queue_trace = s.queue_trace;
  c.queue_trace_links = s.queue_trace_links;
  c.queue_trace_from_ms = s.queue_trace_from_ms;
  c.queue_trace_to_ms = s.queue_trace_to_ms;
  c.eq1_per_tensor = s.eq1_priority == "tensor";
  c.max_sim_ms = s.max_sim_ms;
  c.threads = static_cast<unsigned>(s.threads);
  c.partitions = static_cast<unsigned>(s.partitions);
  c.fail_rank = s.fail_rank;
  c.fail_at_ms = s.fail_at_ms;
  if (!s.memory_mb_per_switch.empty()) {
    for (const auto entry : split(s.memory_mb_per_switch, ',')) {
      const size_t eq = entry.find('=');
      double mb = 0;
      if (eq == std::string_view::npos || !parse_num(entry.substr(eq + 1), mb) || !(mb > 0 && mb <= 1024))
        fail(origin, "switch.memory_mb_per_switch", fmt::format("expected name=MiB with 0 < MiB <= 1024, got '{}'", entry),
             s.memory_mb_per_switch);
      std::string name(entry.substr(0, eq));
      while (!name.empty() && name.back() == ' ') name.pop_back();
      const auto id = g.find(name);
      if (!id || g.is_host(*id))
        fail(origin, "switch.memory_mb_per_switch", fmt::format("'{}' is not a switch of {}", name, g.name),
             s.memory_mb_per_switch);
      c.switch_memory_mb[name] = mb;
    }
  }
  return run;
}

void validate_network(const Settings& s, const std::vector<std::string>& scheme_names, const std::string& origin) {
  // Star-only transport settings: refused rather than silently ignored.
  if (s.min_rto_us != 0)
    fail(origin, "transport.min_rto_us",
         "applies to the star simulator only; multi-switch collectives use their own transport (ring: 200 us floor, "
         "transport.ring_min_rto_us; PS family: the paper profile)",
         fmt::format("{}", s.min_rto_us));
  if (s.profile != "paper")
    fail(origin, "run.profile", "applies to the star simulator only; multi-switch collectives use the paper profile",
         s.profile);
  // workload.jobs defaults to the star's 8: several jobs need their size said.
  if (s.jobs != 1 && s.workers == 0)
    fail(origin, "workload.jobs",
         fmt::format("{} jobs on a multi-switch topology need workload.workers (per job); set workload.jobs = 1 for "
                     "one job",
                     s.jobs),
         std::to_string(s.jobs));
  if (s.rina_ag_relay != "members" &&
      std::none_of(scheme_names.begin(), scheme_names.end(),
                   [](const std::string& n) { return schemes::find(n).collective == schemes::Collective::RingIna; }))
    fail(origin, "workload.rina_ag_relay", "applies to rina; run.schemes has no rina", s.rina_ag_relay);
  for (const auto& name : scheme_names) {
    const auto c = schemes::find(name).collective;
    const bool ring = c == schemes::Collective::Ring || c == schemes::Collective::Hierarchical ||
                      c == schemes::Collective::RingIna;
    if (s.step_barrier && !ring)
      fail(origin, "workload.step_barrier",
           fmt::format("applies to the ring collectives (rar, h-ar, rina); {} has no ring steps", name), "true");
    if (s.ring_min_rto_us != 0 && !ring)
      fail(origin, "transport.ring_min_rto_us",
           fmt::format("applies to the ring collectives (rar, h-ar, rina); {} has no ring endpoints", name),
           fmt::format("{}", s.ring_min_rto_us));
  }
  if (!workload::find_dnn_model(s.model) && s.gradient_mb == 0) {
    std::vector<std::string_view> names;
    for (const auto& m : workload::dnn_models()) names.push_back(m.name);
    fail(origin, "workload.model",
         fmt::format("topology.kind = \"{}\" needs a DNN ({}) or workload.gradient_mb", s.topology_kind,
                     fmt::join(names, ", ")),
         s.model);
  }
  const std::pair<const char*, double> star_only[] = {
      {"faults.worker_loss", s.worker_loss}, {"faults.ps_loss", s.ps_loss}, {"workload.partition_mb", s.partition_mb}};
  for (const auto& [key, v] : star_only)
    if (v != 0)
      fail(origin, key, fmt::format("applies to topology.kind = \"star\" only, not \"{}\"", s.topology_kind),
           fmt::format("{}", v));
  if (!s.queue_trace.empty() && s.queue_trace_links.empty())
    fail(origin, "run.queue_trace_links", "run.queue_trace needs the links to trace: \"from->to, ...\" by node names",
         "\"\"");
  if (s.queue_trace.empty() && !s.queue_trace_links.empty())
    fail(origin, "run.queue_trace_links", "needs run.queue_trace, the directory the traces go to", s.queue_trace_links);
  if ((s.queue_trace_from_ms != 0 || s.queue_trace_to_ms != 0) && s.queue_trace.empty())
    fail(origin, s.queue_trace_from_ms != 0 ? "run.queue_trace_from_ms" : "run.queue_trace_to_ms",
         "needs run.queue_trace, the directory the traces go to",
         fmt::format("{}", s.queue_trace_from_ms != 0 ? s.queue_trace_from_ms : s.queue_trace_to_ms));
  if (s.queue_trace_to_ms != 0 && s.queue_trace_to_ms <= s.queue_trace_from_ms)
    fail(origin, "run.queue_trace_to_ms",
         fmt::format("ends the trace before it starts (run.queue_trace_from_ms = {})", s.queue_trace_from_ms),
         fmt::format("{}", s.queue_trace_to_ms));
  if (s.fail_rank >= 0 && s.workers > 0 && s.fail_rank >= s.workers)
    fail(origin, "faults.fail_rank", fmt::format("the job has {} workers", s.workers), std::to_string(s.fail_rank));
  if (gradient_mb(s) * static_cast<double>(workload::kMiB) < s.payload_bytes)
    fail(origin, "workload.gradient_scale", "the scaled gradient is smaller than one packet's payload",
         fmt::format("{}", s.gradient_scale));
  for (const auto& name : scheme_names) {
    const schemes::Scheme& scheme = schemes::find(name);
    if (scheme.collective == schemes::Collective::None)
      fail(origin, "run.schemes",
           fmt::format("{} runs only on the star (topology.kind = \"star\"); on \"{}\" run one of: {}", name,
                       s.topology_kind, schemes::names_text(schemes::Engine::SimNetwork)),
           name);
    const NetworkRun run = network_run(s, scheme, 1, origin);  // topology, workers, switch.ina, per-switch memory
    if (!s.queue_trace_links.empty()) {
      try {
        queue_trace_links(run.graph, s.queue_trace_links);
      } catch (const std::invalid_argument& e) {
        fail(origin, "run.queue_trace_links", e.what(), s.queue_trace_links);
      }
    }
    const bool ps_family =
        scheme.collective == schemes::Collective::Ps || scheme.collective == schemes::Collective::PsIna;
    if (ps_family && run.settings.workers_per_job.at(0) > static_cast<int>(kMaxWorkers))
      fail(origin, "workload.workers",
           fmt::format("{} has a PS per worker and a {}-bit worker bitmap: at most {} workers ({} has {} hosts; "
                       "set workload.workers)",
                       name, kMaxWorkers, kMaxWorkers, run.graph.name, run.graph.hosts().size()),
           std::to_string(s.workers));
  }
}

}  // namespace ina::exp
