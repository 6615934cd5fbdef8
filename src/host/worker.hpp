#pragma once
// Worker transport (sans-I/O): turns allreduce operations into a PSN stream
// of gradient packets and assembles the results carried by Acks.
//
//  - All ops of a job form one PSN stream in submit order; every worker of the
//    job submits the same ops, so equal PSNs meet in the same aggregator.
//  - Sliding window of in-flight packets, initial 60 KB (DSA §III-D); AIMD on
//    ECN as in DSA/ATP: +1 packet per window of Acks, halved on an ECN-echo
//    Ack (at most once per RTT). Out-of-order and duplicate Acks are normal
//    with two result sources (switch and PS) and change nothing; neither does
//    a timeout, which in INA mostly means a task is stuck, not congestion.
//  - Isolated regions (SwitchML) add a cap: no PSN may run `window_cap` or
//    more past the lowest unacknowledged one.
//  - A RateSync from a switch (GRID §5.2: the fragment was dropped at a
//    collision) halves the window and resends that packet at once.
//  - Optional pacing at a planned rate (GRID's per-worker sending rate).
//  - Retransmission with an EWMA RTO (TCP's estimator, Karn's rule, floor
//    min_rto, exponential backoff per packet); after every `reminder_after`
//    retransmissions of a packet a Reminder goes to the PS (DSA §IV-B).
//  - Optional time-based fast retransmit (`fast_retransmit`, after TCP RACK,
//    RFC 8985): a result for a packet first sent at t means every packet
//    last sent before t - srtt/4 and still without a result is presumed lost;
//    it is retransmitted at once instead of after an RTO, and the window is
//    halved (a loss is a congestion signal; once per RTT). Off in the
//    simulator's paper scenarios (the papers' workers only time out); on in
//    the UDP runtime, where the RTO floor must sit above scheduling jitter
//    and waiting for it on every loss would stall the window.
//  - Optional delay signal (`delay_target` > 0): an Ack whose round trip
//    exceeds the smallest one seen by more than the target counts as an
//    ECN echo (the window is halved, once per RTT). For networks whose
//    bottleneck queues cannot mark ECN (a software switch over ordinary
//    links, tc-shaped ports): without it the window grows until the queue
//    delay outruns the RTO and timeouts cascade. Off in the simulator (its
//    switches mark ECN, as the papers' do).
//  - P4INC-AOI (§VI-B; `segment_size` > 0): the job owns aggregators
//    [segment_mem_id, + segment_size) of the switch, and the worker names each
//    packet's aggregator (agg_index): MemID + Hash(JobID, FragmentID) mod Size,
//    redirected (linear probing) past the aggregators of the job's previous
//    H - 1 fragments, H = max(1, Size / 2). Every worker of the job assigns
//    the same fragments in the same order, so they agree on every index
//    (a redirect decided on a worker's own in-flight set would not: after a
//    loss the workers' sets differ). A packet whose aggregator's previous
//    fragment has no result here yet carries kBehind (the switch refuses it:
//    dataplane/aoi.cpp). AIMD as the paper's: +1 packet per result up to
//    the threshold min(H, bdp_packets), where the window stops growing (the
//    paper's "until reaching a threshold", set from the job's aggregators,
//    bandwidth and RTT); an ECN notification (RateSync with kEcn: an
//    asynchronous error) halves the window (once per RTT), which then grows
//    +1 per window back to the threshold; the refused packet is retransmitted
//    when the result it lacked arrives (at once if it already has). Loss
//    recovery: a result for a fragment first sent after an outstanding one
//    was last sent retransmits that one at once (the paper's "a Fragment ID
//    greater than expected", by fragment id, not time: it does not shrink
//    the window), and the RTO for the tail.
//  - A PS GradRequest is answered with this worker's gradient, or with the
//    result if the worker already has it. A request for a packet not sent yet
//    is remembered: that packet then goes straight to the PS.
//  - Retention (R = retain_ops, equal for all workers of a job): a worker keeps
//    the R completed ops before its oldest incomplete op, and never starts an
//    op R or more past its oldest incomplete op. Then, if any worker has
//    retired op k, every worker has completed op k (a peer completed op k + R,
//    which needed this worker to start it, which needed op k done here). So a
//    request for a retired PSN is answered "retired" and the PS drops the
//    entry: it is a stale copy of a finished task.
// The transport is not a Node itself: a host node owns it and forwards
// packets and timers whose token has bit 63 clear.
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <memory>
#include <utility>
#include <vector>

