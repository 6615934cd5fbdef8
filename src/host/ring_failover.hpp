#pragma once
// Rina's failure handling (Rina paper §IV-C "Reliability"): the control
// node's re-plan of a ring job (RAR, Rina) after workers fail. One decision,
// shared by both engines: the simulator's exp::run_collective applies it by
// direct calls, the UDP runtime's control node (the lowest surviving rank of
// `ina ring-worker`) computes it and hands it to every survivor and every ToR
// switch daemon serving the job (docs/architecture.md, "Failures").
//
// The rule:
//  - the survivors keep their order and are ranked anew 0..n-1;
//  - each rack keeps its surviving ranks (racks left empty disappear); a rack
//    whose agent (its lowest rank) failed gets no INA ToR: its members fall
//    back to autonomous RAR workers (§IV-C: the agent holds the rack's
//    state), and its ToR keeps the job with no rack (it only forwards);
//  - every ToR that served the job gets it again under the next epoch, with
//    its rack among the survivors (agent first) and the ranks that send
//    AllGather shards to it (dp::SwitchJob::rack / upstream);
//  - every survivor restarts from the first op not all of them finished
//    (ops before it stay done); results of the restarted and later ops are
//    the sum over the survivors only.
// H-AR needs racks of equal size, which a failure breaks: callers refuse it.
#include <cstdint>
#include <functional>
#include <vector>

#include "host/ring.hpp"

namespace ina::host {

// A ring job's membership in one epoch.
struct RingMembership {
  std::vector<NodeId> nodes;                 // by rank
  std::vector<std::vector<uint16_t>> racks;  // ring order; each rack's ranks ascending (agent first)
  std::vector<NodeId> tors;                  // by rack: its INA ToR, or kNoNode
  uint8_t epoch = 0;
};

// The stages of every rank for n ranks in these racks (the scheme's plan_rar /
// plan_rina; schemes::ring_plan).
using RingPlanner = std::function<std::vector<std::vector<RingStage>>(
    size_t n, const std::vector<std::vector<uint16_t>>& racks, const std::vector<NodeId>& tors)>;

// A ToR that served the job before the failure, and its job under the new epoch.
struct RingTorJob {
  NodeId tor = kNoNode;
  std::vector<uint16_t> rack;      // its rack in new ranks, agent first; empty: it only forwards
  std::vector<uint16_t> upstream;  // the ranks that send AllGather shards to that rack
  bool aggregates() const { return !rack.empty(); }
};

struct RingFailover {
  RingMembership next;                        // the survivors' membership (epoch + 1)
  std::vector<uint16_t> survivors;            // by new rank: the rank each had before
  std::vector<int> new_rank;                  // by old rank: its new rank, -1 if it failed
  std::vector<std::vector<RingStage>> plan;   // by new rank
  size_t restart_op = 0;                      // every survivor restarts here
  std::vector<RingTorJob> tors;               // every ToR that served the job (a rack of >= 2 ranks)
};

// The re-plan after `failed` (old ranks) failed. ops[r]: the op survivor r
// (old rank) is running or next (host::RingEndpoint::op()); entries of failed
// ranks are ignored. Throws std::invalid_argument if a failed rank does not
// exist, fewer than two ranks survive, ops has the wrong size, or the epoch
// would wrap.
RingFailover ring_failover(const RingMembership& m, const std::vector<uint16_t>& failed, const std::vector<size_t>& ops,
                           const RingPlanner& plan);

}  // namespace ina::host
