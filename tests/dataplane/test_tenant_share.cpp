// Two tenants of one shared aggregator pool, one of them attacking: the
// switch program's per-job bounds (dp::PoolShare: job_quota / fair_quota,
// reclaim_after; SwitchJob's priority range) keep the other
// job's share. The switch program and both jobs' real PSes are driven
// directly through FakeEffects; the workers are the test, sending first
// transmissions. Job 1 is the victim (workers 1, 2; PS 10), job 2 the
// attacker (workers 3, 4; PS 11), which sends only rank 0 of each task, so
// none of its tasks ever completes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <sys/socket.h>

#include <span>
#include <thread>

#include "cluster_fixture.hpp"
#include "core/rng.hpp"
#include "host/ps.hpp"
#include "runtime/communicator.hpp"
#include "runtime/control.hpp"
#include "runtime_fixture.hpp"
#include "schemes/registry.hpp"
#include "wire/packet.hpp"

namespace ina::test {
namespace {

constexpr NodeId kShareSw = 0, kPsV = 10, kPsA = 11;
constexpr uint16_t kVictim = 1, kAttacker = 2;
const std::vector<NodeId> kVictimWorkers = {1, 2};
const std::vector<NodeId> kAttackerWorkers = {3, 4};
constexpr uint64_t kAggregators = 64;
constexpr uint32_t kVictimPriority = 1u << 16;  // the communicator's default priority

// Rank r's gradient of task psn (victim); the exact sum is computed from these.
std::vector<int32_t> grad(uint32_t psn, unsigned r) {
  return ramp(64, static_cast<int32_t>(psn * 7 + r * 1000) - 500, static_cast<int32_t>(r) + 1);
}

// Hash(JobID, PSN) as the shared-pool switch addresses it (SwitchProgram::index_of).
uint32_t index_of(uint16_t job, uint32_t psn) {
  return static_cast<uint32_t>(splitmix64(dp::SwitchProgram::key_of(job, psn)) % kAggregators);
}

class Rig {
 public:
  // `cfg_fn` sets the sharing rules of the switch, `job_fn` the admission of each job.
  // victim_now = false: the victim's job is registered later, by join_victim().
  Rig(const std::string& scheme, void (*cfg_fn)(dp::SwitchConfig&), void (*job_fn)(dp::SwitchJob&) = nullptr,
      bool victim_now = true) {
    dp::SwitchConfig c;
    c.payload_values = 64;
    c.memory_bytes = kAggregators * 256;
    if (cfg_fn) cfg_fn(c);
    sw = schemes::find(scheme).make_switch(c);
    sw->set_id(kShareSw);
    for (uint16_t job : {kVictim, kAttacker}) {
      dp::SwitchJob j;
      j.job = job;
      j.workers = job == kVictim ? kVictimWorkers : kAttackerWorkers;
      j.ps = job == kVictim ? kPsV : kPsA;
      if (job_fn) job_fn(j);
      if (job == kAttacker || victim_now) sw->add_job(j);
      else victim_job_ = j;
      host::PsConfig pc;
      pc.job = job;
      pc.workers = j.workers;
      pc.sw = kShareSw;
      pc.payload_values = 64;
      pc.min_timeout = 1 * kMs;
      auto ps = std::make_unique<host::ParameterServer>(pc);
      ps->set_id(j.ps);
      ps_[job == kVictim ? 0 : 1] = std::move(ps);
    }
  }

  void join_victim() { sw->add_job(victim_job_); }

  // The attacker's first transmissions of tasks [from, from + n), rank 0 only.
  void flood(uint32_t from, uint32_t n, uint32_t priority) {
    for (uint32_t psn = from; psn < from + n; ++psn) {
      inject(make_data(fx_[0], kAttacker, psn, 0, 2, kAttackerWorkers[0], ramp(64, 9), priority));
      ++attacker_sent;
    }
  }

  // The victim's first transmissions of rank 0 only, tasks [from, from + n) (never completed: not in `tasks`).
  void hold(uint32_t from, uint32_t n) {
    for (uint32_t psn = from; psn < from + n; ++psn)
      inject(make_data(fx_[0], kVictim, psn, 0, 2, kVictimWorkers[0], grad(psn, 0), kVictimPriority));
  }

