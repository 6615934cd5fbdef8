#pragma once
// Sparse <key, value> hosts (Zebra, PS-lite-style push): a worker
// that pushes one iteration's non-zero gradients and receives the sums for
// the union of every worker's keys, and a PS in the PS-lite style.
//
// Worker, per iteration (begin()):
//   - keys the current hot-set table holds (dataplane/zebra_layout.hpp) form the
//     hot stream to the switch, packed by Algorithm 1 (layout-aware, at most
//     `pairs` per packet, keys ascending within a packet); its last packet
//     (flag kLast) carries the stream's packet count — an empty packet if the
//     worker has no hot gradient (§III-F);
//   - the other keys, sorted, form the cold stream to the PS (PS-lite: unique,
//     sorted keys per push), psn with kv::kPsStream;
//   - every packet is acknowledged (by the switch, or by the PS for cold pairs
//     and for the pairs the switch passed on); a window of packets in flight,
//     AIMD on ECN echo, RTO with backoff. The streams to and from the PS may
//     instead run as PS-lite's TCP does (ps_pairs, ack_every): full-size
//     segments and a cumulative acknowledgement per `ack_every` in-order
//     segments, at once for one out of order, repeated, retransmitted, the
//     stream's last, or one its sender is blocked on (flag kAckNow);
//   - once everything is acknowledged, a last empty cold packet (kLast) tells
//     the PS this worker's contributions are all in (ours: the paper's PS
//     learns it from ps-lite's push/response protocol);
//   - the iteration ends when the PS's results (keys) are complete, and with
//     hot_results Multicast also the switch's (rank indices, mapped back with
//     the table of the result's hot-set version); a key in both (a hot-set
//     change) gets both parts. With ViaPs (the Zebra paper's route) the
//     switch's results go to the PS, and the worker's last cold packet says
//     (flag kHot) that its hot stream went to the switch this iteration.
// With no table for the iteration (a runtime job before its first hot set)
// every key is cold and only the PS answers.
// Without a switch (SparseConfig::sw == kNoNode) every key is cold: the
// PS-lite-style baseline, the very same code.
//
// PS: sums the pairs of one iteration per key (int32, exact), deduplicated per
// (worker, psn); with hot_results ViaPs it also takes the switch's results
// (rank indices of a hot set it holds, set_table), acknowledging each, and
// adds them in. When every worker's last packet is in (and, if any said
// kHot, the switch's whole result stream), it sends the sums of the union of
// keys, sorted, `pairs` per packet, multicast to the workers and
// retransmitted to each worker that has not acknowledged a packet.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "dataplane/zebra_layout.hpp"
#include "core/deadline_queue.hpp"
#include "core/rtt_estimator.hpp"
#include "host/congestion_window.hpp"
#include "proto/node.hpp"
#include "wire/fp16.hpp"
#include "wire/kv.hpp"

namespace ina::host {

struct SparseConfig {
  uint16_t job = 1;
  std::vector<NodeId> workers;  // by rank
  NodeId ps = kNoNode;
  NodeId sw = kNoNode;          // Zebra's switch; kNoNode: no INA (PS-lite-style push)
  unsigned pairs = 9;           // per packet (the Zebra prototype's 9)
  // The streams between the workers and the PS (cold pairs, results):
  // pairs per packet (0: `pairs`; PS-lite over TCP: 120, a full 1500-byte
  // frame) and an acknowledgement per this many in-order packets (1: every
  // packet, the Zebra design's §III-F; 2: TCP's delayed acknowledgement),
  // cumulative. The switch's streams keep `pairs` and a per-packet ack.
  unsigned ps_pairs = 0;
  unsigned ack_every = 1;
  // A packet's bytes on the wire besides its KV payload. A worker's window
  // counts bytes, in units of a full packet of `pairs` (a full PS-stream
  // packet weighs its size over that one's).
  uint32_t header_bytes = 50;
  bool layout_aware = true;     // Algorithm 1 (false: pack in rank order)
  double init_window = 64;      // packets in flight
  double max_window = 4096;
  Time min_rto = 1 * kMs;
  Time max_rto = 200 * kMs;
  uint32_t first_iteration = 0;  // the PS's first iteration (a job that starts later in training)
  // Values (wire/fp16.hpp): Fixed, int32 summed exactly; Float16Table, begin()'s
  // values are float32 bits, hot pairs go to the switch as float16 bits, the
  // PS sums in float32 and the sums handed to Done are float32 bits.
  KvArith arith = KvArith::Fixed;
  // Where the switch's hot results go (wire/kv.hpp); the switch's
  // ZebraConfig::hot_results must agree.
  kv::HotRoute hot_results = kv::HotRoute::ViaPs;
};

struct SparseWorkerStats {
  uint64_t sent = 0, retransmits = 0, acks = 0, dup_acks = 0, ece = 0, decreases = 0;
  uint64_t hot_packets = 0, cold_packets = 0, hot_pairs = 0, cold_pairs = 0;
  uint64_t results = 0, dup_results = 0, malformed = 0, foreign = 0;
};

class SparseWorker final : public Node {
 public:
  // Called when an iteration's sums are complete: the union of keys, ascending, and their sums.
  using Done = std::function<void(uint32_t iter, std::span<const uint64_t> keys, std::span<const int32_t> sums,
                                  Time now, Effects& fx)>;
  SparseWorker(SparseConfig cfg, uint8_t rank);

