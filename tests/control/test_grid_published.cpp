// GRID: the authors' published planner
// ("grid-published": GRID.py, commit 36d154a) on instances solved by hand,
// and the result multicast option (GridModel::multicast_results) on a tiny
// topology whose loads and optimum are computed by hand below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "control/grid.hpp"
#include "topo/graph.hpp"

namespace grid = ina::control::grid;
using ina::topo::ArcId;
using ina::topo::Graph;
using ina::topo::NodeId;

namespace {

// PS and W3 on the non-programmable switch R; W1 on S1, W2 on S2
// (programmable, C = 50); S1 and S2 hang off R; every link 10 Gbps, so
// B_alpha = T = 10. Aggregation node indices: S1 = 0, S2 = 1, PS = 2.
struct ThreeWorkers {
  Graph g;
  ina::topo::Job job;
  ThreeWorkers() {
    const NodeId r = g.add_switch("R");
    const NodeId s1 = g.add_switch("S1", true, 50), s2 = g.add_switch("S2", true, 50);
    const NodeId ps = g.add_host("PS"), w1 = g.add_host("W1"), w2 = g.add_host("W2"), w3 = g.add_host("W3");
    g.add_link(ps, r, 10);
    g.add_link(s1, r, 10);
    g.add_link(s2, r, 10);
    g.add_link(w1, s1, 10);
    g.add_link(w2, s2, 10);
    g.add_link(w3, r, 10);
    job.ps = ps;
    job.workers = {w1, w2, w3};
  }
};

// A point of the published LP, by hand (T = 10; r <= x T holds everywhere):
//          x: S1    S2    PS        r: S1  S2  PS
//   W1      0.5   0.25  0.25           4   2   1
//   W2      0     1     0              0   6   0
//   W3      0.25  0.25  0.5            1   2   3
// Published rounding: rate = r / x at the chosen node, so
//   W1: S1 8, S2 8, PS 4;  W2: S2 6;  W3: S1 4, S2 8, PS 6;
// a chosen switch sends max_n r_n^s / sum_n x_n^s:
//   S1: 4 / 0.75 = 16/3;  S2: 6 / 1.5 = 4.
grid::LpSolution hand_solution() {
  grid::LpSolution lp;
  lp.lambda = 6;
  lp.x = {{0.5, 0.25, 0.25}, {0, 1, 0}, {0.25, 0.25, 0.5}};
  lp.r = {{4, 2, 1}, {0, 6, 0}, {1, 2, 3}};
  lp.y = {4, 6};
  return lp;
}

constexpr double kRate[3][3] = {{8, 8, 4}, {0, 6, 0}, {4, 8, 6}};  // [worker][node], hand-computed r / x
constexpr double kYhat[2] = {16.0 / 3.0, 4};                        // hand-computed max r / sum x

}  // namespace

TEST(GridPublished, RoundingPicksByXSendsRoverXAndSwitchesSendMaxROverSumX) {
  ThreeWorkers t;
  grid::GridModel m;
  m.enforce_links = false;
  const grid::Instance inst(t.g, t.job, m);
  ASSERT_EQ(inst.num_switches(), 2u);
  ASSERT_EQ(inst.node_name(0), "S1");
  ASSERT_EQ(inst.node_name(1), "S2");
  ASSERT_DOUBLE_EQ(inst.max_rate(), 10);
  const grid::LpSolution lp = hand_solution();

  constexpr int kRuns = 4000;
  int count[3][3] = {};
  int alg1_w1_s1 = 0;
  for (int seed = 1; seed <= kRuns; ++seed) {
    const grid::Plan p = grid::round_gria_published(inst, lp, static_cast<uint64_t>(seed));
    ASSERT_EQ(p.scheme, "grid-published");
    EXPECT_TRUE(p.rounded);
    bool chosen[2] = {false, false};
    double ps_load = 0;
    for (size_t n = 0; n < 3; ++n) {
      const size_t a = *inst.index_of(p.workers[n].node);
      ++count[n][a];
      EXPECT_NEAR(p.workers[n].rate_gbps, kRate[n][a], 1e-12) << "worker " << n << " at node " << a;
      if (a == 2) ps_load += kRate[n][a];
      else chosen[a] = true;
    }
    for (size_t s = 0; s < 2; ++s) {
      EXPECT_NEAR(p.switches[s].y_gbps, chosen[s] ? kYhat[s] : 0.0, 1e-12) << "switch " << s;
      if (chosen[s]) ps_load += kYhat[s];
    }
    EXPECT_NEAR(p.ps_load_gbps, ps_load, 1e-12);
    // Algorithm 1 on the same solution picks S1 for W1 with r / sum r = 4/7.
    const grid::Plan a1 = grid::round_gria(inst, lp, static_cast<uint64_t>(seed));
    if (a1.workers[0].node == inst.node(0)) ++alg1_w1_s1;
    EXPECT_DOUBLE_EQ(a1.workers[0].rate_gbps, 7);  // sum_s r~ (Algorithm 1, line 8)
  }
  // Node frequencies match x (within 5 standard deviations of a binomial).
  auto within = [&](int c, double prob) {
    const double sd = std::sqrt(kRuns * prob * (1 - prob));
    return std::abs(c - kRuns * prob) <= 5 * sd + 1e-9;
  };
  for (size_t n = 0; n < 3; ++n)
    for (size_t a = 0; a < 3; ++a)
      EXPECT_TRUE(within(count[n][a], lp.x[n][a])) << "worker " << n << " node " << a << ": " << count[n][a];
  EXPECT_EQ(count[1][1], kRuns);  // x = 1
  // The two roundings differ: 0.5 (published) vs 4/7 (Algorithm 1) for W1 -> S1.
  EXPECT_TRUE(within(alg1_w1_s1, 4.0 / 7.0)) << alg1_w1_s1;
  EXPECT_FALSE(within(alg1_w1_s1, 0.5)) << alg1_w1_s1;
}

