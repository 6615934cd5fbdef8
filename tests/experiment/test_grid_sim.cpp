// A routing plan run in the packet-level simulator (experiment/grid_sim):
// the data plane must deliver exact results and achieve what the planner
// says is feasible for the chosen aggregation nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "experiment/grid_sim.hpp"
#include "sim/engine.hpp"

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
      if (plan.lambda_gbps <= 0) {
        // Only the published rounding plans a zero rate (a worker drawn, with
        // probability x~, at a node where its r~ is 0: rate r~ / x~ = 0);
        // the simulator cannot pace at 0 (0 means unpaced there).
        EXPECT_EQ(scheme, "grid-published");
        continue;
      }
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

// The planner's paths are the simulator's: every gradient packet from worker
// n to its aggregation node a visits exactly the nodes of Instance::route(n,
// a), and every partial aggregate from switch s to the PS those of
// Instance::uplink(s) (both engines break equal-cost ties with ecmp_index).
// On a k = 4 fat-tree with programmable edge switches, the PS h15 in pod 3 and
// workers h0..h7 in pods 0 and 1, SwitchML aggregates at edge0..edge3, whose
// partials cross the core to the PS: 8 worker flows and 4 switch -> PS flows,
// the latter with 4 equal-cost paths each.
TEST(GridSim, PacketsTakeThePlannersPaths) {
  topo::Graph g = topo::fat_tree(4, 2);
  topo::InaDeployment d;
  d.min_gbps = d.max_gbps = 3200;
  topo::deploy_ina(g, d, 1);
  topo::Job job;
  job.ps = g.at("h15", "ps");
  for (int i = 0; i < 8; ++i) job.workers.push_back(g.at(fmt::format("h{}", i), "worker"));
  const control::grid::Instance inst(g, job);
  for (const char* scheme : {"switchml", "atp", "grid"}) {
    SCOPED_TRACE(scheme);
    const auto plan = control::grid::plan_scheme(inst, scheme, 1);
    std::vector<sim::TraceRecord> trace;
    exp::GridSimSettings s;
    s.gradient_mb = 0.25;
    s.trace = &trace;
    const auto r = exp::simulate_plan(g, job, plan, s);
    ASSERT_TRUE(r.ok) << r.problems;
    // Nodes each gradient flow (src, dst) visited, and the planned ones.
    std::map<std::pair<NodeId, NodeId>, std::set<topo::NodeId>> seen, want;
    for (const auto& t : trace)
      if (!t.timer && t.type == PktType::Data && t.dst != kMulticast) seen[{t.src, t.dst}].insert(t.node);
    auto plan_path = [&](NodeId src, NodeId dst, const std::vector<topo::ArcId>& arcs) {
      for (const topo::ArcId a : arcs) want[{src, dst}].insert(g.arc_to(a));
    };
    std::set<topo::NodeId> aggregating;
    for (size_t n = 0; n < plan.workers.size(); ++n) {
      const auto& wp = plan.workers[n];
      const size_t a = *inst.index_of(wp.node);
      plan_path(static_cast<NodeId>(wp.worker), static_cast<NodeId>(wp.node), *inst.route(n, a));
      if (a != inst.ps_index()) aggregating.insert(wp.node);
    }
    for (const topo::NodeId sw : aggregating)
      plan_path(static_cast<NodeId>(sw), static_cast<NodeId>(job.ps), inst.uplink(*inst.index_of(sw)));
    EXPECT_EQ(seen, want);
    if (std::string(scheme) == "switchml") {
      EXPECT_EQ(want.size(), 12u);
      int via_core = 0;
      for (const auto& [flow, nodes] : want)
        via_core += std::any_of(nodes.begin(), nodes.end(), [&](topo::NodeId v) { return g.node(v).name.starts_with("core"); });
      EXPECT_EQ(via_core, 4);
    }
  }
}
