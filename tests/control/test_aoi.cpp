// P4INC-AOI's model, validator and planners (TW, FCFS): exact schedules on
// hand-sized instances, hand-broken schedules rejected with their reason,
// Algorithm 2's matching against brute force, the generators, and the
// paper's directions on the Table I scenario.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "aoi_fixture.hpp"
#include "control/aoi.hpp"
#include "control/aoi_milp.hpp"
#include "core/rng.hpp"

namespace ina::control::aoi {
namespace {

const std::string& kDir = kAoiSourceDir;

// Two units, one job: 2 workers in unit 0 with 1 Gb each, PS in unit 1.
Instance two_units() {
  Instance inst;
  inst.origin = "test";
  inst.net = make_odcn(2);
  inst.net.reconfig_s = 0.02;
  Job j;
  j.id = 0;
  j.name = "a";
  j.workers = {{0, 2}};
  j.ps_unit = 1;
  j.gb_per_worker = 1.0;
  j.update_s = 0.25;
  inst.jobs.push_back(j);
  return inst;
}

Schedule one_ts(double rate, int connections = 1) {
  Schedule s;
  s.algo = "hand";
  s.inc = false;
  s.changes.push_back({0.0, 0, 1, connections});
  s.jobs.push_back({0, std::nullopt, std::nullopt, 1, {rate}});
  return s;
}

bool mentions(const Check& c, const std::string& what) {
  for (const auto& e : c.errors)
    if (e.find(what) != std::string::npos) return true;
  return false;
}

TEST(AoiCheck, AHandScheduleIsRecomputedExactly) {
  const Instance inst = two_units();
  // 10 Gbps per worker: 2 x 10 = 20 Gbps from unit 0 to the PS over one new
  // 40 Gbps connection; the flow must carry 2 Gb and sends 20·1 - 0.02·20 = 19.6.
  const Check c = check_schedule(inst, one_ts(10));
  ASSERT_TRUE(c.ok) << c.errors.front();
  EXPECT_EQ(c.reconfigured, 1u);
  EXPECT_EQ(c.reconfig_ts, 1u);
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_DOUBLE_EQ(c.jobs[0].ict_s, 1.0 + 0.25);  // Eq. 11: end of TS 1 + a_j (no INC)
  EXPECT_DOUBLE_EQ(c.ct_bti_s, 1.25);
  EXPECT_NEAR(c.aoi_gb, 2.0, 1e-12);  // the flow's data, not its spare rate
}

TEST(AoiCheck, TheReconfigurationLossOfEq10DecidesCompletion) {
  Instance inst = two_units();
  inst.jobs[0].workers = {{0, 1}};
  // 0.4 Gbps for one TS over a new connection sends 0.4 - 0.02·0.4 = 0.392 Gb.
  inst.jobs[0].gb_per_worker = 0.39;
  EXPECT_TRUE(check_schedule(inst, one_ts(0.4)).ok);
  inst.jobs[0].gb_per_worker = 0.395;  // the worker's local push (0.4) would make it; the AOI flow does not
  const Check c = check_schedule(inst, one_ts(0.4));
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(mentions(c, "flow 0->1 sends 0.3920 of 0.3950 Gb")) << c.errors.front();
  // Preconfigured (NoRecon's fixed AOI), the same connection loses nothing.
  Schedule pre = one_ts(0.4);
  pre.changes.clear();
  pre.no_recon = true;
  pre.preconfigured.push_back({0, 1, 1});
  EXPECT_TRUE(check_schedule(inst, pre).ok);
}

TEST(AoiCheck, BrokenSchedulesAreRejectedWithTheReason) {
  const Instance inst = two_units();
  {  // over a port: 2 x 30 = 60 Gbps over one 40 Gbps connection
    const Check c = check_schedule(inst, one_ts(30));
    EXPECT_FALSE(c.ok);
    EXPECT_TRUE(mentions(c, "units 0-1 carry 60.000 Gbps over 1 connections of 40 Gbps (Eq. 6)")) << c.errors.front();
  }
  {  // more connections than a unit has ports
    const Check c = check_schedule(inst, one_ts(10, 25));
    EXPECT_TRUE(mentions(c, "unit 0 uses 25 optical ports, it has 24")) << c.errors.front();
  }
  {  // a reconfiguration inside a TS
    Schedule s = one_ts(10);
    s.changes[0].at_s = 0.5;
    const Check c = check_schedule(inst, s);
    EXPECT_TRUE(mentions(c, "inside TS 1")) << c.errors.front();
  }
  {  // a change under NoRecon
    Schedule s = one_ts(10);
    s.no_recon = true;
    EXPECT_TRUE(mentions(check_schedule(inst, s), "may not reconfigure"));
  }
  {  // a TS without bandwidth inside the job's duration
    Schedule s = one_ts(10);
    s.jobs[0].rate_gbps = {0.5, 0, 10};
    EXPECT_TRUE(mentions(check_schedule(inst, s), "no bandwidth in TS 2"));
  }
  {  // bandwidth kept after the data is sent
    Schedule s = one_ts(10);
    s.jobs[0].rate_gbps = {10, 10};
    EXPECT_TRUE(mentions(check_schedule(inst, s), "sent in TS 1 but it keeps bandwidth until TS 2"));
  }
  {  // not enough data
    const Check c = check_schedule(inst, one_ts(0.5));
    EXPECT_TRUE(mentions(c, "a worker sends 0.5000 of 1.0000 Gb")) << c.errors.front();
  }
  {  // above the worker's NIC
    EXPECT_TRUE(mentions(check_schedule(inst, one_ts(50, 3)), "exceeds the worker's 40 Gbps"));
  }
  {  // before its arrival
    Instance late = inst;
    late.jobs[0].arrival_s = 1.5;
    EXPECT_TRUE(mentions(check_schedule(late, one_ts(10)), "before it arrives"));
  }
  {  // INC in a schedule without INC, and INC where a worker is missing
    Schedule s = one_ts(10);
    s.jobs[0].inc_unit = 1;
    s.jobs[0].segment = Segment{0, 1024};
    const Check c = check_schedule(inst, s);
    EXPECT_TRUE(mentions(c, "in a schedule without INC"));
    EXPECT_TRUE(mentions(c, "no worker there, Eq. 2"));
  }
  {  // the unit's switch: 2 workers x 10 Gbps against a 15 Gbps switch
    Instance small = inst;
    small.net.units[0].pdp_gbps = 15;
    EXPECT_TRUE(mentions(check_schedule(small, one_ts(10)), "unit 0 carries 20.000 Gbps, its switch has 15 (Eq. 5)"));
  }
}

// Three local jobs in one unit with one INC slot: INC capacity and segments.
Instance three_local() {
  Instance inst;
  inst.origin = "test";
  inst.net = make_odcn(2);
  inst.net.units[0].inc_jobs = 1;
  for (unsigned k = 0; k < 3; ++k) {
    Job j;
    j.id = k;
    j.name = std::vector<std::string>{"j0", "j1", "j2"}[k];
    j.workers = {{0, 2u + 6u * (k == 1)}};  // job 1 has 8 workers, the others 2
    j.ps_unit = 1;
    j.gb_per_worker = 1.0;
    j.update_s = 0.5;
    inst.jobs.push_back(j);
  }
  return inst;
}

TEST(AoiCheck, IncCapacityAndSegmentsAreChecked) {
  const Instance inst = three_local();
  Schedule s;
  s.algo = "hand";
  s.changes.push_back({0.0, 0, 1, 2});
  s.jobs.push_back({0, 0u, Segment{0, 4096}, 1, {10}});
  s.jobs.push_back({1, 0u, Segment{0, 4096}, 1, {10}});
  s.jobs.push_back({2, std::nullopt, std::nullopt, 1, {10}});
  const Check c = check_schedule(inst, s);
  EXPECT_TRUE(mentions(c, "unit 0 aggregates 2 INC jobs, its INC capacity is 1 (Eq. 3)")) << c.errors.front();
  EXPECT_TRUE(mentions(c, "jobs 0 and 1 share aggregators"));
  // One after the other: the same segment is fine, ICTs follow Eq. 11.
  s.jobs[1].first_ts = 2;
  const Check ok = check_schedule(inst, s);
  ASSERT_TRUE(ok.ok) << ok.errors.front();
  EXPECT_DOUBLE_EQ(ok.jobs[0].ict_s, 1.0);        // INC at its all-local unit: no update time
  EXPECT_DOUBLE_EQ(ok.jobs[1].ict_s, 2.0);
  EXPECT_DOUBLE_EQ(ok.jobs[2].ict_s, 1.0 + 0.5);  // its PS updates
  EXPECT_NEAR(ok.aoi_gb, 2.0, 1e-12);  // only job 2 crosses the AOI: 2 workers x 1 Gb
}

// The -need variant (steps stop where the job completes in its TS), whose
// rates are hand-derived; StepsGoUpToTheNic is the same instance under
// Algorithm 2's default.
TEST(AoiPlan, TwGivesIncToTheHeavierInterUnitJobFcfsToTheFirst) {
  Instance inst = three_local();
  // 30 Gb a worker: a job finishing in TS 1 over a new connection needs
  // 30 / (1 - 0.02) = 30.61 Gbps per worker (the ε loss of Eq. 10).
  for (Job& j : inst.jobs) j.gb_per_worker = 30;
  PlanOptions o;
  o.stop_at_need = true;
  const Schedule tw = plan_tw(inst, o);
  const Schedule fcfs = plan_fcfs(inst, o);
  for (const Schedule* s : {&tw, &fcfs}) {
    const Check c = check_schedule(inst, *s);
    ASSERT_TRUE(c.ok) << s->algo << ": " << c.errors.front();
  }
  auto inc_of = [](const Schedule& s) {
    std::set<unsigned> out;
    for (const auto& p : s.jobs)
      if (p.inc_unit) out.insert(p.job);
    return out;
  };
  // The matching's weight is the inter-unit traffic INC removes: 8 Gb for job 1, 2 Gb for the others.
  EXPECT_EQ(inc_of(tw), std::set<unsigned>{1});
  EXPECT_EQ(inc_of(fcfs), std::set<unsigned>{0});
  // TW: jobs 0 and 2 cross the AOI, 2 x 2 x 30.61 = 122.4 Gbps: 4 connections of 40 Gbps.
  EXPECT_EQ(check_schedule(inst, tw).reconfigured, 4u);
  // FCFS sends job 1's 8 workers through it instead of job 0's 2: (8 + 2) x 30.61 = 306.1 Gbps: 8 connections.
  EXPECT_EQ(check_schedule(inst, fcfs).reconfigured, 8u);
  // Both finish every job in TS 1; the non-INC jobs add their PS's update time.
  EXPECT_DOUBLE_EQ(check_schedule(inst, tw).ct_bti_s, 1.5);
  EXPECT_DOUBLE_EQ(check_schedule(inst, fcfs).ct_bti_s, 1.5);
}

// Algorithm 2 ("until no more bandwidth can be allocated"), the default: a
// job's steps go up to the worker's NIC.
TEST(AoiPlan, StepsGoUpToTheNic) {
  Instance inst = three_local();
  for (Job& j : inst.jobs) j.gb_per_worker = 30;
  PlanOptions o;
  const Schedule tw = plan_tw(inst, o);
  const Schedule fcfs = plan_fcfs(inst, o);
  for (const Schedule* s : {&tw, &fcfs}) {
    const Check c = check_schedule(inst, *s);
    ASSERT_TRUE(c.ok) << c.errors.front();
    for (const JobPlan& p : s->jobs) EXPECT_EQ(p.rate_gbps, std::vector<double>{40}) << s->algo << " job " << p.job;
  }
  // 40 Gbps a worker instead of 30.61: TW 2 x 2 x 40 = 160 Gbps (4 connections), FCFS (8 + 2) x 40 = 400 (10).
  EXPECT_EQ(check_schedule(inst, tw).reconfigured, 4u);
  EXPECT_EQ(check_schedule(inst, fcfs).reconfigured, 10u);
}

// FCFS in arrival order, no INC, unit 0's 24 ports of 40 Gbps to the PS'
// unit 1. j0 (20 workers, 60 Gb each) takes 20 ports at its NIC's 40 Gbps
// in TS 1 and TS 2 (39.2 Gb in TS 1 after ε, then the rest); j1 (20
// workers) needs 5 ports for one δB step a worker and finds 4; j2 (2
// workers) fits in them. Plain FCFS starts j2 in TS 1; strict FCFS holds
// it behind j1 until j0 is done and both start, in TS 3.
TEST(AoiPlan, StrictFcfsHoldsLaterJobsBehindOneThatCannotStart) {
  Instance inst;
  inst.origin = "test";
  inst.net = make_odcn(2);
  for (unsigned k = 0; k < 3; ++k) {
    Job j;
    j.id = k;
    j.name = std::vector<std::string>{"j0", "j1", "j2"}[k];
    j.workers = {{0, k == 2 ? 2u : 20u}};
    j.ps_unit = 1;
    j.gb_per_worker = k == 0 ? 60 : 30;
    j.update_s = 0.5;
    inst.jobs.push_back(j);
  }
  PlanOptions o;
  o.inc = false;
  const Schedule plain = plan_fcfs(inst, o);
  o.fcfs_strict = true;
  const Schedule strict = plan_fcfs(inst, o);
  EXPECT_EQ(strict.algo, "fcfs-strict");
  auto first = [](const Schedule& s) {
    std::vector<unsigned> f(3);
    for (const JobPlan& p : s.jobs) f[p.job] = p.first_ts;
    return f;
  };
  for (const Schedule* s : {&plain, &strict}) {
    const Check c = check_schedule(inst, *s);
    ASSERT_TRUE(c.ok) << s->algo << ": " << c.errors.front();
  }
  EXPECT_EQ(first(plain), (std::vector<unsigned>{1, 3, 1}));
  EXPECT_EQ(first(strict), (std::vector<unsigned>{1, 3, 3}));
}

TEST(AoiPlan, MaxWeightAssignmentMatchesBruteForce) {
  Rng rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t rows = 1 + rng.below(4), cols = 1 + rng.below(6);
    std::vector<std::vector<double>> w(rows, std::vector<double>(cols));
    for (auto& r : w)
      for (double& x : r) x = rng.bernoulli(0.3) ? 0.0 : std::floor(rng.uniform() * 20);
    const std::vector<int> m = max_weight_assignment(w);
    ASSERT_EQ(m.size(), rows);
    double got = 0;
    std::set<int> used;
    for (size_t r = 0; r < rows; ++r)
      if (m[r] >= 0) {
        ASSERT_GT(w[r][m[r]], 0) << "an assignment along a non-edge";
        ASSERT_TRUE(used.insert(m[r]).second) << "a column used twice";
        got += w[r][m[r]];
      }
    // Brute force: every injective partial map rows -> columns (cols + 1 choices a row, the last = none).
    double best = 0;
    std::vector<size_t> pick(rows, 0);
    for (;;) {
      std::set<size_t> cs;
      double sum = 0;
      bool ok = true;
      for (size_t r = 0; r < rows && ok; ++r) {
        if (pick[r] == cols) {
          continue;
        }
        ok = cs.insert(pick[r]).second;
        sum += w[r][pick[r]];
      }
      if (ok) best = std::max(best, sum);
      size_t r = 0;
      while (r < rows && ++pick[r] > cols) pick[r++] = 0;
      if (r == rows) break;
    }
    EXPECT_DOUBLE_EQ(got, best) << "trial " << trial;
  }
}

TEST(AoiModel, TheUniformAoiOfNoReconIsACirculant) {
  const Odcn net = make_odcn(8);
  const auto aoi = uniform_aoi(net);
  std::vector<unsigned> ports(8, 0);
  for (const Connection& c : aoi) {
    ports[c.u] += c.count;
    ports[c.v] += c.count;
    const unsigned d = std::min(c.v - c.u, 8 - (c.v - c.u));
    // 24 ports: three full rounds of offsets 1-4 (7 ports), then offset 1 (2) and offset 4 (1).
    EXPECT_EQ(c.count, d == 1 || d == 4 ? 4u : 3u) << c.u << "-" << c.v;
  }
  EXPECT_EQ(aoi.size(), 28u);  // every pair of 8 units
  for (unsigned p : ports) EXPECT_EQ(p, 24u);
}

TEST(AoiModel, GeneratorsFollowSectionVIIC) {
  const Odcn net = make_odcn(64);
  WorkloadOptions w;
  w.dml = DmlJobOptions{};
  w.dml->count = 2000;
  const auto jobs = generate_jobs(net, w, 3);
  ASSERT_EQ(jobs.size(), 2000u);
  std::set<unsigned> sizes;
  for (size_t k = 0; k < jobs.size(); ++k) {
    const Job& j = jobs[k];
    EXPECT_EQ(j.id, k);
    sizes.insert(j.num_workers());
    EXPECT_GE(j.gb_per_worker, 102 * 0.008);
    EXPECT_LE(j.gb_per_worker, 548 * 0.008);
    if (k > 0) {
      EXPECT_GE(j.arrival_s, jobs[k - 1].arrival_s);
    }
    // The cluster has room: every job sits in one unit (§VII-C: localized placement).
    EXPECT_TRUE(j.local_unit().has_value()) << j.name;
  }
  EXPECT_EQ(sizes, (std::set<unsigned>{2, 4, 8, 16}));
  // 20 jobs per 1 s TS: 1999 gaps of mean 0.05 s (the sample mean's sd is 0.05 / sqrt(1999) ~ 2.2 %).
  EXPECT_NEAR(jobs.back().arrival_s / 1999, 0.05, 0.05 * 0.07);
  // Deterministic for a seed.
  const auto again = generate_jobs(net, w, 3);
  for (size_t k = 0; k < jobs.size(); ++k) {
    EXPECT_EQ(again[k].workers, jobs[k].workers);
    EXPECT_EQ(again[k].ps_unit, jobs[k].ps_unit);
    EXPECT_EQ(again[k].arrival_s, jobs[k].arrival_s);
  }
}

TEST(AoiModel, MapReduceJobsComeFromTheCoflowTrace) {
  const Odcn net = make_odcn(8);
  WorkloadOptions w;
  w.mapreduce = MapReduceJobOptions{};
  w.mapreduce->count = 3;
  w.trace_path = kDir + "/data/coflow/FB2010-1Hr-150-0.txt";
  const auto jobs = generate_jobs(net, w, 1);
  ASSERT_EQ(jobs.size(), 3u);
  // Trace lines 2-3: "1 0 1 22 1 65:1.0" and "2 10833 2 104 132 1 140:48.0".
  EXPECT_EQ(jobs[0].name, "coflow 1");
  EXPECT_EQ(jobs[0].num_workers(), 1u);
  EXPECT_DOUBLE_EQ(jobs[0].gb_per_worker, 1.0 * 0.008);
  EXPECT_EQ(jobs[1].name, "coflow 2");
  EXPECT_EQ(jobs[1].num_workers(), 2u);
  EXPECT_DOUBLE_EQ(jobs[1].gb_per_worker, 24.0 * 0.008);
  EXPECT_EQ(jobs[1].kind, JobKind::MapReduce);
}

TEST(AoiModel, PlacementSplitsAJobOnlyWhenNoUnitHoldsIt) {
  Odcn net = make_odcn(3);
  for (Unit& u : net.units) u.worker_slots = 10;
  net.units[1].worker_slots = 6;
  Placer p(net, 1);
  Job a;
  a.name = "a";
  p.place(a, 16);  // no unit holds 16: the emptiest first, unit 0 (10) then unit 2 (6 of 10)
  EXPECT_EQ(a.workers, (std::vector<std::pair<unsigned, unsigned>>{{0, 10}, {2, 6}}));
  Job b;
  b.name = "b";
  p.place(b, 6);  // only unit 1 has 6 free
  EXPECT_EQ(b.workers, (std::vector<std::pair<unsigned, unsigned>>{{1, 6}}));
  Job c;
  c.name = "c";
  EXPECT_THROW(p.place(c, 5), AoiError);  // 4 slots left in all
}

// Variant dml.ps_with_workers: the PS goes in the unit holding most of the
// job's workers among those with a free PS slot, else anywhere free; by
// default it is drawn among all units.
TEST(AoiModel, PsWithWorkersTakesTheUnitOfMostWorkersWhileItHasASlot) {
  auto placed = [](Placer& p, const char* name, unsigned workers) {
    Job j;
    j.name = name;
    j.ps_with_workers = true;
    p.place(j, workers);
    return j;
  };
  // Three units of 10 workers; unit 0 has no PS slot. Under any seed:
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(seed);
    Odcn net = make_odcn(3);
    for (Unit& u : net.units) u.worker_slots = 10, u.ps_slots = 1;
    net.units[0].ps_slots = 0;
    Placer p(net, seed);
    // No unit holds 14: unit 0 (10) and unit 1 (4). Unit 0 has no PS slot,
    // so the PS goes in unit 1, the other unit of its workers (unit 2, the
    // only other with a slot, would be as likely under the default rule).
    const Job a = placed(p, "a", 14);
    EXPECT_EQ(a.workers, (std::vector<std::pair<unsigned, unsigned>>{{0, 10}, {1, 4}}));
    EXPECT_EQ(a.ps_unit, 1u);
    // 6 fit in unit 1 (6 free) or unit 2 (10): the PS beside them while a
    // slot is free there (unit 1's is a's), else in unit 2.
    const Job b = placed(p, "b", 6);
    ASSERT_EQ(b.workers.size(), 1u);
    EXPECT_EQ(b.ps_unit, 2u);
    // Workers still fit (unit 2 or 1), but every PS slot is taken.
    try {
      placed(p, "c", 2);
      ADD_FAILURE() << "c was placed without a PS slot";
    } catch (const AoiError& e) {
      EXPECT_NE(std::string(e.what()).find("every PS slot"), std::string::npos) << e.what();
    }
  }

