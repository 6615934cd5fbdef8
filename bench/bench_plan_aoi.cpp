// `ina bench plan`, P4INC-AOI part: TW (Algorithms 1-3) and FCFS on §VII-C's
// largest settings, 1000 and 1400 DML jobs on 64 units (the target:
// TW on 1000 jobs x 64 units under 10 s on one core; the paper's Python took
// about 2 s for 100 jobs). FCFS is the baseline measured in the same run.
// Job generation is outside the timed loop; the validator is not timed.
#include <benchmark/benchmark.h>

#include "control/aoi.hpp"

namespace {

using namespace ina::control::aoi;

Instance fig8_instance(unsigned jobs) {
  Instance inst;
  inst.origin = "bench";
  inst.net = make_odcn(64);
  WorkloadOptions w;
  w.dml = DmlJobOptions{};
  w.dml->count = jobs;
  inst.jobs = generate_jobs(inst.net, w, 1);
  return inst;
}

void BM_AoiPlan(benchmark::State& state, bool tw, bool inc) {
  const Instance inst = fig8_instance(static_cast<unsigned>(state.range(0)));
  PlanOptions o;
  o.inc = inc;
  Schedule s;
  for (auto _ : state) s = tw ? plan_tw(inst, o) : plan_fcfs(inst, o);
  const Check c = check_schedule(inst, s);
  state.counters["ct_bti_s"] = c.ct_bti_s;
  state.counters["reconfigured"] = c.reconfigured;
  state.counters["valid"] = c.ok;
}

}  // namespace

BENCHMARK_CAPTURE(BM_AoiPlan, inc_tw, true, true)
    ->Name("plan/aoi_inc_tw_64_units")->Arg(1000)->Arg(1400)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_AoiPlan, inc_fcfs, false, true)
    ->Name("plan/aoi_inc_fcfs_64_units")->Arg(1000)->Arg(1400)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_AoiPlan, noinc_tw, true, false)
    ->Name("plan/aoi_noinc_tw_64_units")->Arg(1000)->Arg(1400)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_AoiPlan, noinc_fcfs, false, false)
    ->Name("plan/aoi_noinc_fcfs_64_units")->Arg(1000)->Arg(1400)->Unit(benchmark::kMillisecond)->UseRealTime();
