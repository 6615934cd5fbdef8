#pragma once
// Rina's ToR settings (rina.cpp): how the switch's memory is divided, and
// what a ring job's entry holds beyond the common fields.
#include <cstdint>
#include <vector>

#include "wire/packet.hpp"

namespace ina::dp {

// A contiguous region per job (the paper's §V), or one pool every job shares,
// aggregators taken per task by Hash(job, PSN) under ATP's policy (first come
// first served) or DSA's (a job of higher priority preempts a partial; the
// loser's priority halves).
enum class RingMemory : uint8_t { Region, PoolAtp, PoolDsa };

struct RinaConfig {
  RingMemory ring_memory = RingMemory::Region;
};

// A ring job's entry at an INA switch (SwitchJob::rina). A group is served
// by its top switch (an INA ToR, or, Rina §IV-D, an INA switch above
// several units: rina.cpp) and, below a top, by levels that aggregate part
// of the group's ScatterReduce first (SwitchJob::parent names the switch
// above; SwitchJob::children the levels below a switch, child_bits what
// each one's partial carries).
struct RinaJob {
  std::vector<uint16_t> rack;      // a top: the group's ranks, agent (lowest) first; a level (parent set): the
                                   //   ranks that send their ScatterReduce shards here
  std::vector<uint16_t> upstream;  // a top: the ranks that send AllGather shards to this group (the previous group);
                                   //   an empty rack and no children: the ToR only forwards the job (its rack fell
                                   //   back to RAR)
  std::vector<uint8_t> bits;       // a level: each rack rank's bit in the group's packets (a top: its index in rack)
  std::vector<uint64_t> child_bits;  // per SwitchJob::children entry: the group bits its partial carries
  uint8_t epoch = 0;               // the job's membership epoch (the step tag's top 8 bits; others are stale)
  uint32_t priority = 0;           // a shared pool under DSA's policy: the job's priority (a higher one preempts)
};

struct SwitchJob;
// A ring job's ToR entry under a new membership epoch (Rina §IV-C,
// host::ring_failover): `old` with the survivors by new rank, the epoch, and
// this ToR's rack and upstream ranks (an empty rack: it only forwards).
SwitchJob ring_job_at_epoch(SwitchJob old, std::vector<NodeId> workers, uint8_t epoch, std::vector<uint16_t> rack,
                            std::vector<uint16_t> upstream);

}  // namespace ina::dp
