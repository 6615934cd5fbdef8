#include "schemes/registry.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace ina::schemes {
namespace {

std::vector<Scheme> registered() {
  using E = Engine;
  const unsigned star_and_runtime = E::SimStar | E::Runtime | E::Training;
  std::vector<Scheme> v;
  {
    Scheme s;
    s.name = "switchml";
    s.aliases = {"isolated"};
    s.description = "SwitchML: an isolated region per job, synchronous slots with a shadow copy, no PS";
    s.policy = "isolated";
    s.factory = dp::make_switchml;
    s.has_ps = false;
    s.isolated = true;
    s.engines = star_and_runtime | E::SimSparse;
    s.sparse = Sparse::Dense;
    s.paper_payload_bytes = 128;
    s.paper_header_bytes = 52;
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "atp";
    s.aliases = {"shared-fcfs"};
    s.description = "ATP: a shared pool, Hash(job, PSN), first come first served, collisions to the PS";
    s.policy = "shared-fcfs";
    s.factory = dp::make_atp;
    s.engines = star_and_runtime | E::SimNetwork | E::Layout;  // layout: ATP over racks
    s.collective = Collective::PsIna;
    s.hosts_sparse = true;
    s.ring_pool = dp::RingMemory::PoolAtp;
    s.paper_payload_bytes = 256;
    s.paper_header_bytes = 50;
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "dsa";
    s.aliases = {"preemptive"};
    s.description = "DSA: a shared pool with priority preemption (Eq. 1 priorities) and downgrading";
    s.policy = "preemptive";
    s.factory = dp::make_dsa;
    s.eq1_priority = true;
    s.track_tasks = true;
    s.engines = star_and_runtime | E::SimNetwork | E::Layout;  // layout: DSA over racks, ATP's tree
    s.collective = Collective::PsIna;  // on a topology: sharded PSes, DSA at the INA switches of each shard's tree
    s.hosts_sparse = true;
    s.ring_pool = dp::RingMemory::PoolDsa;
    s.paper_payload_bytes = 256;
    s.paper_header_bytes = 50;
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "dsa-join";
    s.description =
        "DSA with a cheaper join of split tasks (ours, not the paper's): the switch sends its half of a task "
        "to the PS as soon as the halves cover every worker";
    s.policy = "preemptive";
    s.factory = dp::make_dsa;
    s.join_splits = true;
    s.eq1_priority = true;
    s.track_tasks = true;
    s.engines = static_cast<unsigned>(E::SimStar);
    s.paper_payload_bytes = 256;
    s.paper_header_bytes = 50;
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "dsa-always";
    s.description = "DSA strawman (Fig. 11): a colliding first transmission always preempts";
    s.policy = "preemptive";
    s.factory = dp::make_dsa;
    s.preempt = dp::PreemptMode::Always;
    s.track_tasks = true;
    s.engines = static_cast<unsigned>(E::SimStar);
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "dsa-coin";
    s.description = "DSA strawman (Fig. 11): a colliding first transmission preempts with probability 1/2";
    s.policy = "preemptive";
    s.factory = dp::make_dsa;
    s.preempt = dp::PreemptMode::Coin;
    s.track_tasks = true;
    s.engines = static_cast<unsigned>(E::SimStar);
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "grid";
    s.aliases = {"routed"};
    s.description = "GRID: gradient routing over several switches (a planned node per fragment), rate sync, PS";
    s.policy = "routed";
    s.factory = dp::make_grid;
    s.routed = true;
    // layout: the plan's aggregation nodes and rates (ring_layout.hpp), e.g. scripts/grid-netns
    s.engines = E::SimTopology | E::Layout;
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "ps";
    s.description = "Parameter servers co-located with the workers (one shard each), no INA";
    s.policy = "none";
    s.engines = static_cast<unsigned>(E::SimNetwork);
    s.collective = Collective::Ps;
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "rar";
    s.aliases = {"ring"};
    s.description = "Ring-AllReduce: ScatterReduce and AllGather, 2(N-1) steps of S/N, no INA";
    s.policy = "none";
    s.has_ps = false;
    s.engines = E::SimNetwork | E::Runtime | E::Layout;  // runtime: ina run / ina ring-worker (runtime/ring_worker.hpp)
    s.collective = Collective::Ring;
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "h-ar";
    s.aliases = {"hierarchical"};
    s.description = "Hierarchical AllReduce: intra-rack ScatterReduce, inter-rack rings, intra-rack AllGather";
    s.policy = "none";
    s.has_ps = false;
    s.engines = E::SimNetwork | E::Runtime | E::Layout;  // runtime: ina run / ina ring-worker (runtime/ring_worker.hpp)
    s.collective = Collective::Hierarchical;
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "rina";
    s.description = "Rina: racks with an INA ToR are one abstracted worker of the ring (agent, pull, ToR aggregation)";
    s.policy = "ring-ina";
    s.factory = dp::make_rina;
    s.has_ps = false;
    s.engines = E::SimNetwork | E::Runtime | E::Layout;  // runtime: ina run / ina ring-worker (runtime/ring_worker.hpp)
    s.collective = Collective::RingIna;
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "zebra";
    s.description = "Zebra: sparse <key, value> gradients; hot keys aggregated in the switch, cold keys at the PS";
    s.policy = "sparse-hot";
    s.factory = dp::make_zebra;
    s.engines = E::SimSparse | E::Runtime;  // runtime: ina switch / ps, ina::Communicator::allreduce_sparse
    s.sparse = Sparse::HotIna;
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "ps-lite";
    s.aliases = {"pslite"};
    s.description = "PS-lite-style sparse push: every non-zero <key, value> pair to the PS, no INA";
    s.policy = "none";
    s.factory = dp::make_zebra;  // the star's switch only forwards and replicates the PS's results
    s.engines = E::SimSparse | E::Runtime;
    s.sparse = Sparse::Push;
    v.push_back(std::move(s));
  }
  {
    Scheme s;
    s.name = "p4inc-aoi";
    s.aliases = {"aoi"};
    s.description =
        "P4INC-AOI: a segment <MemID, Size> per job, the worker picks the aggregator, no PS (results from the "
        "switch), shadow copy, ECN on asynchronous errors";
    s.policy = "segments";
    s.factory = dp::make_aoi;
    s.has_ps = false;
    s.segments = true;
    s.engines = static_cast<unsigned>(E::SimStar);
    v.push_back(std::move(s));
  }
  return v;
}

template <class S>
std::string or_list(const std::vector<S>& names) {
  if (names.empty()) return "none";
  if (names.size() == 1) return std::string(names[0]);
  std::string out;
  for (size_t i = 0; i + 1 < names.size(); ++i) (out += i ? ", " : "") += names[i];
  return (out += " or ") += names.back();
}

}  // namespace

