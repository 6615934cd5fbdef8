// Paper-derived expectations (DSA §VII) that the simulator must keep
// reproducing. Sizes are reduced where the ordering does not depend on them.
#include <gtest/gtest.h>

#include "experiment/runner.hpp"

using namespace ina::exp;

namespace {

double jct(const Settings& s, const char* scheme, uint64_t seed = 1) {
  const auto out = run_point(s, scheme, seed);
  EXPECT_TRUE(out.ok) << scheme << ": " << out.problems;
  return out.metrics.at("avg_jct_ms");
}

}  // namespace

// Fig. 8/9: with DNN A (4 MiB partitions) and 5 MiB of switch memory, DSA's
// completion at the switch (no PS round trip) beats ATP clearly.
TEST(PaperExpectations, DsaBeatsAtpOnDnnA) {
  Settings s;
  s.jobs = 4;
  s.workers_per_job = 8;
  s.model = "A";
  const double dsa = jct(s, "dsa"), atp = jct(s, "atp");
  EXPECT_LT(dsa * 1.15, atp) << "dsa " << dsa << " ms, atp " << atp << " ms";
}

// When the switch memory per job is scarce, isolation (SwitchML) and FCFS
// sharing (ATP) both lose to preemption.
TEST(PaperExpectations, DsaBeatsBothBaselinesWhenMemoryIsScarce) {
  Settings s;
  s.jobs = 8;
  s.workers_per_job = 8;
  s.partition_mb = 0.5;
  s.memory_mb = 0.125;
  const double dsa = jct(s, "dsa"), sml = jct(s, "switchml"), atp = jct(s, "atp");
  EXPECT_LT(dsa * 1.1, sml) << "dsa " << dsa << " ms, switchml " << sml << " ms";
  EXPECT_LT(dsa * 1.1, atp) << "dsa " << dsa << " ms, atp " << atp << " ms";
}

// Fig. 10: utilization (aggregation throughput / link rate) of DSA above ATP.
TEST(PaperExpectations, DsaUtilizationAboveAtp) {
  Settings s;
  s.jobs = 4;
  s.workers_per_job = 8;
  s.model = "A";
  const auto dsa = run_point(s, "dsa", 1), atp = run_point(s, "atp", 1);
  ASSERT_TRUE(dsa.ok && atp.ok);
  EXPECT_GT(dsa.metrics.at("utilization"), 1.2 * atp.metrics.at("utilization"));
  EXPECT_LE(dsa.metrics.at("utilization"), 1.0);
}

// Loss on the PS links hurts ATP (every result passes the PS) but hardly DSA.
TEST(PaperExpectations, PsLossHurtsAtpMoreThanDsa) {
  Settings s;
  s.jobs = 2;
  s.workers_per_job = 4;
  s.partition_mb = 1;
  Settings lossy = s;
  lossy.ps_loss = 0.01;
  const double dsa0 = jct(s, "dsa"), dsa1 = jct(lossy, "dsa");
  const double atp0 = jct(s, "atp"), atp1 = jct(lossy, "atp");
  EXPECT_LT(dsa1 / dsa0, atp1 / atp0);
  EXPECT_GT(atp1, 1.2 * atp0);
}

// workload.eq1_priority reaches the star's workers: per tensor (§V, the
// default) and per packet are different runs, and per tensor DSA loses
// far more compares (4 jobs x 8 workers of DNN A: 309 against 13).
TEST(PaperExpectations, Eq1PerTensorAndPerPacketAreDifferentRuns) {
  Settings s;
  s.jobs = 4;
  s.workers_per_job = 8;
  s.model = "A";
  const auto tensor = run_point(s, "dsa", 1);
  s.eq1_priority = "packet";
  const auto packet = run_point(s, "dsa", 1);
  ASSERT_TRUE(tensor.ok && packet.ok) << tensor.problems << packet.problems;
  EXPECT_NE(tensor.digest, packet.digest);
  EXPECT_GT(tensor.metrics.at("preempt_lost"), 10 * packet.metrics.at("preempt_lost"));
}

// And the PS family's hosts on a topology: two DSA jobs of 0.25 MiB on the
// 1024-host fat-tree of scenarios/scale, rack-packed (59 lost compares per
// tensor against 49 per packet).
TEST(PaperExpectations, Eq1PerTensorReachesTheFatTreesHosts) {
  Scenario sc = load_scenario_file(std::string(INA_SOURCE_DIR) + "/scenarios/scale/fat_tree_1024.toml",
                                   {"run.schemes=dsa", "workload.jobs=2", "workload.gradient_mb=0.25"});
  Settings s = expand(sc).front().settings;
  const auto tensor = run_point(s, "dsa", 1);
  s.eq1_priority = "packet";
  const auto packet = run_point(s, "dsa", 1);
  ASSERT_TRUE(tensor.ok && packet.ok) << tensor.problems << packet.problems;
  EXPECT_NE(tensor.digest, packet.digest);
  EXPECT_EQ(tensor.metrics.at("preempt_lost"), 59);
  EXPECT_EQ(packet.metrics.at("preempt_lost"), 49);
}
