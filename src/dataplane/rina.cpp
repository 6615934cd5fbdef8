// Rina's INA ToR (Rina paper §IV-B, §V): the switch of a rack that runs as
// one abstracted worker of a ring.
//
//  - RingPull from the rack's agent: copied to every other rack member (the
//    "data pull message" ②, multicast at the last hop). A late member's
//    answer (host/ring.hpp: RingPull | kBusy, it cannot begin the step yet;
//    | kResume, it has begun it now) sets or clears its bit in the job's
//    register (the step tag and the late members). The rack hears when the
//    step turns held (the first late member: RingPull | kBusy) and when no
//    member holds it any more (| kResume; again for each such answer, which
//    comes again when the agent pulls again: someone missed the word).
//  - RingData partials from the rack's members (③): summed in the job's
//    contiguous region (§V: no hashing, no collisions), slot = offset +
//    psn % size, keyed by (step tag, psn). When every rack member's bit is
//    in, one partial goes on to agg_index, the next group's entry (④⑤) or,
//    for the step that completes the rack's own shard, back to the agent.
//    The slot keeps the sum until that node acknowledges it.
//  - RingAck from that node: frees the slot, remembers the freed key, and
//    copies the acknowledgement to the rack (the members slide their window).
//    Its refusal or resume (kBusy: the receiver's buffers are full) frees
//    nothing and goes to the rack the same way (relay_busy).
//  - Membership (Rina §IV-C): after a failure the control plane registers
//    the job again with a new epoch and the survivors' ranks (the rack
//    without a failed member; no rack at all when the agent failed: the
//    members fall back to RAR and this ToR only forwards); ring packets of
//    another epoch are dropped as stale.
//  - AllGather (kResult) shard packets (§IV-B4, Fig. 8): one addressed to
//    this switch by another group's sender is copied to every rack member;
//    the agent's broadcast of the rack's own complete shard is copied to the
//    other members and, in the same pass, to agg_index (the next group). So
//    a shard crosses a rack's downlinks once and no member relays it to the
//    others; the members' acknowledgements are collected here into one
//    (see "AllGather" below).
//
// Levels above the ToR (Rina §IV-D, control/rina_bom.hpp): a group whose
// top switch is above the ToR. The top's entry is a rack of the whole group
// (RingPull as above, one copy per member); below it, a level (an entry
// naming SwitchJob::parent: an INA ToR,
// or an INA switch between) aggregates the ScatterReduce shards of its own
// ranks (RinaJob::rack, each with its bit in the group's packets,
// RinaJob::bits) and of the levels below it (SwitchJob::children, each
// partial carrying RinaJob::child_bits) in its region, and sends one partial
// up to its parent, onward node unchanged; the top takes children's
// partials as it takes its own members' packets (Lemma 2: each child is one
// sender). The top's acknowledgement from the onward node goes to the
// members that send to it directly and to each child, which frees its slot
// and passes it down the same way. A level passes its agent's RingPull up
// to its parent (the top copies it to the group). A retransmission that
// finds a level's slot complete goes up again marked as a resend, so the
// top serves the sum again. A level frees a complete sum whose parent's
// acknowledgement was lost when a later task of the job meets its slot (a
// later step's packet, or the agent's broadcast of the group's shard): the
// ranks skip their pulled steps once the agent moves on (host/ring.hpp) and
// would never resend it, and the agent moves on only after the top had
// every part of it. AllGather goes down the same tree: the top
// copies a shard for the group to the members no child covers and to each
// child, a level (from its parent: the sender in agg_index, rows by
// RinaJob::upstream, the group's agent first) to its own ranks and
// children, never back to the agent its own broadcast; each level gathers
// its ranks' and children's acknowledgements into one for its parent, the
// top into one for the sender. Levels use the job's region (no shared pool).
//
// Reliability without switch timers: members keep at most `region` packets
// past their lowest unacknowledged one, so a slot is reused for psn + size
// only after psn's sum was acknowledged. A retransmission that finds the
// slot still complete makes the switch send the sum again; one that finds a
// later key, or the slot free with its freed key at or past its own, is for
// a finished task and is answered with an acknowledgement at once.
//
// Shared pool (ours, beyond the paper; RinaConfig::ring_memory = PoolAtp
// or PoolDsa): every job's tasks share all aggregators. Task (job, step
// tag, psn) lives at Hash(job, psn) (SwitchProgram::index_of, as ATP/DSA),
// the key register holds (job, psn) and a tag register the step. What
// cannot be aggregated goes on to the onward node, which sums the disjoint
// partial sums a rack's ToR sends it (host/ring.hpp: a receive from a ToR
// completes a packet when every rack member's bit is in) and acknowledges
// only complete packets, so a member's packet stays unacknowledged, and is
// retransmitted, until its contribution reached the onward node:
//  - first transmission, free aggregator: reserve; the rack's last packet
//    completes the sum, which goes on and frees the aggregator at once
//    (members that miss the acknowledgement retransmit; see below);
//  - first transmission, another task's aggregator (a collision): ATP
//    policy: the packet goes on alone (bypassed); DSA policy: if its job's
//    priority is higher than the aggregator's, they swap (a resubmit,
//    SwitchProgram::swap_with) and the evicted partial goes on to its own
//    onward node (an eviction, as DSA evicts to the PS); else the
//    aggregator's priority halves (DSA's downgrading) and the packet goes
//    on alone;
//  - a retransmission never aggregates (its earlier copy may be anywhere):
//    one finding its own task's partial holding its bit flushes the partial
//    on (the task is stuck: some member's packet went elsewhere), any other
//    goes on alone; the onward node drops a packet overlapping what it holds;
//  - register `gone` names the last task that left an aggregator
//    incomplete (flushed, evicted, or bypassed there): its later first
//    transmissions go on alone rather than reserve a partial that could
//    never complete; register `done` names the last task completed there:
//    a later first transmission of it is a late copy, dropped;
//  - a per-job register holds the step the agent last pulled or broadcast
//    (the agent moves on only when every packet of its step was
//    acknowledged): packets of earlier steps are dropped, and an aggregator
//    the job holds for an earlier step (a late copy's) is taken back;
//  - the onward node's acknowledgement frees the task's aggregator if it
//    still holds it (ATP's release on the result) and is copied to the rack.
// The acknowledgement rows of AllGather stay per job (`region_size` rows,
// the members' window).
//
// Registers per aggregator: key, bitmap, ECN and count (common), values,
// complete, the onward node, and the last freed key (pool: the step tag,
// the priority, `gone` and `done` instead of complete and freed key); per acknowledgement
// slot (same count, its own arrays): key, sender, needed and received bits,
// ECN, and the last freed key and sender. A packet touches one aggregator or
// one acknowledgement slot once per pass.
#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "dataplane/dsa_preempt.hpp"
#include "dataplane/rina.hpp"
#include "dataplane/switch.hpp"

