#pragma once
// Resource estimate of `ina sim` before anything runs: processes, threads and
// peak memory, derived from the sizes of the data structures a run allocates
// (switch register arrays, per-packet worker transport records, PS entries,
// the packet pool, links and events; on multi-switch topologies, the ring
// endpoints' shard buffers, from the job's plan: estimate_ring.hpp). `ina sim`
// prints it and refuses to start when it exceeds the machine's available
// memory (/proc/meminfo MemAvailable) unless --force.
//
// Accuracy: the estimate is an upper-leaning model, not a measurement. On the
// runs in tests/cli/test_bad_input.cpp (memory dominated by the switch arrays,
// by the workers' per-packet records with and without loss, or by a ring
// collective's shard buffers) it is within a factor of 2 of the measured peak
// RSS (getrusage ru_maxrss of the `ina sim` process), which is the documented
// tolerance (kEstimateFactor). PS-family collectives on multi-switch
// topologies count every switch's aggregators and no per-worker state.
#include <cstdint>
#include <string>
#include <vector>

#include "core/resources.hpp"  // mem_available_bytes, human_bytes
#include "experiment/scenario.hpp"

namespace ina::exp {

inline constexpr double kEstimateFactor = 2.0;

struct MemoryPart {
  std::string what;    // "worker transport records"
  std::string fields;  // the settings that size it, e.g. "workload.jobs x workload.workers_per_job"
  uint64_t bytes = 0;
};

struct Estimate {
  uint64_t processes = 1;
  uint64_t threads = 1;
  std::vector<MemoryPart> parts;  // largest first
  uint64_t total_bytes() const;
  // "1 process, 2 threads, ~1.2 GiB peak memory (worker transport records 1.0 GiB, ...)"
  std::string summary() const;
};

// Peak memory of one simulation run (one point, one scheme), without the
// process baseline.
Estimate estimate_run(const Settings& s, const std::string& scheme);

// The whole `ina sim` process: the baseline plus the largest `threads` runs
// at once (runs in parallel with -j).
Estimate estimate_sim(const Scenario& sc, unsigned threads);

}  // namespace ina::exp
