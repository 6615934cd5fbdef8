// DSA: shared aggregator pool with priority preemption (DSA §III-B, §V, §VI).
//
// Packet (job, PSN) addresses aggregator Hash(job, PSN).
//  - same task: deduplicate by bitmap, else add; a full bitmap completes the
//    task here: the result is multicast to the workers and the aggregator freed;
//  - free aggregator: a first transmission reserves it;
//  - another task: compare priorities. If the packet wins, packet and
//    aggregator swap (a resubmit: the second pass writes key and priority) and
//    the evicted partial aggregate goes to its job's PS. If it loses, it goes
//    to the PS and the aggregator's priority is halved (downgrading), so a
//    long-held aggregator eventually yields.
// Retransmissions never reserve or preempt (a late copy would otherwise hold
// an aggregator nobody completes); they only join their own task or go to the PS.
// Strawman modes for Fig. 11: always preempt, or preempt with probability 1/2.
// With SwitchConfig::kv_pool (ours), an aggregator a sparse job's hot-set
// table pins is not a task: a packet that maps to it goes to the PS without a
// compare (preempting it would split a hot key's sum between switch and PS,
// which Zebra's workers cannot join: they take a hot key's sum from the switch).
#include "dataplane/switch.hpp"

namespace ina::dp {
namespace {

class DsaSwitch final : public SwitchProgram {
 public:
  DsaSwitch(const SwitchConfig& cfg, std::string_view scheme) : SwitchProgram(cfg, scheme), priority_(n_, 0) {
    host_sparse_in_pool();
  }

 protected:
  void on_data(Packet* p, const SwitchJob& j, uint32_t i, Time, Effects& fx) override {
    Agg& a = agg(i);
    const uint16_t job = p->h.job;
    const uint32_t psn = p->h.psn;
    mark(job, psn, task::kSeen);
    if (a.key == key_of(job, psn)) {
      if (a.bitmap & p->h.bitmap) { ++st_.duplicates; fx.free(p); return; }
      accumulate(i, *p);
      finish_or_free(i, p, j, fx);
      return;
    }
    const bool resend = p->h.has(flag::kResend);
    if (a.key == 0) {
      if (resend) { send_to_ps(p, j, flag::kCollision, fx); return; }
      reserve(i, *p);
      priority_[i] = p->h.priority;
      finish_or_free(i, p, j, fx);
      return;
    }
    ++st_.collisions;
    if (is_pinned(i)) {  // a sparse job's hot values (kv_pool): never preempted, never downgraded
      if (!resend) mark(job, psn, task::kLost);
      send_to_ps(p, j, flag::kCollision, fx);
      return;
    }
    if (!resend && wins(p->h.priority, priority_[i])) {
      ++st_.preempt_won;
      ++st_.resubmits;
      const auto victim_job = static_cast<uint16_t>(a.key >> 32);
      mark(victim_job, static_cast<uint32_t>(a.key), task::kLost);
      mark(job, psn, task::kWon);
      const uint32_t held = priority_[i];
      priority_[i] = p->h.priority;
      const SwitchJob* vj = swap_with(i, *p);  // p now carries the evicted partial aggregate
      p->h.priority = held;                    // ... and the priority it held the aggregator with
      if (full(i, j)) {  // a one-worker job completes on arrival
        Packet* r = fx.alloc();
        r->h = p->h;
        r->h.job = job;
        r->h.psn = psn;
        r->h.nworkers = static_cast<uint8_t>(j.workers.size());
        r->h.rank = 0;  // the winner's job has one worker
        load_into(i, *r);
        release(i);
        ++st_.completed;
        multicast_result(r, j, fx);
      }
      if (vj) send_to_ps(p, *vj, flag::kPartial | flag::kEvicted, fx);
      else { ++st_.malformed; fx.free(p); }
      return;
    }
    if (!resend) {
      ++st_.preempt_lost;
      ++st_.downgrades;
      priority_[i] >>= 1;
      mark(job, psn, task::kLost);
    }
    send_to_ps(p, j, flag::kCollision, fx);
  }

 private:
  bool wins(uint32_t pkt, uint32_t held) {
    switch (cfg_.preempt) {
      case PreemptMode::Priority: return pkt > held;
      case PreemptMode::Always: return true;
      case PreemptMode::Coin: return rng_.bernoulli(0.5);
    }
    return false;
  }

  void finish_or_free(uint32_t i, Packet* p, const SwitchJob& j, Effects& fx) {
    if (!full(i, j)) { fx.free(p); return; }
    load_into(i, *p);
    release(i);
    ++st_.completed;
    multicast_result(p, j, fx);
  }

  std::vector<uint32_t> priority_;  // register: the held task's priority (Eq. 1), halved when it wins a compare
};

}  // namespace

std::unique_ptr<SwitchProgram> make_dsa(const SwitchConfig& cfg, std::string_view scheme) {
  return std::make_unique<DsaSwitch>(cfg, scheme);
}

}  // namespace ina::dp
