#include "schemes/ring_plan.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace ina::schemes {

std::vector<std::vector<host::RingStage>> ring_plan(const Scheme& s, size_t n,
                                                    const std::vector<std::vector<uint16_t>>& racks,
                                                    const std::vector<NodeId>& tors, uint64_t elems) {
  switch (s.collective) {
    case Collective::Ring: return host::plan_rar(n, elems);
    case Collective::Hierarchical: return host::plan_hierarchical(racks, elems);
    case Collective::RingIna: return host::plan_rina(racks, tors, elems);
    default: throw std::invalid_argument(fmt::format("{}: its jobs do not run as a ring", s.name));
  }
}

}  // namespace ina::schemes
