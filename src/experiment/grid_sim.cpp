#include "experiment/grid_sim.hpp"

#include <algorithm>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "dataplane/switch.hpp"
#include "host/ps.hpp"
#include "host/worker_node.hpp"
#include "schemes/registry.hpp"
#include "sim/engine.hpp"
#include "workload/model.hpp"

namespace ina::exp {
namespace {

// A host with no role in the job: it only sinks what reaches it.
class IdleHost final : public Node {
 public:
  void on_packet(Packet* p, Time, Effects& fx) override { fx.free(p); }
  void on_timer(uint64_t, Time, Effects&) override {}
};

}  // namespace

GridSimResult simulate_plan(const topo::Graph& g, const topo::Job& job, const control::grid::Plan& plan,
                            const GridSimSettings& s) {
  if (g.num_nodes() >= kMulticast) throw std::invalid_argument("topology too large for the simulator's node ids");
  if (plan.workers.size() != job.workers.size() || job.workers.size() > kMaxWorkers)
    throw std::invalid_argument("plan and job disagree on the workers (or more than 64 workers)");
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
  std::unordered_map<topo::NodeId, uint64_t> mask;
  for (const auto& wp : plan.workers) mask[wp.node] |= 1ULL << rank_of.at(wp.worker);
  std::vector<NodeId> agg_switches;  // fetched by the PS's reminder
  for (topo::NodeId v = 0; v < g.num_nodes(); ++v)
    if (!g.is_host(v) && mask.count(v)) agg_switches.push_back(static_cast<NodeId>(v));

  std::vector<NodeId> all_switches;  // peers of each other; results may come from any of them
  for (topo::NodeId v = 0; v < g.num_nodes(); ++v)
    if (!g.is_host(v)) all_switches.push_back(static_cast<NodeId>(v));

  const schemes::Scheme& scheme = schemes::find("grid", schemes::Engine::SimTopology);
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
      dp::SwitchConfig c;
      c.memory_bytes = static_cast<uint64_t>(s.memory_mb * workload::kMiB);
      c.payload_values = s.payload_values;
      c.capacity_gbps = node.ina ? node.capacity_gbps : 0;
      c.seed = mix(s.seed, v);
      auto prog = scheme.make_switch(c);
      dp::SwitchJob sj;
      sj.job = job_id;
      sj.workers = workers;
      sj.ps = ps_id;
      auto it = mask.find(v);
      sj.agg_mask = it == mask.end() ? 0 : it->second;
      if (sj.agg_mask && !node.ina)
        throw std::invalid_argument(fmt::format("plan aggregates at '{}', which is not programmable", node.name));
      prog->add_job(sj);
      for (NodeId peer : all_switches)
        if (peer != v) prog->add_peer(peer);
      switches.push_back(prog.get());
      sim.add_node(std::move(prog), true);
    } else if (v == job.ps) {
      host::PsConfig pc;
      pc.job = job_id;
      pc.workers = workers;
      pc.sw = static_cast<NodeId>(g.neighbors(v)[0].peer);
      pc.more_switches = agg_switches;
      auto p = std::make_unique<host::ParameterServer>(pc);
      ps = p.get();
      sim.add_node(std::move(p), false);
    } else if (auto r = rank_of.find(v); r != rank_of.end()) {
      const auto& wp = plan.workers[r->second];
      host::WorkerConfig w;
      w.job = job_id;
      w.rank = static_cast<uint8_t>(r->second);
      w.nworkers = static_cast<uint8_t>(n);
      w.self = static_cast<NodeId>(v);
      w.aggregator = static_cast<NodeId>(wp.node);
      w.switches = all_switches;
      w.ps = ps_id;
      w.payload_values = s.payload_values;
      w.init_window = std::max(1.0, s.init_window_kb * 1000 / pkt_bytes);
      w.rate_gbps = s.pace ? wp.rate_gbps : 0;
      w.wire_bytes = static_cast<uint32_t>(pkt_bytes);
      auto wn = std::make_unique<host::WorkerNode>(w);
      tensors[r->second] = std::make_shared<host::SyntheticTensor>(data_seed, r->second, n);
      wn->submit(tensors[r->second], elems);
      nodes[r->second] = wn.get();
      sim.add_node(std::move(wn), false);
    } else {
      sim.add_node(std::make_unique<IdleHost>(), false);
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
  uint64_t sw_bad = 0, w_bad = 0;
  for (auto* sw : switches) sw_bad += sw->stats().malformed + sw->stats().foreign();
  for (auto* w : nodes) w_bad += w->transport().stats().malformed + w->transport().stats().foreign;
  if (sw_bad) probs.push_back(fmt::format("switches refused {} packets as malformed or foreign", sw_bad));
  if (ps->stats().malformed + ps->stats().foreign)
    probs.push_back(fmt::format("the PS refused {} packets as malformed and {} as foreign", ps->stats().malformed,
                                ps->stats().foreign));
  if (w_bad) probs.push_back(fmt::format("workers refused {} packets as malformed or foreign", w_bad));
  out.ok = probs.empty();
  for (size_t i = 0; i < probs.size(); ++i) out.problems += (i ? "; " : "") + probs[i];
  return out;
}

}  // namespace ina::exp
