// Protocol tests: end-to-end exactness of every policy under faults in the
// simulator, DSA task types, and unit tests of the switch programs and the PS
// driven directly through a recording Effects.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cluster_fixture.hpp"
#include "schemes/registry.hpp"

namespace ina::test {
namespace {

// ====================================================================
// End to end: policy x concurrent jobs x fault profile
// ====================================================================

struct PolicyCase {
  std::string name;
  std::string scheme;  // of the registry
  bool priorities = false;
};

const std::vector<PolicyCase>& policies() {
  static const std::vector<PolicyCase> v = {
      {"SwitchML", "switchml"},
      {"ATP", "atp"},
      {"DSA", "dsa", true},
      {"DSAJoin", "dsa-join", true},
      {"DSAAlways", "dsa-always"},
      {"DSACoin", "dsa-coin"},
  };
  return v;
}

std::vector<Faults> fault_profiles() {
  Faults clean;
  Faults l1;
  l1.name = "loss1";
  l1.loss = 0.01;
  Faults l5;
  l5.name = "loss5";
  l5.loss = 0.05;
  Faults dr;
  dr.name = "dup2reorder5";
  dr.dup = 0.02;
  dr.reorder = 0.05;
  dr.reorder_delay = 4 * kUs;
  Faults all;
  all.name = "loss2dup2reorder5";
  all.loss = 0.02;
  all.dup = 0.02;
  all.reorder = 0.05;
  all.reorder_delay = 4 * kUs;
  return {clean, l1, l5, dr, all};
}

ClusterConfig e2e_config(const PolicyCase& pc, int jobs, const Faults& f, uint64_t seed) {
  ClusterConfig c;
  c.scheme = pc.scheme;
  const std::vector<int> wpj = {4, 3, 2};
  c.workers_per_job.assign(wpj.begin(), wpj.begin() + jobs);
  // Different sizes per job, including sizes that are not multiples of 64 and a 1-value op.
  c.ops = {{1000, 64, 2500, 130}, {777, 1280, 63, 1}, {2048, 500, 321}};
  if (pc.priorities) c.job_priority = {1u << 20, 1u << 10, 1u << 4};  // job 1 high, job 2 low, job 3 lower
  c.job_start = {0, 7 * kUs, 15 * kUs};
  c.rank_stagger = 700 * kNs;
  c.aggregators = 32;  // small: collisions between (and within) jobs
  c.faults = f;
  c.seed = seed;
  return c;
}

using E2EParam = std::tuple<size_t, int, size_t>;  // policy index, jobs, fault index

class EndToEnd : public ::testing::TestWithParam<E2EParam> {};

TEST_P(EndToEnd, ExactSumNoLeaks) {
  const auto [pi, jobs, fi] = GetParam();
  const PolicyCase& pc = policies()[pi];
  const Faults f = fault_profiles()[fi];
  for (uint64_t rep = 0; rep < 3; ++rep) {
    const uint64_t seed = 1000 + pi * 100 + jobs * 10 + fi + rep * 7919;
    SCOPED_TRACE("seed " + std::to_string(seed));
    Cluster cl(e2e_config(pc, jobs, f, seed));
    if (pc.scheme == "switchml") {
      // SwitchML: every worker's window cap is the slots per pool of its region.
      ASSERT_EQ(cl.slots_per_pool, (32u / jobs & ~1u) / 2);
    } else {
      ASSERT_EQ(cl.slots_per_pool, 0u);
      ASSERT_EQ(cl.servers.size(), static_cast<size_t>(jobs));
    }
    ASSERT_TRUE(cl.run(10 * kSec)) << "not idle after 10 s simulated";
    cl.check_all(pc.name + "/" + f.name);
    // Every op completed, at every worker.
    for (size_t j = 0; j < cl.workers.size(); ++j)
      for (auto* w : cl.workers[j]) {
        EXPECT_EQ(w->completed(), cl.expected[j].size());
        EXPECT_FALSE(w->transport().busy());
        EXPECT_GE(w->finish_time(), 0);
      }
    // The scheme did the work where it should. Without faults, SwitchML and
    // ATP never time out and complete every task exactly once: at the switch
    // (SwitchML, where every gradient packet is summed exactly once) or at
    // the PS (ATP: the switch's aggregates and collisions all end there).
    // Catches a task completed twice, a gradient aggregated twice or never,
    // and spurious retransmissions. (DSA does time out without faults: a
    // split task waits for the PS's reminder, DSA §IV-B.)
    const auto& st = cl.sw->stats();
    if (f.loss == 0 && !f.late_copies() && schemes::find(pc.scheme).policy != "preemptive") {
      uint64_t tasks = 0, grads = 0, retx = 0, ps_done = 0;
      for (size_t j = 0; j < cl.workers.size(); ++j)
        for (const auto& op : cl.expected[j]) {
          tasks += (op.size() + 63) / 64;
          grads += (op.size() + 63) / 64 * cl.workers[j].size();
        }
      for (const auto& job : cl.workers)
        for (auto* w : job) retx += w->transport().stats().retransmits;
      for (auto* p : cl.servers) ps_done += p->stats().completions;
      EXPECT_EQ(retx, 0u) << "no fault, yet a worker timed out";
      if (pc.scheme == "switchml") {
        EXPECT_EQ(st.completed, tasks);
        EXPECT_EQ(st.aggregated, grads);
      } else {
        EXPECT_EQ(ps_done, tasks);
      }
    }
    EXPECT_EQ(st.malformed, 0u);
    if (pc.scheme == "switchml") {
      EXPECT_EQ(st.to_ps, 0u);
      EXPECT_GT(st.completed, 0u);
    }
    if (f.loss == 0 && !f.late_copies()) {
      for (size_t j = 0; j < cl.workers.size(); ++j)
        for (auto* w : cl.workers[j]) EXPECT_EQ(w->transport().stats().malformed, 0u);
    }
  }
}

std::string e2e_name(const ::testing::TestParamInfo<E2EParam>& info) {
  const auto [pi, jobs, fi] = info.param;
  return policies()[pi].name + "_" + std::to_string(jobs) + "jobs_" + fault_profiles()[fi].name;
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, EndToEnd,
                         ::testing::Combine(::testing::Range<size_t>(0, 5), ::testing::Values(1, 2, 3),
                                            ::testing::Range<size_t>(0, 5)),
                         e2e_name);

// More seeds for the hardest profile with three jobs contending for a tiny pool.
class EndToEndSeeds : public ::testing::TestWithParam<std::tuple<size_t, uint64_t>> {};

TEST_P(EndToEndSeeds, ThreeJobsTinyPoolAllFaults) {
  const auto [pi, seed0] = GetParam();
  const PolicyCase& pc = policies()[pi];
  for (uint64_t seed = seed0; seed < seed0 + 5; ++seed) {
    ClusterConfig c = e2e_config(pc, 3, fault_profiles()[4], seed);
    c.aggregators = pc.scheme == "switchml" ? 12 : 16;
    Cluster cl(c);
    ASSERT_TRUE(cl.run(10 * kSec)) << "seed " << seed;
    cl.check_all(pc.name + " seed " + std::to_string(seed));
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, EndToEndSeeds,
                         ::testing::Combine(::testing::Range<size_t>(0, 5), ::testing::Values(100, 200)),
                         [](const auto& info) {
                           return policies()[std::get<0>(info.param)].name + "_seed" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(SwitchMLRegions, RegisterJobsSplitsMemoryEvenly) {
  ClusterConfig c;
  c.scheme = "switchml";
  c.workers_per_job = {2, 2, 2};
  c.aggregators = 32;
  Cluster cl(c);
  // 32 / 3 = 10 aggregators per region (even), two pools of 5.
  EXPECT_EQ(cl.slots_per_pool, 5u);
  for (size_t j = 0; j < 3; ++j)
    for (auto* w : cl.workers[j]) EXPECT_EQ(w->transport().config().window_cap, 5u);
  ASSERT_TRUE(cl.run());
  cl.check_all("switchml regions");
}

// More ops than WorkerConfig.retain_ops (64) in flight at once: one-packet
// ops, so the initial window (196 packets) spans ~196 ops. A worker whose
// result Ack was lost for an early op must still get it (from the PS via the
// reminder: its peers answer the PS's GradRequest with their result), and
// every PS entry must be resolved.
class ManyOps : public ::testing::TestWithParam<std::tuple<size_t, size_t>> {};

namespace {
ClusterConfig many_ops_config(const PolicyCase& pc, const Faults& f) {
  ClusterConfig c;
  c.scheme = pc.scheme;
  if (pc.priorities) c.job_priority = {1u << 20, 1u << 10};
  c.workers_per_job = {3, 2};
  c.ops = {std::vector<uint64_t>(100, 64), std::vector<uint64_t>(90, 70)};
  c.job_start = {0, 5 * kUs};
  c.rank_stagger = 700 * kNs;
  c.aggregators = 16;
  c.faults = f;
  c.seed = 1;
  return c;
}
}  // namespace

TEST_P(ManyOps, MoreOpsThanRetainedStillComplete) {
  const auto [pi, fi] = GetParam();
  const PolicyCase& pc = policies()[pi];
  const Faults f = fault_profiles()[fi];
  Cluster cl(many_ops_config(pc, f));
  EXPECT_TRUE(cl.run(10 * kSec)) << "not idle after 10 s simulated (retransmitting or reminding forever)";
  cl.check_all(pc.name + "/" + f.name + " 100 ops");
}

// The same runs with every op retained: the retention bound must not change
// the outcome, only how far ahead a worker may run.
TEST_P(ManyOps, SameRunsPassWhenEveryOpIsRetained) {
  const auto [pi, fi] = GetParam();
  const PolicyCase& pc = policies()[pi];
  const Faults f = fault_profiles()[fi];
  ClusterConfig c = many_ops_config(pc, f);
  c.retain_ops = 256;
  Cluster cl(c);
  EXPECT_TRUE(cl.run(10 * kSec));
  cl.check_all(pc.name + "/" + f.name + " 100 ops, all retained");
}

INSTANTIATE_TEST_SUITE_P(SharedPools, ManyOps,
                         ::testing::Combine(::testing::Values<size_t>(0, 1, 2), ::testing::Values<size_t>(2, 3)),
                         [](const auto& info) {
                           return policies()[std::get<0>(info.param)].name + "_" +
                                  fault_profiles()[std::get<1>(info.param)].name;
                         });

// ====================================================================
// DSA task types (§IV-C)
// ====================================================================

TEST(DsaTaskTypes, AllThreeTypesOccurAndResolve) {
  for (const Faults& f : {fault_profiles()[0], fault_profiles()[1]}) {
    SCOPED_TRACE(f.name);
    ClusterConfig c;
    c.scheme = "dsa";
    c.workers_per_job = {3, 3, 2};
    c.ops = {{3000, 700}, {2500, 999}, {2000, 1500}};
    c.job_priority = {1u << 20, 1u << 12, 1u << 6};
    // The lowest-priority job starts first, the highest last: later, higher
    // priority packets find aggregators held by lower ones (type II), lower
    // ones find higher ones (type III); worker send jitter keeps partials waiting.
    c.job_start = {4 * kUs, 2 * kUs, 0};
    c.rank_stagger = 300 * kNs;
    c.aggregators = 32;
    c.track_tasks = true;
    c.faults = f;
    c.seed = 77;
    Cluster cl(c);
    ASSERT_TRUE(cl.run());
    const auto t = cl.sw->task_types();
    EXPECT_GT(t[0], 0u) << "type I: no preemption";
    EXPECT_GT(t[1], 0u) << "type II: won a preemption";
    EXPECT_GT(t[2], 0u) << "type III: lost a preemption";
    // Every task of every job was seen by the switch at least once (no loss) and
    // is classified exactly once.
    size_t tasks = 0;
    for (size_t j = 0; j < cl.expected.size(); ++j)
      for (const auto& op : cl.expected[j]) tasks += (op.size() + 63) / 64;
    if (f.loss == 0) {
      EXPECT_EQ(t[0] + t[1] + t[2], tasks);
    }
    EXPECT_LE(t[0] + t[1] + t[2], tasks);
    const auto& st = cl.sw->stats();
    EXPECT_GT(st.preempt_won, 0u);
    EXPECT_GT(st.preempt_lost, 0u);
    EXPECT_GT(st.downgrades, 0u);
    EXPECT_EQ(st.resubmits, st.preempt_won);
    EXPECT_EQ(cl.ps_entries(), 0u) << "protocol suspension: a split task was never resolved";
    cl.check_all("dsa task types");
  }
}

// ====================================================================
// Switch programs, driven directly
// ====================================================================

constexpr NodeId kSw = 0;
constexpr NodeId kPs1 = 10, kPs2 = 11;
// Job 1: workers 1, 2, 3 (ranks 0..2). Job 2: workers 4, 5.
const std::vector<NodeId> kJob1 = {1, 2, 3};
const std::vector<NodeId> kJob2 = {4, 5};

std::unique_ptr<dp::SwitchProgram> make_sw(const std::string& scheme, uint64_t aggregators) {
  dp::SwitchConfig c;
  c.payload_values = 64;
  c.memory_bytes = aggregators * 256;
  c.track_tasks = true;
  auto sw = schemes::find(scheme).make_switch(c);
  sw->set_id(kSw);
  return sw;
}

void add_shared_jobs(dp::SwitchProgram& sw) {
  dp::SwitchJob j1;
  j1.job = 1;
  j1.workers = kJob1;
  j1.ps = kPs1;
  sw.add_job(j1);
  dp::SwitchJob j2;
  j2.job = 2;
  j2.workers = kJob2;
  j2.ps = kPs2;
  sw.add_job(j2);
}

void expect_multicast(const std::vector<Sent>& out, const std::vector<NodeId>& workers, uint16_t job, uint32_t psn,
                      const std::vector<int32_t>& sum) {
  ASSERT_EQ(out.size(), workers.size());
  std::set<NodeId> dsts;
  for (const auto& s : out) {
    dsts.insert(s.h.dst);
    EXPECT_EQ(s.h.type, PktType::Ack);
    EXPECT_TRUE(s.h.has(flag::kResult));
    EXPECT_EQ(s.h.job, job);
    EXPECT_EQ(s.h.psn, psn);
    EXPECT_EQ(s.h.bitmap, full_bitmap(static_cast<unsigned>(workers.size())));
    EXPECT_EQ(s.h.count, sum.size());
    EXPECT_EQ(s.v, sum);
  }
  EXPECT_EQ(dsts, std::set<NodeId>(workers.begin(), workers.end()));
}

// ---- DSA

TEST(DsaSwitch, HigherPriorityEvictsPartialToItsPs) {
  FakeFx fx;
  auto sw = make_sw("dsa", 1);  // one aggregator: every task collides
  add_shared_jobs(*sw);
  const auto g0 = ramp(64, -100, 3), g1 = ramp(64, 5, -2);
  sw->on_packet(make_data(fx, 1, 5, 0, 3, 1, g0, 10), 0, fx);
  sw->on_packet(make_data(fx, 1, 5, 1, 3, 2, g1, 10), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  EXPECT_EQ(sw->occupied_by(1), 1u);
  // Job 2, higher priority and a shorter packet: takes the aggregator.
  const auto h0 = ramp(10, 1000), h1 = ramp(10, -7, 11);
  sw->on_packet(make_data(fx, 2, 7, 0, 2, 4, h0, 500), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  const Sent& ev = out[0];
  EXPECT_EQ(ev.h.type, PktType::Data);
  EXPECT_EQ(ev.h.dst, kPs1) << "the evicted partial goes to its own job's PS";
  EXPECT_TRUE(ev.h.has(flag::kPartial));
  EXPECT_TRUE(ev.h.has(flag::kEvicted));
  EXPECT_FALSE(ev.h.has(flag::kResend));
  EXPECT_EQ(ev.h.job, 1);
  EXPECT_EQ(ev.h.psn, 5u);
  EXPECT_EQ(ev.h.bitmap, 0b011u);
  EXPECT_EQ(ev.h.priority, 10u);
  EXPECT_EQ(ev.v, add(g0, g1));
  EXPECT_EQ(sw->occupied_by(1), 0u);
  EXPECT_EQ(sw->occupied_by(2), 1u);
  // Job 2 completes in the switch with only its own values.
  sw->on_packet(make_data(fx, 2, 7, 1, 2, 5, h1, 500), 0, fx);
  expect_multicast(fx.take(), kJob2, 2, 7, add(h0, h1));
  EXPECT_EQ(sw->occupied(), 0u);
  const auto& st = sw->stats();
  EXPECT_EQ(st.preempt_won, 1u);
  EXPECT_EQ(st.resubmits, 1u);
  EXPECT_EQ(st.preempt_lost, 0u);
  EXPECT_EQ(st.completed, 1u);
  EXPECT_EQ(st.to_ps, 1u);
  const auto t = sw->task_types();
  EXPECT_EQ(t[1], 1u);  // job 2 psn 7 won
  EXPECT_EQ(t[2], 1u);  // job 1 psn 5 lost
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(DsaSwitch, LowerPriorityGoesToPsAndHalvesAggregatorPriority) {
  FakeFx fx;
  auto sw = make_sw("dsa", 1);
  add_shared_jobs(*sw);
  const auto g0 = ramp(64, 1);
  sw->on_packet(make_data(fx, 1, 3, 0, 3, 1, g0, 100), 0, fx);
  const auto h = ramp(64, -50);
  sw->on_packet(make_data(fx, 2, 9, 0, 2, 4, h, 10), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs2);
  EXPECT_EQ(out[0].h.job, 2);
  EXPECT_EQ(out[0].h.psn, 9u);
  EXPECT_TRUE(out[0].h.has(flag::kCollision));
  EXPECT_FALSE(out[0].h.has(flag::kEvicted));
  EXPECT_EQ(out[0].h.bitmap, 0b01u);
  EXPECT_EQ(out[0].v, h);
  EXPECT_EQ(sw->stats().preempt_lost, 1u);
  EXPECT_EQ(sw->stats().downgrades, 1u);
  // Priority is now 50: 49 still loses (and halves it to 25), 30 then wins.
  sw->on_packet(make_data(fx, 2, 11, 0, 2, 4, h, 49), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].h.has(flag::kCollision));
  EXPECT_EQ(sw->stats().downgrades, 2u);
  EXPECT_EQ(sw->occupied_by(1), 1u);
  sw->on_packet(make_data(fx, 2, 13, 0, 2, 4, h, 30), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].h.has(flag::kEvicted));
  EXPECT_EQ(out[0].h.job, 1);
  EXPECT_EQ(out[0].h.psn, 3u);
  EXPECT_EQ(out[0].h.priority, 25u) << "the evicted aggregator carried the downgraded priority";
  EXPECT_EQ(out[0].v, g0);
  EXPECT_EQ(sw->occupied_by(2), 1u);
  EXPECT_EQ(sw->stats().preempt_won, 1u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(DsaSwitch, DuplicateBitIsNotAddedTwice) {
  FakeFx fx;
  auto sw = make_sw("dsa", 4);
  add_shared_jobs(*sw);
  const auto g0 = ramp(20, 1), g1 = ramp(20, 100), g2 = ramp(20, -1000, 7);
  sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, g0), 0, fx);
  sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, g0), 0, fx);                  // duplicate
  sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, g0, 0, flag::kResend), 0, fx);  // retransmission
  sw->on_packet(make_data(fx, 1, 0, 1, 3, 2, g1), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  sw->on_packet(make_data(fx, 1, 0, 1, 3, 2, g1), 0, fx);  // duplicate
  EXPECT_TRUE(fx.sent.empty());
  sw->on_packet(make_data(fx, 1, 0, 2, 3, 3, g2), 0, fx);
  expect_multicast(fx.take(), kJob1, 1, 0, add(add(g0, g1), g2));
  EXPECT_EQ(sw->stats().duplicates, 3u);
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(DsaSwitch, CompletionMulticastsToEveryWorkerAndFrees) {
  FakeFx fx;
  auto sw = make_sw("dsa", 4);
  add_shared_jobs(*sw);
  for (uint32_t psn : {0u, 1u, 2u, 3u, 4u, 5u}) {
    const auto g0 = ramp(64, static_cast<int32_t>(psn)), g1 = ramp(64, -3, 2), g2 = ramp(64, 9, -5);
    sw->on_packet(make_data(fx, 1, psn, 2, 3, 3, g2), 0, fx);
    sw->on_packet(make_data(fx, 1, psn, 0, 3, 1, g0), 0, fx);
    EXPECT_EQ(sw->occupied(), 1u);
    sw->on_packet(make_data(fx, 1, psn, 1, 3, 2, g1), 0, fx);
    expect_multicast(fx.take(), kJob1, 1, psn, add(add(g0, g1), g2));
    EXPECT_EQ(sw->occupied(), 0u);
  }
  EXPECT_EQ(sw->stats().completed, 6u);
  EXPECT_EQ(sw->stats().to_ps, 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(DsaSwitch, FetchReturnsPartialAndFrees) {
  FakeFx fx;
  auto sw = make_sw("dsa", 1);
  add_shared_jobs(*sw);
  const auto g1 = ramp(33, 17, -3);
  sw->on_packet(make_data(fx, 1, 8, 1, 3, 2, g1), 0, fx);
  auto fetch = [&](uint32_t psn) {
    Packet* f = fx.alloc();
    f->h.type = PktType::Fetch;
    f->h.job = 1;
    f->h.psn = psn;
    f->h.src = kPs1;
    f->h.dst = kSw;
    f->h.nworkers = 3;
    sw->on_packet(f, 0, fx);
  };
  fetch(9);  // not held
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::FetchReply);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(out[0].h.bitmap, 0u);
  EXPECT_EQ(out[0].h.count, 0u);
  EXPECT_EQ(sw->occupied(), 1u);
  fetch(8);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::FetchReply);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(out[0].h.job, 1);
  EXPECT_EQ(out[0].h.psn, 8u);
  EXPECT_EQ(out[0].h.bitmap, 0b010u);
  EXPECT_TRUE(out[0].h.has(flag::kPartial));
  EXPECT_EQ(out[0].v, g1);
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(sw->stats().fetches, 2u);
  EXPECT_EQ(sw->stats().fetch_hits, 1u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(DsaSwitch, RetransmissionNeverReservesOrPreempts) {
  FakeFx fx;
  auto sw = make_sw("dsa", 1);
  add_shared_jobs(*sw);
  const auto g = ramp(64, 3);
  sw->on_packet(make_data(fx, 1, 4, 0, 3, 1, g, 1000, flag::kResend), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(out[0].v, g);
  EXPECT_EQ(sw->occupied(), 0u) << "a retransmission reserved a free aggregator";
  // Nor does it preempt, whatever its priority, nor downgrade the holder.
  sw->on_packet(make_data(fx, 2, 6, 0, 2, 4, g, 1), 0, fx);
  EXPECT_EQ(sw->occupied_by(2), 1u);
  sw->on_packet(make_data(fx, 1, 4, 0, 3, 1, g, 1000, flag::kResend), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(out[0].h.job, 1);
  EXPECT_EQ(sw->occupied_by(2), 1u);
  EXPECT_EQ(sw->stats().preempt_won, 0u);
  EXPECT_EQ(sw->stats().downgrades, 0u);
  // A retransmission joins its own task.
  sw->on_packet(make_data(fx, 2, 6, 1, 2, 5, g, 1, flag::kResend), 0, fx);
  expect_multicast(fx.take(), kJob2, 2, 6, add(g, g));
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(DsaSwitch, PsAckPassingByReleasesStalePartial) {
  FakeFx fx;
  auto sw = make_sw("dsa", 1);
  add_shared_jobs(*sw);
  sw->on_packet(make_data(fx, 1, 2, 0, 3, 1, ramp(64, 0)), 0, fx);
  Packet* a = fx.alloc();
  a->h.type = PktType::Ack;
  a->h.flags = flag::kResult;
  a->h.job = 1;
  a->h.psn = 2;
  a->h.src = kPs1;
  a->h.dst = kMulticast;
  a->h.nworkers = 3;
  a->h.bitmap = 0b111;
  a->h.count = 64;
  for (int i = 0; i < 64; ++i) a->payload()[i] = i * 3;
  sw->on_packet(a, 0, fx);
  expect_multicast(fx.take(), kJob1, 1, 2, ramp(64, 0, 3));
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

// dsa-join's flush: one Data packet to `ps` carrying the switch's half (ranks `bitmap`, values `v`).
void expect_flush(const std::vector<Sent>& out, NodeId ps, uint64_t bitmap, const std::vector<int32_t>& v) {
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.dst, ps);
  EXPECT_EQ(out[0].h.bitmap, bitmap);
  EXPECT_EQ(out[0].v, v);
}

// Split tasks (issue 12 item 3). Job 1's task (psn 5) is evicted with rank
// 0's value; job 2's task completes and frees the aggregator; then job 1's
// ranks 1 and 2 arrive and take the free aggregator. The paper's DSA keeps
// them there: the task is split between the PS (rank 0) and the switch
// (ranks 1, 2) until the PS's timeout fetches it. dsa-join (ours) knows that
// rank 0 is at the PS, so when rank 2 arrives the halves cover the job and
// the switch sends its half (ranks 1, 2) to the PS at once.
TEST(DsaJoin, AnEvictedTaskJoinsAtThePsOnItsLastPacket) {
  const auto g0 = ramp(64, 1), g1 = ramp(64, 2), g2 = ramp(64, 3), h = ramp(64, 9);
  for (const std::string scheme : {"dsa", "dsa-join"}) {
    SCOPED_TRACE(scheme);
    FakeFx fx;
    auto sw = make_sw(scheme, 1);
    add_shared_jobs(*sw);
    sw->on_packet(make_data(fx, 1, 5, 0, 3, 1, g0, 10), 0, fx);
    sw->on_packet(make_data(fx, 2, 7, 0, 2, 4, h, 500), 0, fx);  // evicts job 1's partial (rank 0)
    sw->on_packet(make_data(fx, 2, 7, 1, 2, 5, h, 500), 0, fx);  // job 2 completes: the aggregator is free
    EXPECT_EQ(fx.take().size(), 1u + kJob2.size());             // the evicted partial, the multicast result
    sw->on_packet(make_data(fx, 1, 5, 1, 3, 2, g1, 10), 0, fx);
    EXPECT_TRUE(fx.take().empty());
    EXPECT_EQ(sw->occupied_by(1), 1u);  // both: rank 1 reserves (ranks 0 and 1 do not cover the job)
    sw->on_packet(make_data(fx, 1, 5, 2, 3, 3, g2, 10), 0, fx);
    const auto out = fx.take();
    if (scheme == "dsa") {
      EXPECT_TRUE(out.empty());
      EXPECT_EQ(sw->occupied_by(1), 1u) << "the paper's switch holds its half until the PS fetches it";
      EXPECT_EQ(sw->stats().split_joins, 0u);
    } else {
      expect_flush(out, kPs1, 0b110u, add(g1, g2));
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].h.job, 1);
      EXPECT_EQ(out[0].h.psn, 5u);
      EXPECT_EQ(out[0].h.rank, 1u);
      EXPECT_EQ(out[0].h.src, kSw);
      EXPECT_TRUE(out[0].h.has(flag::kPartial));
      EXPECT_EQ(sw->occupied(), 0u);
      EXPECT_EQ(sw->stats().split_joins, 1u);
    }
    EXPECT_EQ(sw->stats().resubmits, 1u) << "the eviction's second pass writes the register too";
    EXPECT_EQ(sw->stats().completed, 1u);
    EXPECT_EQ(fx.pool.in_use(), 0u);
  }
}

// A first packet that loses the compare goes to the PS; once the holder has
// completed, the loser's next packet finds the aggregator free. For a job of
// two workers that packet and the PS's rank cover the job: dsa-join sends it
// on at once; the paper's DSA reserves the aggregator with it and waits.
TEST(DsaJoin, ATaskThatLostTheCompareJoinsAtThePs) {
  for (const std::string scheme : {"dsa", "dsa-join"}) {
    SCOPED_TRACE(scheme);
    FakeFx fx;
    auto sw = make_sw(scheme, 1);
    add_shared_jobs(*sw);
    const auto g = ramp(64, 4), k = ramp(64, -8);
    sw->on_packet(make_data(fx, 1, 3, 0, 3, 1, g, 100), 0, fx);
    sw->on_packet(make_data(fx, 2, 9, 0, 2, 4, g, 10), 0, fx);  // loses: to PS 2
    sw->on_packet(make_data(fx, 1, 3, 1, 3, 2, g, 100), 0, fx);
    sw->on_packet(make_data(fx, 1, 3, 2, 3, 3, g, 100), 0, fx);  // job 1 completes
    EXPECT_EQ(fx.take().size(), 1u + kJob1.size());
    sw->on_packet(make_data(fx, 2, 9, 1, 2, 5, k, 10), 0, fx);
    const auto out = fx.take();
    if (scheme == "dsa") {
      EXPECT_TRUE(out.empty());
      EXPECT_EQ(sw->occupied_by(2), 1u);
    } else {
      expect_flush(out, kPs2, 0b10u, k);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].h.psn, 9u);
      EXPECT_EQ(sw->occupied(), 0u);
      EXPECT_EQ(sw->stats().split_joins, 1u);
    }
    // The lost compare's register write costs dsa-join a second pass.
    EXPECT_EQ(sw->stats().resubmits, scheme == "dsa" ? 0u : 1u);
    EXPECT_EQ(fx.pool.in_use(), 0u);
  }
}

// A PS's fetch (its timeout) takes a partial out of the aggregator: the
// fetched ranks are at the PS. When the task's remaining packets take the
// aggregator again, dsa-join flushes them on the last one; the paper's DSA
// holds them until the next fetch.
TEST(DsaJoin, AFetchedPartialJoinsAtThePsOnTheLastPacket) {
  const auto g0 = ramp(64, 1), g1 = ramp(64, 2), g2 = ramp(64, 3);
  for (const std::string scheme : {"dsa", "dsa-join"}) {
    SCOPED_TRACE(scheme);
    FakeFx fx;
    auto sw = make_sw(scheme, 1);
    add_shared_jobs(*sw);
    sw->on_packet(make_data(fx, 1, 5, 0, 3, 1, g0, 10), 0, fx);
    Packet* f = fx.alloc();
    f->h.type = PktType::Fetch;
    f->h.job = 1;
    f->h.psn = 5;
    f->h.src = kPs1;
    f->h.dst = kSw;
    f->h.nworkers = 3;
    sw->on_packet(f, 0, fx);
    auto out = fx.take();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].h.type, PktType::FetchReply);
    EXPECT_EQ(out[0].h.bitmap, 0b001u);
    sw->on_packet(make_data(fx, 1, 5, 1, 3, 2, g1, 10), 0, fx);
    sw->on_packet(make_data(fx, 1, 5, 2, 3, 3, g2, 10), 0, fx);
    out = fx.take();
    if (scheme == "dsa") {
      EXPECT_TRUE(out.empty());
      EXPECT_EQ(sw->occupied_by(1), 1u);
    } else {
      expect_flush(out, kPs1, 0b110u, add(g1, g2));
      EXPECT_EQ(sw->occupied(), 0u);
    }
    EXPECT_EQ(fx.pool.in_use(), 0u);
  }
}

// While another task holds the aggregator, a task with contributions at the
// PS does not compete for it, however high its priority: the paper's DSA
// lets it evict the holder and splits it again; dsa-join sends it to the PS
// and the holder keeps the aggregator.
TEST(DsaJoin, ARegisteredTaskDoesNotPreemptTheHolder) {
  for (const std::string scheme : {"dsa", "dsa-join"}) {
    SCOPED_TRACE(scheme);
    FakeFx fx;
    auto sw = make_sw(scheme, 1);
    add_shared_jobs(*sw);
    const auto g = ramp(64, 6);
    sw->on_packet(make_data(fx, 1, 5, 0, 3, 1, g, 10), 0, fx);
    sw->on_packet(make_data(fx, 2, 7, 0, 2, 4, g, 500), 0, fx);  // evicts job 1's rank 0
    EXPECT_EQ(fx.take().size(), 1u);
    sw->on_packet(make_data(fx, 1, 5, 1, 3, 2, g, 1000), 0, fx);
    const auto out = fx.take();
    ASSERT_EQ(out.size(), 1u);
    if (scheme == "dsa") {
      EXPECT_TRUE(out[0].h.has(flag::kEvicted));
      EXPECT_EQ(out[0].h.job, 2);
      EXPECT_EQ(sw->occupied_by(1), 1u);
    } else {
      EXPECT_EQ(out[0].h.dst, kPs1);
      EXPECT_EQ(out[0].h.job, 1);
      EXPECT_EQ(out[0].h.bitmap, 0b010u);
      EXPECT_FALSE(out[0].h.has(flag::kEvicted));
      EXPECT_EQ(sw->occupied_by(2), 1u);
      EXPECT_EQ(sw->stats().preempt_won, 1u);  // only job 2's
    }
    EXPECT_EQ(fx.pool.in_use(), 0u);
  }
}

TEST(DsaSwitch, AlwaysModePreemptsEvenAtLowerPriority) {
  FakeFx fx;
  auto sw = make_sw("dsa-always", 1);
  add_shared_jobs(*sw);
  sw->on_packet(make_data(fx, 1, 2, 0, 3, 1, ramp(64, 0), 1000), 0, fx);
  sw->on_packet(make_data(fx, 2, 3, 0, 2, 4, ramp(64, 1), 1), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].h.has(flag::kEvicted));
  EXPECT_EQ(out[0].h.job, 1);
  EXPECT_EQ(sw->occupied_by(2), 1u);
}

// ---- ATP

TEST(AtpSwitch, CollisionGoesToPs) {
  FakeFx fx;
  auto sw = make_sw("atp", 1);
  add_shared_jobs(*sw);
  const auto g = ramp(64, 1), h = ramp(64, 2);
  sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, g, 1), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  sw->on_packet(make_data(fx, 2, 0, 1, 2, 5, h, 1000), 0, fx);  // priorities mean nothing to ATP
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs2);
  EXPECT_EQ(out[0].h.job, 2);
  EXPECT_TRUE(out[0].h.has(flag::kCollision));
  EXPECT_EQ(out[0].h.bitmap, 0b10u);
  EXPECT_EQ(out[0].v, h);
  EXPECT_EQ(sw->occupied_by(1), 1u);
  EXPECT_EQ(sw->occupied_by(2), 0u);
  EXPECT_EQ(sw->stats().collisions, 1u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(AtpSwitch, CompletionGoesToPsAndAggregatorWaitsForPsAck) {
  FakeFx fx;
  auto sw = make_sw("atp", 4);
  add_shared_jobs(*sw);
  const auto g0 = ramp(50, 1), g1 = ramp(50, -20, 4), g2 = ramp(50, 300, -9);
  const auto sum = add(add(g0, g1), g2);
  sw->on_packet(make_data(fx, 1, 12, 0, 3, 1, g0), 0, fx);
  sw->on_packet(make_data(fx, 1, 12, 1, 3, 2, g1), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  sw->on_packet(make_data(fx, 1, 12, 2, 3, 3, g2), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u) << "the aggregate goes to the PS only, not to the workers";
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.bitmap, 0b111u);
  EXPECT_EQ(out[0].v, sum);
  EXPECT_EQ(sw->occupied_by(1), 1u) << "kept until the PS ack passes";
  // A late duplicate of a first transmission: nothing new.
  sw->on_packet(make_data(fx, 1, 12, 2, 3, 3, g2), 0, fx);
  for (const auto& s : fx.take()) EXPECT_NE(s.h.type, PktType::Ack);
  EXPECT_EQ(sw->occupied_by(1), 1u);
  // The PS's ack to the multicast group releases the aggregator and reaches every worker.
  Packet* a = fx.alloc();
  a->h.type = PktType::Ack;
  a->h.flags = flag::kResult;
  a->h.job = 1;
  a->h.psn = 12;
  a->h.src = kPs1;
  a->h.dst = kMulticast;
  a->h.nworkers = 3;
  a->h.bitmap = 0b111;
  a->h.count = 50;
  std::copy(sum.begin(), sum.end(), a->payload());
  sw->on_packet(a, 0, fx);
  expect_multicast(fx.take(), kJob1, 1, 12, sum);
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(sw->stats().released_by_ack, 1u);
  EXPECT_EQ(sw->stats().completed, 1u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(AtpSwitch, RetransmissionFlushesItsOwnPartialAndNeverReserves) {
  FakeFx fx;
  auto sw = make_sw("atp", 1);
  add_shared_jobs(*sw);
  const auto g0 = ramp(64, 1), g1 = ramp(64, 1000);
  // A retransmission finding a free aggregator goes to the PS.
  sw->on_packet(make_data(fx, 1, 3, 1, 3, 2, g1, 0, flag::kResend), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(sw->occupied(), 0u);
  // One finding its own task joins it and flushes the partial to the PS.
  sw->on_packet(make_data(fx, 1, 3, 0, 3, 1, g0), 0, fx);
  sw->on_packet(make_data(fx, 1, 3, 1, 3, 2, g1, 0, flag::kResend), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(out[0].h.bitmap, 0b011u);
  EXPECT_EQ(out[0].v, add(g0, g1));
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

// ---- SwitchML

void add_isolated_job(dp::SwitchProgram& sw, uint16_t job, std::vector<NodeId> workers, uint32_t off, uint32_t size) {
  dp::SwitchJob j;
  j.job = job;
  j.workers = std::move(workers);
  j.region_offset = off;
  j.region_size = size;
  sw.add_job(j);
}

TEST(SwitchMLSwitch, SlotIndexIsOffsetPlusPoolPlusPsnModS) {
  FakeFx fx;
  auto sw = make_sw("switchml", 16);
  add_isolated_job(*sw, 1, {1}, 4, 6);   // S = 3, slots 4..9
  add_isolated_job(*sw, 2, {2}, 10, 6);  // S = 3, slots 10..15
  for (uint32_t psn = 0; psn < 14; ++psn) {
    for (uint16_t job : {1, 2}) {
      const uint32_t off = job == 1 ? 4 : 10, s = 3;
      sw->on_packet(make_data(fx, job, psn, 0, 1, job, ramp(8, static_cast<int32_t>(psn))), 0, fx);
      auto out = fx.take();
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].h.type, PktType::Ack);
      EXPECT_EQ(out[0].h.dst, job);
      EXPECT_EQ(sw->holder_of(job, psn), off + ((psn / s) % 2) * s + psn % s) << "job " << job << " psn " << psn;
      EXPECT_EQ(out[0].v, ramp(8, static_cast<int32_t>(psn)));
    }
    EXPECT_EQ(sw->occupied_by(1), std::min<size_t>(psn + 1, 6));
    EXPECT_EQ(sw->occupied_by(2), std::min<size_t>(psn + 1, 6));
  }
  EXPECT_EQ(sw->stats().to_ps, 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(SwitchMLSwitch, PsnsTwoPoolsApartShareASlotOthersDoNot) {
  FakeFx fx;
  auto sw = make_sw("switchml", 16);
  add_isolated_job(*sw, 1, {1, 2}, 0, 6);  // S = 3
  const auto a = ramp(64, 1), b = ramp(64, 2);
  // psn 0 and psn 3 use different slots: both complete.
  sw->on_packet(make_data(fx, 1, 0, 0, 2, 1, a), 0, fx);
  sw->on_packet(make_data(fx, 1, 3, 0, 2, 1, a), 0, fx);
  sw->on_packet(make_data(fx, 1, 0, 1, 2, 2, b), 0, fx);
  expect_multicast(fx.take(), {1, 2}, 1, 0, add(a, b));
  sw->on_packet(make_data(fx, 1, 3, 1, 2, 2, b), 0, fx);
  expect_multicast(fx.take(), {1, 2}, 1, 3, add(a, b));
  EXPECT_EQ(sw->stats().stale, 0u);
}

TEST(SwitchMLSwitch, RetransmissionAfterCompletionIsServedFromKeptResult) {
  FakeFx fx;
  auto sw = make_sw("switchml", 16);
  add_isolated_job(*sw, 1, {1, 2, 3}, 0, 8);  // S = 4
  const auto g0 = ramp(64, 1), g1 = ramp(64, -5), g2 = ramp(64, 77, 2);
  const auto sum = add(add(g0, g1), g2);
  sw->on_packet(make_data(fx, 1, 2, 0, 3, 1, g0), 0, fx);
  sw->on_packet(make_data(fx, 1, 2, 1, 3, 2, g1), 0, fx);
  sw->on_packet(make_data(fx, 1, 2, 2, 3, 3, g2), 0, fx);
  expect_multicast(fx.take(), {1, 2, 3}, 1, 2, sum);
  // Worker of rank 1 lost the result: its retransmission gets it, unicast.
  sw->on_packet(make_data(fx, 1, 2, 1, 3, 2, g1, 0, flag::kResend), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::Ack);
  EXPECT_EQ(out[0].h.dst, 2);
  EXPECT_EQ(out[0].h.psn, 2u);
  EXPECT_TRUE(out[0].h.has(flag::kResult));
  EXPECT_EQ(out[0].h.bitmap, 0b111u);
  EXPECT_EQ(out[0].v, sum) << "the kept result must not absorb the retransmitted gradient";
  EXPECT_EQ(sw->stats().resend_served, 1u);
  EXPECT_EQ(sw->stats().completed, 1u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(SwitchMLSwitch, StaleOlderPsnIsDropped) {
  FakeFx fx;
  auto sw = make_sw("switchml", 16);
  add_isolated_job(*sw, 1, {1, 2}, 0, 6);  // S = 3: psn 0 and 6 share slot 0
  const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3), d = ramp(64, 4);
  sw->on_packet(make_data(fx, 1, 0, 0, 2, 1, a), 0, fx);
  sw->on_packet(make_data(fx, 1, 0, 1, 2, 2, b), 0, fx);
  expect_multicast(fx.take(), {1, 2}, 1, 0, add(a, b));
  sw->on_packet(make_data(fx, 1, 6, 0, 2, 1, c), 0, fx);  // new phase of slot 0
  EXPECT_TRUE(fx.sent.empty());
  // A delayed copy of psn 0 must neither be answered nor disturb psn 6.
  sw->on_packet(make_data(fx, 1, 0, 1, 2, 2, b), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  EXPECT_EQ(sw->stats().stale, 1u);
  sw->on_packet(make_data(fx, 1, 6, 1, 2, 2, d), 0, fx);
  expect_multicast(fx.take(), {1, 2}, 1, 6, add(c, d));
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

// ---- malformed data, every policy

class MalformedData : public ::testing::TestWithParam<std::string> {};

TEST_P(MalformedData, CountedAndDroppedNeverAggregated) {
  const std::string& policy = GetParam();
  FakeFx fx(128);  // packets can carry more than the switch's 64 values
  auto sw = make_sw(policy, 8);
  dp::SwitchJob j;
  j.job = 1;
  j.workers = kJob1;
  if (policy == "switchml") {
    j.region_offset = 0;
    j.region_size = 8;
  } else {
    j.ps = kPs1;
  }
  sw->add_job(j);
  const auto g = ramp(64, 5);
  std::vector<Packet*> bad;
  bad.push_back(make_data(fx, 9, 0, 0, 3, 1, g));  // unknown job
  bad.push_back(make_data(fx, 0, 0, 0, 3, 1, g));  // job 0
  {
    Packet* p = make_data(fx, 1, 0, 0, 3, 1, g);
    p->h.rank = 3;  // rank >= n
    bad.push_back(p);
  }
  {
    Packet* p = make_data(fx, 1, 0, 0, 3, 1, g);
    p->h.bitmap = 0b1001;  // bit beyond n
    bad.push_back(p);
  }
  {
    Packet* p = make_data(fx, 1, 0, 0, 3, 1, g);
    p->h.bitmap = 0;  // contributes nothing
    bad.push_back(p);
  }
  bad.push_back(make_data(fx, 1, 0, 0, 3, 1, {}));              // count 0
  bad.push_back(make_data(fx, 1, 0, 0, 3, 1, ramp(65, 1)));     // count > payload
  bad.push_back(make_data(fx, 1, 0, 0, 4, 1, g));               // wrong worker count
  {
    Packet* p = make_data(fx, 1, 0, 0, 3, 1, g);
    p->h.type = PktType::GradRequest;  // not a switch packet
    bad.push_back(p);
  }
  size_t n = 0;
  for (Packet* p : bad) {
    sw->on_packet(p, 0, fx);
    ++n;
    EXPECT_EQ(sw->stats().malformed, n) << "case " << n;
    EXPECT_TRUE(fx.sent.empty()) << "case " << n;
    EXPECT_EQ(sw->occupied(), 0u) << "case " << n;
  }
  EXPECT_EQ(sw->stats().aggregated, 0u);
  EXPECT_EQ(fx.freed, bad.size());
  EXPECT_EQ(fx.pool.in_use(), 0u);
  // The job still aggregates correctly afterwards.
  const auto g1 = ramp(64, -9), g2 = ramp(64, 100, 3);
  sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, g), 0, fx);
  sw->on_packet(make_data(fx, 1, 0, 1, 3, 2, g1), 0, fx);
  sw->on_packet(make_data(fx, 1, 0, 2, 3, 3, g2), 0, fx);
  auto out = fx.take();
  ASSERT_FALSE(out.empty());
  for (const auto& s : out) EXPECT_EQ(s.v, add(add(g, g1), g2));
}

INSTANTIATE_TEST_SUITE_P(Policies, MalformedData,
                         ::testing::Values("switchml", "atp", "dsa"),
                         [](const auto& info) { return info.param; });

TEST(SwitchControlPlane, RejectsBadJobs) {
  auto shared = make_sw("dsa", 8);
  dp::SwitchJob j;
  j.job = 1;
  j.workers = kJob1;
  EXPECT_THROW(shared->add_job(j), std::invalid_argument) << "shared pool without a PS";
  j.ps = kPs1;
  j.job = 0;
  EXPECT_THROW(shared->add_job(j), std::invalid_argument);
  j.job = 1;
  shared->add_job(j);
  EXPECT_THROW(shared->add_job(j), std::invalid_argument) << "registered twice";
  auto iso = make_sw("switchml", 8);
  add_isolated_job(*iso, 1, {1}, 0, 4);
  EXPECT_THROW(add_isolated_job(*iso, 2, {2}, 2, 4), std::invalid_argument) << "overlap";
  EXPECT_THROW(add_isolated_job(*iso, 3, {3}, 4, 3), std::invalid_argument) << "odd size";
  EXPECT_THROW(add_isolated_job(*iso, 4, {4}, 6, 4), std::invalid_argument) << "beyond memory";
  add_isolated_job(*iso, 5, {5}, 4, 4);
}

// ====================================================================
// PS, driven directly
// ====================================================================

constexpr NodeId kPsId = 10;

struct PsRig {
  explicit PsRig(bool targeted = false) {
    host::PsConfig c;
    c.targeted_known_results = targeted;
    c.job = 1;
    c.workers = kJob1;
    c.sw = kSw;
    c.payload_values = 64;
    c.min_timeout = 1 * kMs;
    ps = std::make_unique<host::ParameterServer>(c);
    ps->set_id(kPsId);
  }
  // A packet to the PS: Data with `bitmap` and values (kPartial if >1 bit).
  void data(uint32_t psn, uint64_t bitmap, const std::vector<int32_t>& v, Time now = 0, uint16_t flags = 0) {
    Packet* p = make_data(fx, 1, psn, static_cast<uint8_t>(std::countr_zero(bitmap)), 3, kSw, v, 0, flags, kPsId);
    p->h.bitmap = bitmap;
    ps->on_packet(p, now, fx);
  }
  FakeFx fx;
  std::unique_ptr<host::ParameterServer> ps;
};

void expect_ps_ack(const std::vector<Sent>& out, uint32_t psn, const std::vector<int32_t>& sum,
                   NodeId dst = kMulticast) {
  ASSERT_EQ(out.size(), 1u) << "exactly one Ack";
  EXPECT_EQ(out[0].h.type, PktType::Ack);
  EXPECT_EQ(out[0].h.dst, dst);
  EXPECT_EQ(out[0].h.src, kPsId);
  EXPECT_EQ(out[0].h.job, 1);
  EXPECT_EQ(out[0].h.psn, psn);
  EXPECT_EQ(out[0].h.nworkers, 3);
  EXPECT_EQ(out[0].h.bitmap, 0b111u);
  EXPECT_TRUE(out[0].h.has(flag::kResult));
  EXPECT_EQ(out[0].v, sum);
}

// The reminder's packets: one Fetch to the switch and one GradRequest per missing rank.
void expect_reminder(const std::vector<Sent>& out, uint32_t psn, const std::set<uint8_t>& missing_ranks) {
  size_t fetches = 0;
  std::set<uint8_t> ranks;
  for (const auto& s : out) {
    EXPECT_EQ(s.h.job, 1);
    EXPECT_EQ(s.h.psn, psn);
    if (s.h.type == PktType::Fetch) {
      ++fetches;
      EXPECT_EQ(s.h.dst, kSw);
    } else {
      ASSERT_EQ(s.h.type, PktType::GradRequest);
      ASSERT_LT(s.h.rank, 3);
      EXPECT_EQ(s.h.dst, kJob1[s.h.rank]);
      EXPECT_TRUE(ranks.insert(s.h.rank).second) << "rank asked twice";
    }
  }
  EXPECT_EQ(fetches, 1u);
  EXPECT_EQ(ranks, missing_ranks);
  EXPECT_EQ(out.size(), 1 + missing_ranks.size());
}

TEST(Ps, DisjointBitmapsAdd) {
  PsRig r;
  const auto a = ramp(64, 1), b = ramp(64, -30, 2), c = ramp(64, 500, -7);
  r.data(4, 0b001, a);
  EXPECT_EQ(r.ps->entries(), 1u);
  r.data(4, 0b100, c);
  EXPECT_TRUE(r.fx.sent.empty());
  r.data(4, 0b010, b);
  expect_ps_ack(r.fx.take(), 4, add(add(a, b), c));
  EXPECT_EQ(r.ps->entries(), 0u);
  EXPECT_EQ(r.ps->stats().completions, 1u);
  EXPECT_EQ(r.fx.pool.in_use(), 0u);
}

TEST(Ps, SubsetIsIgnored) {
  PsRig r;
  const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3);
  r.data(4, 0b011, add(a, b));
  r.data(4, 0b001, a);   // already counted
  r.data(4, 0b011, add(a, b));
  EXPECT_TRUE(r.fx.sent.empty());
  EXPECT_EQ(r.ps->stats().duplicates, 2u);
  r.data(4, 0b100, c);
  expect_ps_ack(r.fx.take(), 4, add(add(a, b), c));
}

TEST(Ps, SupersetReplaces) {
  PsRig r;
  const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3);
  r.data(4, 0b001, a);
  r.data(4, 0b011, add(a, b));
  EXPECT_TRUE(r.fx.sent.empty());
  EXPECT_EQ(r.ps->stats().superseded, 1u);
  r.data(4, 0b100, c);
  expect_ps_ack(r.fx.take(), 4, add(add(a, b), c));
  // A full-bitmap result (a worker answering with its result) completes at once.
  r.data(5, 0b010, b);
  r.data(5, 0b111, c, 0, flag::kToPs | flag::kResult);
  expect_ps_ack(r.fx.take(), 5, c);
  EXPECT_EQ(r.ps->entries(), 0u);
  EXPECT_EQ(r.ps->stats().known_results, 1u);
}

// A task completed once (its result multicast) and asked for again by two
// workers whose result copies were lost. The paper's PS (default) multicasts
// the result a third worker holds, and again for a late second copy of it.
// With targeted_known_results (the runtime) it goes to those two only, and the
// late copy finds no entry, completes a fresh one no worker waits for, and is
// dropped.
TEST(Ps, KnownResultGoesOnlyToTheWaitingWorkersWhenTargeted) {
  for (bool targeted : {false, true}) {
    SCOPED_TRACE(targeted ? "targeted" : "multicast (paper)");
    PsRig r(targeted);
    const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3), sum = add(add(a, b), c);
    r.data(7, 0b001, a, 0, flag::kResend | flag::kCollision);
    r.data(7, 0b010, b, kUs, flag::kResend | flag::kCollision);
    EXPECT_TRUE(r.fx.sent.empty());
    r.data(7, 0b111, sum, 2 * kUs, flag::kToPs | flag::kResult);  // rank 2 answers with the result
    auto out = r.fx.take();
    if (!targeted) {
      expect_ps_ack(out, 7, sum);
      r.data(7, 0b111, sum, 3 * kUs, flag::kToPs | flag::kResult);  // the late second answer
      expect_ps_ack(r.fx.take(), 7, sum);
      EXPECT_EQ(r.ps->stats().known_results, 2u);
      EXPECT_EQ(r.ps->stats().unicast_results, 0u);
      continue;
    }
    ASSERT_EQ(out.size(), 2u);
    std::set<NodeId> to;
    for (const auto& s : out) {
      EXPECT_EQ(s.h.type, PktType::Ack);
      EXPECT_EQ(s.h.psn, 7u);
      EXPECT_EQ(s.h.bitmap, 0b111u);
      EXPECT_TRUE(s.h.has(flag::kResult));
      EXPECT_EQ(s.v, sum);
      to.insert(s.h.dst);
    }
    EXPECT_EQ(to, (std::set<NodeId>{kJob1[0], kJob1[1]}));
    EXPECT_EQ(r.ps->entries(), 0u);
    r.data(7, 0b111, sum, 3 * kUs, flag::kToPs | flag::kResult);  // the late second answer
    EXPECT_TRUE(r.fx.take().empty());
    EXPECT_EQ(r.ps->entries(), 0u);
    EXPECT_EQ(r.ps->stats().known_results, 2u);
    EXPECT_EQ(r.ps->stats().unicast_results, 2u);
    EXPECT_EQ(r.ps->stats().unneeded_results, 1u);
    EXPECT_EQ(r.fx.pool.in_use(), 0u);
    // Gradients alone (no worker held the result) still complete with one multicast.
    r.data(8, 0b011, add(a, b), 4 * kUs, flag::kPartial);
    r.data(8, 0b100, c, 5 * kUs, flag::kCollision);
    expect_ps_ack(r.fx.take(), 8, sum);
  }
}

TEST(Ps, PartialOverlapIsAConflictAndRunsTheReminder) {
  PsRig r;
  const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3);
  r.data(4, 0b011, add(a, b), 100 * kNs);
  r.data(4, 0b110, add(b, c), 200 * kNs);  // overlaps on rank 1 only
  EXPECT_EQ(r.ps->stats().conflicts, 1u);
  expect_reminder(r.fx.take(), 4, {2});
  EXPECT_EQ(r.ps->entries(), 1u);
  // The conflicting packet was dropped: rank 2's gradient completes the sum exactly.
  r.data(4, 0b100, c, 300 * kNs, flag::kToPs);
  expect_ps_ack(r.fx.take(), 4, add(add(a, b), c));
}

TEST(Ps, TimeoutFetchesFromSwitchAndAsksOnlyMissingRanks) {
  PsRig r;
  const auto b = ramp(64, 2);
  const Time t0 = 5 * kUs;
  r.data(7, 0b010, b, t0);
  ASSERT_FALSE(r.fx.timers.empty());
  const auto [at, token] = r.fx.timers.back();
  EXPECT_EQ(at, t0 + 1 * kMs) << "the first timeout is the floor";
  // An early firing does nothing.
  r.ps->on_timer(token, at - 1, r.fx);
  EXPECT_TRUE(r.fx.sent.empty());
  r.ps->on_timer(token, at, r.fx);
  expect_reminder(r.fx.take(), 7, {0, 2});
  EXPECT_EQ(r.ps->stats().timeout_reminders, 1u);
  // The answers: the switch's partial (rank 0) and rank 2's gradient.
  const auto a = ramp(64, 1), c = ramp(64, 3);
  Packet* fr = make_data(r.fx, 1, 7, 0, 3, kSw, a, 0, flag::kPartial, kPsId);
  fr->h.type = PktType::FetchReply;
  fr->h.bitmap = 0b001;
  r.ps->on_packet(fr, at + kUs, r.fx);
  EXPECT_TRUE(r.fx.sent.empty());
  r.data(7, 0b100, c, at + 2 * kUs, flag::kToPs);
  expect_ps_ack(r.fx.take(), 7, add(add(a, b), c));
  EXPECT_EQ(r.ps->entries(), 0u);
  // Later timers for the closed entry are stale.
  const auto timers = r.fx.timers;
  for (const auto& [t, tok] : timers) r.ps->on_timer(tok, t + 10 * kMs, r.fx);
  EXPECT_TRUE(r.fx.sent.empty());
  EXPECT_EQ(r.fx.pool.in_use(), 0u);
}

TEST(Ps, RepeatedTimeoutsKeepReminding) {
  PsRig r;
  r.data(7, 0b010, ramp(64, 2), 0);
  for (int k = 1; k <= 3; ++k) {
    ASSERT_FALSE(r.fx.timers.empty());
    const Time at = std::max_element(r.fx.timers.begin(), r.fx.timers.end())->first;
    r.ps->on_timer(0, at, r.fx);
    expect_reminder(r.fx.take(), 7, {0, 2});
    EXPECT_EQ(r.ps->stats().timeout_reminders, static_cast<uint64_t>(k));
  }
}

Packet* reminder(FakeFx& fx, uint32_t psn, uint8_t rank) {
  Packet* m = fx.alloc();
  m->h.type = PktType::Reminder;
  m->h.job = 1;
  m->h.src = kJob1[rank];
  m->h.dst = kPsId;
  m->h.rank = rank;
  m->h.nworkers = 3;
  m->h.psn = psn;
  m->h.bitmap = 1ULL << rank;
  return m;
}

TEST(Ps, WorkerReminderRunsTheReminderImmediately) {
  PsRig r;
  const Time now = 5 * kMs;
  r.ps->on_packet(reminder(r.fx, 21, 1), now, r.fx);
  expect_reminder(r.fx.take(), 21, {0, 1, 2});  // nothing known yet: everyone is asked
  EXPECT_EQ(r.ps->stats().worker_reminders, 1u);
  // Workers that already have the result answer with it: that completes the task.
  const auto sum = ramp(64, 42);
  r.data(21, 0b111, sum, now + kUs, flag::kToPs | flag::kResult);
  expect_ps_ack(r.fx.take(), 21, sum);
  EXPECT_EQ(r.ps->entries(), 0u);

  // With an entry already holding rank 0, long before any timeout: only ranks 1 and 2 are asked.
  r.data(22, 0b001, ramp(64, 1), now);
  EXPECT_TRUE(r.fx.sent.empty());
  r.ps->on_packet(reminder(r.fx, 22, 2), now + 2 * kUs, r.fx);
  expect_reminder(r.fx.take(), 22, {1, 2});
  EXPECT_EQ(r.ps->stats().timeout_reminders, 0u);
  EXPECT_EQ(r.fx.pool.in_use(), 0u);
}

TEST(Ps, MalformedIsCountedAndDropped) {
  PsRig r;
  Packet* p = make_data(r.fx, 2, 1, 0, 3, 1, ramp(8, 1), 0, 0, kPsId);  // other job
  r.ps->on_packet(p, 0, r.fx);
  p = make_data(r.fx, 1, 1, 0, 2, 1, ramp(8, 1), 0, 0, kPsId);  // wrong worker count
  r.ps->on_packet(p, 0, r.fx);
  p = make_data(r.fx, 1, 1, 0, 3, 1, ramp(8, 1), 0, 0, kPsId);
  p->h.bitmap = 0b1000;  // beyond the workers
  r.ps->on_packet(p, 0, r.fx);
  p = make_data(r.fx, 1, 1, 0, 3, 1, ramp(65, 1), 0, 0, kPsId);  // larger than the payload
  r.ps->on_packet(p, 0, r.fx);
  EXPECT_EQ(r.ps->stats().malformed, 4u);
  EXPECT_EQ(r.ps->entries(), 0u);
  EXPECT_TRUE(r.fx.sent.empty());
  EXPECT_EQ(r.fx.pool.in_use(), 0u);
}

// ====================================================================
// Worker transport, driven directly
// ====================================================================

struct WorkerRig {
  explicit WorkerRig(bool fast_retransmit = false) : tx(config(fast_retransmit)) {
    grad = ramp(100, -500, 7);
    io = std::make_shared<host::VectorTensor>(grad);
  }
  static host::WorkerConfig config(bool fast_retransmit = false) {
    host::WorkerConfig w;
    w.fast_retransmit = fast_retransmit;
    w.job = 1;
    w.rank = 1;
    w.nworkers = 3;
    w.self = kJob1[1];
    w.aggregator = kSw;
    w.ps = kPsId;
    w.payload_values = 64;
    return w;
  }
  Packet* ack(uint32_t psn, const std::vector<int32_t>& v, uint64_t bitmap = 0b111) {
    Packet* a = fx.alloc();
    a->h.type = PktType::Ack;
    a->h.flags = flag::kResult;
    a->h.job = 1;
    a->h.psn = psn;
    a->h.src = kSw;
    a->h.dst = kJob1[1];
    a->h.nworkers = 3;
    a->h.bitmap = bitmap;
    a->h.count = static_cast<uint16_t>(v.size());
    std::copy(v.begin(), v.end(), a->payload());
    return a;
  }
  Packet* grad_request(uint32_t psn) {
    Packet* q = fx.alloc();
    q->h.type = PktType::GradRequest;
    q->h.job = 1;
    q->h.psn = psn;
    q->h.src = kPsId;
    q->h.dst = kJob1[1];
    q->h.rank = 1;
    q->h.nworkers = 3;
    return q;
  }
  FakeFx fx;
  host::WorkerTransport tx;
  std::vector<int32_t> grad;
  std::shared_ptr<host::VectorTensor> io;
};

TEST(Worker, SendsGradientPacketsOfTheStream) {
  WorkerRig w;
  EXPECT_EQ(w.tx.submit(w.io, 100), 0u);
  w.tx.pump(0, w.fx);
  auto out = w.fx.take();
  ASSERT_EQ(out.size(), 2u);
  for (uint32_t k = 0; k < 2; ++k) {
    EXPECT_EQ(out[k].h.type, PktType::Data);
    EXPECT_EQ(out[k].h.psn, k);
    EXPECT_EQ(out[k].h.dst, kSw);
    EXPECT_EQ(out[k].h.src, kJob1[1]);
    EXPECT_EQ(out[k].h.rank, 1);
    EXPECT_EQ(out[k].h.nworkers, 3);
    EXPECT_EQ(out[k].h.bitmap, 0b010u);
    EXPECT_FALSE(out[k].h.has(flag::kResend));
  }
  EXPECT_EQ(out[0].v, std::vector<int32_t>(w.grad.begin(), w.grad.begin() + 64));
  EXPECT_EQ(out[1].v, std::vector<int32_t>(w.grad.begin() + 64, w.grad.end()));
  EXPECT_EQ(w.tx.next_psn(), 2u);
  EXPECT_TRUE(w.tx.busy());
}

TEST(Worker, AcksAreValidatedAndAssembled) {
  WorkerRig w;
  w.tx.submit(w.io, 100);
  w.tx.pump(0, w.fx);
  w.fx.take();
  const auto r0 = ramp(64, 7), r1 = ramp(36, -3);
  w.tx.on_packet(w.ack(1, ramp(64, 0)), 10 * kUs, w.fx);  // wrong count for psn 1
  w.tx.on_packet(w.ack(1, r1, 0b011), 10 * kUs, w.fx);    // not a full result
  EXPECT_EQ(w.tx.stats().malformed, 2u);
  EXPECT_EQ(w.io->result, std::vector<int32_t>(100, 0));
  w.tx.on_packet(w.ack(0, r0), 10 * kUs, w.fx);
  w.tx.on_packet(w.ack(0, r0), 11 * kUs, w.fx);  // duplicate result (switch and PS)
  EXPECT_EQ(w.tx.stats().dup_acks, 1u);
  EXPECT_TRUE(w.tx.take_completed().empty());
  w.tx.on_packet(w.ack(1, r1), 12 * kUs, w.fx);
  EXPECT_EQ(w.tx.take_completed(), std::vector<uint64_t>{0});
  EXPECT_FALSE(w.tx.busy());
  std::vector<int32_t> want = r0;
  want.insert(want.end(), r1.begin(), r1.end());
  EXPECT_EQ(w.io->result, want);
  EXPECT_EQ(w.fx.pool.in_use(), 0u);
}

// Catches: the record ring growing (doubling past 64, then 128 records)
// while results beyond a missing one are done, and losing which were done:
// a duplicate of such a result would be taken again, and the RTO would
// resend a packet whose result the host has.
TEST(Worker, ResultsDoneBeforeTheRecordRingGrowsStayDone) {
  WorkerRig w;
  host::WorkerConfig c = WorkerRig::config();
  c.init_window = 100;
  c.aimd = false;
  host::WorkerTransport tx(c);
  constexpr uint32_t kPkts = 200;
  auto io = std::make_shared<host::VectorTensor>(std::vector<int32_t>(kPkts * 64, 1));
  tx.submit(io, kPkts * 64);
  tx.pump(0, w.fx);
  ASSERT_EQ(w.fx.take().size(), 100u);  // psn 0..99: the ring grew to 128 with nothing done
  const auto result = [](uint32_t psn) { return std::vector<int32_t>(64, static_cast<int32_t>(psn)); };
  // Results 1..99, psn 0 still out; each lets one more packet go (100..198). The send of 128
  // needs 129 records from psn 0: the ring grows to 256 when results 1..29 are done.
  for (uint32_t psn = 1; psn < 100; ++psn) tx.on_packet(w.ack(psn, result(psn)), 10 * kUs, w.fx);
  ASSERT_EQ(w.fx.take().size(), 99u);
  tx.on_packet(w.ack(0, result(0)), 11 * kUs, w.fx);
  tx.on_packet(w.ack(5, result(5)), 11 * kUs, w.fx);  // a duplicate of a result done before the growth
  EXPECT_EQ(tx.stats().dup_acks, 1u);
  EXPECT_EQ(tx.stats().malformed, 0u);
  ASSERT_EQ(w.fx.take().size(), 1u);  // psn 199, the last
  for (uint32_t psn = 100; psn < kPkts; ++psn) tx.on_packet(w.ack(psn, result(psn)), 12 * kUs, w.fx);
  EXPECT_EQ(tx.take_completed(), std::vector<uint64_t>{0});
  EXPECT_EQ(tx.stats().acks, kPkts);
  for (uint32_t psn = 0; psn < kPkts; ++psn)
    ASSERT_EQ(io->result[psn * 64 + 63], static_cast<int32_t>(psn)) << "psn " << psn;
  tx.on_timer(0, 1 * kSec, w.fx);
  EXPECT_TRUE(w.fx.take().empty()) << "nothing is resent: every result is in";
  EXPECT_EQ(tx.stats().retransmits, 0u);
}

TEST(Worker, GradRequestAnsweredWithGradientOrResult) {
  WorkerRig w;
  w.tx.submit(w.io, 100);
  w.tx.submit(std::make_shared<host::VectorTensor>(ramp(10, 1)), 10);  // psn 2
  w.tx.pump(0, w.fx);
  w.fx.take();
  w.tx.on_packet(w.grad_request(9), 0, w.fx);  // unknown psn: ignored
  EXPECT_TRUE(w.fx.sent.empty());
  w.tx.on_packet(w.grad_request(1), 0, w.fx);
  auto out = w.fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.dst, kPsId);
  EXPECT_TRUE(out[0].h.has(flag::kToPs));
  EXPECT_FALSE(out[0].h.has(flag::kResult));
  EXPECT_EQ(out[0].h.bitmap, 0b010u);
  EXPECT_EQ(out[0].h.psn, 1u);
  EXPECT_EQ(out[0].v, std::vector<int32_t>(w.grad.begin() + 64, w.grad.end()));
  const auto r0 = ramp(64, 7);
  w.tx.on_packet(w.ack(0, r0), 10 * kUs, w.fx);
  w.tx.on_packet(w.grad_request(0), 11 * kUs, w.fx);
  out = w.fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].h.has(flag::kResult));
  EXPECT_EQ(out[0].h.bitmap, 0b111u);
  EXPECT_EQ(out[0].v, r0);
  EXPECT_EQ(w.fx.pool.in_use(), 0u);
}

// Catches: a backoff that does not double per retransmission, or one without
// the x8 cap (shift limited to 3), or reminders at the wrong retransmissions.
TEST(Worker, RetransmitsWithBackoffAndRemindsThePs) {
  WorkerRig w;
  w.tx.submit(std::make_shared<host::VectorTensor>(ramp(10, 1)), 10);
  w.tx.pump(0, w.fx);
  w.fx.take();
  // No RTT sample yet: the RTO is the 1 ms floor, doubled per retransmission
  // of the packet up to x8 (then flat, below max_rto = 200 ms).
  const std::vector<Time> gaps = {1 * kMs, 2 * kMs, 4 * kMs, 8 * kMs, 8 * kMs, 8 * kMs};
  Time last = 0;
  int retx = 0;
  for (int round = 0; round < 6; ++round) {
    ASSERT_FALSE(w.fx.timers.empty());
    const Time at = std::max_element(w.fx.timers.begin(), w.fx.timers.end())->first;
    EXPECT_EQ(at - last, gaps[static_cast<size_t>(round)]) << "round " << round;
    // Firing just before the deadline does nothing.
    w.tx.on_timer(0, at - 1, w.fx);
    EXPECT_TRUE(w.fx.sent.empty()) << "round " << round;
    last = at;
    w.tx.on_timer(0, at, w.fx);
    auto out = w.fx.take();
    size_t data = 0, reminders = 0;
    for (const auto& s : out) {
      if (s.h.type == PktType::Data) {
        ++data;
        EXPECT_TRUE(s.h.has(flag::kResend));
        EXPECT_EQ(s.v, ramp(10, 1));
      } else if (s.h.type == PktType::Reminder) {
        ++reminders;
        EXPECT_EQ(s.h.dst, kPsId);
        EXPECT_EQ(s.h.psn, 0u);
      }
    }
    ++retx;
    EXPECT_EQ(data, 1u) << "round " << round;
    EXPECT_EQ(reminders, retx % 3 == 0 ? 1u : 0u) << "a reminder after every 3 retransmissions";
  }
  EXPECT_EQ(last, 31 * kMs) << "1 + 2 + 4 + 8 + 8 + 8";
  EXPECT_EQ(w.tx.rto(), 1 * kMs) << "backoff is per packet: the estimator is untouched";
  EXPECT_EQ(w.tx.stats().retransmits, 6u);
  EXPECT_EQ(w.tx.stats().reminders, 2u);
}

// Time-based fast retransmit (RACK): a result for a packet sent later than
// another by more than srtt/4 presumes the earlier one lost and resends it at
// once; a packet overtaken within srtt/4 (reordering) is left alone, and so is
// everything when the option is off (the papers' workers only time out).
TEST(Worker, FastRetransmitResendsAnOvertakenPacket) {
  for (bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast retransmit on" : "off");
    WorkerRig w(fast);
    const auto v = ramp(10, 1);
    auto send_op = [&](Time at) {  // one single-packet op sent at `at`
      w.tx.submit(std::make_shared<host::VectorTensor>(v), 10);
      w.tx.pump(at, w.fx);
    };
    send_op(0);                   // psn 0
    send_op(1 * kMs);             // psn 1
    send_op(1 * kMs + 10 * kUs);  // psn 2
    send_op(2 * kMs);             // psn 3
    w.fx.take();
    w.tx.on_packet(w.ack(0, v), 100 * kUs, w.fx);  // srtt 100 us: tolerance 25 us
    const double cwnd = w.tx.cwnd();
    w.tx.on_packet(w.ack(2, v), 1100 * kUs, w.fx);  // psn 1 overtaken by 10 us only
    EXPECT_TRUE(w.fx.take().empty()) << "reordering within srtt/4 is tolerated";
    w.tx.on_packet(w.ack(3, v), 2100 * kUs, w.fx);  // psn 1 overtaken by 1 ms: lost
    auto out = w.fx.take();
    EXPECT_EQ(w.tx.stats().timeouts, 0u);
    if (!fast) {
      EXPECT_TRUE(out.empty());
      EXPECT_EQ(w.tx.stats().fast_retransmits, 0u);
      continue;
    }
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].h.type, PktType::Data);
    EXPECT_EQ(out[0].h.psn, 1u);
    EXPECT_TRUE(out[0].h.has(flag::kResend));
    EXPECT_EQ(out[0].v, v);
    EXPECT_EQ(w.tx.stats().fast_retransmits, 1u);
    EXPECT_LT(w.tx.cwnd(), cwnd) << "a loss halves the window";
    // The retransmission is recent now: further results of earlier-sent
    // packets do not resend it again; its own result completes the op.
    w.tx.on_packet(w.ack(3, v), 2200 * kUs, w.fx);
    EXPECT_TRUE(w.fx.take().empty());
    w.tx.on_packet(w.ack(1, v), 2300 * kUs, w.fx);
    EXPECT_FALSE(w.tx.busy());
    EXPECT_EQ(w.fx.pool.in_use(), 0u);
  }
}

