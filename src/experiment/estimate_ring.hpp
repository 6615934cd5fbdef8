#pragma once
// The memory a ring job's endpoints (host::RingEndpoint: RAR, H-AR, Rina)
// hold, from the job's plan: per rank, what its compiled steps say
// (host/ring_footprint.hpp): the receive buffers it holds at once, its
// receive slots' per-packet state, its kept range and its largest send's
// per-packet records. Part of `ina sim`'s estimate (experiment/estimate.hpp),
// checked against the measured peak RSS in tests/cli/test_bad_input.cpp.
//
// Receive buffers: a rank holds the kept receives it has yet to read that
// have started (host::ring_footprint's `ahead`: how many receives past the
// current one have). Each ring step waits for the previous step's shard and
// acknowledgements, so a predecessor runs at most one step ahead before the
// ring's coupling holds it (more only when a rank stalls while the others
// go on, up to flow control's six). An autonomous rank (RAR, H-AR, a Rina
// worker outside an INA rack) counts one receive ahead (kRingAhead), a rank
// of a Rina group (paced to its ToR, its steps coupled through it) none
// (kRinaAhead). The simulator's values are SyntheticTensor sums, so each
// buffer, and the kept range, holds a few records whatever its size
// (host/value_store.hpp): one per run of packets with the same contributors,
// more while packets arrive out of order or as a Rina ToR's partial sums;
// kRecordsPerBuffer covers those. The measurements: experiment/estimate.hpp.
#include <cstdint>
#include <vector>

#include "host/ring.hpp"

namespace ina::exp {

// Receives past the current one that may have started at an autonomous
// rank and at a rank of a Rina group (host::ring_footprint's `ahead`).
inline constexpr uint64_t kRingAhead = 1;
inline constexpr uint64_t kRinaAhead = 0;
// Records a held buffer or the kept range is counted at.
inline constexpr uint64_t kRecordsPerBuffer = 16;

struct RingBuffers {
  uint64_t values = 0;   // receive buffers held at once and the kept ranges, every rank
  uint64_t records = 0;  // receive bitmaps and rack bits, and the largest send's records, every rank
  uint64_t send_packets = 0;  // the largest send's packets, any rank
};

// The plan's ranks (plan[rank] = its stages), `iterations` ops each, packets of `payload_values`.
RingBuffers ring_buffers(const std::vector<std::vector<host::RingStage>>& plan, uint64_t iterations,
                         uint16_t payload_values, uint64_t ahead = kRingAhead, uint64_t ahead_ina = kRinaAhead);

}  // namespace ina::exp