  // Hot-set tables: from iteration t.from on (several may be queued; the
  // one with the largest from <= iteration applies). Keep the switch's in step.
  void set_table(dp::zebra::Table t);
  // Pushes iteration `iter`'s gradients (keys strictly ascending, one value each).
  void begin(uint32_t iter, std::span<const uint64_t> keys, std::span<const int32_t> values, Time now, Effects& fx);
  void set_done(Done d) { done_ = std::move(d); }

  void on_packet(Packet* p, Time now, Effects& fx) override;
  void on_timer(uint64_t token, Time now, Effects& fx) override;

  bool busy() const { return active_; }
  std::string describe() const;  // where the iteration in flight stands
  uint32_t iteration() const { return iter_; }
  const SparseWorkerStats& stats() const { return st_; }
  double window() const { return cw_.cwnd(); }

 private:
  struct Desc {
    uint32_t first = 0, n = 0;  // pairs_[first, first + n)
    uint32_t psn = 0;           // with kv::kPsStream for the cold stream
    bool hot = false, last = false;
    uint32_t total = 0;         // kLast: the stream's packet count
    bool out = false, acked = false, retx = false;  // sent at least once, acknowledged, retransmitted
    Time sent = 0, deadline = 0;
    uint16_t tries = 0;
  };
  const dp::zebra::Table* table_for(uint32_t iter) const;
  const dp::zebra::Table* table_of_version(uint32_t version) const;
  void pump(Time now, Effects& fx);
  void transmit(uint32_t d, Time now, Effects& fx, bool blocked = false);
  void on_ack(const Packet& p, Time now, Effects& fx);
  bool ack_desc(uint32_t i);  // marks a sent desc acknowledged; false if it was already
  void on_result(Packet* p, Time now, Effects& fx);
  void maybe_finish(Time now, Effects& fx);
  void arm(Time at, uint32_t d, Effects& fx);
  std::vector<uint32_t> order_;  // send order of the descs (hot and cold interleaved), without the last cold one
  std::vector<int32_t> scratch_; // value by rank index while packing

