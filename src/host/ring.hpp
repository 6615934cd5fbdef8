#pragma once
// Ring collectives as sans-I/O host endpoints: Ring-AllReduce (RAR),
// hierarchical AllReduce (H-AR) and Rina's agent / rack member / autonomous
// worker (Rina paper §II-B, §III-A, §IV). One RingEndpoint per worker; the
// simulator and the UDP runtime drive the same object. Its code, one
// concept per file: ring_plan.cpp (plans), ring_step_compiler.cpp (a rank's
// stages into steps), ring.cpp (the endpoint running ops and steps),
// ring_transfer.cpp (the reliable shard transfer, its window in
// host/congestion_window.hpp), ring_barrier.cpp (the step barrier).
//
// A job's collective is a list of stages per rank (RingStage). A stage is a
// ring of groups over a range of the gradient: a group is either one
// autonomous worker (plain RAR member) or a Rina rack: the ranks under an
// INA ToR, the lowest first (the agent). With G groups the range is cut
// into G shards; group q (ring position) does, per op:
//   ScatterReduce, steps s = 0..G-2: send shard (q - s) mod G (its own
//     values plus the partial received in step s - 1) to the next group,
//     receive shard (q - 1 - s) mod G from the previous one;
//   then shard (q + 1) mod G is complete: own values + the last partial
//     (a Rina rack reduces it through its ToR once more, to the agent: step G-1);
//   AllGather, steps s = 0..G-2: send the complete shard (q + 1 - s) mod G
//     on (s = 0: the own one; later: the one received in step s - 1),
//     receive shard (q - s) mod G;
//   in a Rina rack (Fig. 8), shards reach every member at once: a shard for
//     the rack is addressed to its ToR, which copies it to the members; the
//     agent's step-0 send (the rack's own complete shard) goes to its own
//     ToR, which copies it to the other members and, in the same pass, to
//     the next group; a later step's send (the shard the rack received in
//     the step before) is made by the rack's members in turn (step s by
//     member s mod k), so no uplink carries every shard. The members
//     acknowledge to the ToR, which sends the sender one acknowledgement
//     for the rack. With G = 1 the agent's step 0 only feeds its rack.
//   Ours, not the paper's: the paper's ToR forwards an incoming shard on to
//     the next group in the same pass (cut-through around the ring); that
//     would need each ToR to hold acknowledgement state for every later
//     group, so here the rack forwards it in its next step (G - 1
//     AllGather steps, 2G - 1 per op with ScatterReduce's G).
// A step starts when the previous step's shard has fully arrived and the
// endpoint's previous send is fully acknowledged (the dependency chain of
// §III-A; no barrier unless step_barrier, below). H-AR is three stages: a
// ReduceScatter ring inside each rack, an AllReduce ring among the ranks
// holding the same rack shard in every rack, and an AllGather ring inside
// each rack.
//
// A Rina group above the ToR (§IV-D, merge_rina_group): its top switch is
// RingGroup::tor, and each rank sends its ScatterReduce shards to (and has
// them acknowledged by, and receives AllGather copies from) its entry
// switch, a level below the top that aggregates its part first
// (dataplane/rina.cpp); the pull and AllGather shards for the group go to
// the top.
//
// Rina's data path (dataplane/rina.cpp): the agent sends a RingPull with
// the step's tag to its ToR, which copies it to the rack; every member
// (the agent too) then streams its shard to the ToR, addressed onward to
// the next group's entry (agg_index); the ToR sums the rack's packets in a
// contiguous region of its aggregators and forwards one partial; the next
// group's entry acknowledges it to the ToR, which frees the slot and copies
// the acknowledgement to the rack. The agent's contribution includes the
// partial it received, so the group's output carries everything upstream.
//
// Transport: every shard transfer is reliable on its own: a window of
// packets (AIMD: halved at most once per RTT on an ECN echo or a loss, a
// loss seen by RTO or by kDupThresh = 3 later packets completing first, which
// also resends the packet at once; starting at init_window, one window per
// endpoint, carried from step to step and op to op; AllGather sends may
// start from one packet and grow by slow start until the first echo, as
// Rina §IV-C lets AllGather start from zero: which ones, RinaTransport
// below), per-packet acknowledgements from
// every receiver the transfer has (a broadcast is done when the rack members
// and the next group have it), retransmission on an EWMA RTO with backoff
// (core/rtt_estimator.hpp, the worker transport's estimator), and packets
// to a Rina ToR kept within its region. Late members: a Rina rack's
// ScatterReduce packet waits in its ToR's slot until every member's has
// come, and a member may get its agent's pull before it can begin the step
// (it still finishes an earlier step, e.g. the previous op's AllGather send,
// which the agent has no part in). Such a member answers the pull "late"
// (RingPull | kBusy to its ToR) and "begun" (| kResume) when it begins; the
// ToR tells the rack when the step turns held and when no member holds it
// any more (dataplane/rina.cpp). While held, a sender's RTO in that step is
// no loss: the packet is timed again (no retransmission, no window or RTO
// change) and the agent pulls again (a lost word or answer is recovered by
// the answer to that pull); once released, the packets are timed afresh,
// and none sent before the release gives an RTT sample (its round trip
// holds the wait). A packet's RTO runs from the later of its send and its
// transfer's last completed packet (RFC 6298 5.3: a packet waiting its
// turn at the ToR behind a slower member's is no loss while the transfer
// moves), from its send alone once a timeout has backed the RTO off.
// Receivers keep a bitmap per step:
// duplicates are counted and acknowledged again, never added twice; packets
// of a step more than six receives ahead are refused (kBusy): the sender
// holds them, neither lost nor timed, until the receiver's resume (or a
// persist-timer probe) says they fit (an unpaced rank runs that far ahead
// of a paced INA rack). Optional per-step straggler delay
// (Rina Eq. 1): before sending a step, a worker waits N(k/N, sigma^2) (>= 0).
//
// Optional step barrier (RingConfig::step_barrier; Rina §III-A: "each round
// of communication has a barrier to global synchronization", as NCCL/MPI
// rings have, and Eq. 1 assumes). Without it a step waits only for the
// chain above. With it, the job's step codes in which some rank sends or
// receives (barrier_codes_: the same list at every rank, from the stages'
// shape; the op's last one excluded, nothing follows it in the op) each end
// with a job-wide barrier: a rank that has finished every step of its own
// with that code or a lower one (incoming shard complete, send fully
// acknowledged; a rank with no step of that code right after the previous
// barrier) reports to the coordinator, the job's lowest rank (RingBarrier,
// psn 0, the code's tag); when every rank of the job has reported, the
// coordinator sends each a release (psn 1) and no rank starts a step with a
// higher code before it has the release. Every rank reports every barrier,
// so a barrier waits for the ranks that act in the step; in Rina those are
// every rank in ScatterReduce (each member sends its shard to the ToR) and,
// in an INA rack's AllGather step, the member that sends and the members
// that receive. A step's straggler delay is drawn when the step becomes
// current, i.e. after the release: a step lasts the slowest actor's
// delay + transfer, Eq. 1's Max(O(G_u) + C(G_u)) per round. So RAR's 2(N-1)
// steps each wait for the largest of N draws, Rina's G ScatterReduce steps
// for the largest of N and its G - 1 AllGather steps for the largest of the
// G senders' draws. H-AR's parallel rings (inside every rack, then across
// racks) share one job-wide barrier per step. Reliability: a report is
// resent on the RTO (doubling, up to max_rto) until its release arrives; the
// coordinator answers a report of a barrier it already released with that
// release again (so a lost release is recovered by the report's resend),
// ignores a second report, and drops reports ahead of the barrier it
// gathers; releases already applied are dropped as duplicates; barrier
// packets carry the epoch in their tag (other epochs are stale).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/deadline_queue.hpp"
#include "core/rng.hpp"
#include "core/rtt_estimator.hpp"
#include "host/congestion_window.hpp"
#include "host/delay_signal.hpp"
#include "host/ring_record.hpp"
#include "host/tensor_io.hpp"
#include "host/value_store.hpp"
#include "proto/node.hpp"