// The delay signal: an Ack whose round trip exceeds the smallest one by more
// than delay_target halves the window like an ECN echo (once per RTT); with
// the target off (the simulator's default) the same Acks grow the window.
TEST(Worker, DelaySignalHalvesTheWindowOnlyWhenEnabled) {
  for (Time target : {Time{0}, 1 * kMs}) {
    SCOPED_TRACE(target ? "delay target 1 ms" : "off");
    host::WorkerConfig c = WorkerRig::config();
    c.delay_target = target;
    c.init_window = 8;
    WorkerRig w;
    host::WorkerTransport tx(c);
    const auto v = ramp(10, 1);
    for (int k = 0; k < 3; ++k) tx.submit(std::make_shared<host::VectorTensor>(v), 10);
    tx.pump(0, w.fx);
    ASSERT_EQ(w.fx.take().size(), 3u);
    tx.on_packet(w.ack(0, v), 100 * kUs, w.fx);  // the smallest round trip: 100 us
    const double before = tx.cwnd();
    tx.on_packet(w.ack(1, v), 900 * kUs, w.fx);  // 800 us above it: within 1 ms
    EXPECT_GT(tx.cwnd(), before);
    const double grown = tx.cwnd();
    tx.on_packet(w.ack(2, v), 5 * kMs, w.fx);  // 4.9 ms above it
    if (target) {
      EXPECT_EQ(tx.stats().delayed_acks, 1u);
      EXPECT_EQ(tx.stats().decreases, 1u);
      EXPECT_DOUBLE_EQ(tx.cwnd(), grown / 2);
    } else {
      EXPECT_EQ(tx.stats().delayed_acks, 0u);
      EXPECT_EQ(tx.stats().decreases, 0u);
      EXPECT_GT(tx.cwnd(), grown);
    }
    EXPECT_FALSE(tx.busy());
    EXPECT_EQ(w.fx.pool.in_use(), 0u);
  }
}


