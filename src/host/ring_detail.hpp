#pragma once
// The ring endpoint's private parts, shared by its files (not a public
// header): a compiled step, a shard transfer's send and receive state, the
// timer kinds and tag helpers. ring.hpp says what each concept does; the
// files are ring.cpp (the endpoint: ops, steps in order, timers, pulls),
// ring_plan.cpp (plans), ring_step_compiler.cpp (a rank's stages into
// steps), ring_transfer.cpp (the reliable shard transfer) and
// ring_barrier.cpp (the step barrier).
#include <cstdint>
#include <vector>

#include "core/deadline_queue.hpp"
#include "host/congestion_window.hpp"
#include "host/ring.hpp"

namespace ina::host {

struct RingEndpoint::Step {
  uint8_t code = 0;          // tag = op << 8 | code
  size_t stage = 0;
  bool last_stage = false;
  // Send (none if !sends).
  bool sends = false;
  bool bcast = false;        // Rina agent: through the ToR to the rack (and fwd)
  bool gather = false;       // AllGather: complete values (kResult), slow start
  bool rack_gather = false;  //   an INA rack worker's (RinaTransport::Paper: its window continues)
  bool rack_gather_first = false;  //   ... its first of the op (Paper: from one packet, slow start)
  bool pulled = false;       // Rina member: starts when its agent pulls this tag
  bool pull_first = false;   // Rina agent: pull the rack before sending
  bool rack_step = false;    // a Rina rack's ScatterReduce step (a late member may hold it)
  bool to_tor = false;       // ScatterReduce to the own Rina ToR (paced at the INA rate)
  bool region_cap = false;   // to a Rina ToR: window capped by its region
  uint64_t tor_bit = 0;      //   this rank's bit in its rack (agent = bit 0)
  uint64_t off = 0, len = 0;
  bool add_local = false;    // own input values
  int add_recv = -1;         // + values received in that step (index in steps_)
  bool from_kept = false;    // values from kept_
  NodeId dst = kNoNode, fwd = kNoNode;
  std::vector<NodeId> ackers;
  // Local finish (autonomous final, AllGather start): kept[shard] = local + recv; write if last stage.
  bool finish = false;
  int finish_recv = -1;
  bool write_kept = false;   // write kept [off, off+len) as results (AllGather stage start)
  // Receive (none if !recvs).
  bool recvs = false;
  uint64_t r_off = 0, r_len = 0;
  NodeId r_src = kNoNode;
  NodeId r_orig = kNoNode;   // through a ToR's copy: the original sender (in agg_index)
  bool r_keep = false;       // store for a later send (buffer)
  bool r_to_kept = false;    // store into kept_
  bool r_write = false;      // write as results
  uint64_t r_parts = 0;      // from a Rina ToR: its rack's full bitmap (a shared-pool ToR may send partial sums)
  int ridx = -1;             // receive ordinal within the op
};

struct RingEndpoint::Send {
  size_t step = 0;
  uint32_t npkts = 0, next = 0, low = 0, acked_pkts = 0;
  uint64_t all = 0;          // every acker's bit
  std::vector<uint64_t> acked;
  std::vector<Time> first_tx, last_tx, deadline;
  std::vector<uint16_t> retx;
  uint64_t inflight = 0;
  uint32_t hi = 0;  // one past the highest packet every acker acknowledged
  uint32_t fr = 0;  // packets below this were checked for a fast retransmission
  Time least_rtt = 0;  // the least round trip sampled on this transfer (0: none yet)
  DeadlineQueue<uint32_t> rto;
  // Receiver flow control: packets an acker refused (kBusy), neither in
  // flight nor timed; while some acker holds the transfer (its bit in
  // `held`), nothing new goes out. Its resume, or its acknowledgement of
  // anything (a probe), clears its bit; then the parked packets go again.
  // parked[i]: 0, kParked (held), or kReleased (to go again: pump sends
  // these first, from `redo` on).
  std::vector<uint8_t> parked;
  // 1: some acker refused packet i at least once (never a fast
  // retransmission then: its acknowledgements need not come in send order).
  std::vector<uint8_t> refused;
  uint32_t nparked = 0, released = 0, redo = 0;
  uint64_t held = 0;
  uint8_t probes = 0;  // persist-timer doublings since the transfer was held
  // A Rina rack's ScatterReduce step a late member holds (the ToR's word):
  // the ToR keeps this sender's packets for that member's, so their RTO is
  // not a loss.
  bool rack_held = false;
  // Packets below this one were in flight while a late member held the
  // step: their round trip includes the wait, no RTT or delay sample.
  uint32_t sample_from = 0;
  // When a packet of this transfer was last acknowledged by every acker
  // (kNever: none yet). An RTO runs from the later of a packet's send and
  // this (RFC 6298, 5.3): while the transfer makes progress, a packet that
  // waits for its turn (at a ToR, behind a slower rack member's) is not lost.
  Time progress_at = kNever;
};

struct RingEndpoint::Recv {
  uint64_t ord = UINT64_MAX;  // global receive ordinal (op * receives per op + ridx)
  ValueStore vals;  // from s.r_off on
  std::vector<bool> got;
  std::vector<uint64_t> parts;  // r_parts: the rack bits summed so far, per packet
  uint32_t count = 0, npkts = 0;
  Time done_at = kNever;  // when the last packet came (step_log)
  bool complete() const { return count == npkts; }
};

namespace ring_detail {

// Send::parked states.
inline constexpr uint8_t kParked = 1, kReleased = 2;

inline constexpr uint64_t kRtoTimer = 0, kPaceTimer = 1, kDelayTimer = 2, kBarrierTimer = 3, kPersistTimer = 4;

// The op field of a step tag (see RingEndpoint::tag_of).
inline uint64_t op_of_tag(uint32_t tag) { return (tag >> 8) & 0xFFFF; }

inline uint32_t packets(uint64_t len, uint16_t width) { return static_cast<uint32_t>((len + width - 1) / width); }

// A shard transfer's congestion window (ring_transfer.cpp).
CongestionWindowConfig transfer_window(const RingConfig& c);
// The time between two paced packets of `wire_bytes` at `gbps` (ring_transfer.cpp).
Time pace_gap(double gbps, uint32_t wire_bytes);

}  // namespace ring_detail
}  // namespace ina::host