  // 64 units of 64 PS slots, 500 jobs of 2-16 workers: every job local and
  // with its PS beside it; by default most PS' are elsewhere.
  WorkloadOptions w;
  w.dml = DmlJobOptions{};
  w.dml->count = 500;
  unsigned beside = 0;
  for (const Job& j : generate_jobs(make_odcn(64), w, 3)) beside += j.ps_unit == j.local_unit();
  EXPECT_LT(beside, 50u);
  w.dml->ps_with_workers = true;
  for (const Job& j : generate_jobs(make_odcn(64), w, 3)) {
    ASSERT_TRUE(j.local_unit().has_value()) << j.name;
    EXPECT_EQ(j.ps_unit, *j.local_unit()) << j.name;
  }
}

std::string write_tmp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::string& file, const std::vector<std::string>& sets = {}) {
  try {
    load_scenario(file, sets);
  } catch (const AoiError& e) {
    return e.what();
  }
  return "";
}

TEST(AoiModel, BadScenariosNameFileFieldAndValue) {
  const std::string base = "[net]\nunits = 4\n[dml]\ncount = 10\n";
  const std::string f = write_tmp("aoi_bad.toml", base);
  EXPECT_EQ(error_of(f), "");
  auto has = [&](const std::vector<std::string>& sets, const std::string& want) {
    const std::string e = error_of(f, sets);
    EXPECT_NE(e.find(f), std::string::npos) << e;
    EXPECT_NE(e.find(want), std::string::npos) << e << "\n wanted: " << want;
  };
  has({"net.optical_ports=0"}, "unit 0 optical_ports: must be at least 1 (a unit with zero ports is cut off from the AOI), got 0");
  has({"net.ts_s=0"}, "net.ts_s: must be a positive number, got 0");
  has({"net.ts_s=-1"}, "net.ts_s: must be a positive number, got -1");
  has({"net.units=0"}, "net.units: an ODCN needs at least one unit, got 0");
  has({"net.worker_slots=4", "dml.workers=[17]"}, "17 workers is larger than the cluster (16 worker slots in 4 units)");
  has({"net.reconfig_ms=1000"}, "net.reconfig_ms: must be >= 0 and shorter than the TS (1 s), got 1000 ms");
  has({"net.colour=2"}, "field 'net.colour': unknown key (known in [net]: units, pdp_gbps");
  has({"dml.count=\"ten\""}, "field 'dml.count': expected an integer, got string (value: ten)");
  // A generator the file does not have is not added by --set (it would add jobs unasked).
  has({"mapreduce.trace=\"nope.txt\""},
      "field 'mapreduce.trace': --set would add a [mapreduce] job generator that the file does not have");
  const std::string mr = write_tmp("aoi_bad_mr.toml", "[net]\nunits = 4\n[mapreduce]\ncount = 10\n");
  EXPECT_NE(error_of(mr, {"mapreduce.trace=\"nope.txt\""}).find("field 'mapreduce.trace': 'nope.txt' not found"),
            std::string::npos)
      << error_of(mr, {"mapreduce.trace=\"nope.txt\""});
  const std::string j = write_tmp("aoi_bad_job.toml", "[net]\nunits = 2\n[[job]]\nworkers = [[5, 2]]\nmb_per_worker = 1\n");
  EXPECT_NE(error_of(j).find("job 0 (job[0]) workers: unit 5 does not exist (the ODCN has 2 units)"), std::string::npos)
      << error_of(j);
}

