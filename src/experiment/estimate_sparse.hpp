#pragma once
// The memory of a sparse run (Zebra's star, experiment/sparse.hpp) for
// `ina sim`'s estimate (experiment/estimate.hpp). A sparse run's memory
// grows with its workload, not with its network: per pushed pair (the
// pushes the run checks against, each worker's packets) and per key of an
// iteration's union (the exact sums, each worker's received sums, the PS's
// sums). Those counts are taken from the run's own workload, generated (or
// its trace read) as the run does, so the estimate is exact in them; only
// the bytes per pair and per key below are a model, of the structures named
// beside each constant (the measurements: estimate_sparse.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "experiment/estimate.hpp"
#include "experiment/scenario.hpp"

namespace ina::exp {

// What a sparse run's workload holds, after workload.sparse_row_width.
struct SparseSizes {
  uint64_t pairs = 0;          // pushed pairs over the measured iterations, all workers
  uint64_t union_keys = 0;     // the sum over the measured iterations of each one's union of keys
  uint64_t max_union = 0;      // the largest union of one iteration
  uint64_t max_batch = 0;      // the largest batch of one worker in one iteration
  uint64_t profile_union = 0;  // distinct keys of the iterations Zebra's hot-set profile counts
};

// Counted from the workload of seed 1 (another seed draws other keys from
// the same distribution: the counts move by a fraction of a percent).
// Memoized per workload: a scenario's schemes and sweep points share it.
// Throws as the run would on an unknown model or a bad trace.
SparseSizes sparse_sizes(const Settings& s);

// The run's memory by part, largest first (without the process baseline).
std::vector<MemoryPart> sparse_parts(const Settings& s, const std::string& scheme);

}  // namespace ina::exp
