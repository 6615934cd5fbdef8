// End to end on a simulated star: every shared-pool and isolated policy
// exact under concurrent jobs and faults, more ops than a worker retains,
// SwitchML's regions, and DSA's three task types (§IV-C).
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

}  // namespace
}  // namespace ina::test