namespace ina::host {

struct RingGroup {
  std::vector<uint16_t> ranks;  // one rank (autonomous) or a Rina rack, agent (lowest rank) first
  NodeId tor = kNoNode;         // the group's top INA switch: the rack's ToR, or one above (Rina §IV-D); kNoNode: autonomous
  // Above the ToR: per rank (as `ranks`), the INA switch it sends its
  // ScatterReduce shards to and has them acknowledged by (its own INA ToR,
  // a level below `tor`, see dataplane/rina.cpp, or `tor`). Empty: `tor` for all.
  std::vector<NodeId> entry;
  bool ina() const { return tor != kNoNode; }
};

struct RingStage {
  enum class Kind : uint8_t { AllReduce, ReduceScatter, AllGather };
  Kind kind = Kind::AllReduce;
  std::vector<RingGroup> groups;  // ring order
  uint64_t off = 0, len = 0;      // the range of the gradient this ring covers
  // ReduceScatter: the complete shard stays with the worker (input of the
  // next stage); AllGather: each worker starts from the shard a previous
  // stage left it. The last stage writes results.
};

// The shards of [off, off + len) among g groups: shard c is [off + c*len/g, off + (c+1)*len/g).
inline uint64_t shard_begin(const RingStage& st, size_t c) {
  return st.off + st.len * c / st.groups.size();
}

// Plans (identical at every rank): the stages each rank runs, by rank.
// RAR over n ranks.
std::vector<std::vector<RingStage>> plan_rar(size_t n, uint64_t elems);
// Rina: `racks` partitions the ranks (each rack's ranks ascending, racks in
// ring order); tors[r] is rack r's INA ToR or kNoNode (its ranks are then
// autonomous workers). A rack of one rank is autonomous whatever its ToR.
std::vector<std::vector<RingStage>> plan_rina(const std::vector<std::vector<uint16_t>>& racks,
                                              const std::vector<NodeId>& tors, uint64_t elems);
// Rina above the ToR (§IV-D): the groups of `plan` (identical at every rank)
// whose ranks all lie in `ranks` become one group at the position of the
// first, `ranks` (ascending) with top switch `top` and per-rank entry
// switches `entry` (as RingGroup::entry). std::invalid_argument if a merged
// group is not wholly inside `ranks` or the group would exceed 64 ranks.
void merge_rina_group(std::vector<std::vector<RingStage>>& plan, std::vector<uint16_t> ranks, NodeId top,
                      std::vector<NodeId> entry);
// H-AR: every rack must have the same number of ranks (std::invalid_argument otherwise).
std::vector<std::vector<RingStage>> plan_hierarchical(const std::vector<std::vector<uint16_t>>& racks, uint64_t elems);
// The ranks that send AllGather shards to `rank`'s group in its Rina stage
// (the previous group's ranks): the rows of its ToR's acknowledgement slots
// (dp::RinaJob::upstream). Empty if `rank` is in no INA group.
std::vector<uint16_t> upstream_of(const std::vector<RingStage>& stages, uint16_t rank);
// Ring steps one op takes at `rank` (sends + the INA rack's extra steps).
uint64_t ring_steps(const std::vector<RingStage>& stages, uint16_t rank);

// Rina §IV-C's congestion control, for a Rina rack's sends (ScatterReduce
// to the own INA ToR, the rack's AllGather sends); of it, autonomous
// workers, RAR and H-AR see only the NIC's rate limit (below).
enum class RinaTransport : uint8_t {
  // The paper's: ScatterReduce at "full speed" (paced at ina_gbps, which
  // the simulator's experiment layer and the time model set by
  // rina_pace_gbps below), the window carried over from step to step, AIMD
  // on echoes and losses, its growth stopping where it covers ina_gbps x
  // srtt ("ceasing window expansion upon reaching full speed"; no ceiling
  // when not paced); AllGather "starts from zero": every INA rack worker's first
  // AllGather send of an op starts from one packet in slow start (the
  // agent's broadcast and each member's first forward), and its later
  // AllGather sends in that op continue that window (allgather_all_from_zero
  // still restarts every one). Every send of every worker (an INA rack's,
  // an autonomous one's, RAR's and H-AR's, which run over the same NICs)
  // goes at most at its NIC's rate (nic_gbps), its growth stopping where it
  // covers that rate: DCQCN's rate limiter never sends faster than the
  // link, so the worker's window does not queue (or drop) behind its own
  // NIC, nor do the acknowledgements it sends. Those share the link: each
  // delays its next packet by its own wire time. The PS family's senders on
  // the same NICs pace at their window's rate too, without the ceiling
  // (host::WorkerConfig::window_paced, which the simulator's collectives
  // set under "paper").
  Paper,
  // The endpoint's plain AIMD: paced only if ina_gbps > 0, growth up to
  // max_window, and AllGather slow start only where allgather_from_zero /
  // allgather_all_from_zero say.
  Aimd,
};
// "Full speed" of Rina §IV-C, footnote 1: a Tofino-1 with 100G ports
// aggregates at about 20 Gbps.
inline constexpr double kRinaFullSpeedGbps = 20;
// The rate a Rina rack's members pace their ScatterReduce to the ToR at
// (Gbps; 0: not paced): `ina_gbps` if set, else full speed under Paper.
inline double rina_pace_gbps(double ina_gbps, RinaTransport t) {
  if (ina_gbps > 0) return ina_gbps;
  return t == RinaTransport::Paper ? kRinaFullSpeedGbps : 0;
}
// The rate a ring send's link allows (Gbps; 0: no limit): a ScatterReduce
// send to the own ToR at ina_gbps; under Paper every send at most at the
// NIC's rate (nic_gbps; 0: unknown), as DCQCN's rate limiter sends ("full
// speed"). RingEndpoint::link_rate and the Rina time model.
inline double ring_link_gbps(bool to_tor, double ina_gbps, double nic_gbps, RinaTransport t) {
  double r = to_tor && ina_gbps > 0 ? ina_gbps : 0;
  if (t == RinaTransport::Paper && nic_gbps > 0) r = r > 0 ? std::min(r, nic_gbps) : nic_gbps;
  return r;
}

struct RingConfig {
  uint16_t job = 1;
  uint16_t rank = 0;
  std::vector<NodeId> nodes;      // by rank
  std::vector<RingStage> stages;  // this rank's stages (a plan's entry)
  uint16_t payload_values = 64;
  uint32_t region = 0;            // Rina: aggregators the job has in each ToR (window cap to a ToR)
  double init_window = 196;       // packets
  double max_window = 1e6;
  // Rina §IV-C, "AllGather starting from zero": the agent's AllGather
  // broadcast starts at one packet (slow start). With allgather_all_from_zero
  // too, every AllGather send of this endpoint does (set for the workers of
  // INA racks; autonomous workers stay exactly RAR).
  bool allgather_from_zero = false;
  bool allgather_all_from_zero = false;
  // Who relays an INA rack's later AllGather shards (steps s >= 1): its
  // members in turn (false: step s by the member at rack position s mod k),
  // or its agent alone (true), whose every relay then waits for its previous
  // send's acknowledgements. Job-wide: the receivers expect the same sender.
  bool agent_relays = false;
  double ina_gbps = 0;            // Rina: pace packets to the ToR at this rate (0: no pacing)
  // The host's link rate (Gbps; 0: unknown). Under RinaTransport::Paper a
  // worker paces its sends at its window's rate over the smoothed RTT, at
  // most at this one (RingEndpoint::pace_rate).
  double nic_gbps = 0;
  RinaTransport rina_transport = RinaTransport::Paper;
  uint32_t wire_bytes = 306;      // per full packet, for pacing
  uint32_t ack_wire_bytes = 64;   // per acknowledgement (a minimum frame), for pacing at the NIC's rate
  Time min_rto = 200 * kUs;
  Time max_rto = 2 * kSec;  // above any queueing delay a link can build (4 MB at 100 Mbit/s: 335 ms)
  // Queueing delay that halves the window as an ECN echo would
  // (host/delay_signal.hpp; 0: off, as in the simulator, whose switches mark).
  Time delay_target = 0;
  // Straggler model (Rina Eq. 1): before each step's send, wait ~ N(mean, sigma^2), at least 0.
  Time straggler_mean = 0, straggler_sigma = 0;
  // Deterministic straggler schedule (tests): if not empty, the delay before
  // a send in the step with code c is step_delays[c] (0 past its end), not a draw.
  std::vector<Time> step_delays;
  bool step_barrier = false;  // a job-wide barrier per ring step (see above); every rank of a job must agree
  uint64_t seed = 1;
};

struct RingFootprint;  // host/ring_footprint.hpp

struct RingStats {
  uint64_t sent = 0, retransmits = 0, timeouts = 0, fast_retransmits = 0, acks = 0, dup_acks = 0, ece = 0, decreases = 0;
  uint64_t delayed = 0;  // acknowledgements whose round trip was a delay signal (delay_target)
  uint64_t received = 0, duplicates = 0, early = 0, late = 0;  // data packets
  // Receiver flow control: `early` packets were refused with kBusy; resumes
  // sent for them; as a sender, refusals received, probes sent while held.
  // `resent_refused`: a refused packet sent again (a probe or after a
  // resume), not a retransmission.
  uint64_t resumes_sent = 0, busy = 0, probes = 0, resent_refused = 0;
  uint64_t pulls_sent = 0, pulls = 0;
  // A late Rina member's answers to a pull (late, then begun); the ToR's
  // words taken (a late member holds the current step, then no longer);
  // `held_rtos`: packets whose RTO came while the step was held (timed
  // again, not a loss).
  uint64_t answers_sent = 0, rack_words = 0, held_rtos = 0;
  uint64_t steps = 0;           // sends started (incl. Rina's rack-only broadcast)
  uint64_t bytes_sent = 0;      // payload bytes of data packets (first transmissions and resends)
  uint64_t stale_epoch = 0;     // dropped: a packet of an earlier membership (after a failure)
  uint64_t after_crash = 0;     // dropped by a crashed endpoint
  uint64_t malformed = 0;       // dropped: wrong type/tag/size for this endpoint
  uint64_t foreign = 0;         // dropped: not from a node this endpoint expects it from
  // Step barrier: reports sent (first and resent), resends, releases sent
  // (coordinator) and received, duplicates (a second report, a release
  // already applied) and reports ahead of the coordinator's barrier.
  uint64_t reports = 0, report_resends = 0, releases_sent = 0, releases = 0, barrier_dups = 0, barrier_early = 0;
};

class RingEndpoint final : public Node {
 public:
  explicit RingEndpoint(RingConfig cfg);
  ~RingEndpoint() override;