// ====================================================================
// Worker transport: congestion control, RTO estimation, PS interplay
// ====================================================================

// Acks, one per single-packet op, each op sent `rtt` before its Ack, so every
// round trip (and srtt) is exactly `rtt`.
struct OneRttRig {
  explicit OneRttRig(host::WorkerConfig c) : tx(c) {}
  void send_op(Time at) {
    tx.submit(std::make_shared<host::VectorTensor>(v), 10);
    tx.pump(at, w.fx);
  }
  Packet* ack(uint32_t psn, bool ece) {
    Packet* a = w.ack(psn, v);
    if (ece) a->h.flags |= flag::kEce;
    return a;
  }
  WorkerRig w;
  host::WorkerTransport tx;
  std::vector<int32_t> v = ramp(10, 1);
};

// Catches: halving on every ECN-echo Ack (a burst of marks would collapse the
// window to 1), never halving, or growing the window on an ECE Ack.
TEST(Worker, EcnEchoHalvesTheWindowAtMostOncePerRtt) {
  host::WorkerConfig c = WorkerRig::config();
  c.init_window = 10;
  OneRttRig r(c);
  const Time rtt = 100 * kUs;
  for (int k = 0; k < 4; ++k) r.send_op(k * 10 * kUs);  // psn k sent at 10k us
  ASSERT_EQ(r.w.fx.take().size(), 4u);
  r.tx.on_packet(r.ack(0, false), rtt, r.w.fx);  // srtt = 100 us; +1/cwnd
  EXPECT_DOUBLE_EQ(r.tx.cwnd(), 10.1);
  r.send_op(110 * kUs);  // psn 4
  r.tx.on_packet(r.ack(1, true), 10 * kUs + rtt, r.w.fx);  // first echo: halve
  EXPECT_DOUBLE_EQ(r.tx.cwnd(), 5.05);
  r.send_op(120 * kUs);  // psn 5
  r.tx.on_packet(r.ack(2, true), 20 * kUs + rtt, r.w.fx);  // 10 us later: same RTT, unchanged
  r.tx.on_packet(r.ack(3, true), 30 * kUs + rtt, r.w.fx);  // 20 us later: unchanged
  EXPECT_DOUBLE_EQ(r.tx.cwnd(), 5.05) << "an echo within one RTT of the last decrease neither halves nor grows";
  EXPECT_EQ(r.tx.stats().decreases, 1u);
  ASSERT_EQ(r.w.fx.take().size(), 2u);
  r.tx.on_packet(r.ack(4, true), 110 * kUs + rtt, r.w.fx);  // one srtt after the decrease: halve again
  EXPECT_DOUBLE_EQ(r.tx.cwnd(), 2.525);
  r.tx.on_packet(r.ack(5, false), 120 * kUs + rtt, r.w.fx);  // unmarked: additive increase
  EXPECT_DOUBLE_EQ(r.tx.cwnd(), 2.525 + 1 / 2.525);
  EXPECT_EQ(r.tx.stats().ece_acks, 4u);
  EXPECT_EQ(r.tx.stats().decreases, 2u);
  EXPECT_EQ(r.w.fx.pool.in_use(), 0u);
}

