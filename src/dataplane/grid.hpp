#pragma once
// GRID's settings (grid.cpp, the routed policy): the switch's aggregation
// capacity and the eviction that keeps a unit from blocking its index.
#include <cstdint>

namespace ina::dp {

struct GridConfig {
  double capacity_gbps = 0;  // aggregation processing capacity C_s (0 = unlimited)
  uint32_t evict_after = 8;  // collisions after which a unit's partial goes to the PS
};

}  // namespace ina::dp
