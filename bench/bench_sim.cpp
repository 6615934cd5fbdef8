// `ina bench sim`: simulator speed, in simulated link hops per second (one
// packet crossing one link) and events per second, on one core.
//  (a) INA star, 16 and 64 hosts, every host streaming 306 B packets at
//      100 Gbps line rate for 1 ms of simulated time, the switch aggregating;
//  (b) the DSA 8-job x 8-worker scenario (DNN A), one full run;
//  (c) collectives on multi-switch topologies (exp::run_collective), one
//      allreduce of 4 MiB per worker: Rina on the dragonfly 4,9,2 (72
//      workers, every router INA) and RAR on the k = 4 fat-tree (16 workers);
//  (d) sparse aggregation, Zebra and PS-lite (below);
//  (e) one simulation on 1 and on 2 threads (sim::Simulator::set_partitions),
//      a partition per thread (threads/T/T), and split into 16 partitions,
//      the default for its hosts, on 1 and on 2 threads (partitions/T/16):
//      ATP on the 1024-host fat-tree, 32 jobs x 32 workers interleaved (each
//      job in every pod), 0.25 MiB each; the rows' ratios are the speedups,
//      and every digest must equal the first row's (else that row fails).
//      Wall time: the 2-thread runs use both cores; hops_per_cpu_s counts
//      every thread's CPU. scenarios/scale/fat_tree_1024_threads.toml is the
//      same run as a scenario file.
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/resources.hpp"
#include "experiment/collective.hpp"
#include "experiment/runner.hpp"
#include "experiment/sparse.hpp"
#include "experiment/star_line_rate.hpp"
#include "workload/sparse.hpp"

namespace {

using namespace ina;

// Simulated link hops and events per second of the timed part, and hops per run.
void set_counters(benchmark::State& state, uint64_t hops, uint64_t events) {
  state.counters["hops_per_s"] = benchmark::Counter(static_cast<double>(hops), benchmark::Counter::kIsRate);
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["hops"] = benchmark::Counter(static_cast<double>(hops), benchmark::Counter::kAvgIterations);
}

void BM_StarLineRate(benchmark::State& state) {
  exp::StarLineRateSettings s;  // 306 B packets at 100 Gbps for 1 ms, window 512 (experiment/star_line_rate.hpp)
  s.hosts = static_cast<int>(state.range(0));
  uint64_t hops = 0, events = 0;
  double cpu = 0;
  for (auto _ : state) {
    const auto r = exp::run_star_line_rate(s);
    cpu += r.cpu_s;
    if (!r.values_ok(s)) state.SkipWithError("wrong result values");
    state.SetIterationTime(r.wall_s);
    hops += r.hops;
    events += r.events;
  }
  set_counters(state, hops, events);
  // Hops per second of the simulation thread's CPU time (the figure above is per wall second).
  state.counters["hops_per_cpu_s"] = cpu > 0 ? static_cast<double>(hops) / cpu : 0;
}
BENCHMARK(BM_StarLineRate)->Name("sim/star_line_rate_1ms")->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->UseManualTime();

void BM_DsaScenario(benchmark::State& state) {
  exp::Settings s;  // defaults: DSA §VII-B, 8 jobs x 8 workers, DNN A
  uint64_t hops = 0, events = 0;
  for (auto _ : state) {
    const auto out = exp::run_point(s, "dsa", 1);
    hops += static_cast<uint64_t>(out.metrics.at("hops"));
    events += static_cast<uint64_t>(out.metrics.at("events"));
    if (!out.ok) state.SkipWithError(out.problems.c_str());
  }
  set_counters(state, hops, events);
}
BENCHMARK(BM_DsaScenario)->Name("sim/dsa_8jobs_8workers")->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Collective(benchmark::State& state, const char* topology, const char* scheme, bool ina) {
  auto g = *topo::generate(topology);
  if (ina)
    for (const auto sw : g.switches()) g.set_ina(sw, true, 100);
  exp::CollectiveSettings s;
  s.gradient_mb = 4;
  uint64_t hops = 0, events = 0;
  for (auto _ : state) {
    const auto r = exp::run_collective(g, scheme, s);
    hops += r.hops;
    events += r.events;
    if (!r.ok) state.SkipWithError(r.problems.c_str());
  }
  set_counters(state, hops, events);
}
BENCHMARK_CAPTURE(BM_Collective, rina_dragonfly, "dragonfly:4,9,2", "rina", true)
    ->Name("sim/rina_dragonfly_4_9_2")->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Collective, rar_fat_tree, "fat-tree:4", "rar", false)
    ->Name("sim/rar_fat_tree_4")->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// (d) sparse aggregation (exp::run_sparse): Zebra and PS-lite-style push on
