// Rina's INA ToR (Rina paper §IV-B, §V): the switch of a rack that runs as
// one abstracted worker of a ring.
//
//  - RingPull from the rack's agent: copied to every other rack member (the
//    "data pull message" ②, multicast at the last hop).
//  - RingData partials from the rack's members (③): summed in the job's
//    contiguous region (§V: no hashing, no collisions), slot = offset +
//    psn % size, keyed by (step tag, psn). When every rack member's bit is
//    in, one partial goes on to agg_index, the next group's entry (④⑤) or,
//    for the step that completes the rack's own shard, back to the agent.
//    The slot keeps the sum until that node acknowledges it.
//  - RingAck from that node: frees the slot, remembers the freed key, and
//    copies the acknowledgement to the rack (the members slide their window).
//  - RingData broadcasts (kResult) from the agent in AllGather: copied to the
//    rack members and, in the same pass, to agg_index (the next group), so a
//    rack receives a shard once over its uplink (the ToR's multicast, §IV-B4).
//
// Reliability without switch timers: members keep at most `region` packets
// past their lowest unacknowledged one, so a slot is reused for psn + size
// only after psn's sum was acknowledged. A retransmission that finds the
// slot still complete makes the switch send the sum again; one that finds a
// later key, or the slot free with its freed key at or past its own, is for
// a finished task and is answered with an acknowledgement at once.
//
// Registers per aggregator: key, bitmap, ECN and count (common), values,
// complete, the onward node, and the last freed key. A packet touches one
// aggregator once per pass.
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "dataplane/switch.hpp"

namespace ina::dp {
namespace {

class RinaSwitch final : public SwitchProgram {
 public:
  RinaSwitch(const SwitchConfig& cfg, std::string_view scheme)
      : SwitchProgram(cfg, scheme), complete_(n_, 0), fwd_(n_, kNoNode), freed_(n_, 0) {}

 protected:
  size_t max_workers() const override { return kMaxRingWorkers; }

  void check_job(const SwitchJob& j) const override {
    if (j.rack.size() < 2 || j.rack.size() > 64)
      throw std::invalid_argument(fmt::format("switch: job {} rack has {} ranks (2..64)", j.job, j.rack.size()));
    for (size_t i = 0; i < j.rack.size(); ++i) {
      if (j.rack[i] >= j.workers.size())
        throw std::invalid_argument(fmt::format("switch: job {} rack rank {} beyond its {} workers", j.job, j.rack[i],
                                                j.workers.size()));
      if (i && j.rack[i] <= j.rack[i - 1])
        throw std::invalid_argument(fmt::format("switch: job {} rack ranks must ascend (agent first)", j.job));
    }
    check_region(j, 1);
  }

  void on_data(Packet* p, const SwitchJob&, uint32_t, Time, Effects& fx) override {
    ++st_.malformed;  // Rina's ToR aggregates ring packets only
    fx.free(p);
  }

  void on_ring(Packet* p, const SwitchJob& j, Time, Effects& fx) override {
    const NodeId src = p->h.src;
    const int local = local_index(j, p->h.rank);
    const bool from_member = local >= 0 && j.workers[p->h.rank] == src;
    switch (p->h.type) {
      case PktType::RingPull:
        if (!from_member || local != 0) return drop(p, st_.foreign_data, fx);
        p->h.src = id();
        replicate(p, j, 1, kNoNode, fx);
        return;
      case PktType::RingData:
        if (!from_member || p->h.count == 0 || p->h.count > width_) {
          if (!from_member) return drop(p, st_.foreign_data, fx);
          return drop(p, st_.malformed, fx);
        }
        if (p->h.has(flag::kResult)) {
          // The agent's AllGather broadcast.
          if (local != 0) return drop(p, st_.foreign_data, fx);
          const auto fwd = static_cast<NodeId>(p->h.agg_index);
          if (p->h.agg_index != kNoNode && (p->h.agg_index > kNoNode || !member(j, fwd)))
            return drop(p, st_.foreign_forward, fx);
          replicate(p, j, 1, p->h.agg_index == kNoNode ? kNoNode : fwd, fx);
          return;
        }
        if (p->h.bitmap != (1ULL << local)) return drop(p, st_.foreign_data, fx);
        if (p->h.agg_index >= kNoNode || !member(j, static_cast<NodeId>(p->h.agg_index)))
          return drop(p, st_.foreign_forward, fx);
        ++st_.data_in;
        aggregate(p, j, fx);
        return;
      case PktType::RingAck:
        on_ack(p, j, fx);
        return;
      default:
        return drop(p, st_.malformed, fx);
    }
  }

 private:
  static uint64_t key(const Packet& p) { return ((static_cast<uint64_t>(p.h.priority) << 32) | p.h.psn) + 1; }
  uint32_t slot(const SwitchJob& j, uint32_t psn) const { return j.region_offset + psn % j.region_size; }