  // Queues one allreduce of the gradient `io` reads (every rank submits the
  // same sequence); `start_after`: compute time before it starts.
  void submit(std::shared_ptr<TensorIO> io, uint64_t elems, Time start_after = 0);

  void on_start(Time now, Effects& fx) override;
  void on_packet(Packet* p, Time now, Effects& fx) override;
  void on_timer(uint64_t token, Time now, Effects& fx) override;

  bool done() const;                   // every submitted op complete
  size_t op() const { return op_; }    // the op running or next (== ops complete when idle)

  // Failures (Rina §IV-C). crash(): this worker stops for good (drops what
  // it receives, ignores its timers, sends nothing). reconfigure(): the
  // control node's new membership after a failure: the job's plan among the
  // survivors (nodes by new rank, this endpoint's rank and stages), a new
  // epoch (carried in every step tag; packets of other epochs are dropped as
  // stale) and the op every survivor restarts from (ops before it stay
  // done). The restarted op begins at once; the transport's RTT estimate and
  // window are kept.
  void crash() { crashed_ = true; }
  // Drops the RTO backoff the timeouts toward a failed peer built up (the
  // RTT estimate stays). The runtime calls it before reconfigure(): its
  // survivors apply a new membership moments apart, so a first packet of the
  // new epoch may be dropped as stale by one that has not yet, and its resend
  // should not wait a 64x RTO. (The simulator reconfigures every survivor at
  // once and keeps the backoff.)
  void forget_backoff() { backoff_ = 0; }
  bool crashed() const { return crashed_; }
  void reconfigure(std::vector<NodeId> nodes, uint16_t rank, std::vector<RingStage> stages, uint8_t epoch,
                   size_t restart_op, Time now, Effects& fx);
  uint64_t completed() const { return completed_; }
  const std::vector<Time>& op_start() const { return op_start_; }
  const std::vector<Time>& op_end() const { return op_end_; }
  const RingStats& stats() const { return st_; }
  const std::vector<RingStepRecord>& step_log() const { return log_; }
  const RingConfig& config() const { return cfg_; }
  double cwnd() const { return cw_.cwnd(); }  // the transport's window now (packets)
  // Where an unfinished endpoint waits (op, step, its send and receive progress), for reports.
  std::string describe() const;
  // The buffers this endpoint's compiled steps hold (host/ring_footprint.hpp).
  RingFootprint footprint(uint64_t ahead, uint64_t ops) const;

