#pragma once
// The collectives of multi-switch topologies, apart from the registry so that
// the planners that model them (control/rina_time.hpp) need no switch program.
#include <cstdint>

namespace ina::schemes {

// The collective a scheme's jobs run on a multi-switch topology (Engine::SimNetwork).
enum class Collective : uint8_t {
  None = 0,      // not on multi-switch topologies
  Ps,            // parameter servers co-located with the workers, one shard each, no INA
  PsIna,         // PS-based INA: every INA switch on the way to a shard's PS aggregates (ATP, DSA)
  Ring,          // Ring-AllReduce: ScatterReduce + AllGather over all workers
  Hierarchical,  // H-AR: intra-rack ScatterReduce, inter-rack rings, intra-rack AllGather
  RingIna,       // Rina: INA racks are abstracted workers of the ring
};
const char* to_string(Collective c);

}  // namespace ina::schemes
