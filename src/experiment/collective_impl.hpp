#pragma once
// Internal to run_collective: one function per collective family, each in
// its own file. `jobs` are the placed workers (graph node ids by rank).
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiment/collective.hpp"
#include "host/ring.hpp"
#include "schemes/registry.hpp"
#include "sim/network.hpp"
#include "sim/partition.hpp"

namespace ina::exp::detail {

// What every family needs in range: each setting (throws
// std::invalid_argument naming the setting and its value); one job unless `jobs_ok`.
void check_settings(const CollectiveSettings& s, const sim::Placement& pl, bool jobs_ok = false);
// The links of the run: delay, queue, ECN threshold, loss, duplication, reordering.
sim::LinkParams link_params(const CollectiveSettings& s);

// One worker's iterations: when each started and when its last result came.
struct WorkerTimes {
  std::vector<Time> start, end;
};
// sync_ms (per iteration: the last worker's end - the first worker's start,
// averaged), iteration_ms (the last end / iterations) and throughput_gbps
// (per worker and iteration: 8 * gradient bytes / its own span, averaged).
// Every worker must have finished every iteration.
void summarize_times(const std::vector<WorkerTimes>& w, uint64_t elems, int iterations, CollectiveResult& out);

// The simulator-wide checks once every worker finished: no packet held when
// nothing is in flight (and, if `require_quiet`, nothing in flight or
// scheduled at all: a leaked timer or packet), none without a route, none
// dropped by a node with no role (`dropped`: what forwarding switches and
// hosts outside the job dropped, dropped_by()).
void check_network(sim::Simulator& sim, uint64_t dropped, bool require_quiet, std::vector<std::string>& problems);
// What `idle` nodes dropped (a split run's process builds only its own).
uint64_t dropped_by(const std::vector<const sim::Forwarder*>& idle);
// A run split over processes (CollectiveSettings::ranks): `mine` (what
// this process read off the nodes it ran) to every other, and what each
// other sent, as `step` of the protocol (sim::Ranks::exchange).
std::vector<nlohmann::json> share_json(sim::Ranks& ranks, const nlohmann::json& mine, std::string_view step);
// How a run on `g` splits (CollectiveSettings::threads, partitions, ranks): its
// partitions by the racks of the jobs' hosts `pl` (none: one thread, one
// process) and which nodes this process builds and runs; the others are
// sim::RemoteNode stand-ins.
struct RunSplit {
  // Partitions by default (CollectiveSettings::partitions = 0): one per
  // this many of the jobs' hosts, at least one per thread. On one thread
  // the 1024-host fat-tree in 16 partitions has 11 L2 misses a hop against
  // one partition's 19, and its runs take 1.2-2.9x less time; 128 hosts in
  // 2, 1.15x less (docs/results/simulator.md, "Partitions on one thread").
  static constexpr size_t kHostsPerPartition = 64;
  // ... when links delay packets at least this long (link_delay_us). The
  // window is about one link's delay, and each window visits every
  // partition (and every pair's posts): with shorter delays the windows
  // multiply and the default keeps one partition per thread.
  static constexpr double kMinDelayUs = 0.5;
  RunSplit(const topo::Graph& g, const sim::Placement& pl, const CollectiveSettings& s);
  unsigned processes = 1, threads = 1;
  std::vector<uint16_t> parts;  // by node (empty: not split)
  std::vector<bool> here;       // by node, with parts
  bool builds(topo::NodeId v) const { return parts.empty() || here[v]; }
  // After the network is built: the partitions, over the ranks.
  void apply(sim::Simulator& sim, sim::Ranks* ranks) const {
    if (parts.empty()) return;
    sim.set_partitions(parts, ranks);
    sim.set_threads(threads);
  }
};
// The run's link counters: ECN marks by where they were set (a host's NIC
// queue or a switch port), queue drops, the links that marked or dropped,
// and the kBusiestLinks busiest links.
void count_link_stats(sim::Simulator& sim, const topo::Graph& g, CollectiveResult& out);
// The aggregator memory (bytes) every one of `switches` has: the smallest
// switch_memory_mb() among them (memory_mb if there is none). Rina gives a
// job one contiguous region of the same size at every ToR (§V).
uint64_t smallest_memory_bytes(const CollectiveSettings& s, const topo::Graph& g, const std::vector<NodeId>& switches);
// ok and problems ("; "-joined).
void set_problems(CollectiveResult& out, const std::vector<std::string>& problems);

// The jobs' hosts by rank (workers_per_job = {0}: one job on every host), as every run places them.
sim::Placement job_placement(const topo::Graph& g, const CollectiveSettings& s);

// A Rina ToR's memory under switch.ring_memory and switch.pool_policy: a
// shared pool runs the policy's scheme's rule (checked by check_settings).
inline dp::RingMemory ring_memory_of(std::string_view ring_memory, std::string_view pool_policy) {
  const schemes::Scheme* pool = ring_memory == "pool" ? schemes::ring_pool_scheme(pool_policy) : nullptr;
  return pool ? pool->ring_pool : dp::RingMemory::Region;
}
// PS (co-located, sharded over the workers) and PS-based INA (ATP over the topology).
CollectiveResult run_ps_family(const topo::Graph& g, const schemes::Scheme& scheme, const sim::Placement& pl,
                               const CollectiveSettings& s);
// RAR, H-AR and Rina (host/ring.hpp, dataplane/rina.cpp).
CollectiveResult run_ring_family(const topo::Graph& g, const schemes::Scheme& scheme, const sim::Placement& pl,
                                 const CollectiveSettings& s);
// Each ring job's plan (plan[rank] = its stages) exactly as run_ring_family
// makes it (racks, INA ToRs, Rina's groups above the ToR), for the estimate.
std::vector<std::vector<std::vector<host::RingStage>>> ring_plans(const topo::Graph& g, const schemes::Scheme& scheme,
                                                                  const sim::Placement& pl, double gradient_mb);

}  // namespace ina::exp::detail
