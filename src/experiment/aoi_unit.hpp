#pragma once
// P4INC-AOI's data plane on one network unit (§VI): the INC jobs the
// scheduler placed on a unit run on its ToR switch in the packet simulator
// (a star: the switch and every worker of these jobs under it), each job in
// its aggregator segment <MemID, Size>, one allreduce of `bytes_per_worker`
// per worker, no PS. The entry point a scheduler calls to check a unit's
// INC plan packet by packet: per-job completion times, and whether every
// result was exact, no aggregator stayed occupied and no job touched an
// aggregator outside its segment.
#include <cstdint>
#include <string>
#include <vector>

namespace ina::exp {

struct AoiUnitJob {
  uint32_t job = 0;                 // the scheduler's job id (reported back; the switch numbers jobs 1..n in order)
  int workers = 2;                  // 1..64
  uint32_t mem_id = 0, size = 0;    // the segment; size 0 for every job = the array split equally in job order
  uint64_t bytes_per_worker = 0;    // the gradient each worker pushes (int32 values, rounded up)
};

struct AoiUnitOptions {
  double memory_mb = 5;       // the switch's aggregator memory (MiB)
  int payload_bytes = 256;    // per packet and aggregator
  int header_bytes = 50;
  double link_gbps = 100;
  double rtt_us = 10;         // host-switch-host, 4 propagation delays
  double queue_kb = 1024, ecn_kb = 100;
  double loss = 0;            // every link, both directions
  double init_window_kb = 60;
  uint64_t seed = 1;
  double max_sim_ms = 10000;  // a run still busy then fails
};

struct AoiUnitJobResult {
  uint32_t job = 0;
  uint32_t mem_id = 0, size = 0;   // its segment
  double completion_ms = 0;        // until its last worker held the whole result (NaN: unfinished)
  uint64_t values_checked = 0, mismatches = 0;
  uint64_t retransmits = 0, timeouts = 0, ecn_notices = 0, behind = 0;
};

struct AoiUnitResult {
  std::vector<AoiUnitJobResult> jobs;  // in the given order
  bool ok = true;                      // finished, exact, nothing leaked or refused, segments respected
  std::string problems;                // why not
  uint64_t async_errors = 0, shadow_resends = 0, stale = 0, duplicates = 0, completed = 0;
  size_t occupied_after = 0;           // aggregators still held at the end
  uint64_t outside_segment = 0;        // aggregators a job touched outside its segment (or shared with another job)
  uint64_t refused = 0;                // packets an honest node refused as malformed or foreign
  size_t packets_leaked = 0;
  double sim_ms = 0;
};

// Throws std::invalid_argument for bad jobs or segments (naming the job and the value).
AoiUnitResult run_aoi_unit(const std::vector<AoiUnitJob>& jobs, const AoiUnitOptions& opt = {});

}  // namespace ina::exp