namespace ina::dp {
namespace {

class RinaSwitch final : public SwitchProgram {
 public:
  RinaSwitch(const SwitchConfig& cfg, std::string_view scheme)
      : SwitchProgram(cfg, scheme),
        complete_(n_),
        fwd_(n_, kNoNode),
        freed_(n_) {
    static_assert(Task{}.key == 0 && Task{}.tag == 0, "Task's zero bytes are its default (Registers)");
    if (pool()) {
      tag_.resize(n_);
      prio_.resize(n_);
      gone_.resize(n_);
      done_.resize(n_);
    }
  }

  // The job's region (keys here are step tags, not job ids) and acknowledgement rows.
  // (Pool: remove_job frees the job's aggregators by key.)
  size_t on_remove(const SwitchJob& j) override {
    size_t c = 0;
    if (j.job < mark_.size()) mark_[j.job] = 0;
    for (uint32_t i = j.region_offset; !pool() && i < j.region_offset + j.region_size; ++i) {
      if (agg(i).key) {
        release(i);
        ++c;
      }
      complete_[i] = 0;  // (remove_job may have freed the slot already: a new task must not find it complete,
      freed_[i] = 0;     //  nor finished, whatever epoch numbers come later)
    }
    if (auto it = ag_.find(j.job); it != ag_.end()) {
      for (const auto& a : it->second) c += a.key != 0;
      ag_.erase(it);
    }
    late_.erase(j.job);
    return c;
  }

  // A region's keys name the step and the packet, not the job: the slot is
  // the job's that reserved it (reserve() charges it to the packet's job).
  uint16_t job_holding(uint32_t i) const override {
    if (pool()) return SwitchProgram::job_holding(i);
    const Agg& a = const_cast<RinaSwitch*>(this)->agg(i);
    return a.key ? a.owner : 0;
  }

  size_t held_elsewhere() const override {
    size_t c = 0;
    for (const auto& [job, t] : ag_)
      for (const auto& a : t) c += a.key != 0;
    return c;
  }

 protected:
  size_t max_workers() const override { return kMaxRingWorkers; }