  // One victim task: both ranks' first transmissions, back to back.
  void task(uint32_t psn, uint32_t priority = kVictimPriority) {
    tasks.insert(psn);
    for (unsigned r = 0; r < 2; ++r)
      inject(make_data(fx_[0], kVictim, psn, static_cast<uint8_t>(r), 2, kVictimWorkers[r], grad(psn, r), priority));
  }

  // Runs the victim PS's reminders (Fetch, GradRequest; the test's workers do
  // not answer the latter) until every victim task has its result at both
  // workers, or no reminder is left.
  void settle() {
    for (int k = 0; k < 100000 && !all_done(); ++k) {
      auto& timers = fx_[1].timers;
      if (timers.empty()) return;
      auto first = std::min_element(timers.begin(), timers.end());
      const auto [at, token] = *first;
      timers.erase(first);
      now = std::max(now, at);
      ps_[0]->on_timer(token, now, fx_[1]);
      pump();
    }
  }

  bool all_done() const {
    for (uint32_t psn : tasks)
      for (unsigned r = 0; r < 2; ++r)
        if (!results[r].count(psn)) return false;
    return true;
  }

  // Every victim task's result at both workers, and each the exact sum.
  void expect_victim_exact() const {
    EXPECT_TRUE(all_done()) << "victim tasks without a result";
    size_t bad = 0;
    for (uint32_t psn : tasks) {
      const auto want = add(grad(psn, 0), grad(psn, 1));
      for (unsigned r = 0; r < 2; ++r) {
        auto it = results[r].find(psn);
        bad += it != results[r].end() && it->second != want;
      }
    }
    EXPECT_EQ(bad, 0u) << "victim results that are not the exact sum";
    EXPECT_EQ(ps_[0]->stats().foreign + ps_[0]->stats().malformed, 0u);
  }

  const host::ParameterServer& ps(uint16_t job) const { return *ps_[job == kVictim ? 0 : 1]; }

  std::unique_ptr<dp::SwitchProgram> sw;
  std::set<uint32_t> tasks;                       // victim tasks sent
  std::map<uint32_t, std::vector<int32_t>> results[2];  // victim results by rank, by PSN
  uint64_t attacker_sent = 0;
  uint64_t evicted_to_attacker_ps = 0;  // partial aggregates of the attacker sent to its PS by the switch
  Time now = 0;

 private:
  void inject(Packet* p) {
    sw->on_packet(p, now, fx_[0]);
    pump();
  }

  // Delivers everything sent (instantly, in order) until nothing is in flight.
  void pump() {
    for (bool any = true; any;) {
      any = false;
      for (auto& f : fx_) {
        if (f.sent.empty()) continue;
        any = true;
        for (const Sent& s : f.take()) route(s);
      }
    }
  }

  void route(const Sent& s) {
    auto rebuild = [&](FakeEffects& f) {
      Packet* p = f.alloc();
      p->h = s.h;
      std::copy(s.v.begin(), s.v.end(), p->payload());
      return p;
    };
    const NodeId d = s.h.dst;
    if (d == kShareSw || d == kMulticast) return sw->on_packet(rebuild(fx_[0]), now, fx_[0]);
    if (d == kPsV) return ps_[0]->on_packet(rebuild(fx_[1]), now, fx_[1]);
    if (d == kPsA) {
      if (s.h.src == kShareSw && s.h.has(flag::kEvicted)) ++evicted_to_attacker_ps;
      return ps_[1]->on_packet(rebuild(fx_[2]), now, fx_[2]);
    }
    for (unsigned r = 0; r < 2; ++r)
      if (d == kVictimWorkers[r] && s.h.type == PktType::Ack && s.h.has(flag::kResult)) {
        EXPECT_EQ(s.h.job, kVictim);
        results[r][s.h.psn] = s.v;
      }
    // Anything else (GradRequests, the attacker's workers' packets) reaches no node here.
  }

