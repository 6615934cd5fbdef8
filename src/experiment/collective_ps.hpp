#pragma once
// The PS family of run_collective (experiment/collective_impl.hpp) with the
// hooks its tests use: wrap any node before it is added (targeted drops),
// look at the simulator after the run, and per-node statistics.
//
// Ps (scheme `ps`) and PsIna (schemes `atp`, `dsa`) over a topo::Graph, one
// job or several, each of N workers on hosts of its own: a job's gradient of
// S values is cut into N shards (shard k: S/N values, the first S % N shards
// one more), and the PS of shard k runs on the host of the job's rank k
// beside that host's worker (cluster::ShardedPsCluster; shards numbered across
// the jobs). Every host runs N worker transports (one per shard of its job,
// each its own PSN stream) and one PS; what a host's parts send to each
// other stays on the host. Ps: every switch only forwards. PsIna: the graph's
// INA switches run the scheme's program and aggregate along each shard's
// tree (cluster::ShardTree, dataplane/switch.hpp); DSA's workers stamp Eq. 1
// priorities. `atp_pool` and `ina_gbps` provision the INA switches
// (cluster::ShardedPsCluster::Provision): a contiguous region per shard, and
// hosts pacing what they send to INA switches at ina_gbps, as Rina's members
// do toward their ToR. `straggler_*` and `fail_*` do not apply (ignored). PsFamilyDetail's per-host
// vectors are by the cluster's shard index (job 0's ranks, then job 1's, ...).
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "dataplane/switch.hpp"
#include "experiment/collective_impl.hpp"
#include "host/ps.hpp"
#include "host/worker.hpp"

namespace ina::exp::detail {

struct PsFamilyHooks {
  // Called with every node as it is made (graph node v), before it joins the
  // simulator; returns the node to add (the same one, or a wrapper that
  // forwards to it and calls its set_id / on_start).
  std::function<std::unique_ptr<Node>(topo::NodeId, std::unique_ptr<Node>)> wrap;
  // Called once after the run, before the checks.
  std::function<void(sim::Simulator&)> inspect;
  // Adjust the workers' transports and the PSes (applied over the paper profile).
  std::function<void(host::WorkerConfig&)> worker;
  std::function<void(host::PsConfig&)> ps;
};

struct PsFamilyDetail {
  std::vector<host::PsStats> ps;                       // by shard
  std::vector<size_t> ps_entries;                      // by shard: entries left
  std::vector<std::vector<host::WorkerStats>> worker;  // [host][shard of its job]
  std::vector<std::pair<NodeId, dp::SwitchStats>> switches;  // the switches with a program, by node id
  std::vector<uint64_t> ps_link_in_bytes;              // by shard: bytes delivered on the link into its PS's host
  std::vector<uint64_t> host_sent_bytes;               // by host: bytes the host put on its link
  std::vector<uint64_t> local_packets;                 // by host: packets between the host's own parts
  size_t aggregators_left = 0;
  uint64_t misrouted = 0;
};

CollectiveResult run_ps_family(const topo::Graph& g, const schemes::Scheme& scheme, const sim::Placement& pl,
                               const CollectiveSettings& s, const PsFamilyHooks& hooks, PsFamilyDetail* detail);

}  // namespace ina::exp::detail
