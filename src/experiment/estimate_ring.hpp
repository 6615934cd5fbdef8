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
// go on, up to flow control's six). Summed over a ring the gaps cancel: at
// any moment the ranks hold about the buffers of `ahead` 0 (a rank ahead of
// its predecessor holds one fewer). The peak RSS is above that live peak:
// the allocator keeps pages of freed shard buffers (glibc serves blocks
// below its mmap threshold, raised to a freed shard's size, from the heap),
// measured up to about half a shard per rank (RAR on the k = 4 fat-tree,
// full-size ResNet50: peak RSS ~50 MiB above the live heap's peak). So an
// autonomous rank (RAR, H-AR, a Rina worker outside an INA rack) counts one
// receive ahead (kRingAhead), which covers that. A rank of a Rina group
// (paced to its ToR, its steps coupled through it) counts none
// (kRinaAhead): measured, the count at 0 is already at or above the run's
// peak RSS there. The measurements: experiment/estimate.hpp.
#include <cstdint>
#include <vector>

#include "host/ring.hpp"

namespace ina::exp {

// Receives past the current one that may have started at an autonomous
// rank and at a rank of a Rina group (host::ring_footprint's `ahead`).
inline constexpr uint64_t kRingAhead = 1;
inline constexpr uint64_t kRinaAhead = 0;

struct RingBuffers {
  uint64_t values = 0;   // receive buffers held at once and the kept ranges, every rank
  uint64_t records = 0;  // receive bitmaps and rack bits, and the largest send's records, every rank
};

// The plan's ranks (plan[rank] = its stages), `iterations` ops each, packets of `payload_values`.
RingBuffers ring_buffers(const std::vector<std::vector<host::RingStage>>& plan, uint64_t iterations,
                         uint16_t payload_values, uint64_t ahead = kRingAhead, uint64_t ahead_ina = kRinaAhead);

}  // namespace ina::exp
