// A routing plan run in the packet-level simulator (experiment/grid_sim):
// the data plane must deliver exact results and achieve what the planner
// says is feasible for the chosen aggregation nodes.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "experiment/grid_sim.hpp"

using namespace ina;

namespace {

struct Loaded {
  topo::TopologyFile tf;
  topo::Job job;
};

Loaded load(const char* name) {
  Loaded l{topo::load_topology_file(std::string(INA_SOURCE_DIR) + "/scenarios/grid/" + name), {}};
  l.job.ps = l.tf.graph.at(l.tf.job->ps, "ps");
  for (const auto& w : l.tf.job->workers) l.job.workers.push_back(l.tf.graph.at(w, "worker"));
  return l;
}

}  // namespace

TEST(GridSim, AchievesTheFeasibleRateOfEveryScheme) {
  for (const char* file : {"fig1.json", "testbed.json"}) {
    auto l = load(file);
    control::grid::Instance inst(l.tf.graph, l.job);
    for (const auto& scheme : control::grid::scheme_names()) {
      SCOPED_TRACE(std::string(file) + " " + scheme);
      const auto plan = control::grid::plan_scheme(inst, scheme, 1);
      const auto feasible = control::grid::feasible_rates(inst, plan);
      exp::GridSimSettings s;
      s.gradient_mb = 1;
      const auto r = exp::simulate_plan(l.tf.graph, l.job, plan, s);
      ASSERT_TRUE(r.ok) << r.problems;
      EXPECT_EQ(r.verify_errors, 0u);
      // Never faster than planned (pacing). The fixed-path baselines, paced at feasible rates on a lossless
      // network, must deliver them: at least 95 % (measured 0.98 to 1.08).
      // Catches pacing, rate-sync or window bugs that throttle a worker.
      // GRID's plans fill links whose other direction carries the result
      // multicast, which the planner ignores: a floor of 60 % there
      // (measured 0.65 to 0.98), instead of the former 20 %.
      EXPECT_LE(r.achieved_min_gbps, plan.lambda_gbps * 1.01);
      const bool grid_plan = scheme.rfind("grid", 0) == 0;
      EXPECT_GT(r.achieved_min_gbps, (grid_plan ? 0.6 : 0.95) * feasible.lambda_gbps);
    }
  }
}

TEST(GridSim, ExactUnderOnePercentLoss) {
  auto l = load("testbed.json");
  control::grid::Instance inst(l.tf.graph, l.job);
  for (const char* scheme : {"grid", "atp", "switchml", "geryon"}) {
    SCOPED_TRACE(scheme);
    exp::GridSimSettings s;
    s.gradient_mb = 0.1;
    s.loss = 0.01;
    s.memory_mb = 0.02;  // 80 units per switch: collisions under loss and reordering of completions
    const auto r = exp::simulate_plan(l.tf.graph, l.job, control::grid::plan_scheme(inst, scheme, 2), s);
    EXPECT_TRUE(r.ok) << r.problems;
    EXPECT_GT(r.retransmits, 0u);
  }
}

TEST(GridSim, PlanGridSimulateReportsAchievedRates) {
  const auto r = ina_test::run_ina("plan grid --topology " + std::string(INA_SOURCE_DIR) +
                                   "/scenarios/grid/fig1.json --scheme grid-exact --simulate 0.25 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_TRUE(j.contains("simulated")) << r.output;
  EXPECT_TRUE(j["simulated"]["ok"].get<bool>());
  EXPECT_GT(j["simulated"]["achieved_min_gbps"].get<double>(), 0.9 * 3.0);
  EXPECT_LE(j["simulated"]["achieved_min_gbps"].get<double>(), 3.0 * 1.01);
}
