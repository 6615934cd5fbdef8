// `ina bench plan`: control-plane planning time.
//  GRID (R-GRIA: routes, GRIA LP relaxation with CLP, randomized rounding) on
//  the GRID paper's leaf-spine (30 spines, 30 leaves, 500 servers, 100 Gbps)
//  with 100 workers drawn at random and the PS on h499; programmable switches
//  per the paper's scenario (a) (the 30 leaves) and (b) (20 % of all
//  switches), capacities U(100 Gbps, 3.2 Tbps). Target: under 1 s.
//  The baselines on the same instance, for scale.
#include <benchmark/benchmark.h>

#include <string>

#include "control/grid.hpp"
#include "topo/graph.hpp"

namespace {

using namespace ina;
namespace grid = control::grid;

struct LeafSpineCase {
  topo::Graph g;
  topo::Job job;
};

LeafSpineCase leaf_spine_case(const char* programmable, int workers) {
  LeafSpineCase c{topo::leaf_spine_paper(), {}};
  topo::InaDeployment d;
  topo::parse_ina_where(programmable, d);
  topo::deploy_ina(c.g, d, 1);
  c.job.ps = c.g.at("h499", "bench");
  c.job.workers = topo::place_workers(c.g, c.job.ps, workers, topo::Placement::Random, 1);
  return c;
}

void BM_PlanLeafSpine(benchmark::State& state, const char* programmable, const char* scheme) {
  const LeafSpineCase c = leaf_spine_case(programmable, static_cast<int>(state.range(0)));
  double lambda = 0;
  for (auto _ : state) {
    const grid::Instance inst(c.g, c.job);  // routes are part of planning
    const grid::Plan p = grid::plan_scheme(inst, scheme, 1);
    lambda = p.lambda_gbps;  // (the plan allocates and cannot be optimized away)
  }
  state.counters["lambda_gbps"] = lambda;
}

void BM_GriaLpSize(benchmark::State& state) {
  const LeafSpineCase c = leaf_spine_case("tor", static_cast<int>(state.range(0)));
  const grid::Instance inst(c.g, c.job);
  grid::LpSolution lp;
  for (auto _ : state) lp = grid::solve_gria_lp(inst);
  state.counters["rows"] = lp.rows;
  state.counters["columns"] = lp.columns;
  state.counters["simplex_iterations"] = lp.iterations;
}

}  // namespace

BENCHMARK_CAPTURE(BM_PlanLeafSpine, grid_tor, "tor", "grid")
    ->Name("plan/grid_leaf_spine_500_tor")->Arg(100)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_PlanLeafSpine, grid_random, "random:0.2", "grid")
    ->Name("plan/grid_leaf_spine_500_random20")->Arg(100)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GriaLpSize)->Name("plan/gria_lp_leaf_spine_500_tor")->Arg(100)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_PlanLeafSpine, atp, "tor", "atp")
    ->Name("plan/atp_leaf_spine_500_tor")->Arg(100)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_PlanLeafSpine, switchml, "tor", "switchml")
    ->Name("plan/switchml_leaf_spine_500_tor")->Arg(100)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_PlanLeafSpine, geryon, "tor", "geryon")
    ->Name("plan/geryon_leaf_spine_500_tor")->Arg(100)->Unit(benchmark::kMillisecond)->UseRealTime();