#include "core/deadline_queue.hpp"
#include "core/rtt_estimator.hpp"
#include "host/congestion_window.hpp"
#include "host/delay_signal.hpp"
#include "host/record_ring.hpp"
#include "host/tensor_io.hpp"
#include "proto/node.hpp"
#include "host/profile.hpp"

namespace ina::host {

struct WorkerConfig {
  uint16_t job = 1;
  uint8_t rank = 0;
  uint8_t nworkers = 1;
  NodeId self = kNoNode;
  NodeId aggregator = kNoNode;  // the switch the gradients are addressed to
  NodeId ps = kNoNode;          // fallback server (kNoNode: none, e.g. SwitchML)
  // Further switches whose results and rate syncs this worker accepts
  // (multi-switch topologies: the result may be multicast from another
  // switch). Results come only from these, the aggregator and the PS.
  std::vector<NodeId> switches;
  uint16_t payload_values = 64;
  double init_window = 196;     // packets (60 KB of 306 B packets)
  double max_window = 1e6;
  bool aimd = true;
  // How often an ECN echo halves the window. false: at most once per
  // smoothed RTT (the papers' "once per RTT", as the simulator's paper
  // scenarios run). true: besides that, only for a packet first sent after
  // the last decrease, as RFC 3168's CWR rule reacts once per window of
  // data; echoes for older packets, which a slow path (the PS's) delivers
  // more than one smoothed RTT later, then do not halve it again. A scenario setting
  // (transport.ecn_per_window); DSA's calibrated overlay sets it.
  bool ecn_per_window = false;
  uint32_t window_cap = 0;      // isolated regions: slots per pool (0 = no cap)
  double rate_gbps = 0;         // pacing: planned sending rate (GRID); 0 = window-limited only
  // Without a planned rate: pace first transmissions at the window's rate
  // over the smoothed RTT, this stream at most at nic_gbps (a host's other
  // streams share its NIC, which serializes them) (host::window_pace_gbps, as a
  // DCQCN NIC's rate limiter sends a rate, never a window's burst; the ring
  // endpoints under the Rina paper transport pace alike). Off: a window's
  // packets leave as fast as the acknowledgements open it.
  bool window_paced = false;
  double nic_gbps = 0;          // the host's link (0: no cap)
  uint32_t wire_bytes = 306;    // bytes per full packet on the wire, for pacing
  // Defaults: the `paper` profile (host/profile.hpp).
  Time min_rto = kPaperProfile.min_rto;
  Time max_rto = 200 * kMs;
  bool fast_retransmit = kPaperProfile.fast_retransmit;  // RACK-style loss detection (see the header)
  Time delay_target = kPaperProfile.delay_target;       // queueing delay that counts as congestion (0: off)
  int reminder_after = 3;
  size_t retain_ops = kPaperProfile.retain_ops;
  // P4INC-AOI: the job's aggregator segment <MemID, Size> (size 0: not a segment scheme).
  uint32_t segment_mem_id = 0;
  uint32_t segment_size = 0;
  // P4INC-AOI: the job's bandwidth x the worker-switch RTT, in packets. The
  // paper's AIMD threshold is "set according to the aggregators and
  // bandwidth allocated to the worker's job and the RTT": min(Size / 2, this).
  // 0: not known (Size / 2 alone).
  double bdp_packets = 0;
};

struct WorkerStats {
  uint64_t sent = 0, retransmits = 0, reminders = 0, timeouts = 0, fast_retransmits = 0;
  uint64_t acks = 0, dup_acks = 0, ece_acks = 0, delayed_acks = 0, decreases = 0, rate_syncs = 0;
  uint64_t grads_to_ps = 0, results_to_ps = 0, retired_to_ps = 0, redirected = 0, malformed = 0;
  uint64_t foreign = 0;  // dropped: not from this job's switch or PS (job isolation)
  uint64_t ecn_notices = 0;  // P4INC-AOI: asynchronous-error notifications from the switch
  uint64_t behind = 0;       // P4INC-AOI: packets sent with kBehind
};

// Priority of a packet of an op with this tag (DSA's Eq. 1 is one such).
// Asked for every packet sent, retransmissions included; an owner that
// prices a tensor once answers all its packets alike
// (workload::TrainingWorker, the PS family's hosts in experiment/).
class PriorityFn {
 public:
  virtual ~PriorityFn() = default;
  virtual uint32_t priority(uint32_t tag, Time now) = 0;
};

class WorkerTransport {
 public:
  static constexpr uint64_t kOwnerTimer = 1ULL << 63;  // tokens with this bit belong to the owner
  static constexpr uint64_t kPaceTimer = 1;            // the transport's pacing timer (RTO timer is 0)

