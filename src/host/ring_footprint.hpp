#pragma once
// What a ring endpoint's compiled steps (ring_step_compiler.cpp) hold in
// memory, asked of the steps themselves: the memory estimate of `ina sim`
// (experiment/estimate_ring.hpp) sums it over a job's ranks.
//
// A receive whose values a later step reads (Step::r_keep: a ScatterReduce
// partial the next send adds to, the last one a finish adds, an AllGather
// shard the rank forwards) fills a values buffer of its shard from its first
// packet on; the step that reads it (add_recv, finish_recv) frees it when it
// ends (RingEndpoint::end_step). Other receives keep no values. So at the
// current step the endpoint holds the kept receives it has yet to read that
// have started: the one the current send reads, the current one (the first
// receive at or after the current step, as flow control counts them), and
// later ones whose sender already runs ahead. `ahead` says how many
// receives past the current one may have started: 0 when every sender is
// in this rank's step or behind it, up to kRecvSlots - 2 = 6, where
// receiver flow control refuses packets (ring_transfer.cpp).
//
// Besides, every receive slot keeps its per-packet bitmap (1 bit) and,
// from a Rina ToR, its rack bits (8 B) at the largest size a receive landing
// in it had (the slot of receive ordinal o is o mod kRecvSlots); the kept
// range (4 B per value) lives as long as the endpoint; a send's per-packet
// records as long as the send.
#include <cstdint>
#include <vector>

#include "host/ring.hpp"

namespace ina::host {

struct RingFootprint {
  uint64_t receives = 0;      // receives per op
  uint64_t held_buffers = 0;  // receive values buffers held at once, at most
  uint64_t held_values = 0;   // values (int32) in the receive buffers held at once, at most
  uint64_t kept_values = 0;   // the kept range
  uint64_t slot_bytes = 0;    // the receive slots' bitmaps and rack bits, every slot
  uint64_t send_packets = 0;  // the largest send's packets
};

// Bytes per packet of a send's records (RingEndpoint::Send: acknowledgement
// bits 8, first and last transmission and deadline 8 each, resends 2, parked 1, refused 1).
inline constexpr uint64_t kRingSendRecordBytes = 36;

// The footprint of `rank` in a plan's stages (plan[rank]), `ops` ops of
// packets of `payload_values`, senders at most `ahead` receives ahead
// (capped at 6). Throws std::invalid_argument as RingEndpoint does for a
// rank in no group of a stage.
RingFootprint ring_footprint(const std::vector<RingStage>& stages, uint16_t rank, uint16_t payload_values,
                             uint64_t ahead, uint64_t ops);

}  // namespace ina::host