TEST(AoiPlan, AJobThatFitsNowhereIsAnErrorNotAHang) {
  Instance inst = two_units();
  // 2 workers x even δB/1024 (the narrowest step, for jobs too wide for δB) do not fit a 0.01 Gbps switch.
  inst.net.units[0].pdp_gbps = 0.01;
  try {
    plan_tw(inst, PlanOptions{});
    FAIL() << "no error";
  } catch (const AoiError& e) {
    EXPECT_NE(std::string(e.what()).find("no step of 10 Gbps per worker fits these jobs: a"), std::string::npos)
        << e.what();
  }
}

// The Table I scenario (8 units): every planner's schedule passes the
// validator, and the paper's directions hold.
TEST(AoiPlan, TableOneDirections) {
  for (const unsigned count : {40u, 100u}) {
    const Instance inst = load_scenario(kDir + "/scenarios/aoi/table1.toml", {"dml.count=" + std::to_string(count)});
    PlanOptions inc, noinc, norecon;
    noinc.inc = false;
    norecon.no_recon = true;
    const Check tw = check_schedule(inst, plan_tw(inst, inc));
    const Check fcfs = check_schedule(inst, plan_fcfs(inst, inc));
    const Check tw0 = check_schedule(inst, plan_tw(inst, noinc));
    const Check fcfs0 = check_schedule(inst, plan_fcfs(inst, noinc));
    const Check nr = check_schedule(inst, plan_tw(inst, norecon));
    for (const Check* c : {&tw, &fcfs, &tw0, &fcfs0, &nr}) ASSERT_TRUE(c->ok) << c->errors.front();
    EXPECT_EQ(nr.reconfigured, 0u);
    // INC reduces reconfigurations, TW reconfigures fewer connections than FCFS.
    EXPECT_LT(tw.reconfigured, tw0.reconfigured) << count;
    EXPECT_LT(fcfs.reconfigured, fcfs0.reconfigured) << count;
    EXPECT_LT(tw.reconfigured, fcfs.reconfigured) << count;
    EXPECT_LE(tw.ct_bti_s, fcfs.ct_bti_s) << count;
    EXPECT_LE(tw0.ct_bti_s, fcfs0.ct_bti_s) << count;
    EXPECT_LE(tw.ct_bti_s, nr.ct_bti_s) << count;
  }
}

}  // namespace
}  // namespace ina::control::aoi