// transport.ecn_per_window (RFC 3168's CWR rule): an echo for a packet sent
// before the last decrease does not halve the window again, however late it
// comes (a slow PS path delivers such echoes more than one smoothed RTT
// after the decrease); the default rule halves on it. An echo for a packet
// sent after the decrease halves under both.
TEST(Worker, EcnPerWindowIgnoresEchoesOfPacketsSentBeforeTheDecrease) {
  for (const bool per_window : {false, true}) {
    SCOPED_TRACE(per_window);
    host::WorkerConfig c = WorkerRig::config();
    c.init_window = 10;
    c.ecn_per_window = per_window;
    OneRttRig r(c);
    const Time rtt = 100 * kUs;
    for (int k = 0; k < 4; ++k) r.send_op(k * 10 * kUs);     // psn k sent at 10k us
    r.tx.on_packet(r.ack(0, false), rtt, r.w.fx);           // srtt = 100 us
    r.tx.on_packet(r.ack(1, true), 10 * kUs + rtt, r.w.fx);  // t = 110 us: halve
    EXPECT_DOUBLE_EQ(r.tx.cwnd(), 10.1 / 2);
    r.send_op(120 * kUs);                                    // psn 4, after the decrease
    r.tx.on_packet(r.ack(2, true), 230 * kUs, r.w.fx);       // psn 2 (sent at 20 us), 120 us after the decrease
    EXPECT_DOUBLE_EQ(r.tx.cwnd(), per_window ? 10.1 / 2 : 10.1 / 4);
    r.tx.on_packet(r.ack(4, true), 400 * kUs, r.w.fx);       // psn 4: sent after the first decrease
    EXPECT_DOUBLE_EQ(r.tx.cwnd(), per_window ? 10.1 / 4 : 10.1 / 8);
    EXPECT_EQ(r.tx.stats().ece_acks, 3u);
    EXPECT_EQ(r.tx.stats().decreases, per_window ? 2u : 3u);
    r.w.fx.take();
    EXPECT_EQ(r.w.fx.pool.in_use(), 0u);
  }
}