  void drop(Packet* p, uint64_t& counter, Effects& fx) {
    ++counter;
    fx.free(p);
  }

  static int local_index(const SwitchJob& j, uint8_t rank) {
    for (size_t i = 0; i < j.rack.size(); ++i)
      if (j.rack[i] == rank) return static_cast<int>(i);
    return -1;
  }

  // A copy of p to the rack members from `first` on (1: all but the agent)
  // and to `also` (unless kNoNode). The last destination gets p itself.
  void replicate(Packet* p, const SwitchJob& j, size_t first, NodeId also, Effects& fx) {
    std::vector<NodeId> to;
    for (size_t i = first; i < j.rack.size(); ++i) to.push_back(j.workers[j.rack[i]]);
    if (also != kNoNode) to.push_back(also);
    if (to.empty()) return fx.free(p);
    for (size_t k = 0; k < to.size(); ++k) {
      Packet* c = k + 1 == to.size() ? p : clone(*p, fx);
      c->h.dst = to[k];
      fx.send(c);
    }
    ++st_.acks_multicast;
  }

  Packet* clone(const Packet& p, Effects& fx) {
    Packet* c = fx.alloc();
    c->h = p.h;
    std::copy_n(p.payload(), p.h.count, c->payload());
    return c;
  }

  bool finished(uint32_t i, uint64_t k) const {
    const uint64_t held = const_cast<RinaSwitch*>(this)->agg(i).key;
    return held > k || (held == 0 && freed_[i] >= k);
  }

  // An acknowledgement straight back to the member (a retransmission of a finished task).
  void answer(Packet* p, Effects& fx) {
    p->h.type = PktType::RingAck;
    p->h.flags = 0;
    p->h.dst = p->h.src;
    p->h.src = id();
    p->h.count = 0;
    ++st_.stale;
    fx.send(p);
  }

  void send_sum(uint32_t i, Packet* p, const SwitchJob& j, Effects& fx) {
    load_into(i, *p);
    p->h.type = PktType::RingData;
    p->h.flags = static_cast<uint16_t>(flag::kPartial | (p->h.flags & flag::kEcn));
    p->h.rank = static_cast<uint8_t>(j.rack[0]);
    p->h.dst = fwd_[i];
    fx.send(p);
  }

  void aggregate(Packet* p, const SwitchJob& j, Effects& fx) {
    const uint64_t k = key(*p);
    const uint32_t i = slot(j, p->h.psn);
    Agg& a = agg(i);
    const uint64_t all = full_bitmap(static_cast<unsigned>(j.rack.size()));
    if (a.key == k) {
      if (complete_[i]) {
        if (!p->h.has(flag::kResend)) return drop(p, st_.duplicates, fx);
        ++st_.resend_served;  // the onward node may have lost the sum
        send_sum(i, p, j, fx);
        return;
      }
      if (a.bitmap & p->h.bitmap) return drop(p, st_.duplicates, fx);
      accumulate(i, *p);
    } else if (finished(i, k)) {
      answer(p, fx);
      return;
    } else if (a.key == 0) {
      reserve(i, *p);
      a.key = k;
      fwd_[i] = static_cast<NodeId>(p->h.agg_index);
    } else {
      // An older task still holds the slot: impossible within the window; the sender retries.
      return drop(p, st_.collisions, fx);
    }
    if (a.bitmap != all) {
      fx.free(p);
      return;
    }
    complete_[i] = 1;
    ++st_.completed;
    send_sum(i, p, j, fx);
  }

  void on_ack(Packet* p, const SwitchJob& j, Effects& fx) {
    const uint64_t k = key(*p);
    const uint32_t i = slot(j, p->h.psn);
    Agg& a = agg(i);
    if (a.key == k && complete_[i]) {
      if (p->h.src != fwd_[i]) return drop(p, st_.foreign_ack, fx);
      release(i);
      complete_[i] = 0;
      freed_[i] = k;
      ++st_.released_by_ack;
    } else if (!finished(i, k) || !member(j, p->h.src)) {
      return drop(p, st_.foreign_ack, fx);
    }
    // To the rack (again, for a repeated acknowledgement: a member may have missed it).
    p->h.flags &= flag::kEce;
    p->h.src = id();
    replicate(p, j, 0, kNoNode, fx);
  }

  std::vector<uint8_t> complete_;
  std::vector<NodeId> fwd_;
  std::vector<uint64_t> freed_;
};

}  // namespace

std::unique_ptr<SwitchProgram> make_rina(const SwitchConfig& cfg, std::string_view scheme) {
  return std::make_unique<RinaSwitch>(cfg, scheme);
}

}  // namespace ina::dp
