#pragma once
// One builder for simulated clusters. The runner, the tests and GRID's
// simulator run wire their switches, PSes and workers through it, so the
// rules that make nodes talk to each other live in one place: node ids, the
// scheme's switch program, the job table (with SwitchML's regions), switches
// as peers of each other, the sources a worker accepts results from
// (`WorkerConfig::switches`), the switches a PS fetches from
// (`PsConfig::more_switches`), and the check that honest nodes refused
// nothing (job isolation counts a refusal as malformed or foreign).
//
// Callers make their own host nodes (training workers, plain workers,
// float-allreduce nodes, wrapped ones) from the configs the builder gives and
// add them in id order.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/switch.hpp"
#include "host/ps.hpp"
#include "host/worker.hpp"
#include "schemes/atp_tree.hpp"
#include "schemes/registry.hpp"
#include "sim/engine.hpp"
#include "cluster/star.hpp"
#include "topo/graph.hpp"

namespace ina::cluster {

using sim::LinkParams;
using sim::Simulator;

// Packets honest nodes refused (malformed or foreign), and a text naming who
// refused how many; empty when nothing was refused.
struct Refusals {
  uint64_t switches = 0, servers = 0, workers = 0;
  uint64_t total() const { return switches + servers + workers; }
  std::string text() const;
};
Refusals count_refusals(const std::vector<const dp::SwitchProgram*>& switches,
                        const std::vector<const host::ParameterServer*>& servers,
                        const std::vector<const host::WorkerTransport*>& workers);

// A star: switch 0, the jobs' workers, then one PS per job if the scheme has one.
class StarCluster {
 public:
  // Builds the plan, adds the scheme's switch program (node 0) and registers the jobs.
  // A scheme with segments (P4INC-AOI) gives job j segments[j] (none: cluster::equal_segments);
  // other schemes take no segments (std::invalid_argument).
  StarCluster(Simulator& sim, const schemes::Scheme& scheme, const std::vector<int>& workers_per_job,
              const dp::SwitchConfig& sw, const std::vector<Segment>& segments = {});

  const StarPlan& plan() const { return plan_; }
  dp::SwitchProgram& sw() { return *sw_; }
  const dp::SwitchProgram& sw() const { return *sw_; }
  uint32_t slots_per_pool() const { return slots_; }  // isolated schemes' window cap, else 0
  const std::vector<Segment>& segments() const { return segs_; }  // by job (schemes with segments), else empty

  // Worker `rank` of job index `j`: its ids, switch, PS and window cap over `base`.
  host::WorkerConfig worker(size_t j, size_t rank, host::WorkerConfig base = {}) const;
  // The PS of job index `j` over `base` (the scheme must have a PS).
  host::PsConfig ps(size_t j, host::PsConfig base = {}) const;
  // Adds a host at its planned id; throws std::logic_error if the id differs.
  void add_host(NodeId planned, std::unique_ptr<Node> n);
  // Adds every job's PS (after the workers), made from ps(j, base).
  std::vector<host::ParameterServer*> add_servers(const host::PsConfig& base);
  // Links every host to the switch; link(h) gives (host->switch, switch->host).
  void wire(const std::function<std::pair<LinkParams, LinkParams>(NodeId)>& link);

 private:
  Simulator& sim_;
  const schemes::Scheme& scheme_;
  StarPlan plan_;
  dp::SwitchProgram* sw_ = nullptr;
  uint32_t slots_ = 0;
  std::vector<Segment> segs_;
};

// One job over several switches (GRID): every switch runs the scheme's
// program with the job registered (aggregating the ranks in its mask), each
// switch is a peer of the others, workers accept results from any of them,
// and the PS fetches from every aggregating switch.
class TopologyCluster {
 public:
  struct Job {
    uint16_t id = 1;
    std::vector<NodeId> workers;  // by rank
    NodeId ps = kNoNode;
  };
  // `switches`: every switch's node id; `masks[i]`: the ranks switches[i] aggregates.
  TopologyCluster(const schemes::Scheme& scheme, Job job, std::vector<NodeId> switches, std::vector<RankBits> masks);

  // The program of switch i (configured by `cfg`), job registered, peers set.
  std::unique_ptr<dp::SwitchProgram> make_switch(size_t i, const dp::SwitchConfig& cfg) const;
  // Worker `rank`, whose fragments go to `aggregator` (a switch or the PS).
  host::WorkerConfig worker(size_t rank, NodeId aggregator, host::WorkerConfig base = {}) const;
  // The PS; `first_hop` is the switch it hangs off.
  host::PsConfig ps(NodeId first_hop, host::PsConfig base = {}) const;