// Catches: an RTT sample taken from the Ack of a retransmitted packet (Karn's
// rule): here it would put the RTO at 2.5 + 4 * 1.25 = 7.5 ms instead of the floor.
TEST(Worker, KarnsRuleAcksOfRetransmittedPacketsAreNotSamples) {
  OneRttRig r(WorkerRig::config());
  r.send_op(0);  // psn 0
  r.w.fx.take();
  r.tx.on_timer(0, 1 * kMs, r.w.fx);  // RTO (floor): retransmitted, next deadline 3 ms
  ASSERT_EQ(r.w.fx.take().size(), 1u);
  r.tx.on_packet(r.ack(0, false), 2500 * kUs, r.w.fx);
  EXPECT_EQ(r.tx.rto(), 1 * kMs) << "ambiguous round trip used as a sample";
  r.tx.on_timer(0, 3 * kMs, r.w.fx);  // stale: psn 0 is done
  EXPECT_TRUE(r.w.fx.sent.empty());
  // An unambiguous one is: 0.8 ms gives srtt 0.8, rttvar 0.4, RTO 2.4 ms.
  r.w.fx.timers.clear();
  r.send_op(40 * kMs);  // psn 1
  ASSERT_EQ(r.w.fx.timers.size(), 1u);
  EXPECT_EQ(r.w.fx.timers[0].first, 41 * kMs) << "first timeout: the floor";
  r.tx.on_packet(r.ack(1, false), 40'800 * kUs, r.w.fx);
  EXPECT_EQ(r.tx.rto(), 2'400 * kUs);
  r.tx.on_timer(0, 41 * kMs, r.w.fx);  // stale
  // The next packet's first timeout is that RTO, exactly.
  r.w.fx.timers.clear();
  r.send_op(50 * kMs);  // psn 2
  ASSERT_EQ(r.w.fx.timers.size(), 1u);
  EXPECT_EQ(r.w.fx.timers[0].first, 52'400 * kUs);
  EXPECT_EQ(r.w.fx.take().size(), 2u);  // psn 1 and psn 2, first transmissions only
  EXPECT_EQ(r.tx.stats().retransmits, 1u);
}

// Catches: a RateSync (GRID §5.2) that does not halve the window or does not
// resend the dropped fragment at once, or that resends fragments already
// done or never sent.
TEST(Worker, RateSyncHalvesTheWindowAndResendsThatFragmentAtOnce) {
  host::WorkerConfig c = WorkerRig::config();
  c.init_window = 8;
  WorkerRig w;
  host::WorkerTransport tx(c);
  tx.submit(std::make_shared<host::VectorTensor>(ramp(64 * 10, 1)), 64 * 10);  // psn 0..9
  tx.pump(0, w.fx);
  ASSERT_EQ(w.fx.take().size(), 8u);
  tx.on_packet(w.ack(0, ramp(64, 0)), 50 * kUs, w.fx);  // srtt 50 us; cwnd 8.125: psn 8 goes
  ASSERT_EQ(w.fx.take().size(), 1u);
  auto sync = [&](uint32_t psn) {
    Packet* p = w.fx.alloc();
    p->h.type = PktType::RateSync;
    p->h.flags = flag::kEce;
    p->h.job = 1;
    p->h.psn = psn;
    p->h.src = kSw;
    p->h.dst = kJob1[1];
    p->h.nworkers = 3;
    return p;
  };
  tx.on_packet(sync(3), 60 * kUs, w.fx);
  auto out = w.fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.psn, 3u);
  EXPECT_EQ(out[0].h.dst, kSw);
  EXPECT_TRUE(out[0].h.has(flag::kResend));
  EXPECT_EQ(out[0].v, ramp(64, 1 + 3 * 64));
  EXPECT_DOUBLE_EQ(tx.cwnd(), 8.125 / 2);
  tx.on_packet(sync(0), 61 * kUs, w.fx);  // already done
  tx.on_packet(sync(9), 62 * kUs, w.fx);  // never sent
  EXPECT_TRUE(w.fx.take().empty());
  EXPECT_EQ(tx.stats().rate_syncs, 3u);
  EXPECT_EQ(tx.stats().retransmits, 1u);
  EXPECT_EQ(tx.stats().decreases, 1u);
  EXPECT_EQ(w.fx.pool.in_use(), 0u);
}

// Catches: a worker that answers a GradRequest for a retired PSN with
// whatever its buffer now holds, or not at all (the PS would remind forever).
TEST(Worker, GradRequestForARetiredPsnIsAnsweredRetired) {
  host::WorkerConfig c = WorkerRig::config();
  c.retain_ops = 1;  // keep only the last completed op
  OneRttRig r(c);
  for (int k = 0; k < 3; ++k) r.send_op(0);  // psn 0, 1, 2
  r.w.fx.take();
  for (uint32_t k = 0; k < 3; ++k) r.tx.on_packet(r.ack(k, false), 10 * kUs, r.w.fx);  // each sends the next
  ASSERT_FALSE(r.tx.busy());
  r.w.fx.take();
  r.tx.on_packet(r.w.grad_request(0), 20 * kUs, r.w.fx);  // retired (ops 0, 1 dropped)
  r.tx.on_packet(r.w.grad_request(2), 20 * kUs, r.w.fx);  // still retained: the result
  auto out = r.w.fx.take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.dst, kPsId);
  EXPECT_EQ(out[0].h.src, kJob1[1]);
  EXPECT_EQ(out[0].h.psn, 0u);
  EXPECT_EQ(out[0].h.flags, flag::kToPs | flag::kRetired);
  EXPECT_EQ(out[0].h.bitmap, 0u);
  EXPECT_EQ(out[0].h.count, 0u);
  EXPECT_EQ(out[1].h.psn, 2u);
  EXPECT_EQ(out[1].h.flags, flag::kToPs | flag::kResult);
  EXPECT_EQ(out[1].h.bitmap, 0b111u);
  EXPECT_EQ(out[1].v, r.v);
  EXPECT_EQ(r.tx.stats().retired_to_ps, 1u);
  EXPECT_EQ(r.tx.stats().results_to_ps, 1u);
  EXPECT_EQ(r.w.fx.pool.in_use(), 0u);
}

// Catches: a PS that keeps (or re-opens) an entry a worker reported retired,
// or that completes it with a zero "result".
TEST(Ps, RetiredAnswerDropsTheStaleEntryAndOpensNone) {
  PsRig r;
  r.data(6, 0b001, ramp(64, 1), 0, flag::kResend | flag::kCollision);  // a late copy of a finished task
  ASSERT_EQ(r.ps->entries(), 1u);
  Packet* p = make_data(r.fx, 1, 6, 1, 3, kJob1[1], {}, 0, flag::kToPs | flag::kRetired, kPsId);
  p->h.bitmap = 0;
  r.ps->on_packet(p, 10 * kUs, r.fx);
  EXPECT_EQ(r.ps->entries(), 0u);
  EXPECT_TRUE(r.fx.sent.empty()) << "a retired task is not completed again";
  EXPECT_EQ(r.ps->stats().retired, 1u);
  // Retired for a PSN the PS does not hold: nothing is opened.
  p = make_data(r.fx, 1, 7, 1, 3, kJob1[1], {}, 0, flag::kToPs | flag::kRetired, kPsId);
  p->h.bitmap = 0;
  r.ps->on_packet(p, 11 * kUs, r.fx);
  EXPECT_EQ(r.ps->entries(), 0u);
  EXPECT_EQ(r.ps->stats().retired, 1u);
  EXPECT_EQ(r.fx.pool.in_use(), 0u);
}

// Catches: a request for a not-yet-sent packet being dropped (the PS would
// wait for a switch aggregate that never forms) or answered with an unsent
// slice; and the remembered packet still going to the switch.
TEST(Worker, GradRequestForAnUnsentPacketSendsItToThePsWhenItsTurnComes) {
  host::WorkerConfig c = WorkerRig::config();
  c.init_window = 1;
  c.aimd = false;
  WorkerRig w;
  host::WorkerTransport tx(c);
  tx.submit(w.io, 100);  // psn 0, 1
  const auto v2 = ramp(20, 900, -3);
  tx.submit(std::make_shared<host::VectorTensor>(v2), 20);  // psn 2
  tx.pump(0, w.fx);
  ASSERT_EQ(w.fx.take().size(), 1u);  // psn 0 only (window 1)
  tx.on_packet(w.grad_request(2), 5 * kUs, w.fx);
  EXPECT_TRUE(w.fx.sent.empty()) << "not sent yet: nothing to answer with now";
  tx.on_packet(w.ack(0, ramp(64, 0)), 10 * kUs, w.fx);
  auto out = w.fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.psn, 1u);
  EXPECT_EQ(out[0].h.dst, kSw) << "only the requested packet is redirected";
  EXPECT_FALSE(out[0].h.has(flag::kToPs));
  tx.on_packet(w.ack(1, ramp(36, 0)), 20 * kUs, w.fx);
  out = w.fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.psn, 2u);
  EXPECT_EQ(out[0].h.dst, kPsId);
  EXPECT_EQ(out[0].h.flags, flag::kToPs);
  EXPECT_EQ(out[0].h.bitmap, 0b010u);
  EXPECT_EQ(out[0].v, v2);
  EXPECT_EQ(tx.stats().redirected, 1u);
  EXPECT_EQ(tx.stats().grads_to_ps, 0u) << "not an answer: a first transmission";
}

