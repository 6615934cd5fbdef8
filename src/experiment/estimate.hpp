#pragma once
// Resource estimate of `ina sim` before anything runs: processes, threads and
// peak memory, derived from the sizes of the data structures a run allocates
// (switch register arrays, per-packet worker transport records, PS entries,
// the packet pool, links and events; on multi-switch topologies, the run's
// INA switches only (switch.ina), the PS family's hosts (worker transports,
// PS reminder deadlines) and the ring endpoints' buffers, from the job's
// compiled steps: estimate_ring.hpp; on sparse workloads, what the run holds
// per pushed pair and per key of an iteration's union, counted from the
// workload itself: estimate_sparse.hpp). `ina sim` prints it and refuses to
// start when it exceeds the machine's available memory (/proc/meminfo
// MemAvailable) unless --force.
//
// Accuracy: the estimate is an upper-leaning model, not a measurement. On the
// runs in tests/cli/test_bad_input.cpp (memory dominated by the switch arrays,
// by the workers' per-packet records with and without loss, by a ring
// collective's shard buffers, or by a sparse run's sums) it is within a factor
// of 2 of the measured peak RSS (runs.json's peak_rss_mb of `ina sim -j 1`,
// its VmHWM over each run), which is the documented tolerance (kEstimateFactor); every
// scenario under scenarios/ is checked by scripts/sim-memory-check
// (docs/results/simulator.md has its last run). On scenarios/rina (one run each, `switch.ina_count`
// and `workload.gradient_scale` set; estimate vs peak RSS, 2026-11-28):
//   fig10_full_resnet50, fat-tree k = 4, 16 workers, full-size ResNet50
//     (97.5 MiB per worker): RAR 38.7 vs 36 MiB, H-AR 132.6 vs 128, Rina 50 %
//     81.3 vs 69, Rina 100 % 263.7 vs 239; PS 30.6 vs 27.5, ATP 8 INA 76.3 vs 73.3;
//   testbed (2 racks x 4), full size: Rina 1 INA ToR 53.9 vs 44, 2 INA ToRs
//     99.5 vs 88; PS 24.7 vs 19.9, ATP 36.2 vs 29.2.
// So 4-24 % above, never below. The ring endpoints' values are records
// (host/value_store.hpp), so their send records and receive bitmaps weigh
// most there; the fixed parts (the 16 MiB baseline, the packet pool's
// slabs) weigh most on small runs.
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

// What this machine holds at once: `threads` runs in one process (-j),
// a run in each of `processes` (mpirun, a run per rank), or one run split
// over them (`split`, mpirun --partition: each rank holds its share).
struct Estimate {
  uint64_t processes = 1;
  uint64_t threads = 1;
  bool split = false;
  std::vector<MemoryPart> parts;  // largest first
  uint64_t total_bytes() const;
  // "1 process, 2 runs at once, ~1.2 GiB peak memory (worker transport records 1.0 GiB, ...)"
  std::string summary() const;
};

// Peak memory of one simulation run (one point, one scheme), without the
// process baseline.
Estimate estimate_run(const Settings& s, const std::string& scheme);

// The whole `ina sim` process: the baseline plus the largest `threads` runs
// at once (runs in parallel with -j).
Estimate estimate_sim(const Scenario& sc, unsigned threads);

}  // namespace ina::exp
