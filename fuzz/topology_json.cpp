// Fuzz target: the JSON topology reader (src/topo/topology_json.cpp).
// A TopologyError is the documented answer to bad input; anything else
// (crash, sanitizer report, another exception type such as nlohmann's) is a
// finding. A topology that loads must satisfy the graph's invariants.
#include <string>

#include "fuzz.hpp"
#include "topo/graph.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const ina::topo::TopologyFile f = ina::topo::parse_topology_json(text, "<fuzz>.json");
    const ina::topo::Graph& g = f.graph;
    FUZZ_CHECK(g.num_nodes() > 0, "a loaded topology has no nodes");
    FUZZ_CHECK(g.hosts().size() + g.switches().size() == g.num_nodes(), "hosts + switches != nodes");
    (void)g.tor_switches();
    if (f.job) {
      const ina::topo::Job job = ina::topo::resolve_job(g, *f.job, "<fuzz>");
      FUZZ_CHECK(job.workers.size() == f.job->workers.size(), "job resolves to %zu of %zu workers",
                 job.workers.size(), f.job->workers.size());
    }
  } catch (const ina::topo::TopologyError&) {
  }
  return 0;
}
