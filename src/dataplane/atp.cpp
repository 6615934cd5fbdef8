// ATP: statistical INA with a shared aggregator pool, first come first served.
//
// Packet (job, PSN) addresses aggregator Hash(job, PSN). A free aggregator is
// reserved by a first transmission; a packet finding another task there is
// forwarded to the job's PS (collision). A completed aggregate is sent to the
// PS, and the aggregator stays reserved until the PS's result Ack passes the
// switch on its way to the workers (release on Ack). A retransmission that
// finds its own task joins it and flushes the partial aggregate to the PS,
// freeing the aggregator; one that finds a free or foreign aggregator goes to the PS.
// With ZebraConfig::kv_pool (ours), an aggregator a sparse job's hot-set
// table pins is such a foreign one: first come, first served, the table came first.
//
// Over several switches (a job with a parent: one level of an aggregation
// tree per PS, see switch.hpp) the same rules hold with "the PS" read as
// "the parent": a switch completes when it holds every rank of its subtree
// (Lemma 2 of the Rina paper: an INA switch and its children act as one
// worker) and sends that one aggregate up; collisions and flushes go up too,
// where the next switch may still aggregate them. Two rules are added, both
// for copies that arrive late (duplicated or reordered on a link):
//  - a first transmission that finds its task completed here is a copy of
//    what the aggregate already holds: dropped (a star re-sends the aggregate);
//  - a first transmission that finds a free aggregator whose last result to
//    pass was its own task's (register `retired_`) came after the result:
//    dropped, since reserving would hold an aggregator nobody completes.
//
// Sharing the pool between tenants (ours; off unless configured, see
// PoolShare::job_quota and reclaim_after): a first transmission of a job
// holding its quota of aggregators takes none, and goes to the PS as a
// collision does. A packet that finds another task reserved at least
// reclaim_after ago, or one of a job holding more than its quota (a fair
// share lowered by another job's arrival), reclaims its aggregator first: a
// partial aggregate goes to its job's PS as an evicted partial (the PS
// merges it by bitmap, as a flush), a completed one is dropped (its PS has
// it; a lost copy is recovered from the workers' retransmissions, which find
// the aggregator free or foreign and go to the PS); then the packet finds
// the aggregator free. In hardware the reclaim is a swap, as DSA's
// eviction: a second pass (resubmits).
#include "dataplane/switch.hpp"

namespace ina::dp {
namespace {

class AtpSwitch final : public SwitchProgram {
 public:
  AtpSwitch(const SwitchConfig& cfg, std::string_view scheme)
      : SwitchProgram(cfg, scheme), complete_(n_, 0), retired_(n_, 0) {
    host_sparse_in_pool();
  }

 protected:
  void on_data(Packet* p, const SwitchJob& j, uint32_t i, Time, Effects& fx) override {
    Agg& a = agg(i);
    const bool resend = p->h.has(flag::kResend);
    const bool tree = j.parent != kNoNode;
    const uint64_t key = key_of(p->h.job, p->h.psn);
    if (a.key == key) {
      if (complete_[i] && tree && !resend) {  // a late copy of a contribution the aggregate holds
        ++st_.duplicates;
        fx.free(p);
        return;
      }
      if (complete_[i]) {  // the PS's Ack was lost: hand the result to the PS again
        load_into(i, *p);
        send_to_ps(p, j, flag::kPartial, fx);
        return;
      }
      if (!(a.bitmap & p->h.bitmap)) {
        accumulate(i, *p);
        if (full(i, j)) { complete(i, p, j, fx); return; }
      } else {
        ++st_.duplicates;
      }
      if (!resend) { fx.free(p); return; }
      load_into(i, *p);  // a retransmission means the task is stuck: flush it to the PS
      release(i);
      send_to_ps(p, j, flag::kPartial, fx);
      return;
    }
    if (a.key != 0 && reclaimable(i, j)) {
      ++st_.resubmits;
      const bool done = complete_[i];
      const SwitchJob* holder = nullptr;
      Packet* r = reclaim(i, fx, holder);
      complete_[i] = 0;
      if (r && done) fx.free(r);  // the PS has the complete aggregate
      else if (r) send_to_ps(r, *holder, flag::kPartial | flag::kEvicted, fx);
    }
    if (a.key == 0 && !resend) {
      if (tree && retired_[i] == key) {  // its result passed here already
        ++st_.stale;
        fx.free(p);
        return;
      }
      if (!may_take(j, i)) {  // the job holds its quota of aggregators
        ++st_.quota_refused;
        send_to_ps(p, j, flag::kCollision, fx);
        return;
      }
      reserve(i, *p);
      complete_[i] = 0;
      if (full(i, j)) { complete(i, p, j, fx); return; }
      fx.free(p);
      return;
    }
    if (a.key != 0) ++st_.collisions;
    send_to_ps(p, j, flag::kCollision, fx);
  }

 private:
  void complete(uint32_t i, Packet* p, const SwitchJob& j, Effects& fx) {
    complete_[i] = 1;
    ++st_.completed;
    load_into(i, *p);
    send_to_ps(p, j, flag::kPartial, fx);
  }

  void result_passed(uint32_t i, uint64_t key) override { retired_[i] = key; }

  std::vector<uint8_t> complete_;  // register: the aggregate went to the PS; held until its Ack passes
  std::vector<uint64_t> retired_;  // register: the task whose result passed this index last (trees only read it)
};

}  // namespace

std::unique_ptr<SwitchProgram> make_atp(const SwitchConfig& cfg, std::string_view scheme) {
  return std::make_unique<AtpSwitch>(cfg, scheme);
}

}  // namespace ina::dp
