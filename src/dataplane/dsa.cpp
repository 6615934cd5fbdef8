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
//    long-held aggregator eventually yields (the compare: dsa_preempt.hpp).
// Retransmissions never reserve or preempt (a late copy would otherwise hold
// an aggregator nobody completes); they only join their own task or go to the PS.
// Strawman modes for Fig. 11: always preempt, or preempt with probability 1/2.
// With ZebraConfig::kv_pool (ours), an aggregator a sparse job's hot-set
// table pins is not a task: a packet that maps to it goes to the PS without a
// compare (preempting it would split a hot key's sum between switch and PS,
// which Zebra's workers cannot join: they take a hot key's sum from the switch).
//
// Over several switches (a job with a parent: one level of an aggregation
// tree per PS, see switch.hpp; the PS family on a topology) the same rules
// hold with "the PS" read as "the parent": an evicted partial, a lost
// compare and a retransmission go up, where the next switch may still
// aggregate them, and a task completes here when it holds every rank of its
// subtree: its aggregate goes up and the aggregator is free at once (DSA
// holds nothing for a result: a lost aggregate is recovered from the
// workers' retransmissions, which go up past the free aggregator). The
// result passing down frees a late copy's reservation; a first transmission
// that finds its task's result already passed (register `retired_`, as
// ATP's) is dropped, so it cannot reserve or preempt for a finished task.
//
// Split tasks. A task whose partial went to the PS (evicted by a winner, or a
// first packet that lost the compare) may later find its aggregator free and
// reserve it with its remaining packets: its halves then meet only when the
// PS's timeout fetches the aggregator (§IV-C; ~1 ms each). With
// DsaConfig::join_splits (ours, scheme dsa-join) the switch keeps, per
// aggregator, one more register: the task whose contributions this
// aggregator last sent to the PS (an eviction, a collision, or a PS's fetch)
// and the ranks it sent (48 bits of key and the rank bitmap). Then:
//  - a registered task never competes for its aggregator while another task
//    holds it: its packet goes to the PS (its ranks added to the register);
//  - when a packet of the registered task joins the aggregator and the
//    aggregator's ranks and the register's together are every rank of the
//    job, the aggregator is complete but for what the PS holds: the switch
//    sends its half to the PS at once (one packet, like an eviction) and
//    frees the aggregator; the PS completes the task on it.
// Passes: the register sits in a stage before the aggregator's, so the
// first pass reads it (the compare above, and the flush: the aggregator's
// register action adds the packet and clears itself when the union covers
// the job). Writing it after the aggregator's stage has decided takes a
// second pass: free for an eviction (DSA's swap already resubmits), counted
// in `resubmits` for a collision or a lost compare. A fetch and a passing
// result write it in their own pass. The register is cleared when the
// task's result passes; it is overwritten when the aggregator sends another
// task to the PS, and the overwritten task falls back to the paper's timeout.
//
// Sharing the pool between tenants (ours; off unless configured, see
// PoolShare::job_quota and reclaim_after, SwitchJob's priority range):
//  - a packet's priority is first clamped into its job's admitted range
//    (SwitchProgram::on_packet), so a job cannot outbid the range it was
//    admitted with, whatever its packets say;
//  - a first transmission of a job holding its quota of aggregators neither
//    reserves nor competes: it goes to the PS as a collision does, without a
//    compare (so without downgrading the holder);
//  - a packet that finds another task reserved at least reclaim_after ago,
//    or one of another job holding more than its quota, evicts it first, as
//    a winner of the compare would (its partial to its PS; a swap: the
//    second pass is counted in resubmits), whatever its priority, and then
//    finds the aggregator free. Downgrading alone frees
//    a long-held aggregator only after log2(its priority / the packet's)
//    lost compares, and only to packets that come to it.
#include "dataplane/dsa.hpp"
#include "dataplane/dsa_preempt.hpp"
#include "dataplane/switch.hpp"

namespace ina::dp {
namespace {

class DsaSwitch final : public SwitchProgram {
 public:
  DsaSwitch(const SwitchConfig& cfg, std::string_view scheme)
      : SwitchProgram(cfg, scheme),
        priority_(n_),
        retired_(n_),
        at_ps_(cfg.dsa.join_splits ? n_ : 0),
        at_ps_ranks_(cfg.dsa.join_splits ? n_ : 0) {
    host_sparse_in_pool();
  }

