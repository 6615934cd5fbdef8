#pragma once
// A ring scheme's plan (host/ring.hpp) by its collective: RAR, H-AR or Rina.
// The one dispatch the simulator (exp::run_collective), the runtime's layouts
// (rt::RingLayout) and the failover re-plan (host::ring_failover) share.
#include <vector>

#include "host/ring.hpp"
#include "schemes/registry.hpp"

namespace ina::schemes {

// Every rank's stages for n ranks in `racks` (ring order, ranks ascending),
// tors[q] rack q's INA ToR or kNoNode. std::invalid_argument for a scheme
// whose collective is no ring, or for H-AR's unequal racks.
std::vector<std::vector<host::RingStage>> ring_plan(const Scheme& s, size_t n,
                                                    const std::vector<std::vector<uint16_t>>& racks,
                                                    const std::vector<NodeId>& tors, uint64_t elems);

}  // namespace ina::schemes
