// P4INC-AOI's testbed model (§VII-B): jobs that wait in the scheduling queue
// until their slots are free, training jobs of many iterations with compute
// and a PS update in each, and the PS's NIC. Hand-solved instances, checked
// by the planners and by the validator.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "aoi_fixture.hpp"
#include "control/aoi.hpp"
#include "control/aoi_milp.hpp"

namespace ina::control::aoi {
namespace {

// Unit 0: 4 GPUs and no PS; unit 1: PS slots only.
Instance rack_and_ps() {
  Instance inst;
  inst.origin = "test";
  inst.net = make_odcn(2);
  inst.net.units[0].worker_slots = 4;
  inst.net.units[0].ps_slots = 0;
  inst.net.units[1].worker_slots = 0;
  inst.net.units[1].ps_slots = 4;
  return inst;
}

Job queued_job(unsigned id, unsigned workers, double gb, double arrival_s) {
  Job j;
  j.id = id;
  j.name = "job " + std::to_string(id);
  j.queued = workers;
  j.gb_per_worker = gb;
  j.arrival_s = arrival_s;
  return j;
}

const JobPlan& plan_of(const Schedule& s, unsigned job) {
  for (const JobPlan& p : s.jobs)
    if (p.job == job) return p;
  throw std::runtime_error("no plan");
}

TEST(AoiQueue, AJobWaitsForItsSlotsAndItsJctCountsTheWait) {
  // A (4 workers, 60 Gb each at 40 Gbps with INC: 1.5 s) holds the rack for
  // TSs 1-2; B (4 workers, arrives at 0.1 s) is placed when A is done, in
  // TS 3, and sends in TSs 3-4.
  Instance inst = rack_and_ps();
  inst.jobs = {queued_job(0, 4, 60, 0), queued_job(1, 4, 60, 0.1)};
  validate(inst);
  for (const bool tw : {true, false}) {
    const Schedule s = tw ? plan_tw(inst, {}) : plan_fcfs(inst, {});
    const Check c = check_schedule(inst, s);
    ASSERT_TRUE(c.ok) << (c.errors.empty() ? "" : c.errors.front());
    const JobPlan& a = plan_of(s, 0);
    const JobPlan& b = plan_of(s, 1);
    EXPECT_EQ(a.admitted, 1u);
    EXPECT_EQ(a.last_ts(), 2u);
    EXPECT_EQ(b.admitted, 3u);
    EXPECT_EQ(b.first_ts, 3u);
    EXPECT_EQ(b.last_ts(), 4u);
    EXPECT_EQ(b.workers, (std::vector<std::pair<unsigned, unsigned>>{{0, 4}}));
    EXPECT_EQ(b.ps_unit, 1u);
    ASSERT_TRUE(b.inc_unit.has_value());
    EXPECT_DOUBLE_EQ(c.jobs[1].ict_s, 4.0);
    EXPECT_DOUBLE_EQ(c.jobs[1].jct_s, 3.9);
    EXPECT_DOUBLE_EQ(c.jobs[1].wait_s, 1.9);
    EXPECT_DOUBLE_EQ(c.total_jct_s, 2.0 + 3.9);
    EXPECT_DOUBLE_EQ(c.avg_jct_s, (2.0 + 3.9) / 2);

    // B admitted while A still holds the rack: 8 workers on 4 slots.
    Schedule bad = s;
    for (JobPlan& p : bad.jobs)
      if (p.job == 1) p.admitted = 2;
    const Check cb = check_schedule(inst, bad);
    ASSERT_FALSE(cb.ok);
    EXPECT_NE(cb.errors.front().find("TS 2: unit 0 holds 8 workers of queued jobs, it has 4 worker slots"),
              std::string::npos)
        << cb.errors.front();
  }
}

TEST(AoiQueue, TheQueueIsFirstInFirstOut) {
  // A (2 workers, 4 TSs) leaves 2 slots; B (4 workers) does not fit, and C
  // (2 workers), which would, waits behind it until B is done.
  Instance inst = rack_and_ps();
  inst.jobs = {queued_job(0, 2, 150, 0), queued_job(1, 4, 30, 0.1), queued_job(2, 2, 30, 0.2)};
  const Schedule s = plan_tw(inst, {});
  const Check c = check_schedule(inst, s);
  ASSERT_TRUE(c.ok) << (c.errors.empty() ? "" : c.errors.front());
  EXPECT_EQ(plan_of(s, 0).last_ts(), 4u);
  EXPECT_EQ(plan_of(s, 1).admitted, 5u);
  EXPECT_EQ(plan_of(s, 1).last_ts(), 5u);
  EXPECT_EQ(plan_of(s, 2).admitted, 6u);
}

TEST(AoiQueue, AnIterationIsComputePushAndUpdate) {
  // 10 iterations of 1 Gb, 0.1 s of compute and a 0.05 s update each. At 10
  // Gbps: 0.1 + 0.1 + 0.05 s per iteration, 4 Gbps of data; with INC in the
  // unit of all its workers (no update): 5 Gbps.
  Instance inst = rack_and_ps();
  Job j = aoi_job(0, {{0, 2}}, 1, 10.0, 0.05);
  j.iterations = 10;
  j.compute_s = 0.1;
  EXPECT_DOUBLE_EQ(data_gbps(j, std::nullopt, 10), 4.0);
  EXPECT_DOUBLE_EQ(data_gbps(j, 0u, 10), 5.0);
  EXPECT_DOUBLE_EQ(rate_for_data_gbps(j, std::nullopt, 4.0), 10.0);
  // No rate moves more than an iteration's data per compute and update.
  EXPECT_EQ(rate_for_data_gbps(j, std::nullopt, 1 / 0.15 + 1e-9), std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(final_update(j, std::nullopt), 0.0);

  // The worker's NIC at 10 Gbps: 10 Gb at 4 Gbps is done in TS 3, and the
  // ICT is the end of that TS (each iteration's update is inside it).
  inst.net.worker_gbps = 10;
  inst.jobs = {j};
  const Schedule s = plan_fcfs(inst, {.inc = false});
  const Check c = check_schedule(inst, s);
  ASSERT_TRUE(c.ok) << (c.errors.empty() ? "" : c.errors.front());
  EXPECT_EQ(s.jobs[0].rate_gbps, (std::vector<double>{10, 10, 10}));
  EXPECT_DOUBLE_EQ(c.jobs[0].ict_s, 3.0);

  // One TS short of that is rejected: 8 of 10 Gb by TS 2.
  Schedule bad = s;
  bad.jobs[0].rate_gbps = {10, 10};
  const Check cb = check_schedule(inst, bad);
  ASSERT_FALSE(cb.ok);
  EXPECT_NE(cb.errors.front().find("a worker sends 8.0000 of 10.0000 Gb by its last TS 2"), std::string::npos)
      << cb.errors.front();
}

TEST(AoiQueue, ThePsNicLimitsWhatTheWorkersSend) {
  // 4 workers at 40 Gbps into one PS with a 20 Gbps NIC: 5 Gbps each, so
  // 10 Gb takes 2 s (no ε: reconfig_s = 0); with INC at their unit nothing
  // reaches the PS.
  Instance inst = rack_and_ps();
  inst.net.ps_gbps = 20;
  inst.net.reconfig_s = 0;
  inst.jobs = {aoi_job(0, {{0, 4}}, 1, 10.0, 0.5)};
  EXPECT_DOUBLE_EQ(rate_cap(inst.net, inst.jobs[0], std::nullopt), 5.0);
  EXPECT_DOUBLE_EQ(rate_cap(inst.net, inst.jobs[0], 0u), 40.0);
  const Schedule s = plan_tw(inst, {.inc = false});
  const Check c = check_schedule(inst, s);
  ASSERT_TRUE(c.ok) << (c.errors.empty() ? "" : c.errors.front());
  EXPECT_EQ(s.jobs[0].last_ts(), 2u);
  EXPECT_DOUBLE_EQ(c.jobs[0].ict_s, 2.5);  // one iteration: Eq. 11's update after the data
  const Schedule si = plan_tw(inst, {});
  const Check ci = check_schedule(inst, si);
  ASSERT_TRUE(ci.ok);
  EXPECT_DOUBLE_EQ(ci.jobs[0].ict_s, 1.0);
}

TEST(AoiQueue, BadQueuedScenariosAreRefusedByName) {
  Instance inst = rack_and_ps();
  inst.jobs = {queued_job(0, 2, 1, 0), aoi_job(1, {{0, 2}}, 1, 1.0)};
  try {
    validate(inst);
    FAIL() << "mixed queued and placed jobs accepted";
  } catch (const AoiError& e) {
    EXPECT_NE(std::string(e.what()).find("job 1 (job 1) queued"), std::string::npos) << e.what();
  }
  inst.jobs = {queued_job(0, 2, 1, 0)};
  inst.jobs[0].iterations = 0;
  EXPECT_THROW(validate(inst), AoiError);
  inst.jobs[0].iterations = 5;
  validate(inst);
  try {
    (void)plan_milp(inst, {});
    FAIL() << "the MILP planned a queued job";
  } catch (const AoiError& e) {
    EXPECT_NE(std::string(e.what()).find("waits in the scheduling queue"), std::string::npos) << e.what();
  }
  // A plan that places a queued job with the wrong number of workers.
  Schedule s = plan_tw(inst, {});
  s.jobs[0].workers = {{0, 1}};
  const Check c = check_schedule(inst, s);
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.errors.front().find("places 1 workers"), std::string::npos) << c.errors.front();

  try {
    (void)load_scenario(kAoiSourceDir + "/scenarios/aoi/testbed_resnet50.toml", {"dml.iterations=0"});
    FAIL() << "dml.iterations = 0 accepted";
  } catch (const AoiError& e) {
    EXPECT_NE(std::string(e.what()).find("dml.iterations"), std::string::npos) << e.what();
  }
}

TEST(AoiQueue, OnTheTestbedEveryJobRunsAtItsNicSoTwAndFcfsTie) {
  // §VII-B's testbed: 8 GPUs, so at most four jobs run, and no port or
  // switch is ever the bottleneck; the planners differ only under contention.
  const Instance inst = load_scenario(kAoiSourceDir + "/scenarios/aoi/testbed_vgg16.toml", {"dml.count=20"});
  for (const bool inc : {false, true}) {
    const Schedule tw = plan_tw(inst, {.inc = inc});
    const Schedule fcfs = plan_fcfs(inst, {.inc = inc});
    const Check ct = check_schedule(inst, tw);
    const Check cf = check_schedule(inst, fcfs);
    ASSERT_TRUE(ct.ok && cf.ok);
    for (const JobPlan& p : tw.jobs) {
      Job placed = inst.jobs[p.job];
      placed.workers = p.workers;
      placed.ps_unit = p.ps_unit;
      // The worker's 40 Gbps NIC, or without INC its share of the PS's: 40 / W.
      const double cap = p.inc_unit ? 40.0 : 40.0 / placed.num_workers();
      ASSERT_DOUBLE_EQ(rate_cap(inst.net, placed, p.inc_unit), cap);
      for (double b : p.rate_gbps) EXPECT_DOUBLE_EQ(b, cap) << "job " << p.job;
    }
    ASSERT_EQ(ct.jobs.size(), cf.jobs.size());
    for (size_t k = 0; k < ct.jobs.size(); ++k) EXPECT_DOUBLE_EQ(ct.jobs[k].jct_s, cf.jobs[k].jct_s) << "job " << k;
  }
}

}  // namespace
}  // namespace ina::control::aoi
