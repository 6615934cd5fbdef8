#include "experiment/grid_sim.hpp"

#include <algorithm>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "dataplane/switch.hpp"
#include "host/ps.hpp"
#include "host/worker_node.hpp"
#include "schemes/registry.hpp"
#include "cluster/cluster.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "workload/model.hpp"

namespace ina::exp {

GridSimResult simulate_plan(const topo::Graph& g, const topo::Job& job, const control::grid::Plan& plan,
                            const GridSimSettings& s) {
  if (g.num_nodes() >= kMulticast) throw std::invalid_argument("topology too large for the simulator's node ids");
  if (plan.workers.size() != job.workers.size() || job.workers.size() > kMaxWorkers)
    throw std::invalid_argument(fmt::format("plan and job disagree on the workers (or more than {} workers)", kMaxWorkers));
  for (topo::NodeId v = 0; v < g.num_nodes(); ++v)
    if (g.is_host(v) && g.neighbors(v).size() != 1)
      throw std::invalid_argument(fmt::format("the simulator needs every host on exactly one link ('{}' has {})",
                                              g.node(v).name, g.neighbors(v).size()));
  const auto n = static_cast<unsigned>(job.workers.size());
  const uint16_t job_id = 1;
  std::vector<NodeId> workers(n);
  std::unordered_map<topo::NodeId, unsigned> rank_of;
  for (unsigned r = 0; r < n; ++r) {
    workers[r] = static_cast<NodeId>(job.workers[r]);
    rank_of[job.workers[r]] = r;
  }
  const auto ps_id = static_cast<NodeId>(job.ps);
  // Aggregation masks per switch from the plan.
  std::unordered_map<topo::NodeId, RankBits> mask;
  for (const auto& wp : plan.workers) mask[wp.node] |= RankBits::bit(rank_of.at(wp.worker));
  std::vector<NodeId> switch_ids;
  std::vector<RankBits> switch_masks;
  std::unordered_map<topo::NodeId, size_t> switch_index;
  for (topo::NodeId v = 0; v < g.num_nodes(); ++v) {
    if (g.is_host(v)) continue;
    switch_index[v] = switch_ids.size();
    switch_ids.push_back(static_cast<NodeId>(v));
    auto it = mask.find(v);
    switch_masks.push_back(it == mask.end() ? RankBits{} : it->second);
  }

  const schemes::Scheme& scheme = schemes::find("grid", schemes::Engine::SimTopology);
  const cluster::TopologyCluster cluster(scheme, {job_id, workers, ps_id}, switch_ids, switch_masks);
  sim::Simulator sim(s.seed, s.payload_values, s.header_bytes);
  std::vector<dp::SwitchProgram*> switches;
  std::vector<host::WorkerNode*> nodes(n, nullptr);
  std::vector<std::shared_ptr<host::SyntheticTensor>> tensors(n);
  host::ParameterServer* ps = nullptr;
  const uint64_t elems = static_cast<uint64_t>(s.gradient_mb * workload::kMiB / 4);
  const uint64_t data_seed = mix(s.seed, 0x9d1d);
  const double pkt_bytes = 4.0 * s.payload_values + s.header_bytes;

  for (topo::NodeId v = 0; v < g.num_nodes(); ++v) {
    const auto& node = g.node(v);
    if (!g.is_host(v)) {
      const size_t i = switch_index.at(v);
      if (switch_masks[i] && !node.ina)
        throw std::invalid_argument(fmt::format("plan aggregates at '{}', which is not programmable", node.name));
      dp::SwitchConfig c;
      c.memory_bytes = static_cast<uint64_t>(s.memory_mb * workload::kMiB);
      c.payload_values = s.payload_values;
      c.grid.capacity_gbps = node.ina ? node.capacity_gbps : 0;
      c.seed = mix(s.seed, v);
      auto prog = cluster.make_switch(i, c);
      switches.push_back(prog.get());
      sim.add_node(std::move(prog), true);
    } else if (v == job.ps) {
      auto p = std::make_unique<host::ParameterServer>(cluster.ps(static_cast<NodeId>(g.neighbors(v)[0].peer)));
      ps = p.get();
      sim.add_node(std::move(p), false);
    } else if (auto r = rank_of.find(v); r != rank_of.end()) {
      const auto& wp = plan.workers[r->second];
      host::WorkerConfig w;
      w.payload_values = s.payload_values;
      w.init_window = std::max(1.0, s.init_window_kb * 1000 / pkt_bytes);
      w.rate_gbps = s.pace ? wp.rate_gbps : 0;
      w.wire_bytes = static_cast<uint32_t>(pkt_bytes);
      auto wn = std::make_unique<host::WorkerNode>(cluster.worker(r->second, static_cast<NodeId>(wp.node), w));
      tensors[r->second] = std::make_shared<host::SyntheticTensor>(data_seed, r->second, n);
      wn->submit(tensors[r->second], elems);
      nodes[r->second] = wn.get();
      sim.add_node(std::move(wn), false);
    } else {
      sim.add_node(std::make_unique<sim::Forwarder>(), false);  // a host outside the job: sinks what reaches it
    }
  }
  for (const auto& l : g.links()) {
    sim::LinkParams lp;
    lp.gbps = l.gbps;
    lp.delay = from_us(s.link_delay_us);
    lp.loss = s.loss;
    lp.queue_bytes = 4 << 20;
    lp.ecn_bytes = 0;
    sim.connect(static_cast<NodeId>(l.a), static_cast<NodeId>(l.b), lp, lp);
  }
  sim.build_routes();
  sim.set_multicast_group(job_id, workers);  // results fan out along the tree
  sim.set_trace(s.trace);
  sim.run(from_ms(s.max_sim_ms));

  GridSimResult out;
  out.planned_lambda_gbps = plan.lambda_gbps;
  const double wire_bits = 8.0 * pkt_bytes * static_cast<double>((elems + s.payload_values - 1) / s.payload_values);
  Time end = 0;
  size_t unfinished = 0;
  double sum = 0, mn = 1e300;
  for (unsigned r = 0; r < n; ++r) {
    const auto* w = nodes[r];
    if (w->completed() != 1) { ++unfinished; out.worker_gbps.push_back(0); continue; }
    end = std::max(end, w->finish_time());
    const double gbps = wire_bits / (static_cast<double>(w->finish_time()) / kSec) / 1e9;
    out.worker_gbps.push_back(gbps);
    sum += gbps;
    mn = std::min(mn, gbps);
    out.retransmits += w->transport().stats().retransmits;
    out.verify_errors += tensors[r]->mismatches();
  }
  out.achieved_min_gbps = unfinished ? 0 : mn;
  out.achieved_avg_gbps = n ? sum / n : 0;
  out.comm_time_ms = to_ms(end);
  uint64_t agg_packets = 0;
  for (auto* sw : switches) {
    agg_packets += sw->stats().aggregated;
    out.rate_syncs += sw->stats().rate_syncs;
    out.evictions += sw->stats().evictions;
  }
  const double secs = static_cast<double>(end) / kSec;
  if (secs > 0) {
    out.switch_agg_gbps = 8.0 * pkt_bytes * static_cast<double>(agg_packets) / secs / 1e9;
    const auto& ps_link = sim.link(sim.uplink(ps_id) ^ 1);  // the link into the PS
    out.ps_ingress_gbps = 8.0 * static_cast<double>(ps_link.st.bytes) / secs / 1e9;
  }
  std::vector<std::string> probs;
  if (unfinished) probs.push_back(fmt::format("{} workers did not finish within {} ms", unfinished, s.max_sim_ms));
  if (out.verify_errors) probs.push_back(fmt::format("{} result values differ from the exact sum", out.verify_errors));
  if (!unfinished && ps->entries()) probs.push_back(fmt::format("{} PS entries left", ps->entries()));
  // Every node is honest here: anything refused is a protocol bug.
  std::vector<const dp::SwitchProgram*> sws(switches.begin(), switches.end());
  std::vector<const host::WorkerTransport*> transports;
  for (auto* w : nodes) transports.push_back(&w->transport());
  if (const cluster::Refusals refused = cluster::count_refusals(sws, {ps}, transports); refused.total())
    probs.push_back(refused.text());
  out.ok = probs.empty();
  for (size_t i = 0; i < probs.size(); ++i) out.problems += (i ? "; " : "") + probs[i];
  return out;
}

}  // namespace ina::exp
