#include "experiment/collective.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "experiment/collective_impl.hpp"

namespace ina::exp {

CollectiveResult run_collective(const topo::Graph& g, const std::string& scheme_name, const CollectiveSettings& s) {
  const schemes::Scheme& scheme = schemes::find(scheme_name, schemes::Engine::SimNetwork);
  std::vector<int> sizes = s.workers_per_job;
  if (sizes.size() == 1 && sizes[0] == 0) sizes[0] = static_cast<int>(g.hosts().size());
  const sim::Placement pl = sim::place_rack_packed(g, sizes);
  switch (scheme.collective) {
    case schemes::Collective::Ps:
    case schemes::Collective::PsIna:
      return detail::run_ps_family(g, scheme, pl, s);
    case schemes::Collective::Ring:
    case schemes::Collective::Hierarchical:
    case schemes::Collective::RingIna:
      return detail::run_ring_family(g, scheme, pl, s);
    case schemes::Collective::None:
      break;
  }
  throw std::invalid_argument(fmt::format("scheme {} has no collective for multi-switch topologies", scheme.name));
}

}  // namespace ina::exp
