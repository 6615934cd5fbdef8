#pragma once
// Job 0's ring step records (host::RingStepRecord) of one simulated run,
// written as CSV for reading where a ring's time goes step by step
// (scenario key run.step_records: a directory; docs/results/rina.md).
#include <cstdint>
#include <string>
#include <vector>

#include "host/ring_record.hpp"

namespace ina::exp {

// Writes `log` (one vector per endpoint of job 0, in endpoint order) to
// DIR/steps-<digest, 16 hex digits>.csv, the run's trace digest as runs.json
// gives it: one row per endpoint and step, times in picoseconds (empty
// where the step had no such event). Creates DIR; throws
// std::runtime_error naming the file if it cannot be written.
void write_step_records(const std::string& dir, uint64_t digest,
                        const std::vector<std::vector<host::RingStepRecord>>& log);

}  // namespace ina::exp
