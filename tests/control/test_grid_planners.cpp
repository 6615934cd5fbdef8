// GRID's planner table (control/grid_planners.cpp): the names, their order,
// the help text `ina plan grid --scheme` shows, and that each name runs its
// own planner with the options it uses.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "control/grid.hpp"
#include "topo/graph.hpp"

using namespace ina;
namespace grid = ina::control::grid;

namespace {

const std::string kPlannersFig1 = std::string(INA_SOURCE_DIR) + "/scenarios/grid/fig1.json";

std::vector<topo::NodeId> nodes_of(const grid::Plan& p) {
  std::vector<topo::NodeId> out;
  for (const auto& w : p.workers) out.push_back(w.node);
  return out;
}

}  // namespace

TEST(GridPlanners, NamesAreTheTableInItsOrder) {
  const std::vector<std::string> want = {"grid", "atp", "switchml", "geryon", "grid-exact", "grid-published"};
  EXPECT_EQ(grid::scheme_names(), want);
  ASSERT_EQ(grid::planners().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(grid::planners()[i].name, want[i]);
    EXPECT_EQ(grid::find_planner(want[i]), &grid::planners()[i]);
  }
  EXPECT_EQ(grid::find_planner("ecmp"), nullptr);
  EXPECT_EQ(grid::find_planner("GRID"), nullptr);  // names are exact
}

TEST(GridPlanners, HelpNamesEveryPlannerWithItsDescription) {
  EXPECT_EQ(grid::planner_help(),
            "grid (R-GRIA), atp, switchml, geryon, grid-exact (Eq. (1) solved by CBC; small instances), or "
            "grid-published (the authors' published planner: PS row with x, rounding by x, rates r/x)");
}

TEST(GridPlanners, UnknownNameListsTheTable) {
  const auto file = topo::load_topology_file(kPlannersFig1);
  ASSERT_TRUE(file.job);
  const grid::Instance inst(file.graph, topo::resolve_job(file.graph, *file.job, kPlannersFig1));
  try {
    grid::plan_scheme(inst, "ecmp", 1);
    FAIL() << "no PlanError";
  } catch (const grid::PlanError& e) {
    EXPECT_STREQ(e.what(), "unknown scheme 'ecmp' (schemes: grid, atp, switchml, geryon, grid-exact, grid-published)");
  }
}

// Fig. 1's minimum rates (as GridFig1 checks them planner by planner): each
// name reaches its own planner, and the seed and node limit reach the planners
// that use them.
TEST(GridPlanners, EachNameRunsItsPlannerWithItsOptions) {
  const auto file = topo::load_topology_file(kPlannersFig1);
  ASSERT_TRUE(file.job);
  const grid::Instance inst(file.graph, topo::resolve_job(file.graph, *file.job, kPlannersFig1));
  const std::vector<std::pair<std::string, double>> lambda = {
      {"geryon", 1.0}, {"atp", 2.4375}, {"switchml", 2.25}, {"grid", 3.0}, {"grid-exact", 3.0}};
  for (const auto& [name, gbps] : lambda) {
    const auto p = grid::plan_scheme(inst, name, 1);
    EXPECT_EQ(p.scheme, name);
    EXPECT_NEAR(p.lambda_gbps, gbps, 1e-9) << name;
  }
  std::set<std::vector<topo::NodeId>> published;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const auto p = grid::plan_scheme(inst, "grid-published", seed);
    EXPECT_EQ(p.scheme, "grid-published");
    EXPECT_EQ(nodes_of(p), nodes_of(grid::plan_grid_published(inst, seed))) << seed;
    EXPECT_EQ(p.lambda_gbps, grid::plan_grid_published(inst, seed).lambda_gbps) << seed;
    published.insert(nodes_of(p));
  }
  EXPECT_GT(published.size(), 1u);  // the seed reaches the rounding
  const auto exact = grid::plan_scheme(inst, "grid-exact", 1, 1);
  const auto direct = grid::plan_grid_exact(inst, 1);
  EXPECT_EQ(nodes_of(exact), nodes_of(direct));
  EXPECT_EQ(exact.lambda_bound_gbps, direct.lambda_bound_gbps);
}