// Catches: the SwitchML cap computed from the highest acked PSN (or the
// window) instead of the lowest unacknowledged one: a PSN S past it would
// overwrite a slot whose result some worker may still need.
TEST(Worker, SwitchMLCapNoPsnAPoolPastTheLowestUnacked) {
  host::WorkerConfig c = WorkerRig::config();
  c.window_cap = 4;
  WorkerRig w;
  host::WorkerTransport tx(c);
  tx.submit(std::make_shared<host::VectorTensor>(ramp(64 * 12, 1)), 64 * 12);  // psn 0..11
  auto psns = [&] {
    std::vector<uint32_t> v;
    for (const auto& s : w.fx.take()) v.push_back(s.h.psn);
    return v;
  };
  tx.pump(0, w.fx);
  EXPECT_EQ(psns(), (std::vector<uint32_t>{0, 1, 2, 3}));
  for (uint32_t k : {3u, 2u, 1u}) tx.on_packet(w.ack(k, ramp(64, 0)), 10 * kUs, w.fx);
  EXPECT_TRUE(psns().empty()) << "psn 0 is still unacknowledged: psn 4 would reuse its slot phase";
  EXPECT_EQ(tx.lowest_unacked(), 0u);
  tx.on_packet(w.ack(0, ramp(64, 0)), 11 * kUs, w.fx);
  EXPECT_EQ(psns(), (std::vector<uint32_t>{4, 5, 6, 7}));
  tx.on_packet(w.ack(5, ramp(64, 0)), 12 * kUs, w.fx);
  EXPECT_TRUE(psns().empty());
  tx.on_packet(w.ack(4, ramp(64, 0)), 13 * kUs, w.fx);  // lowest unacked 6: up to 9
  EXPECT_EQ(psns(), (std::vector<uint32_t>{8, 9}));
}