  SparseConfig cfg_;
  uint8_t rank_;
  std::vector<dp::zebra::Table> tables_;
  Done done_;
  SparseWorkerStats st_;
  // The iteration in flight.
  bool active_ = false;
  bool hot_stream_ = false;      // a table applies to this iteration: the switch answers too
  uint32_t iter_ = 0;
  std::vector<std::pair<uint64_t, int32_t>> pairs_;  // the packets' pairs, packet by packet
  std::vector<Desc> desc_;       // hot stream, then cold stream, then the cold stream's last packet
  uint32_t hot_n_ = 0, cold_n_ = 0;  // descs of each stream (the cold count excludes its last packet)
  uint32_t next_ = 0;            // next desc to send for the first time (the last waits for every ack)
  double units_ = 0;             // descs sent and not acknowledged, in window units (SparseConfig::header_bytes)
  double ps_weight_ = 1;         // a cold desc's weight
  uint32_t acked_ = 0;
  uint32_t cold_cum_ = 0;        // cold descs below this are acknowledged (the PS's cumulative count)
  CongestionWindow cw_;
  RttEstimator est_;
  DeadlineQueue<uint64_t> dq_;
  uint64_t gen_ = 0;             // timer token generation (a finished iteration's timers are stale)
  // Results.
  struct Stream {
    std::vector<bool> got;
    uint32_t n = 0, total = 0;
    uint32_t cum = 0, pending = 0;  // every packet below cum has arrived; in-order ones not yet acknowledged
    bool complete() const { return total != 0 && n == total; }
  };
  Stream sw_res_, ps_res_;
  // The iteration's result pairs as they arrive (a key may come from both
  // the switch and the PS while their tables are out of step: summed at the end).
  std::vector<std::pair<uint64_t, int32_t>> sums_;
};

struct SparsePsStats {
  // duplicates: of the workers' packets and of the switch's results
  uint64_t data = 0, pairs = 0, forwarded_pairs = 0, duplicates = 0, stale = 0, malformed = 0, foreign = 0;
  // hot_results ViaPs: the switch's result packets and their pairs, taken
  // once each; those of a hot-set version the PS does not hold yet (dropped
  // unacknowledged: the switch CPU sends them again).
  uint64_t hot_results = 0, hot_pairs = 0, unknown_version = 0;
  uint64_t results_sent = 0, retransmits = 0, result_acks = 0, overflow = 0;
  uint64_t acks_sent = 0;     // acknowledgements of the workers' packets and of the switch's results
  uint64_t delayed_acks = 0;  // of them, sent by the delayed-acknowledgement timer
};

// The receiving side of a stream with delayed cumulative acknowledgements
// (SparseConfig::ack_every): on the arrival of packet `psn` (after `got`
// records it), advances `cum` past every packet that has arrived in order
// and says whether to acknowledge now. `fresh`: not seen before;
// `ack_now`: the sender asked (kAckNow, kResend, kLast).
bool delayed_ack_due(std::vector<bool>& got, uint32_t psn, bool fresh, bool ack_now, unsigned every, uint32_t& cum,
                     uint32_t& pending);

class SparsePs final : public Node {
 public:
  explicit SparsePs(SparseConfig cfg);
  // Hot sets, to map the switch's results back to keys (hot_results ViaPs):
  // the switch's tables, from iteration t.from on; a result is mapped by
  // the one of its iteration, whose version it must carry.
  void set_table(dp::zebra::Table t);
  void on_packet(Packet* p, Time now, Effects& fx) override;
  void on_timer(uint64_t token, Time now, Effects& fx) override;
  const SparsePsStats& stats() const { return st_; }
  uint32_t iteration() const { return iter_; }
  size_t held() const { return unacked_results_; }  // result packets some worker has not acknowledged
  std::string describe() const;  // where the iteration being collected stands

 private:
  struct Out {
    uint32_t first = 0, n = 0;
    uint64_t acked = 0;
    Time deadline = 0;
    uint16_t tries = 0;
    bool sent = false;
  };
  void ack(const Packet& p, Effects& fx, uint32_t cum = 0, bool ece = false);
  void send_ack(uint8_t rank, uint32_t psn, uint32_t iter, uint32_t cum, bool ece, Effects& fx);
  void ack_direct(const Packet& p, bool fresh, Time now, Effects& fx);
  void on_switch_result(Packet* p, Effects& fx);
  void maybe_finish(Time now, Effects& fx);
  void finish_iteration(Time now, Effects& fx);
  void pump(Time now, Effects& fx);
  void transmit(uint32_t i, uint64_t to, Time now, Effects& fx);

  SparseConfig cfg_;
  SparsePsStats st_;
  uint32_t iter_ = 0;
  std::vector<std::unordered_map<uint32_t, bool>> seen_;  // per worker: psns of this iteration
  // Per worker, its direct (cold) stream's delayed acknowledgements:
  // arrivals by index, the cumulative count, in-order packets not yet
  // acknowledged, a CE mark among them, the last of them, and when the
  // delayed-acknowledgement timer sends their acknowledgement anyway (TCP's:
  // a sender whose window shrank after sending them sends nothing more).
  struct Rx {
    std::vector<bool> got;
    uint32_t cum = 0, pending = 0;
    bool ce = false;
    uint32_t held_psn = 0;
    Time ack_at = kNever;
  };
  std::vector<Rx> rx_;
  std::vector<uint32_t> res_cum_;  // per worker: results below this are acknowledged (cumulatively)
  std::vector<bool> in_;  // per worker: its last packet arrived
  unsigned ndone_ = 0;
  // hot_results ViaPs: the switch's result stream of this iteration, which a
  // worker's kHot says will come; the hot sets from the one of this
  // iteration on (ascending `from`).
  std::vector<dp::zebra::Table> tables_;
  bool hot_expected_ = false;
  std::vector<bool> sw_got_;
  uint32_t sw_n_ = 0, sw_total_ = 0;
  std::unordered_map<uint64_t, int32_t> sums_;
  // Results of the previous iteration, until every worker has acknowledged them.
  uint32_t res_iter_ = 0;
  std::vector<std::pair<uint64_t, int32_t>> res_;
  std::vector<Out> out_;
  uint32_t next_ = 0, inflight_ = 0;
  size_t unacked_results_ = 0;
  CongestionWindow window_;      // fixed: results in flight
  DeadlineQueue<uint64_t> dq_;
  uint64_t gen_ = 0;
};

}  // namespace ina::host