// No programmable switch, 2 workers under R with the PS, B_alpha = 10, and
// T = 6. The paper's row r_1 + r_2 <= 10 gives lambda = 5; the published row
// T (x_1 + x_2) <= 10 with x_n^alpha = 1 (the only node) reads 12 <= 10:
// infeasible. With T = 4 it reads 8 <= 10 and lambda = T = 4.
TEST(GridPublished, PsRowCountsXTimesT) {
  Graph g;
  const NodeId r = g.add_switch("R");
  const NodeId ps = g.add_host("PS"), w1 = g.add_host("W1"), w2 = g.add_host("W2");
  g.add_link(ps, r, 10);
  g.add_link(w1, r, 10);
  g.add_link(w2, r, 10);
  ina::topo::Job job{ps, {w1, w2}};
  grid::GridModel m;
  m.max_rate_gbps = 6;
  const grid::Instance inst(g, job, m);
  EXPECT_NEAR(grid::solve_gria_lp(inst).lambda, 5, 1e-9);
  grid::LpOptions pub;
  pub.published = true;
  try {
    grid::solve_gria_lp(inst, pub);
    ADD_FAILURE() << "the published LP should be infeasible";
  } catch (const grid::PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("PS row"), std::string::npos) << e.what();
  }
  m.max_rate_gbps = 4;
  const grid::Instance inst4(g, job, m);
  const grid::LpSolution s = grid::solve_gria_lp(inst4, pub);
  EXPECT_NEAR(s.lambda, 4, 1e-9);
  EXPECT_NEAR(s.x[0][0], 1, 1e-9);
  EXPECT_NEAR(s.x[1][0], 1, 1e-9);
}

// With a programmable switch every worker can put its spare x there at no
// cost, so the published LP has the paper LP's optimum: on Fig. 1, lambda = 3
// with links and 4.08 without (docs/results/grid.md). Its solution satisfies
// the published rows.
TEST(GridPublished, Fig1LpOptimumEqualsThePapersAndSatisfiesThePublishedRows) {
  const std::string fig1 = std::string(INA_SOURCE_DIR) + "/scenarios/grid/fig1.json";
  const auto file = ina::topo::load_topology_file(fig1);
  ASSERT_TRUE(file.job);
  const auto job = ina::topo::resolve_job(file.graph, *file.job, fig1);
  for (const bool links : {true, false}) {
    grid::GridModel m;
    m.enforce_links = links;
    const grid::Instance inst(file.graph, job, m);
    grid::LpOptions pub;
    pub.published = true;
    const grid::LpSolution s = grid::solve_gria_lp(inst, pub);
    EXPECT_NEAR(s.lambda, grid::solve_gria_lp(inst).lambda, 1e-7) << "links " << links;
    if (links) {
      EXPECT_NEAR(s.lambda, 3, 1e-7);
    }
    const double T = inst.max_rate();
    double row = 0;
    for (size_t n = 0; n < inst.num_workers(); ++n) {
      double sum_x = 0;
      for (size_t a = 0; a < inst.num_nodes(); ++a) {
        sum_x += s.x[n][a];
        EXPECT_LE(s.r[n][a], s.x[n][a] * T + 1e-7);
      }
      EXPECT_NEAR(sum_x, 1, 1e-7);
      row += T * s.x[n][inst.ps_index()];
    }
    for (const double y : s.y) {
      row += y;
      EXPECT_LE(y, T + 1e-9);
    }
    EXPECT_LE(row, inst.ps_ingress() + 1e-7);
    const grid::Plan p = grid::plan_scheme(inst, "grid-published", 1);
    EXPECT_TRUE(p.rounded);
    EXPECT_NEAR(*p.lp_lambda_gbps, s.lambda, 1e-7);
  }
}

// ---- Result multicast  ----------------------------------------------