 private:
  const schemes::Scheme& scheme_;
  Job job_;
  std::vector<NodeId> switches_;
  std::vector<RankBits> masks_;
};

// One shard's aggregation tree (ShardedPsCluster; schemes/atp_tree.hpp).
// Every worker addresses the shard's gradients to its first INA switch on
// the way to the PS (or to the PS itself); every INA switch on the tree
// addresses its aggregates to the next INA switch on its own way to the PS
// (or to the PS). Hops are explicit, so the tree holds whatever routes the
// engine's packets take in between. The PS's own rank is on the PS's host:
// its first hop is the PS and it is in no entry's masks (the PS's `direct`
// is the other ranks that reach it past every switch).
using ShardTree = schemes::AtpTree;

// Parameter servers co-located with the workers, one shard each (the Rina
// paper's PS and PS-based INA baselines, §VI-A), for one job or several
// sharing the network. A job of N workers (hosts by rank) has N shards, the
// PS of its shard k on the host of its rank k. Shards are numbered across
// the jobs (job 0's first, then job 1's: shard s of the cluster is the
// shard of the s-th host in that order), and each shard is a job of its own
// to the switches and the engine (id s + 1: its PSN stream, multicast group
// and job-table entry) with the N workers of its job. With `ina`, the
// graph's INA switches run the scheme's program and aggregate along each
// shard's tree (topo::Routing's shortest path from each worker, and from
// each INA switch, to the PS); without, every worker sends to the PS and no
// switch has a program. A job's hosts must be its own (no host in two jobs).
class ShardedPsCluster {
 public:
  ShardedPsCluster(const topo::Graph& g, std::vector<std::vector<NodeId>> jobs, bool ina);
  // One job.
  ShardedPsCluster(const topo::Graph& g, std::vector<NodeId> workers, bool ina)
      : ShardedPsCluster(g, std::vector<std::vector<NodeId>>{std::move(workers)}, ina) {}

  size_t jobs() const { return jobs_.size(); }
  size_t shards() const { return job_index_.size(); }  // over every job
  static uint16_t job_of(size_t shard) { return static_cast<uint16_t>(shard + 1); }
  const std::vector<NodeId>& workers(size_t job = 0) const { return jobs_.at(job); }
  size_t first_shard(size_t job) const { return first_.at(job); }  // the shard of the job's rank 0
  size_t job_index(size_t shard) const { return job_index_.at(shard); }
  const ShardTree& tree(size_t shard) const { return trees_.at(shard); }
  // The switches that run a program (with `ina`: the graph's INA switches, by id).
  const std::vector<NodeId>& ina_switches() const { return ina_; }
  bool runs_program(NodeId v) const;

  // How the INA switches are provisioned for `scheme` (the Rina paper's
  // §VI-A4: INA switches without a memory bottleneck, aggregating as fast as Rina's).
  struct Provision {
    // Contiguous, for a scheme whose jobs share a pool (schemes::memory_of):
    // every INA switch gives shard k the k-th of shards() equal contiguous
    // regions of its aggregators (schemes::Admission, Memory::Regions, one
    // pool) and every transport's window is capped at the region of the
    // switch with the fewest aggregators (`fewest_aggregators`), so no two
    // tasks meet at an aggregator. Hashed (or another scheme): the scheme's own memory.
    dp::PoolAddressing pool = dp::PoolAddressing::Hashed;
    size_t fewest_aggregators = 0;
    // > 0: a host paces what it sends over aggregation trees at this rate
    // in all, as a Rina member paces what it sends to its INA ToR
    // (host/ring.hpp): each transport of a shard whose tree has an INA
    // switch at ina_gbps / (N - 1), N the job's workers (worker() says why
    // every member of such a shard goes at that one rate).
    double ina_gbps = 0;
  };
  // Applies to the programs and transports made from then on (throws
  // std::invalid_argument if the regions do not fit).
  void provision(const schemes::Scheme& scheme, const Provision& p);
  // The window cap provision() gave every transport (0: none).
  uint32_t window_cap() const { return window_cap_; }

  // The scheme's program for INA switch `sw`: every shard registered with
  // its tree level here (a shard whose tree misses `sw`: no parent), and its
  // region with a contiguous pool (cfg.pool is the provisioned one), every
  // other INA switch a peer.
  std::unique_ptr<dp::SwitchProgram> make_switch(const schemes::Scheme& scheme, NodeId sw,
                                                 const dp::SwitchConfig& cfg) const;
  // Worker `rank` (of the shard's job)'s transport for `shard` over `base`:
  // gradients to its first hop on the tree, results accepted from the PS and
  // every INA switch, the provisioned window cap and pacing rate.
  host::WorkerConfig worker(size_t shard, size_t rank, host::WorkerConfig base = {}) const;
  // The PS of `shard` over `base`; its reminder fetches from the INA switches of the tree.
  host::PsConfig ps(size_t shard, host::PsConfig base = {}) const;

 private:
  std::vector<std::vector<NodeId>> jobs_;
  std::vector<size_t> first_, job_index_;
  std::vector<NodeId> ina_;
  std::vector<ShardTree> trees_;
  dp::PoolAddressing pool_ = dp::PoolAddressing::Hashed;  // provision(): the INA switches' addressing
  uint32_t window_cap_ = 0;
  double ina_gbps_ = 0;
};

}  // namespace ina::cluster