  void check_job(const SwitchJob& j) const override {
    const bool level = j.parent != kNoNode;
    if (j.rina.child_bits.size() != j.children.size())
      throw std::invalid_argument(fmt::format("switch: job {} has {} children but {} child bit sets", j.job,
                                              j.children.size(), j.rina.child_bits.size()));
    if ((level || !j.children.empty()) && pool())
      throw std::invalid_argument(fmt::format("switch: job {} aggregates in levels, which need a region, not a pool", j.job));
    if (level) {
      if (j.rina.bits.size() != j.rina.rack.size() || j.rina.rack.size() > 64 || j.rina.rack.size() + j.children.size() == 0)
        throw std::invalid_argument(fmt::format("switch: job {} level needs a bit per rank (at most 64) and a sender", j.job));
      for (const uint8_t b : j.rina.bits)
        if (b >= 64) throw std::invalid_argument(fmt::format("switch: job {} level bit {} beyond 64", j.job, b));
    }
    if ((j.rina.rack.size() == 1 && !level) || j.rina.rack.size() > 64)
      throw std::invalid_argument(fmt::format("switch: job {} rack has {} ranks (2..64, or none: forward only)", j.job,
                                              j.rina.rack.size()));
    for (size_t i = 0; i < j.rina.rack.size(); ++i) {
      if (j.rina.rack[i] >= j.workers.size())
        throw std::invalid_argument(fmt::format("switch: job {} rack rank {} beyond its {} workers", j.job, j.rina.rack[i],
                                                j.workers.size()));
      if (i && j.rina.rack[i] <= j.rina.rack[i - 1])
        throw std::invalid_argument(fmt::format("switch: job {} rack ranks must ascend (agent first)", j.job));
    }
    for (size_t i = level ? 1 : 0; i < j.rina.upstream.size(); ++i)  // a level's first row: the group's agent
      if (const uint16_t u = j.rina.upstream[i];
          u >= j.workers.size() || std::find(j.rina.rack.begin(), j.rina.rack.end(), u) != j.rina.rack.end())
        throw std::invalid_argument(fmt::format("switch: job {} upstream rank {} is not another rack's", j.job, u));
    if (j.rina.upstream.size() > 64)
      throw std::invalid_argument(fmt::format("switch: job {} has {} upstream ranks (at most 64)", j.job, j.rina.upstream.size()));
    if (!pool()) return check_region(j, 1);
    if (j.region_size == 0)
      throw std::invalid_argument(fmt::format("switch: job {} needs a window (region_size) for its AllGather rows", j.job));
  }

  void on_data(Packet* p, const SwitchJob&, uint32_t, Time, Effects& fx) override {
    ++st_.malformed;  // Rina's ToR aggregates ring packets only
    fx.free(p);
  }