// Catches: the PS's entry timeout sampling a completion the reminder helped
// (Karn's rule): the 100 ms one here would put it at 119.375 ms.
TEST(Ps, KarnsRuleACompletionAfterAReminderIsNotATimeoutSample) {
  PsRig r;
  const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3), sum = add(add(a, b), c);
  EXPECT_EQ(r.ps->timeout(), 1 * kMs);
  // Unreminded: created at 0, complete at 5 ms: srtt 5, rttvar 2.5: 15 ms.
  r.data(1, 0b001, a, 0);
  r.data(1, 0b110, add(b, c), 5 * kMs);
  expect_ps_ack(r.fx.take(), 1, sum);
  EXPECT_EQ(r.ps->timeout(), 15 * kMs);
  // A worker's Reminder, then completion 100 ms after creation: not a sample.
  r.data(2, 0b001, a, 10 * kMs);
  r.ps->on_packet(reminder(r.fx, 2, 1), 20 * kMs, r.fx);
  expect_reminder(r.fx.take(), 2, {1, 2});
  r.data(2, 0b110, add(b, c), 110 * kMs);
  expect_ps_ack(r.fx.take(), 2, sum);
  EXPECT_EQ(r.ps->timeout(), 15 * kMs);
  // Nor after the PS's own timeout reminder.
  r.data(3, 0b001, a, 200 * kMs);
  r.ps->on_timer(0, 215 * kMs, r.fx);
  expect_reminder(r.fx.take(), 3, {1, 2});
  r.data(3, 0b110, add(b, c), 290 * kMs);
  expect_ps_ack(r.fx.take(), 3, sum);
  EXPECT_EQ(r.ps->timeout(), 15 * kMs);
  // A clean one is: 1 ms: rttvar (7.5 + 4) / 4 = 2.875, srtt (35 + 1) / 8 = 4.5: 16 ms.
  r.data(4, 0b011, add(a, b), 300 * kMs);
  r.data(4, 0b100, c, 301 * kMs);
  expect_ps_ack(r.fx.take(), 4, sum);
  EXPECT_EQ(r.ps->timeout(), 16 * kMs);
  EXPECT_EQ(r.fx.pool.in_use(), 0u);
}

