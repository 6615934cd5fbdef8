#pragma once
// Equal-cost multipath (ECMP) choice, shared by topo::Routing (the planners'
// paths) and the packet simulator's route(): among the `count` equal-cost
// next hops of node `node` for a flow from `from` to `to`, the one at index
// ecmp_index(from, to, node, count). A flow (from, to) therefore always takes
// the same path, different flows spread, and both engines pick the same hop
// when they list the candidates in the same order (the simulator built from a
// topo::Graph, one sim link per arc in arc order, does).
#include <cstddef>
#include <cstdint>

#include "core/rng.hpp"

namespace ina {

constexpr size_t ecmp_index(uint64_t from, uint64_t to, uint64_t node, size_t count) {
  return static_cast<size_t>(mix(mix(from, to), node) % count);
}

}  // namespace ina