  void on_ring(Packet* p, const SwitchJob& j, Time, Effects& fx) override {
    if ((p->h.priority >> 24) != j.rina.epoch) return drop(p, st_.stale, fx);  // sent before a failure changed the job
    const NodeId src = p->h.src;
    const int local = local_index(j, p->h.rank);
    const bool from_member = local >= 0 && j.workers[p->h.rank] == src;
    switch (p->h.type) {
      case PktType::RingPull:
        if (j.parent != kNoNode) {  // a level: the agent's pull goes up to the group's top
          if (!from_member && child_index(j, src) < 0) return drop(p, st_.foreign_data, fx);
          p->h.src = id();
          p->h.dst = j.parent;
          fx.send(p);
          return;
        }
        if (p->h.has(flag::kBusy)) {  // a late member's answer
          if (local <= 0 || (!from_member && child_index(j, src) < 0)) return drop(p, st_.foreign_data, fx);
          return gather_answer(p, j, local, fx);
        }
        if (const int c = child_index(j, src); c >= 0 && !j.rina.rack.empty() && p->h.rank == j.rina.rack[0] &&
                                              (j.rina.child_bits[static_cast<size_t>(c)] & 1)) {
          p->h.src = id();
          replicate(p, j, 1, kNoNode, fx);
          return;
        }
        if (!from_member || local != 0) return drop(p, st_.foreign_data, fx);
        if (pool()) advance_mark(j, p->h.priority);
        p->h.src = id();
        replicate(p, j, 1, kNoNode, fx);
        return;
      case PktType::RingData:
        if (p->h.count == 0 || p->h.count > width_) return drop(p, st_.malformed, fx);
        if (p->h.has(flag::kResult)) {
          if (j.parent != kNoNode) {  // a level: the shard copied down from its parent
            if (src != j.parent) return drop(p, st_.foreign_data, fx);
            return gather(p, j, -1, fx);
          }
          // AllGather: the own agent's broadcast, or another group's shard for this rack.
          if (p->h.rank >= j.workers.size() || j.workers[p->h.rank] != src || (local >= 0 && local != 0))
            return drop(p, st_.foreign_data, fx);
          if (pool() && local == 0) advance_mark(j, p->h.priority);
          return gather(p, j, local, fx);
        }
        if (const int c = child_index(j, src); c >= 0) {
          if (p->h.bitmap != RankBits(j.rina.child_bits[static_cast<size_t>(c)])) return drop(p, st_.foreign_data, fx);
        } else {
          if (!from_member) return drop(p, st_.foreign_data, fx);
          if (p->h.bitmap != bit_of(j, local)) return drop(p, st_.foreign_data, fx);
        }
        if (p->h.agg_index >= kNoNode || !member(j, static_cast<NodeId>(p->h.agg_index)))
          return drop(p, st_.foreign_forward, fx);
        ++st_.data_in;
        if (pool()) return pool_aggregate(p, j, fx);
        aggregate(p, j, fx);
        return;
      case PktType::RingAck:
        if (p->h.has(flag::kBusy)) return relay_busy(p, j, local, fx);
        if (p->h.has(flag::kResult)) return gather_ack(p, j, local, fx);
        if (pool()) return pool_ack(p, j, fx);
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
    for (size_t i = 0; i < j.rina.rack.size(); ++i)
      if (j.rina.rack[i] == rank) return static_cast<int>(i);
    return -1;
  }
  static int child_index(const SwitchJob& j, NodeId n) {
    for (size_t i = 0; i < j.children.size(); ++i)
      if (j.children[i] == n) return static_cast<int>(i);
    return -1;
  }
  // A rack rank's bit in the group's packets, and every bit this switch's sum holds.
  static RankBits bit_of(const SwitchJob& j, int local) {
    return RankBits::bit(j.parent != kNoNode ? j.rina.bits[static_cast<size_t>(local)] : static_cast<unsigned>(local));
  }
  static RankBits all_bits(const SwitchJob& j) {
    if (j.parent == kNoNode && j.children.empty()) return full_bitmap(static_cast<unsigned>(j.rina.rack.size()));
    RankBits all;
    for (size_t i = 0; i < j.rina.rack.size(); ++i) all |= bit_of(j, static_cast<int>(i));
    for (const uint64_t b : j.rina.child_bits) all |= RankBits(b);
    return all;
  }
  // Where a ScatterReduce acknowledgement goes: the rack ranks that send here
  // (a top: those no child covers) and the children.
  void send_down(Packet* p, const SwitchJob& j, Effects& fx) {
    if (j.children.empty()) return replicate(p, j, 0, kNoNode, fx);
    uint64_t covered = 0;
    for (const uint64_t b : j.rina.child_bits) covered |= b;
    std::vector<NodeId> to;
    for (size_t i = 0; i < j.rina.rack.size(); ++i)
      if (j.parent != kNoNode || !(covered >> i & 1)) to.push_back(j.workers[j.rina.rack[i]]);
    to.insert(to.end(), j.children.begin(), j.children.end());
    for (size_t k = 0; k < to.size(); ++k) {
      Packet* c = k + 1 == to.size() ? p : clone(*p, fx);
      c->h.dst = to[k];
      fx.send(c);
    }
    ++st_.acks_multicast;
  }

  // A copy of p to the rack members from `first` on (1: all but the agent)
  // and to `also` (unless kNoNode). The last destination gets p itself.
  void replicate(Packet* p, const SwitchJob& j, size_t first, NodeId also, Effects& fx) {
    std::vector<NodeId> to;
    for (size_t i = first; i < j.rina.rack.size(); ++i) to.push_back(j.workers[j.rina.rack[i]]);
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

  // The slot's sum on to the onward node, or from a level up to its parent
  // (onward node in agg_index; `resend`: the top serves its sum again).
  void send_sum(uint32_t i, Packet* p, const SwitchJob& j, Effects& fx, bool resend = false) {
    load_into(i, *p);
    p->h.type = PktType::RingData;
    p->h.flags = static_cast<uint16_t>(flag::kPartial | (p->h.flags & flag::kEcn));
    if (!j.rina.rack.empty()) p->h.rank = static_cast<uint8_t>(j.rina.rack[0]);
    p->h.dst = fwd_[i];
    if (j.parent != kNoNode) {
      p->h.dst = j.parent;
      p->h.agg_index = fwd_[i];
      if (resend) p->h.flags |= flag::kResend;
    }
    fx.send(p);
  }

  void aggregate(Packet* p, const SwitchJob& j, Effects& fx) {
    const uint64_t k = key(*p);
    const uint32_t i = slot(j, p->h.psn);
    Agg& a = agg(i);
    const RankBits all = all_bits(j);
    retire_older(j, i, k);
    if (a.key == k) {
      if (complete_[i]) {
        if (!p->h.has(flag::kResend)) return drop(p, st_.duplicates, fx);
        ++st_.resend_served;  // the onward node may have lost the sum
        send_sum(i, p, j, fx, true);
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

  // A level's sum in slot i older than task k whose parent's
  // acknowledgement was lost: the group is at a later step (k: a packet of
  // it), which its agent reaches only once the top had every part of the
  // older one; the ranks skip their pulled steps on the agent's next pull
  // or broadcast and never resend it, so it is done.
  void retire_older(const SwitchJob& j, uint32_t i, uint64_t k) {
    if (j.parent == kNoNode || !complete_[i] || agg(i).key == 0 || agg(i).key >= k) return;
    freed_[i] = agg(i).key;
    release(i);
    complete_[i] = 0;
    ++st_.stale;
  }

  // Whether p (an acknowledgement, a refusal or a resume of task p) comes
  // from the node that answers for the slot's sum: the node the sum went
  // to (a level: its parent) while the slot holds it; once it is finished,
  // any job member (a repeated acknowledgement; a level: its parent).
  bool from_onward(const Packet& p, const SwitchJob& j) const {
    const uint64_t k = key(p);
    const uint32_t i = slot(j, p.h.psn);
    const bool level = j.parent != kNoNode;
    if (const_cast<RinaSwitch*>(this)->agg(i).key == k && complete_[i]) return p.h.src == (level ? j.parent : fwd_[i]);
    return finished(i, k) && (level ? p.h.src == j.parent : member(j, p.h.src));
  }

  void on_ack(Packet* p, const SwitchJob& j, Effects& fx) {
    if (!from_onward(*p, j)) return drop(p, st_.foreign_ack, fx);
    const uint64_t k = key(*p);
    const uint32_t i = slot(j, p->h.psn);
    if (agg(i).key == k && complete_[i]) {
      release(i);
      complete_[i] = 0;
      freed_[i] = k;
      ++st_.released_by_ack;
    }
    // To the rack and the levels below (again, for a repeated acknowledgement: a member may have missed it).
    p->h.flags &= flag::kEce;
    p->h.src = id();
    send_down(p, j, fx);
  }

  // A late member's answer for step tag t (the top; a level passes it up):
  // its bit in the job's register set (late) or cleared (begun); a later
  // tag resets the register, an earlier one is stale. The rack (agent
  // included) hears when t turns held and whenever no member holds it.
  void gather_answer(Packet* p, const SwitchJob& j, int local, Effects& fx) {
    const uint64_t t = static_cast<uint64_t>(p->h.priority) + 1;
    Late& b = late_[j.job];
    if (b.tag && ((b.tag - 1) >> 24) != (t - 1) >> 24) b = Late{};  // held from another membership epoch
    if (t < b.tag) return fx.free(p);  // an answer of a step the rack has left
    if (t > b.tag) b = Late{t, 0};
    const bool begun = p->h.has(flag::kResume), was_held = b.bits != 0;
    if (begun) b.bits &= ~(1ULL << local);
    else b.bits |= 1ULL << local;
    if (begun ? b.bits != 0 : was_held) return fx.free(p);
    p->h.flags = static_cast<uint16_t>(flag::kBusy | (begun ? flag::kResume : 0));
    p->h.src = id();
    p->h.rank = static_cast<uint8_t>(j.rina.rack[0]);
    replicate(p, j, 0, kNoNode, fx);
  }

  // A receiver's refusal or resume (host/ring_transfer.cpp, receiver flow
  // control) goes where the acknowledgement of that packet would, and
  // changes no slot: the refused sum stays held until it is acknowledged,
  // and the members' resends after the resume find it complete and have it
  // served again. ScatterReduce: from the onward node (a level: from its
  // parent) down to the rack and the levels below; AllGather: from a member
  // or a child to the shard's sender (a level: to its parent).
  void relay_busy(Packet* p, const SwitchJob& j, int local, Effects& fx) {
    const bool level = j.parent != kNoNode;
    p->h.flags &= flag::kBusy | flag::kResume | flag::kResult;
    if (p->h.has(flag::kResult)) {
      const bool from_rack = local >= 0 && j.workers[p->h.rank] == p->h.src;
      if ((!from_rack && child_index(j, p->h.src) < 0) || p->h.agg_index >= kNoNode) return drop(p, st_.foreign_ack, fx);
      const auto from = static_cast<NodeId>(p->h.agg_index);
      if (!level && !member(j, from)) return drop(p, st_.foreign_ack, fx);
      p->h.src = id();
      p->h.dst = level ? j.parent : from;
      fx.send(p);
      return;
    }
    // From whom the acknowledgement would be taken (on_ack, pool_ack).
    if (!(pool() ? member(j, p->h.src) : from_onward(*p, j))) return drop(p, st_.foreign_ack, fx);
    p->h.src = id();
    send_down(p, j, fx);
  }

  // ---- shared pool (see the header) --------------------------------------
  struct Task {
    uint64_t key = 0;  // key_of(job, psn); 0 = none
    uint32_t tag = 0;
    bool operator==(const Task&) const = default;
    static constexpr bool kZeroBytesAreDefault = true;  // none (Registers)
  };
  bool pool() const { return cfg_.rina.ring_memory != RingMemory::Region; }

  // The job's step register: the agent's latest step tag + 1 (0: none yet).
  uint32_t& mark_of(uint16_t job) {
    if (mark_.size() <= job) mark_.resize(job + 1, 0);
    return mark_[job];
  }
  void advance_mark(const SwitchJob& j, uint32_t tag) {
    uint32_t& m = mark_of(j.job);
    m = std::max(m, tag + 1);
  }

  // p (a member's packet, or carrying a partial sum) goes on as this switch's packet of task `tag`.
  void send_on(Packet* p, const SwitchJob& j, uint32_t tag, NodeId to, Effects& fx) {
    p->h.type = PktType::RingData;
    p->h.flags = static_cast<uint16_t>(flag::kPartial | (p->h.flags & flag::kEcn));
    p->h.priority = tag;
    p->h.rank = static_cast<uint8_t>(j.rina.rack[0]);
    p->h.nworkers = static_cast<uint8_t>(j.workers.size());
    p->h.src = id();
    p->h.dst = to;
    fx.send(p);
  }
  void bypass(Packet* p, const SwitchJob& j, Effects& fx) {
    ++st_.bypassed;
    send_on(p, j, p->h.priority, static_cast<NodeId>(p->h.agg_index), fx);
  }
  // The aggregator's partial or (`complete`) complete sum goes on in p; the aggregator is freed.
  void release_on(uint32_t i, Packet* p, const SwitchJob& j, bool complete, Effects& fx) {
    const Task t{agg(i).key, tag_[i]};
    const NodeId to = fwd_[i];
    load_into(i, *p);
    release(i);
    (complete ? done_ : gone_)[i] = t;
    send_on(p, j, t.tag, to, fx);
  }

  void pool_aggregate(Packet* p, const SwitchJob& j, Effects& fx) {
    const uint32_t tag = p->h.priority;
    const uint32_t mark = mark_of(j.job);
    if (tag + 1 < mark) return drop(p, st_.stale, fx);  // a step the agent has finished
    const uint32_t i = index_of(j, p->h.psn);
    Agg& a = agg(i);
    const Task t{key_of(j.job, p->h.psn), tag};
    if (a.key && (a.key >> 32) == j.job && tag_[i] + 1 < mark) {  // held for a finished step: take it back
      release(i);
      ++st_.stale;
    }
    const bool resend = p->h.has(flag::kResend);
    const RankBits all = full_bitmap(static_cast<unsigned>(j.rina.rack.size()));
    if (a.key == t.key && tag_[i] == tag) {
      if (a.bitmap & p->h.bitmap) {
        if (!resend) return drop(p, st_.duplicates, fx);
        ++st_.flushed;  // a member waited a timeout: the task is stuck
        return release_on(i, p, j, false, fx);
      }
      if (resend) return bypass(p, j, fx);
      accumulate(i, *p);
      if (a.bitmap != all) return fx.free(p);
      ++st_.completed;
      return release_on(i, p, j, true, fx);
    }
    if (resend || gone_[i] == t) return bypass(p, j, fx);
    if (done_[i] == t) return drop(p, st_.duplicates, fx);  // a late copy of a completed task
    if (a.key == 0) {
      reserve(i, *p);
      a.key = t.key;
      tag_[i] = tag;
      fwd_[i] = static_cast<NodeId>(p->h.agg_index);
      prio_[i] = j.rina.priority;
      return fx.free(p);  // a rack has at least two members
    }
    ++st_.collisions;
    // DSA's compare (dsa_preempt.hpp) by the jobs' priorities: the winner swaps in, the loser downgrades the holder.
    if (cfg_.rina.ring_memory == RingMemory::PoolDsa && dsa_compare(PreemptMode::Priority, prio_[i], j.rina.priority, rng_, st_).won) {
      ++st_.evictions;
      const Task victim{a.key, tag_[i]};
      const NodeId victim_to = fwd_[i];
      const auto to = static_cast<NodeId>(p->h.agg_index);
      const SwitchJob* vj = swap_with(i, *p);  // p now carries the evicted partial
      tag_[i] = tag;
      fwd_[i] = to;
      gone_[i] = victim;
      if (!vj) return drop(p, st_.malformed, fx);
      return send_on(p, *vj, victim.tag, victim_to, fx);
    }
    gone_[i] = t;
    bypass(p, j, fx);
  }

  // The onward node acknowledges a complete packet: frees what the
  // aggregator still holds of the task (a late copy's partial) and goes to the rack.
  void pool_ack(Packet* p, const SwitchJob& j, Effects& fx) {
    if (!member(j, p->h.src) || p->h.psn == UINT32_MAX) return drop(p, st_.foreign_ack, fx);
    const uint32_t i = index_of(j, p->h.psn);
    if (agg(i).key == key_of(j.job, p->h.psn) && tag_[i] == p->h.priority) {
      release(i);
      ++st_.released_by_ack;
    }
    p->h.flags &= flag::kEce;
    p->h.src = id();
    replicate(p, j, 0, kNoNode, fx);
  }

  // ---- AllGather: the ToR's copy of a shard to its rack -------------------
  // A shard packet for this rack (from a sender of the previous group, or
  // the own agent's broadcast) is copied to the rack's members with src =
  // this switch and agg_index = the original sender; the agent's broadcast
  // also goes on, unchanged, to the next group (agg_index on arrival). The
  // members acknowledge to the switch, which collects their bits in an
  // acknowledgement slot and sends one acknowledgement to the sender when
  // the rack is complete. Slots are rows by sender (row 0: the own agent,
  // then the job's `upstream` ranks; the control plane's sender -> row
  // table) of `region_size` slots, slot psn % size: a sender keeps at most
  // `region` packets past its lowest unacknowledged one, so a slot is reused
  // only after its packet was acknowledged, and the row's freed key tells a
  // stale copy exactly. A retransmission finding its slot open is copied
  // again; a stale one (a key at or below the freed one) is acknowledged at
  // once and not copied.
  struct AgSlot {
    uint64_t key = 0;  // 0 = free
    uint64_t bits = 0;
    uint8_t ece = 0;
    uint64_t freed = 0;
  };

  // The sender's row, or -1 if it may not send AllGather data here.
  static int ag_row(const SwitchJob& j, uint8_t rank, bool own) {
    if (own) return 0;
    for (size_t i = 0; i < j.rina.upstream.size(); ++i)
      if (j.rina.upstream[i] == rank) return static_cast<int>(i) + 1;
    return -1;
  }
  AgSlot& ag_slot(const SwitchJob& j, int row, uint32_t psn) {
    auto& t = ag_[j.job];
    if (t.empty()) t.resize((j.rina.upstream.size() + 1) * j.region_size);
    return t[static_cast<size_t>(row) * j.region_size + psn % j.region_size];
  }

  void gather(Packet* p, const SwitchJob& j, int local, Effects& fx) {
    const bool level = j.parent != kNoNode;
    // A level: the original sender is in agg_index (its parent set it), its
    // rows are `upstream` (the group's agent first); the agent's own
    // broadcast needs no copy back to it.
    const NodeId from = level ? static_cast<NodeId>(p->h.agg_index) : p->h.src;
    const int lrow = level ? ag_row(j, p->h.rank, false) - 1 : -1;
    const bool own = level ? lrow == 0 : local == 0;  // the agent's broadcast
    const int row = level ? lrow : ag_row(j, p->h.rank, own);
    if (row < 0 || (level && from >= kNoNode)) return drop(p, st_.foreign_data, fx);
    // The agent's broadcast of the group's shard ends its ScatterReduce: the
    // level's own-shard step's sum for this packet number is done.
    if (level && own && !pool()) retire_older(j, slot(j, p->h.psn), key(*p));
    int skip = level ? -1 : 0;  // the rack index that has the shard already (the agent)
    if (level && own)
      for (size_t i = 0; i < j.rina.rack.size(); ++i)
        if (j.rina.bits[i] == 0) skip = static_cast<int>(i);
    NodeId onward = kNoNode;
    if (!level && own && p->h.agg_index != kNoNode) {
      onward = static_cast<NodeId>(p->h.agg_index);
      if (p->h.agg_index > kNoNode || (!member(j, onward) && !is_peer_switch(onward)))
        return drop(p, st_.foreign_forward, fx);
    }
    ++st_.data_in;
    const uint64_t k = key(*p);
    AgSlot& a = ag_slot(j, row, p->h.psn);
    bool copy = true;
    if (a.key == k) {
      ++st_.resend_served;  // a member missed it
    } else if (a.freed >= k) {
      copy = false;  // the rack has it: acknowledge again
      Packet* ack = clone(*p, fx);
      ack->h.type = PktType::RingAck;
      ack->h.flags = flag::kResult;
      ack->h.src = id();
      ack->h.dst = level ? j.parent : from;
      ack->h.count = 0;
      ++st_.stale;
      fx.send(ack);
    } else if (a.key == 0) {
      a.key = k;
      a.bits = own && skip >= 0 ? 1 : 0;  // the agent has its own shard (its bit is 0 in the group)
      a.ece = 0;
    } else {
      return drop(p, st_.collisions, fx);  // beyond the sender's window: impossible for an honest sender
    }
    std::vector<NodeId> to;
    if (copy) {
      // The rack ranks this switch copies to (a top with levels: those no child covers), then the children.
      uint64_t covered = 0;
      if (!level)
        for (const uint64_t b : j.rina.child_bits) covered |= b;
      for (size_t i = 0; i < j.rina.rack.size(); ++i)
        if (static_cast<int>(i) != (own ? skip : -1) && !(covered >> i & 1)) to.push_back(j.workers[j.rina.rack[i]]);
      to.insert(to.end(), j.children.begin(), j.children.end());
    }
    if (onward != kNoNode) {
      Packet* c = to.empty() ? p : clone(*p, fx);
      c->h.dst = onward;
      fx.send(c);
      if (to.empty()) return;
    }
    if (to.empty()) return fx.free(p);
    p->h.src = id();
    p->h.agg_index = from;
    for (size_t i = 0; i < to.size(); ++i) {
      Packet* c = i + 1 == to.size() ? p : clone(*p, fx);
      c->h.dst = to[i];
      fx.send(c);
    }
    ++st_.acks_multicast;
  }

  // A member's acknowledgement of a shard copy (its bit), or a child's for
  // its part of the group (its bits); when every bit is in, one goes to the
  // sender, or from a level to its parent.
  void gather_ack(Packet* p, const SwitchJob& j, int local, Effects& fx) {
    const bool level = j.parent != kNoNode;
    const int child = child_index(j, p->h.src);
    if ((child < 0 && (local < 0 || j.workers[p->h.rank] != p->h.src)) || p->h.agg_index >= kNoNode)
      return drop(p, st_.foreign_ack, fx);
    const auto from = static_cast<NodeId>(p->h.agg_index);
    // The sender's rank: the own agent, or an upstream rank whose node is `from` (a level: its upstream list).
    int row = -1;
    if (!level && from == j.workers[j.rina.rack[0]]) row = 0;
    for (size_t i = 0; row < 0 && i < j.rina.upstream.size(); ++i)
      if (j.workers[j.rina.upstream[i]] == from) row = static_cast<int>(i) + (level ? 0 : 1);
    if (row < 0) return drop(p, st_.foreign_ack, fx);
    const uint64_t k = key(*p);
    AgSlot& a = ag_slot(j, row, p->h.psn);
    if (a.key != k) return drop(p, st_.duplicates, fx);  // a repeated acknowledgement
    a.bits |= child >= 0 ? j.rina.child_bits[static_cast<size_t>(child)] : bit_of(j, local).lo();
    a.ece |= p->h.has(flag::kEce) ? 1 : 0;
    if (RankBits(a.bits) != all_bits(j)) return fx.free(p);
    p->h.flags = static_cast<uint16_t>(flag::kResult | (a.ece ? flag::kEce : 0));
    p->h.src = id();
    p->h.dst = level ? j.parent : from;
    a.freed = k;
    a.key = 0;
    ++st_.released_by_ack;
    fx.send(p);
  }

  size_t own_register_bytes() const override { return bytes_of(complete_, fwd_, freed_, tag_, prio_, gone_, done_); }
  Registers<uint8_t> complete_;
  std::vector<NodeId> fwd_;
  Registers<uint64_t> freed_;
  std::map<uint16_t, std::vector<AgSlot>> ag_;  // by job: rows of acknowledgement slots
  struct Late {
    uint64_t tag = 0;   // step tag + 1 (0: none)
    uint64_t bits = 0;  // rack indices late for it
  };
  std::map<uint16_t, Late> late_;  // by job: the late members' register
  // Shared pool: per aggregator the task's step tag, the priority it holds
  // it with (DSA), the last task that left it incomplete and the last one
  // completed there; per job the step register.
  Registers<uint32_t> tag_;
  Registers<uint32_t> prio_;
  Registers<Task> gone_;
  Registers<Task> done_;
  std::vector<uint32_t> mark_;
};

}  // namespace

SwitchJob ring_job_at_epoch(SwitchJob old, std::vector<NodeId> workers, uint8_t epoch, std::vector<uint16_t> rack,
                            std::vector<uint16_t> upstream) {
  old.workers = std::move(workers);
  old.rina.epoch = epoch;
  old.rina.rack = std::move(rack);
  old.rina.upstream = std::move(upstream);
  return old;
}

std::unique_ptr<SwitchProgram> make_rina(const SwitchConfig& cfg, std::string_view scheme) {
  return std::make_unique<RinaSwitch>(cfg, scheme);
}

}  // namespace ina::dp
