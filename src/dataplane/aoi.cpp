// P4INC-AOI (§VI-B): in-network aggregation for the jobs a network unit's ToR
// switch holds, with the PS fully offloaded to the switch.
//
// Memory: the aggregator array is cut into non-overlapping SEGMENTS
// <MemID, Size>, one per job, assigned by the scheduler (the job's region:
// SwitchJob::region_offset, region_size). The WORKER picks each packet's
// aggregator in its segment (host/worker.hpp: MemID + Hash(JobID, FragmentID)
// mod Size, redirected past the slots of the job's recent fragments) and
// carries it in the header (agg_index); the switch does no hashing, it only
// checks that the index lies in the job's segment.
//
// Header (wire/packet.hpp, no field added): Service ID = a Data packet
// addressed to the switch (INC) rather than through it; Job ID = job; Worker
// ID = rank; Fragment ID = psn; Index = agg_index. One flag bit is ours:
// kBehind, set by a worker that lacks the result of the fragment that used
// the aggregator before this one (see "Why kBehind" below).
//
// Per aggregator i, a gradient packet of fragment g:
//   busy with g     add it (a rank already counted: duplicate); the last rank
//                   completes it: the sum is multicast to every worker of the
//                   job, written to the SHADOW COPY (fragment id + values)
//                   and the aggregator is freed at once;
//   busy with f < g ASYNCHRONOUS ERROR (the paper's): g is dropped and its
//                   sender gets an ECN notification (a RateSync packet with
//                   kEcn: halve the window; g is retransmitted later, by the
//                   worker's gap rule or its RTO);
//   free            g == shadow id: a retransmission of a completed fragment,
//                   answered from the shadow copy (unicast); g < shadow id: a
//                   late copy, dropped (stale); else g takes the aggregator;
//   busy with f > g g == shadow id: answered from the shadow copy; else stale.
// A kBehind packet that would join or take the aggregator is an asynchronous
// error as well. Notified are the senders of the offending packets (the
// paper: "all the workers that have sent in packets with incorrect Fragment
// IDs"), one notification per refused packet.
//
// Why kBehind: the shadow copy holds ONE result per aggregator. If fragment g
// could complete while some worker still lacked the result of the fragment f
// before it in the same aggregator (its result packet lost), the shadow copy
// would then hold g and that worker could never get f. A worker's packet
// counts only if it holds f's result (no kBehind), so g completes only once
// every worker has f: every lost result is always in the shadow copy. The
// paper's comparison (busy with f < g) only ever sees kBehind packets then;
// both refusals are counted as asynchronous errors.
//
// Hardware: one pipeline pass per packet, each register array touched once:
// key/bitmap/count (read-modify-write), values (RMW: add, or store),
// shadow id (read to classify a packet that does not join the busy fragment,
// or written by the completing packet, which never needs to read it: one
// compare-and-write action when a single-worker job takes and completes at
// once), shadow values (written on completion, read to answer a
// retransmission). No recirculation, no resubmit.
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "dataplane/switch.hpp"

namespace ina::dp {
namespace {

class AoiSwitch final : public SwitchProgram {
 public:
  AoiSwitch(const SwitchConfig& cfg, std::string_view scheme)
      : SwitchProgram(cfg, scheme),
        shadow_id_(n_),
        shadow_valid_(n_),
        shadow_count_(n_),
        shadow_vals_(n_ * width_),
        slots_(n_) {}

  const std::vector<AoiSlotRecord>& slots() const { return slots_; }

 protected:
  // A segment inside the array, overlapping no other job's; no PS.
  void check_job(const SwitchJob& j) const override {
    if (j.ps != kNoNode)
      throw std::invalid_argument(fmt::format("switch: job {} has a PS; {} offloads it to the switch", j.job, scheme_));
    if (j.parent != kNoNode)
      throw std::invalid_argument(fmt::format("switch: job {}: {} aggregates in one switch only (no tree)", j.job, scheme_));
    check_region(j, 1);
  }

  uint32_t index_for(const Packet& p, const SwitchJob&) const override { return p.h.agg_index; }

