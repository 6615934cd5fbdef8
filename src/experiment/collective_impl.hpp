#pragma once
// Internal to run_collective: one function per collective family, each in
// its own file. `jobs` are the placed workers (graph node ids by rank).
#include "experiment/collective.hpp"
#include "schemes/registry.hpp"
#include "sim/network.hpp"

namespace ina::exp::detail {

// PS (co-located, sharded over the workers) and PS-based INA (ATP over the topology).
CollectiveResult run_ps_family(const topo::Graph& g, const schemes::Scheme& scheme, const sim::Placement& pl,
                               const CollectiveSettings& s);
// RAR, H-AR and Rina (host/ring.hpp, dataplane/rina.cpp).
CollectiveResult run_ring_family(const topo::Graph& g, const schemes::Scheme& scheme, const sim::Placement& pl,
                                 const CollectiveSettings& s);

}  // namespace ina::exp::detail
