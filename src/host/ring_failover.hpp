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
//  - every ToR that holds the job (RingMembership::serving, forward-only ones
//    of an earlier failure included) gets it again under the next epoch,
//    with its rack among the survivors (agent first) and the ranks that send
//    AllGather shards to it (dp::RinaJob::rack / upstream), or no rack;
//  - every survivor restarts from the first op not all of them finished
//    (ops before it stay done); results of the restarted and later ops are
//    the sum over the survivors only.
// H-AR needs racks of equal size, which a failure breaks: callers refuse it.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/time.hpp"

#include "host/ring.hpp"

namespace ina::host {

// A ring job's membership in one epoch.
struct RingMembership {
  std::vector<NodeId> nodes;                 // by rank
  std::vector<std::vector<uint16_t>> racks;  // ring order; each rack's ranks ascending (agent first)
  std::vector<NodeId> tors;                  // by rack: its INA ToR, or kNoNode
  uint8_t epoch = 0;
  // Every ToR holding the job, aggregating or only forwarding (a ToR whose
  // rack lost its agent keeps the job with no rack, and must learn later
  // epochs' workers too). Empty: the INA ToRs of `tors` with a rack of >= 2.
  std::vector<NodeId> serving;
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
  std::vector<RingTorJob> tors;               // every ToR holding the job (next.serving, in that order)
};

// The ToRs holding the job in `m` (m.serving, or what it defaults to).
std::vector<NodeId> serving_tors(const RingMembership& m);

// The re-plan after `failed` (old ranks) failed. ops[r]: the op survivor r
// (old rank) is running or next (host::RingEndpoint::op()); entries of failed
// ranks are ignored. Throws std::invalid_argument if a failed rank does not
// exist, fewer than two ranks survive, ops has the wrong size, or the epoch
// would wrap.
RingFailover ring_failover(const RingMembership& m, const std::vector<uint16_t>& failed, const std::vector<size_t>& ops,
                           const RingPlanner& plan);

// Checks a membership a survivor is handed (the UDP runtime's
// membership.E.json) against the current one: `cur` (nodes by current rank,
// the ToRs), `members` (the ranks of the first epoch, by current rank);
// `next` with `survivors` (first-epoch ranks, by new rank) and `restart_op`
// of `ops` ops. Returns what is wrong, naming the field and value; "" if
// nothing: the survivors are at least two, ascending and current members;
// nodes are theirs; the racks partition the new ranks (each ascending); one
// ToR per rack, each none or a current ToR; the ToRs holding the job are
// still the same (serving); the restart op exists (or is `ops`: every
// survivor had finished, nothing to redo).
std::string membership_problem(const RingMembership& cur, const std::vector<uint16_t>& members, const RingMembership& next,
                               const std::vector<uint16_t>& survivors, size_t restart_op, size_t ops);

}  // namespace ina::host

namespace ina::host {

// Failure detection by agreement (docs/architecture.md, "Failures"), sans
// I/O: the UDP runtime (rt::run_ring_worker) feeds it what it reads from the
// barrier directory and the clock, and does what it returns; every decision
// is here.
//  - A member whose heartbeat counter has not changed for `detect` is
//    suspected; a member that beats again, or is done with the epoch, is not.
//  - Two guards against a stalled observer rather than a failed member: an
//    observer that did not look for more than detect/2 (it was descheduled,
//    or the whole host stalled) restarts its clocks and suspects nobody new;
//    one that finds more than half of the others silent suspects nobody (it
//    is more likely the one cut off; a single failure is what is handled).
//  - The control node is the lowest member this observer does not suspect;
//    it may act (re-plan with ring_failover) only when every member it does
//    not suspect publishes the same suspicion set as its own. Two observers
//    that see different sets therefore never both act: each waits for the
//    other to name its set.
class FailureAgreement {
 public:
  // `me` and `members` are ranks of the job's first epoch; members ascending.
  FailureAgreement(uint16_t me, Time detect, std::vector<uint16_t> members);

  // One member's heartbeat as read now (members other than this observer).
  struct Beat {
    uint16_t rank = 0;
    uint64_t count = 0;  // its heartbeat counter (0: none yet)
    bool done = false;   // it finished the epoch's ops (not watched)
  };
  // A look at the heartbeats at `now`. Returns whether the suspicion set changed.
  bool observe(Time now, const std::vector<Beat>& beats);
  // The suspicion set to publish (sorted ranks); empty: withdraw any published.
  const std::vector<uint16_t>& suspects() const { return suspects_; }
  // The lowest member not suspected (this observer if it suspects all).
  uint16_t control() const;
  bool is_control() const { return control() == me_; }

  // A member's published state for the next epoch: the set it suspects and its op.
  struct Published {
    std::vector<uint16_t> suspects;
    size_t op = 0;
  };
  struct Decision {
    bool act = false;               // this observer is the control node and everyone agrees
    std::vector<uint16_t> failed;   // positions in members() (ring_failover's `failed`)
    std::vector<size_t> ops;        // by position in members() (ring_failover's `ops`)
    std::vector<uint16_t> waiting;  // members not suspected whose published set differs (or is missing)
  };
  // The control node's decision from the members' published states (this
  // observer's own is its suspects() and `my_op`). act is false unless this
  // observer suspects someone and is the control node.
  Decision decide(const std::map<uint16_t, Published>& published, size_t my_op) const;

  // The next epoch's members (the survivors, ascending): suspicions and clocks start again.
  void adopt(std::vector<uint16_t> survivors);
  const std::vector<uint16_t>& members() const { return members_; }
  uint16_t me() const { return me_; }
  uint64_t withdrawn() const { return withdrawn_; }  // suspicions dropped because the member beat again

 private:
  bool suspected(uint16_t r) const;
  struct Seen {
    uint64_t count = 0;
    Time at = 0;
  };
  uint16_t me_;
  Time detect_;
  std::vector<uint16_t> members_;
  std::map<uint16_t, Seen> seen_;
  std::vector<uint16_t> suspects_;
  std::optional<Time> looked_;  // the last look
  uint64_t withdrawn_ = 0;
};

}  // namespace ina::host