  explicit WorkerTransport(const WorkerConfig& cfg);
  // Neither copied nor moved: find()'s cache points into ops_.
  WorkerTransport(const WorkerTransport&) = delete;
  WorkerTransport& operator=(const WorkerTransport&) = delete;

  // Queues an allreduce of `elems` values; returns its op id (0, 1, ...).
  uint64_t submit(std::shared_ptr<TensorIO> io, uint64_t elems, uint32_t tag = 0);
  // Sends what the window allows. Call after submit().
  void pump(Time now, Effects& fx);
  void on_packet(Packet* p, Time now, Effects& fx);
  void on_timer(uint64_t token, Time now, Effects& fx);

  // Ops completed since the last call (ids in completion order).
  std::vector<uint64_t> take_completed() { return std::exchange(completed_, {}); }
  bool has_completed() const { return !completed_.empty(); }  // (a test per packet, before take_completed())
  bool busy() const { return incomplete_ > 0; }
  void set_priority_fn(PriorityFn* f) { prio_ = f; }

  const WorkerStats& stats() const { return st_; }
  const WorkerConfig& config() const { return cfg_; }
  double cwnd() const { return cw_.cwnd(); }
  Time rto() const { return rtt_.timeout(); }
  double threshold() const { return cw_.threshold(); }  // P4INC-AOI's AIMD threshold
  // P4INC-AOI: the aggregator index of fragment `psn` (sent and without a result yet), or -1.
  int64_t index_of(uint32_t psn);
  uint32_t next_psn() const { return next_psn_; }
  uint32_t lowest_unacked() const;  // next_psn() when nothing is outstanding

 private:
  struct Rec {
    Time sent = 0;       // first transmission
    Time last_tx = 0;    // latest transmission
    Time deadline = 0;
    uint16_t retx = 0;
    uint32_t slot = 0;           // P4INC-AOI: the aggregator (an index in the segment)
    uint32_t prev = kNoFragment; // P4INC-AOI: the fragment that used it before
    uint32_t gap_mark = 0;       // P4INC-AOI: a result for a fragment >= this one shows this one lost
  };
  static constexpr uint32_t kNoFragment = 0xFFFFFFFF;
  // The records of an op's packets [low, next) that are not done, in a
  // ring sized to what is in flight (host/record_ring.hpp). It starts at
  // RecordRing::kMinRecs: a transport of a host with many (a PS shard's
  // each, 1/N of the host's window) holds a few packets; it doubles as the
  // window grows.
  using RecRing = RecordRing<Rec>;
  struct Op {
    uint64_t id;
    uint32_t tag;
    std::shared_ptr<TensorIO> io;
    uint64_t elems;
    uint32_t psn0, npkts;
    uint32_t next = 0;   // next packet index to send
    uint32_t ndone = 0;
    uint32_t low = 0;    // lowest index not done
    bool complete = false;
    RecRing recs;        // packets [low, next)
    bool done(uint32_t idx) const { return idx < low || (idx < next && recs.done(idx)); }
  };

