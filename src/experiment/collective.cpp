#include "experiment/collective.hpp"
#include "sim/ranks.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "experiment/collective_impl.hpp"
#include "schemes/registry.hpp"
#include "workload/model.hpp"

namespace ina::exp {
namespace detail {

void check_settings(const CollectiveSettings& s, const sim::Placement& pl, bool jobs_ok) {
  if (s.rina_allgather_start != "agent" && s.rina_allgather_start != "rack")
    throw std::invalid_argument(
        fmt::format("rina_allgather_start '{}' is neither \"agent\" nor \"rack\"", s.rina_allgather_start));
  if (s.rina_transport != "paper" && s.rina_transport != "aimd")
    throw std::invalid_argument(fmt::format("rina_transport '{}' is neither \"paper\" nor \"aimd\"", s.rina_transport));
  if (s.rina_ag_relay != "members" && s.rina_ag_relay != "agent")
    throw std::invalid_argument(fmt::format("rina_ag_relay '{}' is neither \"members\" nor \"agent\"", s.rina_ag_relay));
  if (!jobs_ok && (pl.jobs.size() != 1 || s.workers_per_job.size() > 1))
    throw std::invalid_argument(fmt::format(
        "this collective runs one job; workers_per_job has {} entries", s.workers_per_job.size()));
  if (s.placement != "rack-packed" && s.placement != "interleaved")
    throw std::invalid_argument(fmt::format("placement = '{}' (rack-packed or interleaved)", s.placement));
  if (s.ring_memory != "region" && s.ring_memory != "pool")
    throw std::invalid_argument(fmt::format("ring_memory = '{}' (region or pool)", s.ring_memory));
  if (!schemes::ring_pool_scheme(s.pool_policy))
    throw std::invalid_argument(
        fmt::format("pool_policy = '{}' ({})", s.pool_policy, schemes::ring_pool_names_text()));
  if (!s.job_priority.empty() && s.job_priority.size() != pl.jobs.size())
    throw std::invalid_argument(
        fmt::format("job_priority has {} entries for {} jobs", s.job_priority.size(), pl.jobs.size()));
  auto bad = [](const char* what, double v) {
    return std::invalid_argument(fmt::format("{} = {} is out of range", what, v));
  };
  if (s.iterations < 1) throw bad("iterations", s.iterations);
  if (!(s.gradient_mb > 0)) throw bad("gradient_mb", s.gradient_mb);
  if (!(s.compute_ms >= 0)) throw bad("compute_ms", s.compute_ms);
  if (s.payload_values == 0) throw bad("payload_values", 0);
  if (!(s.memory_mb > 0)) throw bad("memory_mb", s.memory_mb);
  for (const auto& [name, mb] : s.switch_memory_mb)
    if (!(mb > 0)) throw bad(fmt::format("switch_memory_mb[{}]", name).c_str(), mb);
  if (!(s.reorder_delay_us >= 0)) throw bad("reorder_delay_us", s.reorder_delay_us);
  if (!(s.max_sim_ms > 0)) throw bad("max_sim_ms", s.max_sim_ms);
  if (!(s.init_window_kb > 0)) throw bad("init_window_kb", s.init_window_kb);
  const std::pair<const char*, double> rates[] = {{"loss", s.loss}, {"dup", s.dup}, {"reorder", s.reorder}};
  for (const auto& [what, v] : rates)
    if (!(v >= 0 && v < 1)) throw bad(what, v);
}

sim::LinkParams link_params(const CollectiveSettings& s) {
  sim::LinkParams lp;
  lp.delay = from_us(s.link_delay_us);
  lp.queue_bytes = static_cast<uint64_t>(s.queue_kb * 1000);
  lp.ecn_bytes = static_cast<uint64_t>(s.ecn_kb * 1000);
  lp.loss = s.loss;
  lp.dup = s.dup;
  lp.reorder = s.reorder;
  lp.reorder_delay = from_us(s.reorder_delay_us);
  return lp;
}

void summarize_times(const std::vector<WorkerTimes>& w, uint64_t elems, int iterations, CollectiveResult& out) {
  const auto iters = static_cast<size_t>(iterations);
  double tput = 0, sync = 0;
  size_t tput_n = 0;
  Time end = 0;
  for (size_t it = 0; it < iters; ++it) {
    Time first = kNever, last = 0;
    for (const auto& t : w) {
      first = std::min(first, t.start[it]);
      last = std::max(last, t.end[it]);
      const Time span = t.end[it] - t.start[it];
      if (span > 0) {
        tput += 8.0 * 4.0 * static_cast<double>(elems) / (static_cast<double>(span) / kSec) / 1e9;
        ++tput_n;
      }
    }
    sync += to_ms(last - first);
    end = std::max(end, last);
  }
  out.sync_ms = sync / static_cast<double>(iters);
  out.iteration_ms = to_ms(end) / static_cast<double>(iters);
  out.throughput_gbps = tput_n ? tput / static_cast<double>(tput_n) : 0;
}

void check_network(sim::Simulator& sim, uint64_t dropped, bool require_quiet, std::vector<std::string>& problems) {
  const bool quiet = sim.quiet();
  if (!quiet && require_quiet) problems.push_back("events left after every worker finished (a timer or packet leaked)");
  if (quiet && sim.packets_in_use()) problems.push_back(fmt::format("{} packets leaked", sim.packets_in_use()));
  if (sim.misrouted()) problems.push_back(fmt::format("{} packets had no route", sim.misrouted()));
  if (dropped) problems.push_back(fmt::format("{} packets were addressed to a node with no role in the job", dropped));
}

uint64_t dropped_by(const std::vector<const sim::Forwarder*>& idle) {
  uint64_t n = 0;
  for (const auto* f : idle) n += f->dropped();
  return n;
}

RunSplit::RunSplit(const topo::Graph& g, const sim::Placement& pl, const CollectiveSettings& s)
    : processes(s.ranks ? s.ranks->size() : 1), threads(s.threads) {
  std::vector<NodeId> busy;
  for (const auto& job : pl.jobs)
    for (const topo::NodeId h : job) busy.push_back(static_cast<NodeId>(h));
  const size_t by_hosts = s.link_delay_us >= kMinDelayUs ? busy.size() / kHostsPerPartition : 0;
  const size_t total = s.partitions ? size_t{std::max(s.partitions, s.threads)} * processes
                                    : std::max(size_t{s.threads} * processes, std::min(sim::Simulator::kMaxPartitions, by_hosts));
  if (total > sim::Simulator::kMaxPartitions)
    throw std::invalid_argument(fmt::format("run.partitions = {} (run.threads = {}) on {} processes: {} partitions, at most {}",
                                            s.partitions, s.threads, processes, total, sim::Simulator::kMaxPartitions));
  if (total > 1) parts = sim::partition_by_racks(g, static_cast<unsigned>(total), busy);
  here = sim::local_nodes(parts, s.ranks);
}

std::vector<nlohmann::json> share_json(sim::Ranks& ranks, const nlohmann::json& mine, std::string_view step) {
  const std::vector<uint8_t> bytes = nlohmann::json::to_cbor(mine);
  std::vector<nlohmann::json> out;
  for (const std::string& m : ranks.share(std::string(bytes.begin(), bytes.end()), step))
    if (!m.empty()) out.push_back(nlohmann::json::from_cbor(m));
  return out;
}

void count_link_stats(sim::Simulator& sim, const topo::Graph& g, CollectiveResult& out) {
  const auto name = [&](const sim::Link& k) { return fmt::format("{}->{}", g.node(k.from).name, g.node(k.to).name); };
  std::vector<uint32_t> busiest;
  for (size_t l = 0; l < sim.link_count(); ++l) {
    const sim::Link& k = sim.link(static_cast<uint32_t>(l));
    (g.is_host(k.from) ? out.ecn_marks_host : out.ecn_marks_switch) += k.st.ecn_marked;
    out.queue_drops += k.st.drop_queue;
    if (k.st.ecn_marked || k.st.drop_queue) out.marked_links.push_back({name(k), k.st.ecn_marked, k.st.drop_queue});
    if (k.st.busy > 0) busiest.push_back(static_cast<uint32_t>(l));
  }
  // Busiest first; equal loads in link order, so the list is the same on every run of a seed.
  const auto more = [&](uint32_t a, uint32_t b) {
    const Time x = sim.link(a).st.busy, y = sim.link(b).st.busy;
    return x > y || (x == y && a < b);
  };
  const size_t n = std::min(busiest.size(), kBusiestLinks);
  std::partial_sort(busiest.begin(), busiest.begin() + static_cast<std::ptrdiff_t>(n), busiest.end(), more);
  for (size_t i = 0; i < n; ++i) {
    const sim::Link& k = sim.link(busiest[i]);
    out.busiest_links.push_back({name(k), to_ms(k.st.busy), k.st.bytes});
  }
}

uint64_t smallest_memory_bytes(const CollectiveSettings& s, const topo::Graph& g, const std::vector<NodeId>& switches) {
  double mb = switches.empty() ? s.memory_mb : switch_memory_mb(s, g, switches.front());
  for (const NodeId v : switches) mb = std::min(mb, switch_memory_mb(s, g, v));
  return static_cast<uint64_t>(mb * static_cast<double>(workload::kMiB));
}

void set_problems(CollectiveResult& out, const std::vector<std::string>& problems) {
  out.ok = problems.empty();
  out.problems.clear();
  for (size_t i = 0; i < problems.size(); ++i) out.problems += (i ? "; " : "") + problems[i];
}

}  // namespace detail

double switch_memory_mb(const CollectiveSettings& s, const topo::Graph& g, topo::NodeId v) {
  const auto it = s.switch_memory_mb.find(g.node(v).name);
  return it == s.switch_memory_mb.end() ? s.memory_mb : it->second;
}

sim::Placement detail::job_placement(const topo::Graph& g, const CollectiveSettings& s) {
  std::vector<int> sizes = s.workers_per_job;
  if (sizes.size() == 1 && sizes[0] == 0) sizes[0] = static_cast<int>(g.hosts().size());  // one job on every host
  return sim::place_jobs(g, sizes, s.placement);
}

CollectiveResult run_collective(const topo::Graph& g, const std::string& scheme_name, const CollectiveSettings& s) {
  const schemes::Scheme& scheme = schemes::find(scheme_name, schemes::Engine::SimNetwork);
  for (const auto& [name, mb] : s.switch_memory_mb) {
    const auto v = g.find(name);
    if (!v || g.is_host(*v))
      throw std::invalid_argument(fmt::format("switch_memory_mb names '{}', which is not a switch of {}", name, g.name));
  }
  const sim::Placement pl = detail::job_placement(g, s);
  switch (scheme.collective) {
    case schemes::Collective::Ps:
    case schemes::Collective::PsIna:
      if (s.fail_rank >= 0)
        throw std::invalid_argument(fmt::format("fail_rank = {}: failures are simulated for ring schemes only, not {}",
                                                s.fail_rank, scheme.name));
      return detail::run_ps_family(g, scheme, pl, s);
    case schemes::Collective::Ring:
    case schemes::Collective::Hierarchical:
    case schemes::Collective::RingIna:
      return detail::run_ring_family(g, scheme, pl, s);
    case schemes::Collective::None:
      break;
  }
  throw std::invalid_argument(fmt::format("scheme {} has no collective for multi-switch topologies", scheme.name));
}

}  // namespace ina::exp