 protected:
  void on_data(Packet* p, const SwitchJob& j, uint32_t i, Time, Effects& fx) override {
    Agg& a = agg(i);
    const uint16_t job = p->h.job;
    const uint32_t psn = p->h.psn;
    const uint64_t key = key_of(job, psn);
    mark(job, psn, task::kSeen);
    if (a.key == key) {
      if (a.bitmap & p->h.bitmap) { ++st_.duplicates; fx.free(p); return; }
      accumulate(i, *p);
      finish_or_free(i, p, j, fx);
      return;
    }
    const bool resend = p->h.has(flag::kResend);
    if (j.parent != kNoNode && !resend && retired_[i] == key) {  // its result passed here already
      ++st_.stale;
      fx.free(p);
      return;
    }
    if (a.key != 0 && reclaimable(i, j)) {
      ++st_.resubmits;
      const auto victim_job = static_cast<uint16_t>(a.key >> 32);
      mark(victim_job, static_cast<uint32_t>(a.key), task::kLost);
      const uint32_t held = priority_[i];
      const SwitchJob* holder = nullptr;
      if (Packet* r = reclaim(i, fx, holder)) {
        r->h.priority = held;
        to_ps(i, r, *holder, flag::kPartial | flag::kEvicted, fx, true);
      }
      priority_[i] = 0;
    }
    if (a.key == 0) {
      if (resend) { to_ps(i, p, j, flag::kCollision, fx); return; }
      if (!may_take(j, i)) { refuse(i, p, j, fx); return; }
      reserve(i, *p);
      priority_[i] = p->h.priority;
      finish_or_free(i, p, j, fx);
      return;
    }
    ++st_.collisions;
    if (is_pinned(i)) {  // a sparse job's hot values (kv_pool): never preempted, never downgraded
      if (!resend) mark(job, psn, task::kLost);
      to_ps(i, p, j, flag::kCollision, fx);
      return;
    }
    if (!at_ps_.empty() && at_ps_[i] == key) {  // join_splits: part of it is at the PS; join it there
      to_ps(i, p, j, flag::kCollision, fx);
      return;
    }
    if (!resend && !may_take(j, i)) { refuse(i, p, j, fx); return; }
    if (resend) { to_ps(i, p, j, flag::kCollision, fx); return; }
    const DsaCompare c = dsa_compare(cfg_.dsa.preempt, priority_[i], p->h.priority, rng_, st_);
    if (c.won) {
      const auto victim_job = static_cast<uint16_t>(a.key >> 32);
      mark(victim_job, static_cast<uint32_t>(a.key), task::kLost);
      mark(job, psn, task::kWon);
      const SwitchJob* vj = swap_with(i, *p);  // p now carries the evicted partial aggregate
      p->h.priority = c.evicted;               // ... and the priority it held the aggregator with
      if (full(i, j)) {  // a one-rank job (or subtree) completes on arrival
        Packet* r = fx.alloc();
        r->h = p->h;
        r->h.job = job;
        r->h.psn = psn;
        r->h.nworkers = static_cast<uint8_t>(j.workers.size());
        r->h.rank = static_cast<uint8_t>(agg(i).bitmap.lowest());
        complete(i, r, j, fx);
      }
      if (vj) to_ps(i, p, *vj, flag::kPartial | flag::kEvicted, fx, true);
      else { ++st_.malformed; fx.free(p); }
      return;
    }
    mark(job, psn, task::kLost);  // lost the compare: the holder is downgraded
    to_ps(i, p, j, flag::kCollision, fx);
  }

 private:
  // A first transmission of job j, which holds its quota: to the PS, no aggregator taken.
  void refuse(uint32_t i, Packet* p, const SwitchJob& j, Effects& fx) {
    ++st_.quota_refused;
    mark(p->h.job, p->h.psn, task::kLost);
    to_ps(i, p, j, flag::kCollision, fx);
  }

  // p (of task key(p), or an evicted partial) leaves aggregator i for the PS;
  // with join_splits the register records its ranks, in a second pass unless
  // this one is already the second (`resubmitted`: an eviction).
  void to_ps(uint32_t i, Packet* p, const SwitchJob& j, uint16_t flags, Effects& fx, bool resubmitted = false) {
    if (!at_ps_.empty()) {
      if (!resubmitted) ++st_.resubmits;
      note_at_ps(i, key_of(p->h.job, p->h.psn), p->h.bitmap);
    }
    send_to_ps(p, j, flags, fx);
  }

  void note_at_ps(uint32_t i, uint64_t key, RankBits ranks) {
    if (at_ps_[i] == key) {
      at_ps_ranks_[i] |= ranks;
    } else {
      at_ps_[i] = key;
      at_ps_ranks_[i] = ranks;
    }
  }

  void fetched(uint32_t i, uint64_t key, RankBits ranks) override {
    if (!at_ps_.empty()) note_at_ps(i, key, ranks);
  }

  void finish_or_free(uint32_t i, Packet* p, const SwitchJob& j, Effects& fx) {
    if (!full(i, j)) {
      // join_splits: what the aggregator lacks is at the PS: send it the switch's half now.
      if (!at_ps_.empty() && at_ps_[i] == agg(i).key && (agg(i).bitmap | at_ps_ranks_[i]) == owed(j)) {
        ++st_.split_joins;
        load_into(i, *p);
        p->h.flags &= flag::kEcn;
        p->h.priority = 0;
        p->h.rank = static_cast<uint8_t>(p->h.bitmap.lowest());
        release(i);  // the register stays until the task's result passes (result_passed)
        send_to_ps(p, j, flag::kPartial, fx);
        return;
      }
      fx.free(p);
      return;
    }
    complete(i, p, j, fx);
  }

  // Task `agg(i)` holds every rank owed here: the result goes to the
  // workers (a star), or the subtree's aggregate to the parent (a tree).
  void complete(uint32_t i, Packet* p, const SwitchJob& j, Effects& fx) {
    load_into(i, *p);
    release(i);
    ++st_.completed;
    if (j.parent == kNoNode) multicast_result(p, j, fx);
    else send_to_ps(p, j, flag::kPartial, fx);
  }

  void result_passed(uint32_t i, uint64_t key) override {
    retired_[i] = key;
    if (!at_ps_.empty() && at_ps_[i] == key) at_ps_[i] = 0;
  }
  size_t own_register_bytes() const override { return bytes_of(priority_, retired_, at_ps_, at_ps_ranks_); }

  Registers<uint32_t> priority_;  // register: the held task's priority (Eq. 1), halved when it wins a compare
  Registers<uint64_t> retired_;   // register: the task whose result passed this index last (trees only read it)
  // Register (join_splits): the task whose contributions this aggregator last sent to the PS, and their ranks.
  Registers<uint64_t> at_ps_;
  Registers<RankBits> at_ps_ranks_;
};

}  // namespace

std::unique_ptr<SwitchProgram> make_dsa(const SwitchConfig& cfg, std::string_view scheme) {
  return std::make_unique<DsaSwitch>(cfg, scheme);
}

}  // namespace ina::dp