// ====================================================================
// Switch arithmetic and GRID eviction, driven directly
// ====================================================================

// Catches: wrapping int32 addition, a saturation redo that corrupts lanes
// that did not overflow, or an overflow counter per lane instead of per packet.
TEST(SwitchSaturation, ClampsToInt32AndCountsOverflowingPackets) {
  for (uint16_t count : {uint16_t{64}, uint16_t{5}}) {  // the fixed-width and the generic adder
    SCOPED_TRACE(count);
    FakeFx fx;
    auto sw = make_sw("dsa", 4);
    add_shared_jobs(*sw);
    constexpr int32_t kMax = INT32_MAX, kMin = INT32_MIN;
    std::vector<int32_t> g0 = ramp(count, 1000), g1 = ramp(count, -20), g2 = ramp(count, 7, 2);
    std::vector<int32_t> want = add(add(g0, g1), g2);
    g0[0] = kMax - 5, g1[0] = 10, g2[0] = 1;       // saturates, then saturates again
    g0[1] = kMin + 5, g1[1] = -10, g2[1] = 0;      // saturates low
    g0[2] = 100, g1[2] = 200, g2[2] = -300;        // exact 0, in overflowing packets
    g0[3] = kMax, g1[3] = 0, g2[3] = kMin;         // exact -1: no overflow at all
    g0[4] = kMax - 1, g1[4] = 1, g2[4] = -kMax;    // exact 0, reaches MAX without overflow
    want[0] = kMax, want[1] = kMin, want[2] = 0, want[3] = -1, want[4] = 0;
    sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, g0), 0, fx);
    sw->on_packet(make_data(fx, 1, 0, 1, 3, 2, g1), 0, fx);
    EXPECT_EQ(sw->stats().overflow, 1u);
    sw->on_packet(make_data(fx, 1, 0, 2, 3, 3, g2), 0, fx);
    EXPECT_EQ(sw->stats().overflow, 2u);
    expect_multicast(fx.take(), kJob1, 1, 0, want);
    EXPECT_EQ(fx.pool.in_use(), 0u);
  }
}

// Catches: a GRID unit that never gives up its stuck partial (its index is
// blocked for good), one that evicts too early, or an evicted partial sent to
// the colliding fragment's PS or with the wrong values/bitmap.
TEST(GridSwitch, AfterEvictAfterCollisionsThePartialGoesToItsPs) {
  FakeFx fx;
  dp::SwitchConfig sc;
  sc.payload_values = 64;
  sc.memory_bytes = 256;  // one unit: every fragment maps to it
  sc.evict_after = 3;
  auto sw = schemes::find("grid").make_switch(sc);
  sw->set_id(kSw);
  dp::SwitchJob j1;
  j1.job = 1;
  j1.workers = kJob1;
  j1.ps = kPs1;
  j1.agg_mask = 0b111;
  sw->add_job(j1);
  dp::SwitchJob j2;
  j2.job = 2;
  j2.workers = kJob2;
  j2.ps = kPs2;
  j2.agg_mask = 0b11;
  sw->add_job(j2);
  const auto g0 = ramp(64, -40, 3), g1 = ramp(64, 11, -1);
  sw->on_packet(make_data(fx, 1, 5, 0, 3, 1, g0), 0, fx);
  sw->on_packet(make_data(fx, 1, 5, 1, 3, 2, g1), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  const auto h0 = ramp(30, 500), h1 = ramp(30, -9, 4);
  for (int k = 1; k <= 2; ++k) {  // collisions below evict_after: rate-sync back to the sender
    sw->on_packet(make_data(fx, 2, 8, 0, 2, 4, h0), k * kUs, fx);
    auto out = fx.take();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].h.type, PktType::RateSync);
    EXPECT_EQ(out[0].h.dst, 4);
    EXPECT_EQ(out[0].h.psn, 8u);
    EXPECT_EQ(sw->occupied_by(1), 1u) << "collision " << k;
  }
  sw->on_packet(make_data(fx, 2, 8, 0, 2, 4, h0), 3 * kUs, fx);  // the 3rd: evict
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.dst, kPs1) << "to the evicted partial's own PS";
  EXPECT_EQ(out[0].h.job, 1);
  EXPECT_EQ(out[0].h.psn, 5u);
  EXPECT_EQ(out[0].h.bitmap, 0b011u);
  EXPECT_TRUE(out[0].h.has(flag::kPartial));
  EXPECT_TRUE(out[0].h.has(flag::kEvicted));
  EXPECT_EQ(out[0].v, add(g0, g1));
  EXPECT_EQ(sw->occupied_by(1), 0u);
  EXPECT_EQ(sw->occupied_by(2), 1u);
  // The new fragment holds the unit with its own values and a reset counter.
  sw->on_packet(make_data(fx, 2, 8, 1, 2, 5, h1), 4 * kUs, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs2);
  EXPECT_EQ(out[0].h.job, 2);
  EXPECT_EQ(out[0].h.bitmap, 0b11u);
  EXPECT_TRUE(out[0].h.has(flag::kPartial));
  EXPECT_FALSE(out[0].h.has(flag::kEvicted));
  EXPECT_EQ(out[0].v, add(h0, h1));
  const auto& st = sw->stats();
  EXPECT_EQ(st.collisions, 3u);
  EXPECT_EQ(st.rate_syncs, 2u);
  EXPECT_EQ(st.evictions, 1u);
  EXPECT_EQ(st.completed, 1u);
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

}  // namespace
}  // namespace ina::test