namespace ina::control::aoi {
namespace {

// Table I under load (all 40 jobs arrive in TS 1, ten times the paper's
// rate): TW is closer to the MILP's CT-BTI than FCFS, as in Table I.
TEST(AoiPlan, TwIsCloserToTheMilpThanFcfs) {
  const Instance inst =
      load_scenario(kDir + "/scenarios/aoi/table1.toml", {"dml.count=40", "dml.jobs_per_ts=200"});
  const Schedule tw = plan_tw(inst, PlanOptions{});
  MilpOptions m;
  m.time_limit_s = 120;
  m.incumbent = &tw;
  const Schedule milp = plan_milp(inst, m);
  const Check cm = check_schedule(inst, milp);
  const Check ct = check_schedule(inst, tw);
  const Check cf = check_schedule(inst, plan_fcfs(inst, PlanOptions{}));
  for (const Check* c : {&cm, &ct, &cf}) ASSERT_TRUE(c->ok) << c->errors.front();
  ASSERT_TRUE(milp.optimal);
  // Measured: MILP 2.000 s, TW 2.212 s (+10.6 %), FCFS 3.000 s (+50 %).
  EXPECT_DOUBLE_EQ(cm.ct_bti_s, 2.0);
  EXPECT_LT(ct.ct_bti_s - cm.ct_bti_s, cf.ct_bti_s - cm.ct_bti_s);
  EXPECT_LT(ct.ct_bti_s, 2.25);
  EXPECT_GE(cf.ct_bti_s, 3.0);
  // And the MILP reconfigures no more connections than TW.
  EXPECT_LE(cm.reconfigured, ct.reconfigured);
}

}  // namespace
}  // namespace ina::control::aoi

