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
// A task split by the pool (ours): a packet that goes around its
// aggregator (held by another task, or refused by the job's quota), a
// partial evicted or flushed, or one a PS fetches, leaves the switch while
// the rest of its task may still arrive. Those later packets can find the
// aggregator free and reserve it, and that aggregate would wait forever for
// the ranks that went around (until the workers' retransmission timeout):
// in a tree, every collision could cost an RTO although nothing was lost.
// So the switch records which ranks of the task left it: a bypass record
// (key and rank bits) in one of two register tables, each indexed by its own
// hash of the task (Records below). A task reserving an aggregator
// takes its record: those ranks count as aggregated elsewhere (register
// `elsewhere_`), the aggregate is complete without them and goes up
// without them (its bitmap says what it holds; the parent or PS holds the
// rest), and a late copy of one of them is a duplicate. A record is dropped
// when its task reserves, or when the task's result passes. A record
// overwritten by another task's before its own task reserved is counted
// (bypass_overwritten): that task can stall until a retransmission.
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
#include <array>
#include <utility>

#include "core/rng.hpp"
#include "dataplane/switch.hpp"

namespace ina::dp {
namespace {

class AtpSwitch final : public SwitchProgram {
 public:
  AtpSwitch(const SwitchConfig& cfg, std::string_view scheme)
      : SwitchProgram(cfg, scheme), complete_(n_), retired_(n_), elsewhere_(n_) {
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
      if (!((a.bitmap | elsewhere_[i]) & p->h.bitmap)) {
        accumulate(i, *p);
        if (done(i, j)) { complete(i, p, j, fx); return; }
      } else {
        ++st_.duplicates;
      }
      if (!resend) { fx.free(p); return; }
      load_into(i, *p);  // a retransmission means the task is stuck: flush it to the PS
      record_gone(key, p->h.bitmap | elsewhere_[i]);
      release(i);
      send_to_ps(p, j, flag::kPartial, fx);
      return;
    }
    if (a.key != 0 && reclaimable(i, j)) {
      ++st_.resubmits;
      const bool was_complete = complete_[i];
      const SwitchJob* holder = nullptr;
      const RankBits gone = elsewhere_[i];
      Packet* r = reclaim(i, fx, holder);
      complete_[i] = 0;
      if (r && was_complete) {
        fx.free(r);  // the PS has the complete aggregate
      } else if (r) {
        record_gone(key_of(r->h.job, r->h.psn), r->h.bitmap | gone);
        send_to_ps(r, *holder, flag::kPartial | flag::kEvicted, fx);
      }
    }
    if (a.key == 0 && !resend) {
      if (tree && retired_[i] == key) {  // its result passed here already
        ++st_.stale;
        fx.free(p);
        return;
      }
      if (!may_take(j, i)) {  // the job holds its quota of aggregators
        ++st_.quota_refused;
        record_gone(key, p->h.bitmap);
        send_to_ps(p, j, flag::kCollision, fx);
        return;
      }
      reserve(i, *p);
      complete_[i] = 0;
      elsewhere_[i] = take_record(key) & ~p->h.bitmap;
      if (done(i, j)) { complete(i, p, j, fx); return; }
      fx.free(p);
      return;
    }
    if (a.key != 0) ++st_.collisions;
    record_gone(key, p->h.bitmap);
    send_to_ps(p, j, flag::kCollision, fx);
  }

 private:
  void complete(uint32_t i, Packet* p, const SwitchJob& j, Effects& fx) {
    complete_[i] = 1;
    ++st_.completed;
    load_into(i, *p);
    send_to_ps(p, j, flag::kPartial, fx);
  }

  // Every rank the switch owes is in the aggregate or went around it.
  bool done(uint32_t i, const SwitchJob& j) { return (agg(i).bitmap | elsewhere_[i]) == owed(j); }

  // Bypass records: two register tables of the pool's size, each indexed by
  // its own hash of the task (two choices: a record is lost only when both
  // of its slots hold other tasks' records). A pass reads and writes each
  // table once, the first before the second.
  struct Records {
    Registers<uint64_t> key;   // the task, 0 = none
    Registers<RankBits> ranks; // its ranks that left the switch without its aggregator
    uint64_t salt;
    Records(size_t n, uint64_t salt) : key(n), ranks(n), salt(salt) {}
    uint32_t slot(uint64_t k) const { return static_cast<uint32_t>(mix(k, salt) % key.size()); }
  };
  // Ranks `ranks` of task `key` left this switch without its aggregator:
  // added to its record in the first table if that slot is its own or free,
  // else in the second; with neither, the second's record is overwritten.
  void record_gone(uint64_t key, RankBits ranks) {
    for (Records* t : {&records_[0], &records_[1]}) {
      const uint32_t r = t->slot(key);
      if (t->key[r] == key) {
        t->ranks[r] |= ranks;
        return;
      }
      if (t->key[r] == 0 || t == &records_[1]) {
        if (t->key[r] != 0) ++st_.bypass_overwritten;
        t->key[r] = key;
        t->ranks[r] = ranks;
        return;
      }
    }
  }
  // The ranks of task `key` that went around (both tables: a task may hold a
  // record in each), taken out.
  RankBits take_record(uint64_t key) {
    RankBits gone;
    for (Records& t : records_)
      if (const uint32_t r = t.slot(key); t.key[r] == key) {
        t.key[r] = 0;
        gone |= std::exchange(t.ranks[r], RankBits{});
      }
    return gone;
  }

  void result_passed(uint32_t i, uint64_t key) override {
    retired_[i] = key;
    for (Records& t : records_)
      if (const uint32_t r = t.slot(key); t.key[r] == key) t.key[r] = 0;
  }
  void fetched(uint32_t i, uint64_t key, RankBits ranks) override { record_gone(key, ranks | elsewhere_[i]); }
  size_t own_register_bytes() const override {
    return bytes_of(complete_, retired_, elsewhere_, records_[0].key, records_[0].ranks, records_[1].key,
                    records_[1].ranks);
  }

  Registers<uint8_t> complete_;  // register: the aggregate went to the PS; held until its Ack passes
  Registers<uint64_t> retired_;  // register: the task whose result passed this index last (trees only read it)
  Registers<RankBits> elsewhere_;  // register: ranks of the held task that went around this switch
  std::array<Records, 2> records_{Records(n_, 0x9e3779b97f4a7c15ull), Records(n_, 0xc2b2ae3d27d4eb4full)};
};

}  // namespace

std::unique_ptr<SwitchProgram> make_atp(const SwitchConfig& cfg, std::string_view scheme) {
  return std::make_unique<AtpSwitch>(cfg, scheme);
}

}  // namespace ina::dp