const char* to_string(Engine e) {
  switch (e) {
    case Engine::SimStar: return "the star simulator";
    case Engine::SimTopology: return "the topology simulator";
    case Engine::Runtime: return "the runtime";
    case Engine::Training: return "training";
    case Engine::SimNetwork: return "the network simulator";
    case Engine::SimSparse: return "the sparse simulator";
    case Engine::Layout: return "the runtime's static layouts";
  }
  return "?";
}

const char* to_string(Collective c) {
  switch (c) {
    case Collective::None: return "none";
    case Collective::Ps: return "ps";
    case Collective::PsIna: return "ps-ina";
    case Collective::Ring: return "ring";
    case Collective::Hierarchical: return "hierarchical";
    case Collective::RingIna: return "ring-ina";
  }
  return "?";
}

const char* to_string(Sparse s) {
  switch (s) {
    case Sparse::None: return "none";
    case Sparse::Push: return "push";
    case Sparse::HotIna: return "hot-ina";
    case Sparse::Dense: return "dense";
  }
  return "?";
}

bool Scheme::answers_to(std::string_view n) const {
  return n == name || std::find(aliases.begin(), aliases.end(), n) != aliases.end();
}

std::unique_ptr<dp::SwitchProgram> Scheme::make_switch(dp::SwitchConfig cfg) const {
  if (!factory) throw std::logic_error(fmt::format("scheme {} has no switch program", name));
  cfg.dsa.preempt = preempt;
  cfg.dsa.join_splits = join_splits;
  auto prog = factory(cfg, name);
  if (cfg.zebra.kv_pool && (!hosts_sparse || !prog->runs_sparse())) {
    std::string can;
    for (const auto& x : all())
      if (x.hosts_sparse) can += (can.empty() ? "" : ", ") + x.name;
    throw std::invalid_argument(fmt::format("scheme {}: its pool cannot hold sparse jobs (kv_pool); those that can: {}",
                                            name, can));
  }
  return prog;
}

const std::vector<Scheme>& all() {
  static const std::vector<Scheme> schemes = registered();
  return schemes;
}

const Scheme* lookup(std::string_view name) {
  for (const Scheme& s : all())
    if (s.answers_to(name)) return &s;
  return nullptr;
}

const Scheme& find(std::string_view name) {
  if (const Scheme* s = lookup(name)) return *s;
  std::vector<std::string> known;
  for (const Scheme& s : all()) known.push_back(s.name);
  throw UnknownScheme(fmt::format("unknown scheme '{}' (known schemes: {})", name, or_list(known)));
}

const Scheme& find(std::string_view name, Engine e) {
  const Scheme* s = lookup(name);
  if (!s) throw UnknownScheme(fmt::format("unknown scheme '{}' (schemes of {}: {})", name, to_string(e), names_text(e)));
  if (!s->supports(e))
    throw UnknownScheme(fmt::format("scheme '{}' is not supported by {} (schemes of {}: {})", name, to_string(e),
                                    to_string(e), names_text(e)));
  return *s;
}

std::vector<std::string> names(Engine e) {
  std::vector<std::string> out;
  for (const Scheme& s : all())
    if (s.supports(e)) out.push_back(s.name);
  return out;
}

std::string names_text(Engine e) { return or_list(names(e)); }

const Scheme* ring_pool_scheme(std::string_view name) {
  for (const Scheme& s : all())
    if (s.ring_pool != dp::RingMemory::Region && s.name == name) return &s;
  return nullptr;
}

std::vector<std::string_view> ring_pool_names() {
  std::vector<std::string_view> out;
  for (const Scheme& s : all())
    if (s.ring_pool != dp::RingMemory::Region) out.push_back(s.name);
  return out;
}

std::string ring_pool_names_text() { return or_list(ring_pool_names()); }

std::string help(Engine e) {
  std::string out;
  for (const Scheme& s : all()) {
    if (!s.supports(e)) continue;
    std::string n = s.name;
    for (const auto& a : s.aliases) n += "|" + a;
    out += fmt::format("\n  {:<22} {}", n, s.description);
  }
  return out;
}

}  // namespace ina::schemes