// ---- ina plan aoi / aoi-sweep ----------------------------------------------------

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace ina::control::aoi {
namespace {

// three_local() as a scenario file, 30 Gb (3750 MB) per worker.
std::string three_local_file() {
  std::ostringstream text;
  text << "[net]\nunits = 2\ninc_jobs = 1\n";
  for (const auto& [name, w] : std::vector<std::pair<std::string, int>>{{"j0", 2}, {"j1", 8}, {"j2", 2}})
    text << "[[job]]\nname = \"" << name << "\"\nworkers = [[0, " << w
         << "]]\nps_unit = 1\nmb_per_worker = 3750\nupdate_s = 0.5\n";
  return write_tmp("aoi_three_local.toml", text.str());
}

TEST(AoiCli, JsonCarriesTheValidatedSchedule) {
  const std::string f = three_local_file();
  const auto r = ina_test::run_ina("plan aoi --scenario " + f + " --algo tw --json --quiet");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  // As TwGivesIncToTheHeavierInterUnitJobFcfsToTheFirst: INC for j1, 4 connections, CT-BTI 1.5 s.
  EXPECT_EQ(j.at("valid").get<bool>(), true);
  EXPECT_DOUBLE_EQ(j.at("ct_bti_s").get<double>(), 1.5);
  EXPECT_EQ(j.at("reconfigurations").get<int>(), 4);
  ASSERT_EQ(j.at("jobs").size(), 3u);
  EXPECT_EQ(j.at("jobs")[1].at("name").get<std::string>(), "j1");
  EXPECT_EQ(j.at("jobs")[1].at("inc_unit").get<int>(), 0);
  EXPECT_EQ(j.at("jobs")[1].at("segment"), nlohmann::json({0, 4096}));  // one INC job a switch: the whole array
  EXPECT_DOUBLE_EQ(j.at("jobs")[1].at("ict_s").get<double>(), 1.0);
  EXPECT_TRUE(j.at("jobs")[0].at("inc_unit").is_null());
  EXPECT_DOUBLE_EQ(j.at("jobs")[0].at("ict_s").get<double>(), 1.5);
  EXPECT_EQ(j.at("aoi_changes").size(), 1u);
  EXPECT_EQ(j.at("aoi_changes")[0].at("count").get<int>(), 4);

  // FCFS up to the NIC (StepsGoUpToTheNic): 10 connections; stopped at the TS's need: 8.
  const auto fcfs = ina_test::run_ina("plan aoi --scenario " + f + " --algo fcfs --json --quiet");
  ASSERT_EQ(fcfs.status, 0) << fcfs.output;
  EXPECT_EQ(nlohmann::json::parse(fcfs.output).at("reconfigurations").get<int>(), 10);
  const auto need = ina_test::run_ina("plan aoi --scenario " + f + " --algo fcfs --stop-at-need --json --quiet");
  ASSERT_EQ(need.status, 0) << need.output;
  EXPECT_EQ(nlohmann::json::parse(need.output).at("reconfigurations").get<int>(), 8);
  // The MILP finds CT-BTI 1.5 s as well (no schedule ends a non-INC job before 1 + 0.5 s).
  const auto milp = ina_test::run_ina("plan aoi --scenario " + f + " --algo milp --json --quiet");
  ASSERT_EQ(milp.status, 0) << milp.output;
  const auto m = nlohmann::json::parse(milp.output);
  EXPECT_DOUBLE_EQ(m.at("ct_bti_s").get<double>(), 1.5);
  EXPECT_EQ(m.at("optimal").get<bool>(), true);
}

TEST(AoiCli, UserErrorsExitTwoWithTheReason) {
  const auto missing = ina_test::run_ina("plan aoi --scenario /nonexistent/aoi.toml");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.output.find("error: /nonexistent/aoi.toml"), std::string::npos) << missing.output;
  const auto norecon = ina_test::run_ina("plan aoi --scenario " + three_local_file() + " --algo milp --no-recon");
  EXPECT_EQ(norecon.status, 2);
  EXPECT_NE(norecon.output.find("--no-recon: the MILP has no NoRecon variant"), std::string::npos) << norecon.output;
  const auto plain = ina_test::run_ina("plan aoi --scenario " + three_local_file() + " --milp-plain");
  EXPECT_EQ(plain.status, 2);
  EXPECT_NE(plain.output.find("--milp-plain: for --algo milp"), std::string::npos) << plain.output;
  const auto set = ina_test::run_ina("plan aoi --scenario " + three_local_file() + " --set net.ts_s=0");
  EXPECT_EQ(set.status, 2);
  EXPECT_NE(set.output.find("net.ts_s: must be a positive number, got 0"), std::string::npos) << set.output;
}

TEST(AoiCli, SweepAppliesItsKeyAndSeries) {
  const std::string f = write_tmp("aoi_sweep.toml",
                                  "[net]\nunits = 4\n[dml]\ncount = 5\n[sweep]\nkey = \"dml.count\"\n"
                                  "values = [5, 9]\nvariants = [\"inc-tw\", \"noinc-fcfs\"]\n"
                                  "series_key = \"dml.jobs_per_ts\"\nseries_values = [20, 200]\n");
  const auto out = (std::filesystem::temp_directory_path() / "aoi_sweep_out").string();
  const auto r = ina_test::run_ina("plan aoi-sweep " + f + " --out " + out + " --quiet");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto runs = nlohmann::json::parse(std::ifstream(out + "/runs.json"));
  ASSERT_EQ(runs.size(), 8u);  // 2 series x 2 counts x 2 variants
  for (const auto& run : runs) {
    EXPECT_EQ(run.at("jobs").get<double>(), run.at("x").get<double>());
    EXPECT_TRUE(run.at("valid").get<bool>());
  }
  // The point (200 per TS, 9 jobs, INC-TW) is the one `ina plan aoi` computes with the same settings.
  const auto one = ina_test::run_ina("plan aoi --scenario " + f + " --set dml.count=9 --set dml.jobs_per_ts=200 --json --quiet");
  ASSERT_EQ(one.status, 0) << one.output;
  const double ct = nlohmann::json::parse(one.output).at("ct_bti_s").get<double>();
  bool found = false;
  for (const auto& run : runs)
    if (run.at("series") == "200 dml.jobs_per_ts" && run.at("x") == 9 && run.at("variant") == "INC-TW") {
      EXPECT_DOUBLE_EQ(run.at("ct_bti_s").get<double>(), ct);
      found = true;
    }
  EXPECT_TRUE(found);
  EXPECT_TRUE(std::filesystem::exists(out + "/ct_bti_s.png"));
}

}  // namespace
}  // namespace ina::control::aoi

