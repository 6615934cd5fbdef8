#pragma once
// Runs scenario points in the simulator: builds the star, the switch program
// of the scheme, one PS per job (ATP, DSA), the training workers, runs, checks
// every invariant and returns the metrics.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "experiment/collective.hpp"
#include "experiment/results.hpp"
#include "experiment/scenario.hpp"
#include "schemes/registry.hpp"
#include "sim/engine.hpp"

namespace ina::exp {

struct RunOutput {
  std::map<std::string, double> metrics;
  std::vector<double> job_jct_ms;  // per job, in job order (NaN: did not finish)
  bool ok = true;
  std::string problems;  // why !ok: unfinished workers, wrong results, leaks
  uint64_t digest = 0;
  uint64_t windows = 0;      // synchronization windows of a run in several partitions (run.threads, run.partitions)
  double helper_cpu_s = 0;   //   and the CPU time of its threads besides the runner's
  std::vector<std::pair<uint64_t, double>> partitions;  //   and per partition, its events and busy wall time
  std::vector<LinkMarks> marked_links;  // network kinds: links with ECN marks or queue drops (runs.json "links")
  std::vector<LinkLoad> busiest_links;  //   and the busiest links (runs.json "busiest_links")
};

// A star point runs the star simulator; a point on a multi-switch topology
// (topology.kind != "star") runs exp::run_collective, metrics throughput_gbps,
// sync_ms, iteration_ms, bytes_per_worker, steps, retransmits, ...
// With `ranks` (size > 1): the run split over those processes (each makes
// the same call and gets the same output; what split_refusal() allows).
RunOutput run_point(const Settings& s, const std::string& scheme, uint64_t seed, sim::Ranks* ranks = nullptr);
// Why a run of `scheme` at `s` cannot be split over processes (empty: it
// can): the star and sparse runs are one process's; every collective on a
// multi-switch topology splits.
std::string split_refusal(const Settings& s, const std::string& scheme);
// Every run of `sc` can be split (--partition); else the ScenarioError
// naming the file, the field and the value.
void check_split(const Scenario& sc);
// s with the scheme's own packet (payload and header bytes) when
// switch.packets = "per-scheme" and the registry gives it one; s otherwise.
Settings packets_for(const Settings& s, const schemes::Scheme& scheme);

// A star's host link from the settings: topology.link_gbps, rtt_us / 4 per
// link, queue_kb, ecn_kb, faults.loss / dup / reorder (the dense and the sparse star).
sim::LinkParams star_link(const Settings& s);

struct Progress {
  size_t done = 0, total = 0;
  size_t index = 0;  // the run's place in scenario_runs (and in the records' order)
  const Point* point = nullptr;
  const std::string* scheme = nullptr;
  uint64_t seed = 0;
  const RunOutput* out = nullptr;
  double wall_s = 0;
  double cpu_s = 0;          // the run's own CPU time (its thread's)
  uint64_t peak_rss = 0;     // bytes: the process's peak resident set at the run's end (see RunResult)
  bool threw = false;  // the run threw: out->problems says what; it has no metrics and no record
  int rank = -1;       // the MPI rank that ran it (-1: a local run)
};

// One run of a scenario: a (point, scheme, seed).
struct ScenarioRun {
  const Point* point = nullptr;
  const std::string* scheme = nullptr;
  uint64_t seed = 0;
};
// Every run of the points, in (point, scheme, seed) order: the order of the records.
std::vector<ScenarioRun> scenario_runs(const Scenario& sc, const std::vector<Point>& points);

// A run's outcome. A run that throws is a failed run: error holds what it
// threw, out.ok is false and out.problems says "error: <what>".
struct RunResult {
  RunOutput out;
  double wall_s = 0;
  double cpu_s = 0;        // CPU time of the thread that ran it
  uint64_t peak_rss = 0;   // the process's peak resident set (bytes) at the run's end
  std::string error;
};
// With `own_peak` (a process that runs one run at a time: -j 1, or an MPI
// rank) the process's peak resident set is reset before the run, so that
// peak_rss is the run's own peak (the process baseline included).
// `ranks`: as run_point's.
RunResult run_one(const ScenarioRun& run, bool own_peak = false, sim::Ranks* ranks = nullptr);

// Executes every run once, calling done(index, result, rank) after each, one
// call at a time (rank: the MPI rank that ran it, -1 locally). An exception
// from done ends the execution and is rethrown.
using RunDone = std::function<void(size_t, RunResult&&, int)>;
using RunExecutor = std::function<void(const std::vector<ScenarioRun>&, const RunDone&)>;
// `threads` runs at once in this process (runs are independent, so results do not depend on it).
RunExecutor local_executor(unsigned threads);

// Runs every (point, scheme, seed) with `execute` (default: local_executor(1));
// `on_run` is called after each run, one call at a time. Returns per-seed
// records in (point, scheme, seed) order, without the runs that threw;
// `failures` collects the problem text of failed runs, in that order.
std::vector<Record> run_scenario(const Scenario& sc, const std::function<void(const Progress&)>& on_run,
                                 std::vector<std::string>* failures, const RunExecutor& execute);
std::vector<Record> run_scenario(const Scenario& sc, const std::function<void(const Progress&)>& on_run,
                                 std::vector<std::string>* failures = nullptr, unsigned threads = 1);

}  // namespace ina::exp