// the OA-like workload (docs/zebra.md), 16 workers, two iterations, hot set
// of 30 K keys from two profiling iterations; reported in <key, value>
// pairs (pushed by the workers) per second of wall time.
void BM_Sparse(benchmark::State& state, const char* scheme) {
  const auto src = workload::make_synthetic(*workload::find_sparse_model("oa"), 16, 4, 1);
  exp::SparseSettings s;
  s.scheme = scheme;
  s.workers = 16;
  s.first_iteration = 2;
  s.iterations = 2;
  s.profile_iterations = 2;
  s.init_window = 350;  // 60 KB of KV packets, as `ina sim` sparse scenarios
  uint64_t pairs = 0, events = 0;
  for (auto _ : state) {
    const auto r = exp::run_sparse(s, *src);
    pairs += r.pairs;
    events += r.events;
  }
  state.counters["kv_pairs_per_s"] = benchmark::Counter(static_cast<double>(pairs), benchmark::Counter::kIsRate);
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
// (threads, partitions): one partition per thread; or 16 partitions, the
// default's for these 1024 hosts (exp::RunSplit), on one or two threads.
void BM_Partitioned(benchmark::State& state) {
  exp::Settings s;
  s.topology_kind = "fat-tree";
  s.k = 16;
  s.ina = "tors";
  s.jobs = 32;
  s.workers = 32;
  s.gradient_mb = 0.25;
  s.placement = "interleaved";
  s.rina_transport = "aimd";
  s.threads = static_cast<int>(state.range(0));
  s.partitions = static_cast<int>(state.range(1));
  static uint64_t first_digest = 0;  // the first row's (one thread, one partition)
  uint64_t hops = 0, events = 0;
  double cpu = 0;
  for (auto _ : state) {
    const double c0 = thread_cpu_seconds();
    const auto r = exp::run_point(s, "atp", 1);
    cpu += thread_cpu_seconds() - c0 + r.helper_cpu_s;
    if (!r.ok) state.SkipWithError(r.problems.c_str());
    if (first_digest == 0) first_digest = r.digest;
    else if (r.digest != first_digest) state.SkipWithError("the digest differs from the first row's");
    hops += static_cast<uint64_t>(r.metrics.at("hops"));
    events += static_cast<uint64_t>(r.metrics.at("events"));
  }
  set_counters(state, hops, events);
  // Per second of the run's threads' CPU time (set-up included, as in hops_per_s).
  state.counters["hops_per_cpu_s"] = cpu > 0 ? static_cast<double>(hops) / cpu : 0;
}
BENCHMARK(BM_Partitioned)->Name("sim/fat_tree_1024_atp_threads")->Args({1, 1})->Args({2, 2})->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Partitioned)->Name("sim/fat_tree_1024_atp_partitions")->Args({1, 16})->Args({2, 16})->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_CAPTURE(BM_Sparse, zebra, "zebra")->Name("sim/sparse_zebra_oa_16")->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Sparse, ps_lite, "ps-lite")->Name("sim/sparse_pslite_oa_16")->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

namespace ina::cli {

// Runs the benchmarks registered as "<suite>/..." (in any file under bench/).
// A --benchmark_filter=F among `extra` narrows the suite: F is matched
// after "<suite>/" (F may name the suite itself). An anchored F ("^...")
// is a whole-name regex taken as it is (a suite's file may register
// families under other names: switch_threads/ in the switch suite).
int run_bench(const std::string& suite, const std::vector<std::string>& extra) {
  const std::string flag = "--benchmark_filter=", prefix = suite + "/";
  std::string filter = "^" + prefix;
  std::vector<std::string> args = {"ina-bench"};
  for (const std::string& e : extra) {
    if (e.rfind(flag, 0) != 0) {
      args.push_back(e);
      continue;
    }
    const std::string f = e.substr(flag.size());
    filter = !f.empty() && f.front() == '^' ? f : f.rfind(prefix, 0) == 0 ? "^(" + f + ")" : "^" + prefix + ".*(" + f + ")";
  }
  args.insert(args.begin() + 1, flag + filter);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  benchmark::Initialize(&argc, argv.data());
  const size_t ran = benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (ran == 0) {
    if (filter == "^" + prefix)
      fprintf(stderr, "error: no benchmark in suite '%s' (suites: sim, plan, allreduce, ringstep, switch, udpio, quant, fp16)\n", suite.c_str());
    else
      fprintf(stderr, "error: no benchmark of suite '%s' matches --benchmark_filter (as run: %s)\n", suite.c_str(), filter.c_str());
    return 2;
  }
  return 0;
}

}  // namespace ina::cli