// ---- the review's cases (each failed before its fix) -------------------------------

namespace ina::control::aoi {
namespace {

// A schedule's AOI changes as (at_s, u, v, count).
std::vector<std::tuple<double, unsigned, unsigned, int>> changes_of(const Schedule& s) {
  std::vector<std::tuple<double, unsigned, unsigned, int>> out;
  for (const AoiChange& ch : s.changes) out.emplace_back(ch.at_s, ch.u, ch.v, ch.count);
  return out;
}

TEST(AoiPlan, AWideJobNeverEvictsItsOwnNewConnection) {
  // TS 1: X1 (unit 0 -> PS 2) and X2 (unit 3 -> PS 2) fill unit 2's two ports.
  // TS 2: Y, one worker in unit 0 and one in unit 1, PS 2: flow 0->2 reuses
  // the idle 0-2 connection, flow 1->2 needs a port of unit 2: the idle 2-3
  // connection must go, not 0-2 (which Y's pending step is about to use).
  Instance inst;
  inst.origin = "test";
  inst.net = make_odcn(4);
  inst.net.units[2].optical_ports = 2;
  inst.jobs = {aoi_job(0, {{0, 1}}, 2, 1.0), aoi_job(1, {{3, 1}}, 2, 1.0), aoi_job(2, {{0, 1}, {1, 1}}, 2, 1.0, 0, 1.0)};
  for (const bool tw : {true, false}) {
    const Schedule s = tw ? plan_tw(inst, {.inc = false}) : plan_fcfs(inst, {.inc = false});
    const Check c = check_schedule(inst, s);
    ASSERT_TRUE(c.ok) << c.errors.front();
    EXPECT_EQ(c.jobs[2].last_ts, 2u);
    EXPECT_EQ(c.reconfigured, 3u);  // 0-2 and 2-3 in TS 1, 1-2 in TS 2
    const auto changes = changes_of(s);
    const std::vector<std::tuple<double, unsigned, unsigned, int>> want = {
        {0.0, 0, 2, 1}, {0.0, 2, 3, 1}, {1.0, 1, 2, 1}, {1.0, 2, 3, -1}};
    EXPECT_EQ(changes, want) << (tw ? "tw" : "fcfs");
  }
}

TEST(AoiPlan, AJobTakesASparePortOfItsOwnPair) {
  // Units of 3 ports. TS 1: A (6 workers in unit 0, PS in unit 3) connects
  // 0-3 with all 3 ports (120 Gbps: 20 Gbps a worker, 8 Gb in 0.4 s).
  // TS 3: B has 6 workers in unit 0 and 2 in unit 1, PS in unit 3. Its
  // first step (10 Gbps a worker) needs 60 Gbps on 0-3 (2 ports) and 20 on
  // 1-3, whose port must come from unit 3: the third 0-3 port is spare even
  // counting B's own step on that pair. 8 Gb at 10 Gbps, less Eq. 10's
  // 0.2 Gb, is done in TS 3.
  Instance inst;
  inst.origin = "test";
  inst.net = make_odcn(4);
  for (Unit& u : inst.net.units) u.optical_ports = 3;
  inst.jobs = {aoi_job(0, {{0, 6}}, 3, 8.0, 0.1), aoi_job(1, {{0, 6}, {1, 2}}, 3, 8.0, 0.1, 2.5)};
  for (const bool tw : {true, false}) {
    const Schedule s = tw ? plan_tw(inst, {.inc = false}) : plan_fcfs(inst, {.inc = false});
    const Check c = check_schedule(inst, s);
    ASSERT_TRUE(c.ok) << c.errors.front();
    EXPECT_EQ(c.jobs[0].last_ts, 1u) << (tw ? "tw" : "fcfs");
    EXPECT_EQ(c.jobs[1].first_ts, 3u);
    EXPECT_EQ(c.jobs[1].last_ts, 3u);
    EXPECT_DOUBLE_EQ(c.ct_bti_s, 3.1);
    const auto changes = changes_of(s);
    const std::vector<std::tuple<double, unsigned, unsigned, int>> want = {
        {0.0, 0, 3, 3}, {2.0, 0, 3, -1}, {2.0, 1, 3, 1}};
    EXPECT_EQ(changes, want) << (tw ? "tw" : "fcfs");
  }
}

TEST(AoiPlan, PlannerAndValidatorAgreeWhenAJobIsDone) {
  // What is left of X after TS 1 is between 1e-9 and 1e-6 of its data: the
  // planner must call it done as the validator does (one kDataTol).
  Instance inst;
  inst.origin = "test";
  inst.net = make_odcn(2);
  for (Unit& u : inst.net.units) u.pdp_gbps = 50;
  inst.jobs = {aoi_job(0, {{0, 1}}, 0, 2500 * 0.008), aoi_job(1, {{0, 1}}, 1, 2475.00125 * 0.008),
               aoi_job(2, {{0, 1}}, 1, 4375 * 0.008, 0, 1.0)};
  PlanOptions o;
  o.inc = false;
  o.stop_at_need = true;  // the rates below are what completes each job (the -need variant)
  const Schedule s = plan_fcfs(inst, o);
  const Check c = check_schedule(inst, s);
  ASSERT_TRUE(c.ok) << c.errors.front();
  EXPECT_TRUE(c.errors.empty());
  // TS 1: job 0 (local, 20 Gb) takes 20 Gbps, 2 x 20 of unit 0's 50 Gbps
  // switch; X (job 1) gets the 10 Gbps left on a new connection: 9.8 Gb
  // after ε (Eq. 10: 10 - 0.02 x 10). TS 2: job 2 needs a second connection
  // on the same pair, so X's rise above 10 is lossy; X is sized to send its
  // last 10.00001 Gb, (10.00001 - 0.02 x 10) / 0.98 Gbps, and ends in TS 2
  // with both planner and validator calling it done: no TS 3 for anyone.
  ASSERT_EQ(s.jobs.size(), 3u);
  for (const JobPlan& p : s.jobs)
    if (p.job == 1) {
      EXPECT_EQ(p.first_ts, 1u);
      ASSERT_EQ(p.rate_gbps.size(), 2u);
      EXPECT_DOUBLE_EQ(p.rate_gbps[0], 10);
      EXPECT_NEAR(p.rate_gbps[1], (19.80001 - 9.8 - 0.02 * 10) / 0.98, 1e-9);
    }
  ASSERT_EQ(c.jobs.size(), 3u);
  const unsigned first[] = {1, 1, 2}, last[] = {1, 2, 2};
  for (unsigned j = 0; j < 3; ++j) {
    EXPECT_EQ(c.jobs[j].first_ts, first[j]) << "job " << j;
    EXPECT_EQ(c.jobs[j].last_ts, last[j]) << "job " << j;
    EXPECT_DOUBLE_EQ(c.jobs[j].ict_s, last[j]) << "job " << j;  // a = 0: the end of its last TS
  }
  EXPECT_EQ(c.last_ts, 2u);
  EXPECT_DOUBLE_EQ(c.ct_bti_s, 2.0);
}

TEST(AoiPlan, FcfsTopsUpAJobALaterConnectionMadeLossy) {
  // C runs alone in TS 1; in TS 2, A's step is sized on the existing
  // connection, then B's needs a new one on the same pair: A's rise becomes
  // lossy (ε), and FCFS must top A up so it still ends in TS 2.
  Instance inst;
  inst.origin = "test";
  inst.net = make_odcn(2);
  inst.jobs = {aoi_job(0, {{0, 1}}, 1, 30.0), aoi_job(1, {{0, 1}}, 1, 30.0, 0, 1.0), aoi_job(2, {{0, 1}}, 1, 30.0, 0, 1.0)};
  PlanOptions o;
  o.inc = false;
  for (const bool tw : {true, false}) {
    const Schedule s = tw ? plan_tw(inst, o) : plan_fcfs(inst, o);
    const Check c = check_schedule(inst, s);
    ASSERT_TRUE(c.ok) << c.errors.front();
    EXPECT_DOUBLE_EQ(c.ct_bti_s, 2.0) << (tw ? "tw" : "fcfs");
    for (const CheckedJob& j : c.jobs) EXPECT_EQ(j.last_ts, j.first_ts) << "job " << j.job;
  }
}

TEST(AoiCheck, ChangesHoldFromTheTsTheyStart) {
  Instance inst = two_units();
  inst.jobs[0].arrival_s = 1.0;  // may transfer from TS 2
  Schedule s;
  s.algo = "hand";
  s.inc = false;
  s.jobs.push_back({0, std::nullopt, std::nullopt, 2, {10}});
  s.changes = {{1.0, 0, 1, 1}};  // set up at 1.0 s: there in TS 2
  EXPECT_TRUE(check_schedule(inst, s).ok);
  s.changes = {{2.0, 0, 1, 1}};  // at 2.0 s: only from TS 3
  EXPECT_TRUE(mentions(check_schedule(inst, s), "TS 2: units 0-1 carry 20.000 Gbps over 0 connections"));
  // A free AOI is NoRecon's only.
  s.changes.clear();
  s.preconfigured = {{0, 1, 1}};
  EXPECT_TRUE(mentions(check_schedule(inst, s), "1 preconfigured connections in a schedule that may reconfigure"));
  s.no_recon = true;
  EXPECT_TRUE(check_schedule(inst, s).ok);
}

TEST(AoiCheck, PartialIncOfEq2KeepsThePsAndItsUpdate) {
  // Three units; 3 workers in unit 0, 2 in unit 1, the PS in unit 2; INC in
  // unit 0 (Eq. 2's general case): unit 0 sends one partial aggregate
  // (mult 1), unit 1 its 2 workers' gradients (mult 2). 1 Gb a worker, 10 Gbps.
  Instance inst;
  inst.origin = "test";
  inst.net = make_odcn(3);
  inst.net.inc_requires_local = false;
  inst.jobs = {aoi_job(0, {{0, 3}, {1, 2}}, 2, 1.0, 0.25)};
  Schedule s;
  s.algo = "hand";
  s.changes = {{0.0, 0, 2, 1}, {0.0, 1, 2, 1}};
  s.jobs.push_back({0, 0u, Segment{0, 1024}, 1, {10}});
  const Check c = check_schedule(inst, s);
  ASSERT_TRUE(c.ok) << c.errors.front();
  EXPECT_DOUBLE_EQ(c.aoi_gb, 1.0 + 2.0);
  EXPECT_DOUBLE_EQ(c.jobs[0].ict_s, 1.25);  // not all local: the PS still updates (Eq. 11)
  // Eq. 5 at the PS's unit: 1 + 2 = 3 flows of 10 Gbps arrive; a 25 Gbps switch is too small.
  inst.net.units[2].pdp_gbps = 25;
  EXPECT_TRUE(mentions(check_schedule(inst, s), "unit 2 carries 30.000 Gbps, its switch has 25"));
  // §VI-A (the default) forbids it.
  inst.net.inc_requires_local = true;
  inst.net.units[2].pdp_gbps = 6400;
  EXPECT_TRUE(mentions(check_schedule(inst, s), "its workers are not all there, §VI-A"));
}

TEST(AoiModel, SegmentsGoToTheLowestFreeOne) {
  Instance inst = three_local();
  inst.net.units[0].inc_jobs = 2;
  Schedule s;
  s.jobs.push_back({0, 0u, std::nullopt, 1, {1, 1}});  // TSs 1-2
  s.jobs.push_back({1, 0u, std::nullopt, 1, {1}});     // TS 1
  s.jobs.push_back({2, 0u, std::nullopt, 2, {1}});     // TS 2: segment 1 is free again, 0 is not
  assign_segments(inst, s);
  EXPECT_EQ(s.jobs[0].segment->mem_id, 0u);
  EXPECT_EQ(s.jobs[1].segment->mem_id, 2048u);
  EXPECT_EQ(s.jobs[2].segment->mem_id, 2048u);
  EXPECT_EQ(s.jobs[2].segment->size, 2048u);
  s.jobs.push_back({1, 0u, std::nullopt, 2, {1}});  // a third INC job in TS 2: no segment left
  EXPECT_THROW(assign_segments(inst, s), AoiError);
}

TEST(AoiPlan, NoReconNamesAJobItsAoiCannotCarry) {
  Instance inst;
  inst.origin = "test";
  inst.net = make_odcn(4);
  for (Unit& u : inst.net.units) u.optical_ports = 2;  // offsets +-1 only: 0 and 2 are not connected
  inst.jobs = {aoi_job(0, {{0, 1}}, 2, 1.0)};
  PlanOptions o;
  o.no_recon = true;
  try {
    plan_tw(inst, o);
    FAIL() << "no error";
  } catch (const AoiError& e) {
    EXPECT_NE(std::string(e.what()).find("job 0 needs units 0 and 2 connected"), std::string::npos) << e.what();
  }
}

TEST(AoiCli, SweepValuesMustBeNumbers) {
  const std::string f = write_tmp("aoi_sweep_bad.toml",
                                  "[net]\nunits = 2\n[dml]\ncount = 2\n[sweep]\nkey = \"net.inc_requires_local\"\n"
                                  "values = [true, false]\nvariants = [\"inc-tw\"]\n");
  const auto r = ina_test::run_ina("plan aoi-sweep " + f + " --out /tmp/aoi_sweep_bad --quiet");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("field 'sweep.values': must be numbers (the x axis) (value: true)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ina::control::aoi

namespace ina::control::aoi {
namespace {

// §VI on a schedule: unit 0's INC jobs in their segments through the
// p4inc-aoi data plane, exact at 0 and 1 % loss, nothing left occupied.
TEST(AoiCli, SimulateUnitRunsTheScheduledIncJobsInTheirSegments) {
  const std::string f = write_tmp("aoi_sim_unit.toml",
                                  "[net]\nunits = 2\ninc_jobs = 2\n"
                                  "[[job]]\nworkers = [[0, 2]]\nps_unit = 1\nmb_per_worker = 100\n"
                                  "[[job]]\nworkers = [[0, 4]]\nps_unit = 1\nmb_per_worker = 100\n"
                                  "[[job]]\nworkers = [[0, 8]]\nps_unit = 1\nmb_per_worker = 100\n");
  for (const char* loss : {"0", "0.01"}) {
    const auto r = ina_test::run_ina("plan aoi --scenario " + f + " --json --quiet --simulate-unit 0 --simulate-mb 0.2 " +
                                     "--simulate-loss " + loss);
    ASSERT_EQ(r.status, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    const auto& m = j.at("simulation");
    EXPECT_TRUE(m.at("ok").get<bool>()) << m.at("problems");
    EXPECT_EQ(m.at("ts").get<int>(), 1);
    EXPECT_EQ(m.at("occupied_after").get<int>(), 0);
    EXPECT_EQ(m.at("outside_segment").get<int>(), 0);
    EXPECT_EQ(m.at("packets_leaked").get<int>(), 0);
    // TW's matching gave the two slots to the 8- and 4-worker jobs (the most
    // inter-unit traffic removed); both start in TS 1, so assign_segments
    // hands out <0, 2048> and <2048, 2048> in job order.
    ASSERT_EQ(m.at("jobs").size(), 2u);
    std::map<int, nlohmann::json> seg;
    for (const auto& x : m.at("jobs")) {
      seg[x.at("job").get<int>()] = x.at("segment");
      EXPECT_EQ(x.at("mismatches").get<int>(), 0);
      EXPECT_EQ(x.at("values_checked").get<int>(), 50000 * (x.at("job").get<int>() == 2 ? 8 : 4));
    }
    EXPECT_EQ(seg.at(1), nlohmann::json({0, 2048}));
    EXPECT_EQ(seg.at(2), nlohmann::json({2048, 2048}));
  }
  const auto none = ina_test::run_ina("plan aoi --scenario " + f + " --no-inc --simulate-unit 0");
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.output.find("the schedule gives no job INC in unit 0"), std::string::npos) << none.output;
}

// A scenario's [dml] ps_with_workers reaches every generated job; a value
// that is not a boolean is named.
TEST(AoiModel, ScenarioReadsPsWithWorkers) {
  const Instance inst =
      load_scenario(write_tmp("aoi_ps_with.toml", "[net]\nunits = 4\n[dml]\ncount = 10\nps_with_workers = true\n"));
  ASSERT_EQ(inst.jobs.size(), 10u);
  for (const Job& j : inst.jobs) {
    EXPECT_TRUE(j.ps_with_workers) << j.name;
    ASSERT_TRUE(j.local_unit().has_value()) << j.name;
    EXPECT_EQ(j.ps_unit, *j.local_unit()) << j.name;
  }
  const std::string e = error_of(write_tmp("aoi_ps_with_bad.toml", "[net]\nunits = 4\n[dml]\ncount = 10\nps_with_workers = 2\n"));
  EXPECT_NE(e.find("ps_with_workers"), std::string::npos) << e;
}

}  // namespace
}  // namespace ina::control::aoi
