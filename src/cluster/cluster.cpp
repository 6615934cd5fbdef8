#include "cluster/cluster.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "schemes/admission.hpp"

namespace ina::cluster {

std::string Refusals::text() const {
  std::string t;
  auto add = [&](uint64_t n, const char* who) {
    if (!n) return;
    t += fmt::format("{}{} refused {} packets as malformed or foreign", t.empty() ? "" : "; ", who, n);
  };
  add(switches, "switches");
  add(servers, "PSs");
  add(workers, "workers");
  return t;
}

Refusals count_refusals(const std::vector<const dp::SwitchProgram*>& switches,
                        const std::vector<const host::ParameterServer*>& servers,
                        const std::vector<const host::WorkerTransport*>& workers) {
  Refusals r;
  for (const auto* s : switches) r.switches += s->stats().malformed + s->stats().foreign();
  for (const auto* p : servers) r.servers += p->stats().malformed + p->stats().foreign;
  for (const auto* w : workers) r.workers += w->stats().malformed + w->stats().foreign;
  return r;
}

StarCluster::StarCluster(Simulator& sim, const schemes::Scheme& scheme, const std::vector<int>& workers_per_job,
                         const dp::SwitchConfig& sw, const std::vector<Segment>& segments)
    : sim_(sim), scheme_(scheme), plan_(plan_star(workers_per_job, scheme.has_ps)) {
  if (sim.node_count() != 0) throw std::logic_error("StarCluster: the simulator must be empty");
  if (!segments.empty() && !scheme.segments)
    throw std::invalid_argument(fmt::format("scheme {} gives its jobs no segments", scheme.name));
  auto prog = scheme.make_switch(sw);
  sw_ = prog.get();
  if (sim.add_node(std::move(prog), true) != plan_.sw) throw std::logic_error("StarCluster: the switch is not node 0");
  if (scheme.segments) segs_ = register_segments(*sw_, plan_, segments);
  else slots_ = register_jobs(*sw_, plan_, scheme.isolated);
}

host::WorkerConfig StarCluster::worker(size_t j, size_t rank, host::WorkerConfig w) const {
  const StarJob& job = plan_.jobs.at(j);
  w.job = job.id;
  w.rank = static_cast<uint8_t>(rank);
  w.nworkers = static_cast<uint8_t>(job.workers.size());
  w.self = job.workers.at(rank);
  w.aggregator = plan_.sw;
  w.ps = job.ps;
  w.switches.clear();
  w.window_cap = slots_;  // isolated: slots per pool; shared pools: 0
  w.segment_mem_id = segs_.empty() ? 0 : segs_.at(j).mem_id;  // P4INC-AOI: the worker picks aggregators in it
  w.segment_size = segs_.empty() ? 0 : segs_.at(j).size;
  return w;
}

host::PsConfig StarCluster::ps(size_t j, host::PsConfig p) const {
  const StarJob& job = plan_.jobs.at(j);
  if (job.ps == kNoNode) throw std::logic_error(fmt::format("StarCluster: scheme {} has no PS", scheme_.name));
  p.job = job.id;
  p.workers = job.workers;
  p.sw = plan_.sw;
  p.more_switches.clear();
  return p;
}

void StarCluster::add_host(NodeId planned, std::unique_ptr<Node> n) {
  const NodeId got = sim_.add_node(std::move(n), false);
  if (got != planned) throw std::logic_error(fmt::format("StarCluster: host added as node {}, planned as {}", got, planned));
}

std::vector<host::ParameterServer*> StarCluster::add_servers(const host::PsConfig& base) {
  std::vector<host::ParameterServer*> out;
  if (!scheme_.has_ps) return out;
  for (size_t j = 0; j < plan_.jobs.size(); ++j) {
    auto node = std::make_unique<host::ParameterServer>(ps(j, base));
    out.push_back(node.get());
    add_host(plan_.jobs[j].ps, std::move(node));
  }
  return out;
}

void StarCluster::wire(const std::function<std::pair<LinkParams, LinkParams>(NodeId)>& link) {
  if (sim_.node_count() != plan_.nodes) throw std::logic_error("StarCluster: add every planned host before wiring");
  for (NodeId h = 1; h < plan_.nodes; ++h) {
    const auto [up, down] = link(h);
    sim_.connect(h, plan_.sw, up, down);
  }
  sim_.build_routes();
}

TopologyCluster::TopologyCluster(const schemes::Scheme& scheme, Job job, std::vector<NodeId> switches,
                                 std::vector<RankBits> masks)
    : scheme_(scheme), job_(std::move(job)), switches_(std::move(switches)), masks_(std::move(masks)) {
  if (masks_.size() != switches_.size()) throw std::invalid_argument("TopologyCluster: one mask per switch");
}

std::unique_ptr<dp::SwitchProgram> TopologyCluster::make_switch(size_t i, const dp::SwitchConfig& cfg) const {
  auto prog = scheme_.make_switch(cfg);
  dp::SwitchJob sj;
  sj.job = job_.id;
  sj.workers = job_.workers;
  sj.ps = job_.ps;
  sj.agg_mask = masks_.at(i);
  prog->add_job(sj);
  for (NodeId peer : switches_)
    if (peer != switches_[i]) prog->add_peer(peer);
  return prog;
}

host::WorkerConfig TopologyCluster::worker(size_t rank, NodeId aggregator, host::WorkerConfig w) const {
  w.job = job_.id;
  w.rank = static_cast<uint8_t>(rank);
  w.nworkers = static_cast<uint8_t>(job_.workers.size());
  w.self = job_.workers.at(rank);
  w.aggregator = aggregator;
  w.ps = job_.ps;
  w.switches = switches_;  // results are multicast from whichever switch the tree starts at
  return w;
}

host::PsConfig TopologyCluster::ps(NodeId first_hop, host::PsConfig p) const {
  p.job = job_.id;
  p.workers = job_.workers;
  p.sw = first_hop;
  p.more_switches.clear();
  for (size_t i = 0; i < switches_.size(); ++i)
    if (masks_[i]) p.more_switches.push_back(switches_[i]);  // the reminder fetches from every aggregating switch
  return p;
}

ShardedPsCluster::ShardedPsCluster(const topo::Graph& g, std::vector<std::vector<NodeId>> jobs, bool ina)
    : jobs_(std::move(jobs)) {
  if (jobs_.empty()) throw std::invalid_argument("ShardedPsCluster: no job");
  if (g.num_nodes() >= kMulticast)
    throw std::invalid_argument(fmt::format("topology '{}' has {} nodes, more than the simulator's {}", g.name,
                                            g.num_nodes(), kMulticast - 1));
  std::vector<bool> taken(g.num_nodes(), false);
  for (size_t j = 0; j < jobs_.size(); ++j) {
    const size_t n = jobs_[j].size();
    if (n == 0 || n > kMaxWorkers)
      throw std::invalid_argument(fmt::format("ShardedPsCluster: job {} has {} workers (1..{})", j, n, kMaxWorkers));
    first_.push_back(job_index_.size());
    for (NodeId w : jobs_[j]) {
      if (w >= g.num_nodes() || !g.is_host(w))
        throw std::invalid_argument(fmt::format("ShardedPsCluster: worker node {} is not a host of '{}'", w, g.name));
      if (taken[w]) throw std::invalid_argument(fmt::format("ShardedPsCluster: host {} is in two jobs", w));
      taken[w] = true;
      job_index_.push_back(j);
    }
  }
  if (job_index_.size() >= kMulticast)
    throw std::invalid_argument(fmt::format("ShardedPsCluster: {} shards, more than the {} job ids", job_index_.size(),
                                            kMulticast - 1));
  std::vector<bool> is_ina(g.num_nodes(), false);
  if (ina)
    for (topo::NodeId v : g.ina_switches()) {
      is_ina[v] = true;
      ina_.push_back(static_cast<NodeId>(v));
    }
  std::sort(ina_.begin(), ina_.end());
  const topo::Routing routing(g);
  schemes::AtpTreeBuilder build(g.num_nodes());
  for (size_t shard = 0; shard < job_index_.size(); ++shard) {
    const std::vector<NodeId>& workers = jobs_[job_index_[shard]];
    const size_t n = workers.size(), k = shard - first_[job_index_[shard]];
    const NodeId ps = workers[k];
    // The first INA switch after `from` on its shortest path to the PS, or the PS.
    const schemes::AtpTreeBuilder::Up up = [&](NodeId from) {
      return static_cast<NodeId>(routing.first_in(from, ps, is_ina));
    };
    build.start(ps, n);
    for (size_t r = 0; r < n; ++r)
      if (r != k) build.leaf(r, up(workers[r]), up);  // the PS's own rank: on the same host, no leaf
    trees_.push_back(build.finish());
  }
}

bool ShardedPsCluster::runs_program(NodeId v) const { return std::binary_search(ina_.begin(), ina_.end(), v); }

void ShardedPsCluster::provision(const schemes::Scheme& scheme, const Provision& p) {
  // The addressing changes the scheme's memory rule only where its jobs share a pool.
  const bool regions = schemes::memory_of(scheme, p.pool) != schemes::memory_of(scheme);
  pool_ = regions ? dp::PoolAddressing::Contiguous : dp::PoolAddressing::Hashed;
  window_cap_ = 0;
  if (regions) {
    const schemes::Admission a(schemes::Admission::config_of(scheme, p.fewest_aggregators,
                                                             static_cast<unsigned>(shards()), 1, pool_));
    if (const std::string e = a.memory_error(); !e.empty()) throw std::invalid_argument(e);
    window_cap_ = a.window_cap();
  }
  ina_gbps_ = p.ina_gbps;
}

std::unique_ptr<dp::SwitchProgram> ShardedPsCluster::make_switch(const schemes::Scheme& scheme, NodeId sw,
                                                                 const dp::SwitchConfig& cfg) const {
  if (!runs_program(sw)) throw std::logic_error(fmt::format("ShardedPsCluster: node {} is not an INA switch", sw));
  dp::SwitchConfig c = cfg;
  c.pool = pool_;
  auto prog = scheme.make_switch(c);
  // Contiguous: shard k's region on this switch, from the one admission rule.
  std::optional<schemes::Admission> regions;
  if (pool_ == dp::PoolAddressing::Contiguous) {
    regions.emplace(schemes::Admission::config_of(scheme, prog->aggregators(), static_cast<unsigned>(shards()), 1,
                                                  pool_));
    if (const std::string e = regions->memory_error(); !e.empty()) throw std::invalid_argument(e);
  }
  for (size_t k = 0; k < trees_.size(); ++k) {
    const ShardTree& t = trees_[k];
    dp::SwitchJob j;
    j.job = job_of(k);
    j.workers = jobs_[job_index_[k]];
    j.ps = t.ps;
    if (regions) {
      auto answer = regions->admit({j.job, j.workers, j.ps, std::nullopt});
      if (auto* no = std::get_if<schemes::Admission::Refusal>(&answer)) throw std::invalid_argument(no->reason);
      const schemes::Admission::Grant& g = std::get<schemes::Admission::Grant>(answer);
      j.region_offset = g.region_offset;
      j.region_size = g.region_size;
    }
    if (const ShardTree::Entry* e = t.find(sw); e && e->parent != kNoNode) {
      j.parent = e->parent;
      j.agg_mask = e->subtree;
      j.direct_mask = e->direct;
      j.children = e->children;
    }
    prog->add_job(j);
  }
  for (NodeId peer : ina_)
    if (peer != sw) prog->add_peer(peer);
  return prog;
}

host::WorkerConfig ShardedPsCluster::worker(size_t shard, size_t rank, host::WorkerConfig w) const {
  const ShardTree& t = trees_.at(shard);
  const std::vector<NodeId>& workers = jobs_[job_index_[shard]];
  w.job = job_of(shard);
  w.rank = static_cast<uint8_t>(rank);
  w.nworkers = static_cast<uint8_t>(workers.size());
  w.self = workers.at(rank);
  w.aggregator = t.first.at(rank);
  w.ps = t.ps;
  w.switches = ina_;  // a result passing an INA switch leaves it as that switch's packet
  w.window_cap = window_cap_;
  if (ina_gbps_ > 0 && !t.switches.empty() && workers.size() > 1) {
    // One rate for every member of a shard whose tree aggregates in a switch:
    // ina_gbps over the N - 1 shards a host sends on the wire (its own
    // shard's PS is itself). A member faster than the others gains nothing
    // (the shard's results come at its slowest member's rate), and its lead
    // waits at the aggregator or the PS, a queue no switch marks: its window
    // and with it its RTT grow until its RTO fires with nothing lost. So the
    // PS's own rank, and a rank whose path to the PS crosses no INA switch,
    // go at the rate of the ranks that send to an INA switch.
    w.rate_gbps = ina_gbps_ / static_cast<double>(workers.size() - 1);
  }
  return w;
}

host::PsConfig ShardedPsCluster::ps(size_t shard, host::PsConfig p) const {
  const ShardTree& t = trees_.at(shard);
  p.job = job_of(shard);
  p.workers = jobs_[job_index_[shard]];
  p.sw = kNoNode;
  p.more_switches = t.switches;  // the reminder fetches from every switch of the tree
  return p;
}

}  // namespace ina::cluster
