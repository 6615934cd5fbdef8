// `ina bench ringstep`: the per-step time of a ring allreduce on this
// machine's runtime, the O(G) + C(G) of the Rina paper's Eq. 1: what a ring
// step costs a host beyond the bytes it moves (protocol, memory movement,
// scheduling) and how much it fluctuates between steps and hosts.
//
//  - ringstep/rar/workers:N — `ina run --scheme rar` in-process (real
//    `ina ring-worker` processes over loopback UDP, every value verified
//    exact), shards of one packet of 256 values, so a step moves one
//    1060-byte datagram and its acknowledgement: its time is the overhead.
//    20 allreduces; every rank reports its last allreduce's 2 (N - 1) step
//    times (`step_seconds`). Counters: step_us_mean (O, the fixed part),
//    step_us_sigma (sigma over ranks and steps: the load fluctuation),
//    step_us_p99, steps (samples).
//
// Use: the simulator's ring schemes take a per-step overhead and its
// fluctuation (workload.straggler_* for C, Eq. 1); these are the values this
// machine's runtime shows. The loopback path has no wire time, so the step
// time is host cost plus one loopback round trip.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "bench_launch.hpp"
#include "runtime/launcher.hpp"

namespace {

namespace fs = std::filesystem;

constexpr unsigned kRingStepAllreduces = 20;
constexpr unsigned kRingStepPayload = 256;  // values per packet

void BM_RingStep(benchmark::State& state) {
  const auto workers = static_cast<unsigned>(state.range(0));
  const fs::path dir = fs::temp_directory_path() / ("ina-bench-ringstep-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<double> steps;
  for (auto _ : state) {
    ina::rt::LaunchConfig cfg;
    cfg.scheme = "rar";
    cfg.workers = workers;
    cfg.size_bytes = uint64_t{workers} * kRingStepPayload * 4;  // one packet per shard
    cfg.iterations = kRingStepAllreduces;
    cfg.payload = kRingStepPayload;
    cfg.timeout_s = 120;
    cfg.json_out = (dir / "run.json").string();
    const auto j = ina::bench::launch_summary(cfg, state);
    if (!j) break;
    double slowest = 0;
    for (const auto& w : j->at("jobs").at(0).at("workers")) {
      for (const auto& s : w.at("step_seconds")) steps.push_back(s.get<double>() * 1e6);
      slowest = std::max(slowest, w.at("allreduce_seconds").get<double>());
    }
    state.SetIterationTime(slowest);
  }
  fs::remove_all(dir);
  if (steps.empty()) return;
  const double mean = std::accumulate(steps.begin(), steps.end(), 0.0) / static_cast<double>(steps.size());
  double var = 0;
  for (double s : steps) var += (s - mean) * (s - mean);
  std::sort(steps.begin(), steps.end());
  state.counters["step_us_mean"] = mean;
  state.counters["step_us_sigma"] = std::sqrt(var / static_cast<double>(steps.size()));
  state.counters["step_us_p99"] = steps[std::min(steps.size() - 1, steps.size() * 99 / 100)];
  state.counters["steps"] = static_cast<double>(steps.size());
}

[[maybe_unused]] const int registered_ring_step = [] {
  benchmark::RegisterBenchmark("ringstep/rar", BM_RingStep)
      ->ArgName("workers")
      ->Arg(4)
      ->Arg(8)
      ->Iterations(1)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  return 0;
}();

}  // namespace