  void on_data(Packet* p, const SwitchJob& j, uint32_t i, Time, Effects& fx) override {
    if (i < j.region_offset || i - j.region_offset >= j.region_size) {  // a worker bug: never touch another segment
      ++st_.out_of_segment;
      ++st_.malformed;
      fx.free(p);
      return;
    }
    note(i, j.job);
    Agg& a = agg(i);
    const uint32_t g = p->h.psn;
    const bool behind = p->h.has(flag::kBehind);
    if (a.key != 0) {
      const auto f = static_cast<uint32_t>(a.key);
      if (f == g) {
        if (behind) return async_error(p, j, fx);
        if (a.bitmap & p->h.bitmap) { ++st_.duplicates; fx.free(p); return; }
        accumulate(i, *p);
        if (full(i, j)) return complete(i, p, j, fx);
        fx.free(p);
        return;
      }
      if (f < g) return async_error(p, j, fx);
      if (shadow_valid_[i] && shadow_id_[i] == g) return serve_shadow(i, p, j, fx);
      ++st_.stale;
      fx.free(p);
      return;
    }
    if (shadow_valid_[i] && shadow_id_[i] == g) return serve_shadow(i, p, j, fx);
    if (shadow_valid_[i] && g < shadow_id_[i]) { ++st_.stale; fx.free(p); return; }
    if (behind) return async_error(p, j, fx);
    reserve(i, *p);
    if (full(i, j)) return complete(i, p, j, fx);
    fx.free(p);
  }

 private:
  void note(uint32_t i, uint16_t job) {
    auto& js = slots_[i].jobs;
    for (uint16_t x : js)
      if (x == job) return;
    js.push_back(job);
  }

  void complete(uint32_t i, Packet* p, const SwitchJob& j, Effects& fx) {
    ++st_.completed;
    ++slots_[i].completed;
    load_into(i, *p);
    shadow_id_[i] = p->h.psn;
    shadow_valid_[i] = 1;
    shadow_count_[i] = p->h.count;
    std::memcpy(shadow_vals_.data() + static_cast<size_t>(i) * width_, p->payload(), 4u * p->h.count);
    release(i);
    multicast_result(p, j, fx);
  }

  // The result of a completed fragment again, to the worker that asked (its packet).
  void serve_shadow(uint32_t i, Packet* p, const SwitchJob& j, Effects& fx) {
    const NodeId to = j.workers[p->h.rank];
    p->h.count = shadow_count_[i];
    std::memcpy(p->payload(), shadow_vals_.data() + static_cast<size_t>(i) * width_, 4u * p->h.count);
    p->h.type = PktType::Ack;
    p->h.flags = flag::kResult;
    p->h.bitmap = full_bitmap(static_cast<unsigned>(j.workers.size()));
    p->h.src = id();
    p->h.dst = to;
    ++st_.resend_served;
    fx.send(p);
  }

  // The packet is dropped; its header goes back to the sender as the ECN notification.
  void async_error(Packet* p, const SwitchJob& j, Effects& fx) {
    ++st_.async_errors;
    p->h.type = PktType::RateSync;
    p->h.flags = flag::kEcn;
    p->h.count = 0;
    p->h.src = id();
    p->h.dst = j.workers[p->h.rank];
    fx.send(p);
  }

  // (The shadow values are a second set of values, mapped as written.)
  size_t own_register_bytes() const override { return bytes_of(shadow_id_, shadow_valid_, shadow_count_, slots_); }
  // Shadow copy registers, indexed like the aggregators.
  Registers<uint32_t> shadow_id_;
  Registers<uint8_t> shadow_valid_;
  Registers<uint16_t> shadow_count_;
  std::vector<int32_t, ZeroPageAllocator<int32_t>> shadow_vals_;  // zeros until written, as vals_
  std::vector<AoiSlotRecord> slots_;  // instrumentation
};

}  // namespace

std::unique_ptr<SwitchProgram> make_aoi(const SwitchConfig& cfg, std::string_view scheme) {
  return std::make_unique<AoiSwitch>(cfg, scheme);
}

const std::vector<AoiSlotRecord>* aoi_slots(const SwitchProgram& sw) {
  const auto* a = dynamic_cast<const AoiSwitch*>(&sw);
  return a ? &a->slots() : nullptr;
}

}  // namespace ina::dp