namespace {

// PS - S1 - S2 in a line; W1 on S1, W2 on S2; S1 not programmable, S2
// programmable (C = 100); every link 10 Gbps, so B_alpha = T = 10. The
// result tree is PS->S1, S1->W1, S1->S2, S2->W2.
struct Line {
  Graph g;
  ina::topo::Job job;
  NodeId ps, s1, s2, w1, w2;
  Line() {
    s1 = g.add_switch("S1");
    s2 = g.add_switch("S2", true, 100);
    ps = g.add_host("PS");
    w1 = g.add_host("W1");
    w2 = g.add_host("W2");
    g.add_link(ps, s1, 10);
    g.add_link(s1, s2, 10);
    g.add_link(w1, s1, 10);
    g.add_link(w2, s2, 10);
    job.ps = ps;
    job.workers = {w1, w2};
  }
  ArcId arc(NodeId a, NodeId b) const {
    for (const auto& e : g.neighbors(a))
      if (e.peer == b) return e.arc;
    throw std::logic_error("no such arc");
  }
};

}  // namespace

TEST(GridMulticast, TreeArcsCarryLambdaAndTheSharedArcHalvesThePinnedRate) {
  Line t;
  grid::GridModel off, on;
  on.multicast_results = true;
  const grid::Instance a(t.g, t.job, off), b(t.g, t.job, on);
  const std::vector<ArcId> tree = {t.arc(t.ps, t.s1), t.arc(t.s1, t.w1), t.arc(t.s1, t.s2), t.arc(t.s2, t.w2)};
  std::vector<ArcId> sorted = tree;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(b.multicast_tree(), sorted);

  // Both workers pinned to S2. Without results: W1's gradient fills S1->S2
  // at 10, y = 10 fills S2->S1->PS: lambda = 10. With them, S1->S2 carries
  // W1's gradient and the results: 2 lambda <= 10, lambda = 5.
  const grid::Plan p0 = grid::pinned_rates(a, "pinned", {0, 0});
  const grid::Plan p1 = grid::pinned_rates(b, "pinned", {0, 0});
  EXPECT_NEAR(p0.lambda_gbps, 10, 1e-9);
  EXPECT_NEAR(p1.lambda_gbps, 5, 1e-9);
  EXPECT_NEAR(p0.arc_load_gbps[t.arc(t.s1, t.s2)], 10, 1e-9);  // gradient only
  EXPECT_NEAR(p1.arc_load_gbps[t.arc(t.s1, t.s2)], 10, 1e-9);  // gradient 5 + results 5
  EXPECT_NEAR(p0.arc_load_gbps[t.arc(t.s2, t.w2)], 0, 1e-12);
  EXPECT_NEAR(p1.arc_load_gbps[t.arc(t.s2, t.w2)], 5, 1e-9);
  EXPECT_TRUE(p1.violations.empty());

  // The same allocation evaluated with and without the option: exactly
  // lambda more on each tree arc, nothing elsewhere.
  grid::Allocation alloc;
  alloc.flows = {{0, 1, 3, *a.route(0, 1)}, {1, 0, 4, *a.route(1, 0)}};  // W1 -> PS at 3, W2 -> S2 at 4
  alloc.y = {4};
  const grid::Plan e0 = grid::evaluate(a, "hand", alloc), e1 = grid::evaluate(b, "hand", alloc);
  ASSERT_NEAR(e0.lambda_gbps, 3, 1e-12);
  for (ArcId arc = 0; arc < t.g.num_arcs(); ++arc) {
    const bool in_tree = std::find(tree.begin(), tree.end(), arc) != tree.end();
    EXPECT_NEAR(e1.arc_load_gbps[arc] - e0.arc_load_gbps[arc], in_tree ? 3.0 : 0.0, 1e-12) << t.g.arc_name(arc);
  }
}

// The LP on Line: without results lambda = 10 (W1 via S1->S2 to S2). With
// them, W1 splits b to S2 and a to the PS: b + lambda <= 10 (S1->S2),
// a + y <= 10 (S1->PS and the PS row) with y = lambda, a + b >= lambda:
// lambda <= 2 (10 - lambda), so lambda = 20/3.
TEST(GridMulticast, LpOptimumDropsToTheHandComputedTwentyThirds) {
  Line t;
  grid::GridModel off, on;
  on.multicast_results = true;
  EXPECT_NEAR(grid::solve_gria_lp(grid::Instance(t.g, t.job, off)).lambda, 10, 1e-7);
  EXPECT_NEAR(grid::solve_gria_lp(grid::Instance(t.g, t.job, on)).lambda, 20.0 / 3.0, 1e-7);
  grid::LpOptions lit;
  lit.literal = true;
  EXPECT_NEAR(grid::solve_gria_lp(grid::Instance(t.g, t.job, on), lit).lambda, 20.0 / 3.0, 1e-7);
  // The integral optimum (W1 at the PS or at S2): 5 either way.
  EXPECT_NEAR(grid::plan_scheme(grid::Instance(t.g, t.job, on), "grid-exact", 1).lambda_gbps, 5, 1e-7);
}