 private:
  struct Send;
  struct Recv;
  struct Step;
  void build_steps();
  void start_op(Time now, Effects& fx);
  void advance(Time now, Effects& fx);
  void begin_send(Time now, Effects& fx);
  void pump(Time now, Effects& fx);
  void transmit(uint32_t idx, bool resend, Time now, Effects& fx, bool refused = false);
  void fill(const Step& s, uint32_t idx, Packet& p);
  void on_data(Packet* p, Time now, Effects& fx);
  void on_ack(Packet* p, Time now, Effects& fx);
  void on_pull(Packet* p, Time now, Effects& fx);
  void on_barrier(Packet* p, Time now, Effects& fx);
  bool barrier_gate(Time now, Effects& fx);
  bool gather_report(uint16_t rank, uint64_t seq, Time now, Effects& fx);
  void send_barrier(uint64_t seq, bool release, NodeId dst, Effects& fx);
  void arm_report(Time now, Effects& fx);
  void on_rto(Time now, Effects& fx);
  void on_busy(uint32_t idx, uint64_t bit, bool resume, Time now, Effects& fx);
  void on_persist(Time now, Effects& fx);
  void unpark(Time now, Effects& fx);
  void unpark_one(uint32_t idx, Time now, Effects& fx);
  void unpark_state(uint32_t idx);
  void end_hold(uint64_t bit, Time now, Effects& fx);
  void time_packet(uint32_t idx, unsigned n, Time from, Effects& fx);
  unsigned doublings(uint32_t idx) const;
  void refuse(const Packet& d, uint64_t ord, Effects& fx);
  void resume_refused(Effects& fx);
  uint64_t recv_floor() const;
  void decrease(Time now);
  double growth_ceiling(const Step& s) const;
  double link_rate(const Step& s) const;
  double pace_rate(const Step& s) const;
  void skip_pulled_to(size_t target, Time now);
  void end_step(Time now);
  void send_pull(Time now, Effects& fx);
  void answer_pull(uint32_t tag, NodeId tor, bool begun, Effects& fx);
  void on_rack_word(uint32_t tag, bool resumed, Time now, Effects& fx);
  void ack(const Packet& p, Time now, Effects& fx);
  uint32_t tag_of(size_t step) const;
  void arm(Time at, Effects& fx);

