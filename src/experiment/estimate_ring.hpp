#pragma once
// The memory a ring job's endpoints (host::RingEndpoint: RAR, H-AR, Rina)
// hold, from the job's plan: per rank, its eight receive slots, its kept
// range and one send's per-packet records. Part of `ina sim`'s estimate
// (experiment/estimate.hpp); the sizes mirror host/ring_detail.hpp and
// host/ring_step_compiler.cpp and are checked against the measured peak RSS
// in tests/cli/test_bad_input.cpp.
//
// What the endpoint keeps (ring_step_compiler.cpp, ring_transfer.cpp):
//  - a receive slot per receive ordinal mod kRecvSlots (op * receives per op
//    + the step's receive index); a slot's values vector (4 B per value) is
//    sized by the shard of a receive that keeps its values (every
//    ScatterReduce receive, and the AllGather receives the rank forwards
//    from its slot) and keeps that capacity, as do its per-packet bitmap
//    (1 bit) and, from a Rina ToR, its per-packet rack bits (8 B); so a
//    slot holds the largest such shard of any receive that lands in it;
//  - the kept range: the span of the complete shards its stages leave it (4 B per value);
//  - the send of the current step: acknowledgement bits, three times and a
//    retransmission count per packet (34 B), freed when the step's send ends.
#include <cstdint>
#include <vector>

#include "host/ring.hpp"

namespace ina::exp {

struct RingBuffers {
  uint64_t values = 0;   // receive slots' values and the kept ranges, every rank
  uint64_t records = 0;  // receive bitmaps and rack bits, and the largest send's records, every rank
};

// The plan's ranks (plan[rank] = its stages), `iterations` ops each, packets of `payload_values`.
RingBuffers ring_buffers(const std::vector<std::vector<host::RingStage>>& plan, uint64_t iterations,
                         uint16_t payload_values);

}  // namespace ina::exp