  dp::SwitchJob victim_job_;
  FakeEffects fx_[3] = {FakeEffects(8192), FakeEffects(8192), FakeEffects(8192)};  // the switch's, the victim PS's, the attacker PS's
  std::unique_ptr<host::ParameterServer> ps_[2];
};

// The attacker's aggregators (indices), from its tasks [0, n).
std::set<uint32_t> held_by_attacker(const dp::SwitchProgram& sw, uint32_t n) {
  std::set<uint32_t> s;
  for (uint32_t psn = 0; psn < n; ++psn)
    if (int64_t i = sw.holder_of(kAttacker, psn); i >= 0) s.insert(static_cast<uint32_t>(i));
  return s;
}

// ====================================================================
// (a) Aggregator quota: a job hoarding first transmissions
// ====================================================================

// ATP, first come first served: the attacker sends 7,424 first transmissions
// that never complete before the victim sends anything. With the fair quota
// (64 aggregators, two jobs: 32 each) it holds 32 and no more. Every victim
// task whose aggregator the attacker does not hold then completes in the
// switch, and the victim can hold the other 32 aggregators: its share.
TEST(TenantShare, AtpQuotaBoundsAHoardingJob) {
  {  // Without a quota (the paper's pool): the attacker holds all 64, the victim gets none.
    Rig rig("atp", nullptr);
    rig.flood(0, 7424, 0);
    for (uint32_t psn = 0; psn < 200; ++psn) rig.task(psn);
    rig.settle();
    EXPECT_EQ(rig.sw->occupied_by(kAttacker), kAggregators);
    EXPECT_EQ(rig.sw->stats().completed, 0u);
    rig.expect_victim_exact();  // from the PS alone
  }
  Rig rig("atp", [](dp::SwitchConfig& c) { c.share.fair_quota = true; });
  EXPECT_EQ(rig.sw->quota_of(kVictim), 32u);
  EXPECT_EQ(rig.sw->quota_of(kAttacker), 32u);
  rig.flood(0, 7424, 0);
  const auto& st = rig.sw->stats();
  EXPECT_EQ(rig.sw->occupied_by(kAttacker), 32u) << "the attacker holds its quota, not the pool";
  EXPECT_EQ(st.collisions + st.quota_refused + 32, 7424u);
  const std::set<uint32_t> attacker = held_by_attacker(*rig.sw, 7424);
  ASSERT_EQ(attacker.size(), 32u);

  // 200 victim tasks, one after the other (each aggregator released by its PS's result).
  uint64_t want = 0;
  for (uint32_t psn = 0; psn < 200; ++psn) {
    want += !attacker.count(index_of(kVictim, psn));
    rig.task(psn);
  }
  rig.settle();
  EXPECT_EQ(st.completed, want) << "a victim task on an aggregator the attacker does not hold completes in the switch";
  EXPECT_EQ(want, 103u);
  EXPECT_EQ(rig.ps(kVictim).stats().completions, 200u);
  rig.expect_victim_exact();

  // The victim's share of the pool: rank 0 of 1,000 more tasks (never
  // completed) takes every aggregator the attacker does not hold.
  rig.hold(1000, 1000);
  EXPECT_EQ(rig.sw->occupied_by(kVictim), 32u);
  EXPECT_EQ(rig.sw->occupied_by(kAttacker), 32u);
}

// ATP with the fair quota, the attacker alone at first: its share is the
// whole pool, and it takes all 64 aggregators. When the victim's job is
// registered both shares are 32: the attacker holds 32 more than its
// quota, and the victim's packets reclaim those they address, at once (no
// timeout), until the attacker is down to its quota.
TEST(TenantShare, AtpFairQuotaFollowsTheJobsRegistered) {
  Rig rig("atp", [](dp::SwitchConfig& c) { c.share.fair_quota = true; }, nullptr, /*victim_now=*/false);
  EXPECT_EQ(rig.sw->quota_of(kAttacker), kAggregators);
  rig.flood(0, 7424, 0);
  EXPECT_EQ(rig.sw->occupied_by(kAttacker), kAggregators);
  rig.join_victim();
  EXPECT_EQ(rig.sw->quota_of(kAttacker), 32u);
  const auto& st = rig.sw->stats();
  // The victim's tasks in order; the first 32 distinct aggregators they
  // address are reclaimed, the rest stay the attacker's.
  std::set<uint32_t> reclaimed;
  uint64_t want = 0;
  for (uint32_t psn = 0; psn < 200; ++psn) {
    const uint32_t i = index_of(kVictim, psn);
    if (reclaimed.size() < 32) reclaimed.insert(i);
    want += reclaimed.count(i);
    rig.task(psn);
  }
  rig.settle();
  EXPECT_EQ(st.reclaimed, 32u);
  EXPECT_EQ(rig.evicted_to_attacker_ps, 32u);
  EXPECT_EQ(rig.sw->occupied_by(kAttacker), 32u);
  EXPECT_EQ(st.completed, want);
  EXPECT_EQ(want, 135u);
  rig.expect_victim_exact();
  // The attacker at its quota takes nothing more.
  rig.flood(10000, 1000, 0);
  EXPECT_EQ(rig.sw->occupied_by(kAttacker), 32u);
}

// DSA: the attacker sends its first transmissions at the top of the range
// `ina switch` admits by default (INT32_MAX), 64 more before each victim
// task; the victim sends at 2^16. Without a quota every compare goes the
// attacker's way; with the fair quota it holds 32 aggregators at any time
// and takes no other (a job at its quota does not compete).
TEST(TenantShare, DsaQuotaBoundsAHoardingJob) {
  const uint32_t top = INT32_MAX;
  auto attack = [&](Rig& rig) {
    rig.flood(0, 7424, top);
    for (uint32_t psn = 0, next = 7424; psn < 200; ++psn, next += 64) {
      rig.flood(next, 64, top);
      rig.task(psn);
    }
    rig.settle();
  };
  {  // Without a quota.
    Rig rig("dsa", nullptr);
    attack(rig);
    EXPECT_EQ(rig.sw->occupied_by(kAttacker), kAggregators);
    EXPECT_EQ(rig.sw->stats().completed, 0u);
    rig.expect_victim_exact();
  }
  Rig rig("dsa", [](dp::SwitchConfig& c) { c.share.fair_quota = true; });
  rig.flood(0, 7424, top);
  EXPECT_EQ(rig.sw->occupied_by(kAttacker), 32u);
  uint32_t next = 7424;
  size_t over = 0;  // the same attack, the attacker's holding checked before each victim task
  for (uint32_t psn = 0; psn < 200; ++psn) {
    rig.flood(next, 64, top);
    next += 64;
    over += rig.sw->occupied_by(kAttacker) > 32;
    rig.task(psn);
  }
  rig.settle();
  const auto& st = rig.sw->stats();
  EXPECT_EQ(over, 0u) << "times the attacker held more than its quota";
  EXPECT_EQ(st.completed, 103u) << "victim tasks completed in the switch";
  EXPECT_EQ(rig.ps(kVictim).stats().completions + st.completed, 200u);
  rig.expect_victim_exact();
  rig.hold(1000, 1000);
  EXPECT_EQ(rig.sw->occupied_by(kVictim), 32u);
}

// ====================================================================
// (b) A priority range fixed at admission
// ====================================================================

// DSA: the attacker sends priority 0xFFFFFFFF, which the wire allows. The
// operator admitted it with 1..1024 and the victim with 1..2^20: the switch
// clamps every packet into its job's range, so the victim (2^16) wins every
// compare against the attacker's aggregators and completes each of its tasks
// in the switch, while the attacker floods 64 new tasks before each of them.
TEST(TenantShare, DsaPriorityRangeBoundsAMaxPriorityJob) {
  {  // Without admitted ranges.
    Rig rig("dsa", nullptr);
    rig.flood(0, 7424, 0xFFFFFFFFu);
    for (uint32_t psn = 0, next = 7424; psn < 200; ++psn, next += 64) {
      rig.flood(next, 64, 0xFFFFFFFFu);
      rig.task(psn);
    }
    rig.settle();
    EXPECT_EQ(rig.sw->stats().completed, 0u);
    EXPECT_EQ(rig.sw->stats().priority_clamped, 0u);
    rig.expect_victim_exact();
  }
  Rig rig("dsa", nullptr, [](dp::SwitchJob& j) {
    j.priority_min = 1;
    j.priority_max = j.job == kAttacker ? 1024 : 1u << 20;
  });
  rig.flood(0, 7424, 0xFFFFFFFFu);
  EXPECT_EQ(rig.sw->occupied(), kAggregators);
  uint32_t next = 7424;
  for (uint32_t psn = 0; psn < 200; ++psn) {
    rig.flood(next, 64, 0xFFFFFFFFu);
    next += 64;
    rig.task(psn);
  }
  rig.settle();
  const auto& st = rig.sw->stats();
  EXPECT_EQ(st.priority_clamped, rig.attacker_sent) << "every attacker packet, none of the victim's";
  EXPECT_EQ(st.completed, 200u) << "every victim task completes in the switch";
  EXPECT_EQ(rig.ps(kVictim).stats().completions, 0u);
  rig.expect_victim_exact();
}

// ====================================================================
// (c) Reclaiming reservations that stay incomplete
// ====================================================================

// ATP: the attacker's 7,424 first transmissions at t = 0 take the whole pool
// (no quota here) and never complete. Half a second later the victim still
// finds every aggregator held (its tasks complete at the PS); from
// reclaim_after = 1 s on, each of its packets that finds an attacker's
// aggregator reclaims it (the attacker's partial goes to the attacker's PS)
// and every victim task completes in the switch.
TEST(TenantShare, AtpReclaimsReservationsIncompletePastTheTimeout) {
  {  // Without reclamation the attacker holds the pool for good.
    Rig rig("atp", nullptr);
    rig.flood(0, 7424, 0);
    rig.now = 10 * kSec;
    for (uint32_t psn = 0; psn < 200; ++psn) rig.task(psn);
    rig.settle();
    EXPECT_EQ(rig.sw->occupied_by(kAttacker), kAggregators);
    EXPECT_EQ(rig.sw->stats().completed, 0u);
    rig.expect_victim_exact();
  }
  Rig rig("atp", [](dp::SwitchConfig& c) { c.share.reclaim_after = 1 * kSec; });
  rig.flood(0, 7424, 0);
  const auto& st = rig.sw->stats();
  EXPECT_EQ(rig.sw->occupied_by(kAttacker), kAggregators);
  rig.now = 500 * kMs;
  for (uint32_t psn = 0; psn < 20; ++psn) rig.task(psn);
  rig.settle();
  EXPECT_EQ(st.completed, 0u);
  EXPECT_EQ(st.reclaimed, 0u) << "nothing is reclaimed before reclaim_after";
  rig.now = 1 * kSec;
  std::set<uint32_t> touched;
  for (uint32_t psn = 20; psn < 220; ++psn) {
    touched.insert(index_of(kVictim, psn));
    rig.task(psn);
  }
  rig.settle();
  EXPECT_EQ(st.completed, 200u) << "every victim task after reclaim_after completes in the switch";
  EXPECT_EQ(st.reclaimed, touched.size()) << "each attacker aggregator the victim addressed, once";
  EXPECT_EQ(rig.evicted_to_attacker_ps, touched.size()) << "each reclaimed partial went to the attacker's PS";
  EXPECT_EQ(rig.sw->occupied_by(kAttacker), kAggregators - touched.size());
  EXPECT_EQ(rig.ps(kVictim).stats().completions, 220u) << "under ATP every result comes from the PS";
  rig.expect_victim_exact();
}

// A job at its quota reclaims nothing: it could not take the aggregator, so
// emptying another job's stale reservation would only churn. Quota 16 each on
// 64 aggregators, reclaim after 1 s: the attacker holds 16 stale ones; the
// victim, holding its 16, addresses them after 10 s and none is reclaimed;
// once one of the victim's own is freed, the next stale one it addresses is.
TEST(TenantShare, AJobAtItsQuotaReclaimsNothing) {
  Rig rig("atp", [](dp::SwitchConfig& c) {
    c.share.job_quota = 16;
    c.share.reclaim_after = 1 * kSec;
  });
  rig.flood(0, 7424, 0);
  ASSERT_EQ(rig.sw->occupied_by(kAttacker), 16u);
  const std::set<uint32_t> attacker = held_by_attacker(*rig.sw, 7424);
  // the victim's 16: rank 0 of tasks on aggregators the attacker does not hold
  uint32_t psn = 100000;
  std::vector<uint32_t> mine;
  while (mine.size() < 16) {
    if (!attacker.count(index_of(kVictim, psn)) && rig.sw->holder_of(kVictim, psn) < 0) {
      const size_t before = rig.sw->occupied_by(kVictim);
      rig.hold(psn, 1);
      if (rig.sw->occupied_by(kVictim) > before) mine.push_back(psn);
    }
    ++psn;
  }
  rig.now = 10 * kSec;
  const auto& st = rig.sw->stats();
  uint32_t onto_attacker = 0;
  for (uint32_t p = 200000; onto_attacker < 8; ++p)
    if (attacker.count(index_of(kVictim, p))) {
      rig.hold(p, 1);
      ++onto_attacker;
    }
  EXPECT_EQ(st.reclaimed, 0u) << "a job at its quota reclaimed another job's aggregator";
  EXPECT_EQ(rig.sw->occupied_by(kAttacker), 16u);
  // One of the victim's own completes (rank 1 joins it): the victim is below its quota again.
  rig.task(mine[0]);
  rig.settle();
  ASSERT_EQ(rig.sw->occupied_by(kVictim), 15u);
  for (uint32_t p = 300000;; ++p)
    if (attacker.count(index_of(kVictim, p))) {
      rig.hold(p, 1);
      break;
    }
  EXPECT_EQ(st.reclaimed, 1u);
  EXPECT_EQ(rig.sw->occupied_by(kAttacker), 15u);
  EXPECT_EQ(rig.sw->occupied_by(kVictim), 16u);
}

// DSA: the attacker's first transmissions at INT32_MAX take the pool at t = 0
// and never complete. Downgrading alone lets the victim (2^16) in only after
// 15 lost compares per aggregator; with reclaim_after = 1 s every victim task
// sent after it completes in the switch.
TEST(TenantShare, DsaReclaimsReservationsIncompletePastTheTimeout) {
  {  // Without reclamation.
    Rig rig("dsa", nullptr);
    rig.flood(0, 7424, INT32_MAX);
    rig.now = 10 * kSec;
    for (uint32_t psn = 0; psn < 200; ++psn) rig.task(psn);
    rig.settle();
    EXPECT_EQ(rig.sw->stats().completed, 0u);
    rig.expect_victim_exact();
  }
  Rig rig("dsa", [](dp::SwitchConfig& c) { c.share.reclaim_after = 1 * kSec; });
  rig.flood(0, 7424, INT32_MAX);
  EXPECT_EQ(rig.sw->occupied_by(kAttacker), kAggregators);
  rig.evicted_to_attacker_ps = 0;  // its own packets preempted one another
  rig.now = 1 * kSec;
  std::set<uint32_t> touched;
  for (uint32_t psn = 0; psn < 200; ++psn) {
    touched.insert(index_of(kVictim, psn));
    rig.task(psn);
  }
  rig.settle();
  const auto& st = rig.sw->stats();
  EXPECT_EQ(st.completed, 200u);
  EXPECT_EQ(st.reclaimed, touched.size());
  EXPECT_EQ(rig.evicted_to_attacker_ps, touched.size());
  EXPECT_EQ(rig.ps(kVictim).stats().completions, 0u);
  rig.expect_victim_exact();
}

// ====================================================================
// Admission
// ====================================================================

TEST(TenantShare, QuotaAndPriorityRangeAreAdmissionRules) {
  dp::SwitchConfig c;
  c.payload_values = 64;
  c.memory_bytes = kAggregators * 256;
  c.share.fair_quota = true;
  auto sw = schemes::find("dsa").make_switch(c);
  sw->set_id(kShareSw);
  dp::SwitchJob j;
  j.workers = kVictimWorkers;
  j.ps = kPsV;
  j.job = 1;
  sw->add_job(j);
  EXPECT_EQ(sw->quota_of(1), 64u);
  j.job = 2;
  j.quota = 5;  // the job's own entry beats the fair share
  sw->add_job(j);
  j.job = 3;
  j.quota = 0;
  sw->add_job(j);
  EXPECT_EQ(sw->quota_of(1), 21u) << "64 aggregators, three jobs";
  EXPECT_EQ(sw->quota_of(2), 5u);
  sw->remove_job(3);
  EXPECT_EQ(sw->quota_of(1), 32u);
  j.job = 4;
  j.priority_min = 10;
  j.priority_max = 9;
  try {
    sw->add_job(j);
    FAIL() << "an empty priority range was admitted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("job 4 has an empty priority range 10..9"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sw->job(4), nullptr);
  // Off by default (the papers' behaviour, every simulation): no quota, no reclaim.
  dp::SwitchConfig d;
  d.memory_bytes = kAggregators * 256;
  auto plain = schemes::find("atp").make_switch(d);
  j.job = 1;
  j.priority_min = 0;
  j.priority_max = UINT32_MAX;
  plain->add_job(j);
  EXPECT_EQ(plain->quota_of(1), 0u);
}

// ====================================================================
// The runtime switch's defaults (ina switch: fair quota, reclaim 1 s)
// ====================================================================

// Job 99 of switch `sw` (its two ranks joined by hand) and what it sends.
struct HandJob {
  rt::Joined a0, a1;
  HandJob(const rt::Endpoint& sw, const rt::Key& key99) {
    rt::JoinOptions o;
    o.sw = sw;
    o.job = 99;
    o.nworkers = 2;
    o.retain_ops = CommConfig{}.retain_ops;
    o.key = key99;
    std::thread t1([&] {
      rt::JoinOptions r1 = o;
      r1.rank = 1;
      a1 = rt::join_job(r1);
    });
    a0 = rt::join_job(o);
    t1.join();
  }
  // Rank 0's first transmissions of tasks [0, n) at `priority`, paced within the switch's socket buffer.
  void flood(const rt::Endpoint& sw, uint32_t n, uint32_t priority) {
    for (uint32_t psn = 0; psn < n; ++psn) {
      Header h = data_header(99, a0.job.self, 0, 64);
      h.psn = psn;
      h.priority = priority;
      std::vector<std::byte> buf(kHeaderBytes + 4 * 64);
      const std::vector<int32_t> v(64, 3);
      const size_t len = encode(h, v, buf);
      ASSERT_EQ(::sendto(a0.udp.get(), buf.data(), len, 0, reinterpret_cast<const sockaddr*>(&sw.sa), sizeof(sockaddr_in)),
                static_cast<ssize_t>(len));
      if (psn % 256 == 255) usleep(2000);
    }
  }
};

// The switch's statistics once `n` gradient packets have arrived.
nlohmann::json stats_after(const rt::Endpoint& sw, const rt::Key& key, uint64_t n) {
  nlohmann::json st;
  for (Time end = rt::monotonic_now() + 5 * kSec; rt::monotonic_now() < end; usleep(10000)) {
    st = rt::query_switch_stats(sw, kSec, &key, 0);
    if (st["switch"]["data_in"].get<uint64_t>() >= n) break;
  }
  return st;
}

// Over real sockets, with `ina switch`'s default ShareLimits: job 99 (two
// ranks joined by hand, its PS) sends 7,424 first transmissions of rank 0
// that never complete while it is the only job: its fair share is the pool,
// and it holds all 64 aggregators. Job 4 (two communicators) then joins and
// runs 2,000 tasks: its packets take back the 32 aggregators job 99 holds
// beyond the halved share, job 99 stays at 32, and job 4's results are exact
// with a share of them completed in the switch (none, without the rules:
// job 99 would hold every aggregator for as long as it stays connected).
TEST(TenantShareRuntime, AtpSwitchKeepsASecondJobsShare) {
  using namespace ina::rt;
  SwitchDaemonConfig sc = switch_config("atp", 64, kAggregators * 256);
  ASSERT_EQ(sc.share.job_quota, ShareLimits::kFairQuota);
  ASSERT_EQ(sc.share.reclaim_after, 1 * kSec);
  LocalSwitch sw(sc);
  const Key key = ina::test::test_switch_key();
  const Key key99 = job_key(key, 99);
  LocalPs ps99(sw.d.endpoint(), 99, 2);
  HandJob attacker(sw.d.endpoint(), key99);
  attacker.flood(sw.d.endpoint(), 7424, 0);
  nlohmann::json st = stats_after(sw.d.endpoint(), key, 7424);
  ASSERT_EQ(st["switch"]["data_in"], 7424) << "the flood did not all arrive";
  auto own99 = query_switch_stats(sw.d.endpoint(), kSec, &key99, 99);
  EXPECT_EQ(own99["job"]["aggregators_held"], kAggregators) << "alone, its share is the pool";
  EXPECT_EQ(own99["job"]["quota"], kAggregators);

  LocalPs ps4(sw.d.endpoint(), 4, 2);
  const size_t n = 64 * 2000;
  auto errors = run_workers(2, [&](unsigned r) {
    Communicator comm(comm_config(sw.addr(), 4, r, 2));
    std::vector<int32_t> v(n);
    for (size_t k = 0; k < n; ++k) v[k] = static_cast<int32_t>(k % 977) * (r + 1) - static_cast<int32_t>(r);
    comm.allreduce(std::span<int32_t>(v));
    for (size_t k = 0; k < n; ++k) ASSERT_EQ(v[k], static_cast<int32_t>(k % 977) * 3 - 1) << "rank " << r << " k " << k;
    comm.close();
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  ps4.wait();
  // Job 99 kept at most its share while job 4 ran (32: the aggregators it
  // held beyond it were reclaimed; fewer if job 4 also found some past the
  // 1 s reclaim timeout), and nothing came back to it (it sends no more).
  own99 = query_switch_stats(sw.d.endpoint(), kSec, &key99, 99);
  const auto held = own99["job"]["aggregators_held"].get<uint64_t>();
  EXPECT_LE(held, 32u) << own99;
  EXPECT_EQ(own99["job"]["quota"], kAggregators) << "alone again";
  st = query_switch_stats(sw.d.endpoint(), kSec, &key, 0);
  const auto& s = st["switch"];
  EXPECT_EQ(s["reclaimed"].get<uint64_t>(), kAggregators - held) << s;
  EXPECT_GE(s["completed"].get<uint64_t>(), 2000u / 20) << "job 4's tasks completed in the switch (0 without the rules) " << s;
  EXPECT_EQ(s["malformed"], 0);
}

// The operator admits job 99 with priorities 1..1024 (--job-priority
// 99=1..1024): the switch binds the range when the job goes live, and
// clamps every packet of it, whatever priority the packet carries.
TEST(TenantShareRuntime, DsaSwitchBindsAJobsPriorityRangeAtAdmission) {
  using namespace ina::rt;
  SwitchDaemonConfig sc = switch_config("dsa", 64, kAggregators * 256);
  sc.share = ShareLimits::from_flags("fair", 1000, "", {"99=1..1024"});
  LocalSwitch sw(sc);
  const Key key = ina::test::test_switch_key();
  const Key key99 = job_key(key, 99);
  LocalPs ps99(sw.d.endpoint(), 99, 2);
  HandJob attacker(sw.d.endpoint(), key99);
  attacker.flood(sw.d.endpoint(), 500, 0xFFFFFFFFu);
  const nlohmann::json st = stats_after(sw.d.endpoint(), key, 500);
  EXPECT_EQ(st["switch"]["data_in"], 500);
  EXPECT_EQ(st["switch"]["priority_clamped"], 500) << st["switch"];
  const auto own = query_switch_stats(sw.d.endpoint(), kSec, &key99, 99);
  EXPECT_EQ(own["job"]["priority_range"], nlohmann::json::array({1, 1024})) << own;
  EXPECT_EQ(own["job"]["quota"], kAggregators) << own;
}

// `ina switch`'s flags: defaults, and each bad value refused naming the flag and the value.
TEST(TenantShareRuntime, FlagsAreCheckedNamingFlagAndValue) {
  using rt::ShareLimits;
  const ShareLimits d = ShareLimits::from_flags("fair", 1000, "", {});
  EXPECT_EQ(d.job_quota, ShareLimits::kFairQuota);
  EXPECT_EQ(d.reclaim_after, 1 * kSec);
  EXPECT_EQ(d.priority.lo, 0u);
  EXPECT_EQ(d.priority.hi, static_cast<uint32_t>(INT32_MAX));
  const ShareLimits g = ShareLimits::from_flags("40", 0, "1..4096", {"7=1..1024", "8=2048..65536"});
  EXPECT_EQ(g.job_quota, 40u);
  EXPECT_EQ(g.reclaim_after, 0);
  EXPECT_EQ(g.range_of(7).hi, 1024u);
  EXPECT_EQ(g.range_of(8).lo, 2048u);
  EXPECT_EQ(g.range_of(9).hi, 4096u);
  EXPECT_EQ(ShareLimits::from_flags("none", 1, "", {}).job_quota, 0u);
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"0", "", ""}, "--job-quota 0: give fair, none, or a number"},
      {{"lots", "", ""}, "--job-quota lots: give fair, none, or a number"},
      {{"fair", "5", ""}, "--priority-range 5: give LO..HI, each 0..4294967295"},
      {{"fair", "1..4294967296", ""}, "--priority-range 1..4294967296: give LO..HI"},
      {{"fair", "9..3", ""}, "--priority-range 9..3: LO is above HI"},
      {{"fair", "", "4=9..3"}, "--job-priority 4=9..3: LO is above HI"},
      {{"fair", "", "x=1..2"}, "--job-priority x=1..2: give JOB=LO..HI with JOB 1..65535"},
      {{"fair", "", "0=1..2"}, "--job-priority 0=1..2: give JOB=LO..HI with JOB 1..65535"},
  };
  for (const auto& [args, want] : bad) {
    try {
      std::vector<std::string> jobs;
      if (!args[2].empty()) jobs.push_back(args[2]);
      ShareLimits::from_flags(args[0], 1000, args[1], jobs);
      ADD_FAILURE() << "accepted: " << want;
    } catch (const rt::RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  try {
    ShareLimits::from_flags("fair", 1000, "", {"4=1..2", "4=3..5"});
    ADD_FAILURE() << "a job given twice was accepted";
  } catch (const rt::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("--job-priority 4=3..5: job 4 is given twice"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ina::test