  RingConfig cfg_;
  RingStats st_;
  Rng rng_;
  std::vector<Step> steps_;  // one op's steps in order (the same for every op)
  std::vector<RingStepRecord> log_;  // per step of the last op started
  std::unique_ptr<Send> send_;
  std::vector<Recv> recv_;   // per step of the op (only steps that receive)
  struct Op {
    std::shared_ptr<TensorIO> io;
    Time start_after;
  };
  std::vector<Op> ops_;
  size_t op_ = 0;            // current op
  size_t step_ = 0;          // current step of the op (the send being done or waited for)
  bool op_running_ = false, sending_ = false, waiting_delay_ = false;
  bool delay_done_ = false;  // the current step's straggler delay has passed
  uint64_t completed_ = 0;
  std::vector<Time> op_start_, op_end_;
  // Receive state per step (a step's shard), by receive ordinal mod
  // kRecvSlots, and the complete shards a stage left (its output range).
  static constexpr uint64_t kRecvSlots = 8;
  size_t slot(uint64_t op, size_t step) const;
  ValueStore kept_;
  std::vector<int32_t> scratch_;  // one packet of received values
  uint64_t kept_off_ = 0;
  // Receiver flow control: refused packets to answer with a resume once
  // their receive ordinal fits the buffers (one per sender and ordinal).
  struct Refused {
    uint64_t ord;
    Header h;  // the refused packet's header
  };
  static constexpr size_t kMaxRefused = 64;
  std::vector<Refused> refused_;
  uint64_t persist_gen_ = 0;
  RttEstimator rtt_;
  CongestionWindow cw_;
  DelaySignal delay_;  // delay_target (off at 0)
  uint8_t backoff_ = 0;  // RTO doublings since the last valid RTT sample
  Time next_tx_ = 0;
  Time pace_at_ = kNever;  // the pending pace timer's time (kNever: none)
  Time pace_due_ = kNever;  // while the pace timer runs pump: its due time
  uint64_t timer_gen_ = 0;
  Time armed_at_ = kNever;
  uint32_t pulled_tag_ = 0;  // Rina member: highest step tag pulled + 1 (0: none)
  uint32_t late_tag_ = 0;    // Rina member: the step tag + 1 it answered late to (0: none)
  uint32_t held_tag_ = 0;    // Rina rack: the step tag + 1 the ToR says a late member holds (0: none)
  uint64_t nrecv_ = 0;       // receiving steps per op
  uint8_t epoch_ = 0;        // membership epoch: the tag's top 8 bits
  bool crashed_ = false;
  // Step barrier: the op's barrier step codes (ascending), how many of them
  // this rank has had released and reported in the current op, the report's
  // resend count; at the coordinator (rank 0) the barrier it gathers
  // (op * barriers per op + index) and the ranks that reported it.
  std::vector<uint8_t> barrier_codes_;
  size_t released_ = 0, reported_ = 0;
  uint8_t report_tries_ = 0;
  uint64_t barrier_gen_ = 0;
  uint64_t gathering_ = 0;
  std::vector<bool> have_;
  size_t have_count_ = 0;
};

}  // namespace ina::host