  Op* find(uint32_t psn) {  // most packets belong to the op of the previous one
    if (last_found_ && psn - last_found_->psn0 < last_found_->npkts) return last_found_;
    return find_slow(psn);
  }
  Op* find_slow(uint32_t psn);
  // A result packet this worker owns and has read, sent again as its next
  // packet (what free() then alloc() would hand it, without the two
  // calls), cleared as alloc() returns one.
  Packet* take_spare() {
    Packet* p = spare_;
    spare_ = nullptr;
    p->clear();
    return p;
  }
  uint16_t count_of(const Op& op, uint32_t idx) const;
  [[gnu::always_inline]] inline void send_data(Op& op, uint32_t idx, Time now, Effects& fx, bool resend);
  [[gnu::always_inline]] inline void on_ack(Packet* p, Time now, Effects& fx);  // (inlined into on_packet())
  [[gnu::always_inline]] inline void send_allowed(Time now, Effects& fx);  // pump(), inlined into it and on_ack()
  void on_grad_request(Packet* p, Time now, Effects& fx);
  void on_rate_sync(Packet* p, Time now, Effects& fx);
  void on_rto(Time now, Effects& fx);
  // The record of `psn` if (psn, dl) is its current retransmission deadline, else nullptr.
  Rec* rto_current(uint32_t psn, Time dl);
  void decrease(Time now);  // a congestion signal other than an ECN echo
  double pace_gbps() const;  // the rate first transmissions are spaced at (0: not paced)
  void detect_losses(Time now, Effects& fx);
  bool segmented() const { return cfg_.segment_size > 0; }
  bool has_result(uint32_t psn);
  void assign_slot(Rec& r, uint32_t psn);
  void on_result_aoi(uint32_t psn, Time now, Effects& fx);
  void resend(uint32_t psn, Time now, Effects& fx, uint64_t& counter);

  WorkerConfig cfg_;
  WorkerStats st_;
  PriorityFn* prio_ = nullptr;
  std::deque<Op> ops_;
  size_t send_op_ = 0;       // index in ops_ of the op being sent
  Op* sending_ = nullptr;    // ops_[send_op_] while it has packets to send (else looked up again)
  size_t first_open_ = 0;    // index in ops_ of the first incomplete op
  Op* last_found_ = nullptr;  // the last find() hit (an element of ops_)
  size_t incomplete_ = 0;
  uint64_t next_op_id_ = 0;
  uint32_t next_psn_ = 0;
  CongestionWindow cw_;
  double aoi_threshold_ = 0;  // P4INC-AOI: where the window stops growing (0: not a segment scheme)
  uint64_t inflight_ = 0;
  RttEstimator rtt_;
  DelaySignal delay_;         // delay_target (off at 0)
  Time rack_sent_ = -1;       // fast retransmit: first-send time of the latest-sent packet with a result
  Time next_tx_ = 0;          // pacing: earliest time of the next first transmission
  bool pace_armed_ = false;
  DeadlineQueue<uint32_t> rto_q_;  // psn by retransmission deadline
  const RankBits full_;            // every rank of the job: a result's bitmap
  Packet* spare_ = nullptr;        // take_spare()
  std::unordered_set<uint32_t> to_ps_;  // unsent PSNs the PS asked for
  std::vector<uint64_t> completed_;
  // P4INC-AOI.
  uint32_t horizon_ = 1;            // H: fragments in a row that never share an aggregator
  std::vector<uint32_t> owner_;     // by aggregator of the segment: the last fragment assigned to it
  uint32_t sent_hi_ = 0;            // one past the greatest fragment sent
  std::unordered_map<uint32_t, uint32_t> waiting_;  // refused fragment by the fragment whose result it waits for
};

}  // namespace ina::host
