#pragma once
// One data-parallel synchronization (a gradient allreduce per iteration) of
// one or more jobs on a multi-switch topology, at packet level: PS, PS-based
// INA (ATP or DSA over the topology), Ring-AllReduce, hierarchical AllReduce and
// Rina. The scheme's registry entry says which collective it runs
// (schemes::Scheme::collective); this file only asks it.
//
// Jobs are placed rack-packed, or interleaved (placement = "interleaved",
// sim/network.hpp: several ring jobs then share each ToR; ring families only). Which switches can
// aggregate comes from the graph (topo::Node::ina); each INA switch has
// `memory_mb` of aggregator memory, or its entry in `switch_memory_mb`. Every run is checked: exact sums at
// every worker, nothing left in any switch, PS or transport, no refused
// packet from an honest node.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/time.hpp"
#include "host/ring_record.hpp"
#include "topo/graph.hpp"

namespace ina::sim {
struct TraceRecord;
class Ranks;
}  // namespace ina::sim

namespace ina::exp {

struct CollectiveSettings {
  uint64_t seed = 1;
  std::vector<int> workers_per_job = {0};  // 0: every host of the topology (one job)
  double gradient_mb = 4;         // per worker and iteration (MiB of int32 values)
  int iterations = 1;             // allreduces per job, one after the other
  double compute_ms = 0;          // per iteration, before its allreduce
  uint16_t payload_values = 64;   // 256 B of values per packet
  uint32_t header_bytes = 50;     // 306 B packets
  double link_delay_us = 1;       // propagation per link
  double queue_kb = 1024, ecn_kb = 100;
  bool host_ecn = false;          // hosts' NIC queues mark too (sim/network.hpp build_network); default: switch ports only
  double loss = 0, dup = 0, reorder = 0;  // on every link
  double reorder_delay_us = 5;    // a reordered packet is held ~U(0, this) extra
  double memory_mb = 5;           // aggregator memory per INA switch (MiB)
  std::map<std::string, double> switch_memory_mb;  // per-switch memory (MiB) by switch name, overriding memory_mb
  // INA aggregation rate cap (Rina's "full speed"): Rina members pace their
  // ScatterReduce to the ToR at it. 0: under rina_transport "paper",
  // host::kRinaFullSpeedGbps (20, the paper's Tofino-1 figure); under "aimd", no pacing.
  double ina_gbps = 0;
  double init_window_kb = 60;
  double ring_min_rto_us = 0;  // the ring endpoints' RTO floor (0: host::RingConfig's)
  double straggler_sigma_us = 0;  // per-chunk compute+communication time ~ N(k/N, sigma^2) (Rina Eq. 1)
  double straggler_k_us = 0;      //   its k (mean k/N per ring step)
  // Rina Eq. 1's O: a host's fixed cost per gradient send (protocol, memory
  // movement), independent of N: before each ring step's send, and once per
  // allreduce in the PS family (a worker sends its gradient once). `ina bench
  // ringstep` measures it on this machine's runtime.
  double step_overhead_us = 0;
  bool step_barrier = false;      // ring schemes: a job-wide barrier per ring step (host/ring.hpp; Eq. 1's model)
  // Rina §IV-C's AllGather slow start: "agent" (the agent's broadcast only,
  // the default) or "rack" (every AllGather send of an INA rack's workers).
  std::string rina_allgather_start = "agent";
  // Rina §IV-C's transport (host::RinaTransport): "paper" (the default: paced
  // ScatterReduce with its window carried over and its growth stopping at
  // full speed, every INA rack worker's AllGather starting from one packet)
  // or "aimd" (the plain AIMD transport every ring scheme has, unpaced unless
  // ina_gbps > 0; AllGather slow start only as rina_allgather_start says).
  std::string rina_transport = "paper";
  // Who relays an INA rack's AllGather shards after its agent's broadcast
  // (host::RingConfig::agent_relays): "members" (in turn, the default) or
  // "agent" (the agent alone, one relay after another).
  std::string rina_ag_relay = "members";
  std::string step_records;  // a directory: ring runs write job 0's step records there (experiment/step_records.hpp)
  // A directory: the run writes the queue trace of the links queue_trace_links
  // names there (experiment/queue_trace.hpp); "" = none.
  std::string queue_trace, queue_trace_links;
  double queue_trace_from_ms = 0, queue_trace_to_ms = 0;  // the window traced (to 0: the run's end)
  // DSA's Eq. 1 (the PS family under DSA): one priority per shard of the
  // iteration's gradient, taken at its first packet (true, §V's "a tensor's
  // priority"), or one per packet sent.
  bool eq1_per_tensor = true;
  double max_sim_ms = 60000;
  // Failures (Rina §IV-C; ring schemes): at `fail_at_ms` the worker of job
  // 0 with rank `fail_rank` stops (-1: none). `fail_detect_ms` later the
  // job's control node (Rina's global control node, §IV-A; a heartbeat
  // timeout here) gives the survivors a new plan: an agent's rack falls
  // back to RAR members, a member is excluded by its rack, an autonomous
  // worker is bypassed; every survivor restarts the first op not every
  // survivor finished, and results from then on are the survivors' sum.
  int fail_rank = -1;
  double fail_at_ms = 0;
  double fail_detect_ms = 1;
  // Several jobs (every family; each job on hosts of its own).
  std::string placement = "rack-packed";  // or "interleaved"
  // Rina ToR memory (dataplane/rina.cpp): "region" (§V; with J jobs each
  // gets 1/J of the aggregators, contiguous) or "pool" (all aggregators
  // shared, per task Hash(job, PSN)) under pool_policy, a scheme whose pool
  // a Rina ToR can run (schemes::ring_pool_names(): atp or dsa).
  std::string ring_memory = "region";
  std::string pool_policy = "atp";
  // PS-based INA's shared pool (ATP, DSA; cluster::ShardedPsCluster::Provision):
  // "hashed" (Hash(job, PSN) over the pool) or "contiguous" (a region per PS shard).
  std::string atp_pool = "hashed";
  std::vector<uint32_t> job_priority;     // pool + dsa: per job (empty: 1 each)
  // Ring families: the simulator's trace sink (sim::Simulator::set_trace;
  // the golden traces), or none.
  std::vector<sim::TraceRecord>* trace = nullptr;
  // Threads the simulation runs on (sim::partition_by_racks); results,
  // digest and trace do not depend on it.
  unsigned threads = 1;
  // The partitions each process splits its share into, run by its
  // `threads` one after another in each window (sim::Simulator::set_threads;
  // 0: RunSplit::kHostsPerPartition's rule). Results do not depend on it.
  unsigned partitions = 0;
  // The processes the simulation is split over (`--partition` under
  // mpirun), each on `threads` threads; null: this process alone.
  sim::Ranks* ranks = nullptr;
};

// A link's ECN marks and queue drops in a run ("from->to" by node names).
struct LinkMarks {
  std::string link;
  uint64_t ecn_marks = 0, queue_drops = 0;
};

inline constexpr size_t kBusiestLinks = 8;

// A link's load in a run: its total serialization time and bytes delivered.
struct LinkLoad {
  std::string link;
  double busy_ms = 0;
  uint64_t bytes = 0;
};

struct CollectiveResult {
  bool ok = true;
  std::string problems;            // unfinished workers, wrong sums, leaks, refusals
  double sync_ms = 0;              // mean per iteration: last worker's result - first send
  double iteration_ms = 0;         // mean wall time per iteration (compute + sync)
  double throughput_gbps = 0;      // per worker: 8 * gradient bytes / sync time (mean over workers and iterations)
  double bytes_per_worker = 0;     // payload + header bytes each worker sent per iteration, mean
  double max_bytes_per_worker = 0; //   and the most one worker sent (the busiest uplink)
  uint64_t steps = 0;              // ring steps per iteration (ring schemes; 0 otherwise)
  // Ring families: job 0's step timings, by rank, in each rank's last op.
  std::vector<std::vector<host::RingStepRecord>> step_log;
  uint64_t retransmits = 0, verify_errors = 0;
  // What triggered the workers' retransmissions: a timeout, or later packets
  // acknowledged first (fast retransmission); the ring families also count the
  // data packets a receiver already had.
  uint64_t timeouts = 0, fast_retransmits = 0, dup_received = 0;
  uint64_t hops = 0, events = 0;   // simulator work
  uint64_t digest = 0;             // sim::Simulator::digest()
  uint64_t windows = 0;            // synchronization windows (threads > 1)
  double helper_cpu_s = 0;         // CPU time of the simulation's threads besides the caller's
  std::vector<std::pair<uint64_t, double>> partitions;  // threads > 1: per partition, events and busy wall time
  uint64_t ecn_marks_host = 0;     // packets ECN-marked in a host's NIC queue (only with host_ecn)
  uint64_t ecn_marks_switch = 0;   //   and at switch egress ports
  uint64_t refused = 0;            // ring data packets a receiver refused (kBusy: its buffers held earlier steps)
  uint64_t queue_drops = 0;        // packets a full queue dropped (drop-tail, any link): a run without is lossless
  std::vector<LinkMarks> marked_links;  // every link with a mark or a drop, in link order
  std::vector<LinkLoad> busiest_links;  // the kBusiestLinks links with the most serialization time, busiest first
  int restarted_op = -1;           // after a failure: the op the survivors restarted (-1: none)
  // Per job (ring families): mean throughput per worker and sync time, as above.
  std::vector<double> job_throughput_gbps, job_sync_ms;
  // Rina ToRs, summed (dataplane/switch.hpp SwitchStats): shared-pool activity.
  uint64_t collisions = 0, evictions = 0, preempt_lost = 0, bypassed = 0, flushed = 0;
  double wall_s = 0;               // host time of the run
};

// The aggregator memory (MiB) of switch `v`: its switch_memory_mb entry, else memory_mb.
double switch_memory_mb(const CollectiveSettings& s, const topo::Graph& g, topo::NodeId v);

// Runs `scheme` (a registry name whose collective is not None) on `g`.
// Bad input (unknown scheme, jobs larger than the hosts, a switch_memory_mb
// name that is not a switch of `g`) throws std::invalid_argument with a
// message naming the value.
CollectiveResult run_collective(const topo::Graph& g, const std::string& scheme, const CollectiveSettings& s);

}  // namespace ina::exp
