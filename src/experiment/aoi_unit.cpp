#include "experiment/aoi_unit.hpp"

#include <cmath>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "core/rng.hpp"
#include "dataplane/switch.hpp"
#include "experiment/runner.hpp"
#include "core/time.hpp"
#include "host/congestion_window.hpp"
#include "host/tensor_io.hpp"
#include "host/worker_node.hpp"
#include "schemes/registry.hpp"
#include "cluster/cluster.hpp"
#include "sim/engine.hpp"

namespace ina::exp {

AoiUnitResult run_aoi_unit(const std::vector<AoiUnitJob>& jobs, const AoiUnitOptions& opt) {
  if (jobs.empty()) throw std::invalid_argument("aoi unit: no jobs");
  if (opt.payload_bytes < 4 || opt.payload_bytes % 4 || opt.payload_bytes > 8192)
    throw std::invalid_argument(fmt::format("aoi unit: payload_bytes {} must be a multiple of 4 in [4, 8192]", opt.payload_bytes));
  size_t given = 0;
  std::vector<int> workers;
  std::vector<cluster::Segment> segs;
  for (const auto& j : jobs) {
    if (j.workers < 1 || j.workers > 64)
      throw std::invalid_argument(fmt::format("aoi unit: job {} has {} workers (1..64)", j.job, j.workers));
    if (j.bytes_per_worker == 0) throw std::invalid_argument(fmt::format("aoi unit: job {} pushes 0 bytes", j.job));
    given += j.size > 0;
    workers.push_back(j.workers);
    segs.push_back({j.mem_id, j.size});
  }
  if (given != 0 && given != jobs.size())
    throw std::invalid_argument("aoi unit: give every job a segment (size > 0) or none (equal split)");
  if (!given) segs.clear();

  const schemes::Scheme& spec = schemes::find("p4inc-aoi", schemes::Engine::SimStar);
  const auto payload_values = static_cast<uint16_t>(opt.payload_bytes / 4);
  sim::Simulator sim(opt.seed, payload_values, static_cast<uint32_t>(opt.header_bytes));
  dp::SwitchConfig swc;
  swc.memory_bytes = static_cast<uint64_t>(opt.memory_mb * (1 << 20));
  swc.payload_values = payload_values;
  swc.seed = mix(opt.seed, 0x5);
  std::unique_ptr<cluster::StarCluster> cluster;
  try {
    cluster = std::make_unique<cluster::StarCluster>(sim, spec, workers, swc, segs);
  } catch (const std::invalid_argument& e) {  // the switch's check names the switch's job number: map it back
    throw std::invalid_argument(fmt::format("aoi unit: bad segments (jobs numbered 1..{} in the given order): {}",
                                            jobs.size(), e.what()));
  }
  const cluster::StarPlan& plan = cluster->plan();
  const double pkt_bytes = opt.payload_bytes + opt.header_bytes;

  std::vector<std::vector<host::WorkerNode*>> nodes(jobs.size());
  std::vector<std::vector<std::shared_ptr<host::SyntheticTensor>>> tensors(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    const uint64_t elems = (jobs[j].bytes_per_worker + 3) / 4;
    for (int r = 0; r < jobs[j].workers; ++r) {
      host::WorkerConfig w;
      w.payload_values = payload_values;
      w.init_window = std::max(1.0, opt.init_window_kb * 1000 / pkt_bytes);
      w.bdp_packets = host::window_covering(opt.link_gbps, from_us(opt.rtt_us), pkt_bytes);
      w = cluster->worker(j, static_cast<size_t>(r), w);
      auto t = std::make_shared<host::SyntheticTensor>(mix(opt.seed, 0xA01 + j), static_cast<unsigned>(r),
                                                        static_cast<unsigned>(jobs[j].workers));
      auto node = std::make_unique<host::WorkerNode>(w, 0);
      node->submit(t, elems);
      nodes[j].push_back(node.get());
      tensors[j].push_back(std::move(t));
      cluster->add_host(plan.jobs[j].workers[static_cast<size_t>(r)], std::move(node));
    }
  }
  Settings ls;  // the star's links as `ina sim` builds them
  ls.link_gbps = opt.link_gbps;
  ls.rtt_us = opt.rtt_us;
  ls.queue_kb = opt.queue_kb;
  ls.ecn_kb = opt.ecn_kb;
  ls.loss = opt.loss;
  const sim::LinkParams link = star_link(ls);
  cluster->wire([&](NodeId) { return std::make_pair(link, link); });
  sim.run(from_ms(opt.max_sim_ms));
  bool finished = true;
  for (const auto& job : nodes)
    for (const auto* n : job) finished &= n->completed() == 1;
  if (finished) sim.run(sim.now() + 2 * kSec);  // stale timers and late packets: what is left is a leak

  AoiUnitResult out;
  const dp::SwitchProgram& sw = cluster->sw();
  std::vector<std::string> probs;
  std::vector<const host::WorkerTransport*> transports;
  size_t unfinished = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    AoiUnitJobResult r;
    r.job = jobs[j].job;
    r.mem_id = cluster->segments()[j].mem_id;
    r.size = cluster->segments()[j].size;
    Time finish = 0;
    bool done = true;
    for (size_t k = 0; k < nodes[j].size(); ++k) {
      const auto* n = nodes[j][k];
      transports.push_back(&n->transport());
      const auto& st = n->transport().stats();
      r.retransmits += st.retransmits;
      r.timeouts += st.timeouts;
      r.ecn_notices += st.ecn_notices;
      r.behind += st.behind;
      r.values_checked += tensors[j][k]->checked();
      r.mismatches += tensors[j][k]->mismatches();
      if (n->completed() != 1) { done = false; ++unfinished; continue; }
      finish = std::max(finish, n->finish_time());
    }
    r.completion_ms = done ? to_ms(finish) : std::nan("");
    const uint64_t want = (jobs[j].bytes_per_worker + 3) / 4 * nodes[j].size();
    if (done && (r.mismatches || r.values_checked != want))
      probs.push_back(fmt::format("job {}: {} of {} values checked, {} differ from the exact sum", r.job,
                                  r.values_checked, want, r.mismatches));
    out.sim_ms = std::max(out.sim_ms, done ? r.completion_ms : 0);
    out.jobs.push_back(r);
  }
  const auto& ss = sw.stats();
  out.async_errors = ss.async_errors;
  out.shadow_resends = ss.resend_served;
  out.stale = ss.stale;
  out.duplicates = ss.duplicates;
  out.completed = ss.completed;
  out.occupied_after = sw.occupied();
  out.refused = cluster::count_refusals({&sw}, {}, transports).total();
  out.packets_leaked = sim.packets_in_use();
  if (const auto* slots = dp::aoi_slots(sw)) {
    for (size_t i = 0; i < slots->size(); ++i)
      for (uint16_t id : (*slots)[i].jobs) {
        const cluster::Segment& s = cluster->segments().at(id - 1u);
        out.outside_segment += (*slots)[i].jobs.size() > 1 || i < s.mem_id || i >= uint64_t{s.mem_id} + s.size;
      }
  }
  if (unfinished) probs.push_back(fmt::format("{} workers did not finish within {} ms", unfinished, opt.max_sim_ms));
  if (finished && out.occupied_after) probs.push_back(fmt::format("{} aggregators still occupied", out.occupied_after));
  if (finished && out.packets_leaked) probs.push_back(fmt::format("{} packets leaked", out.packets_leaked));
  if (out.refused) probs.push_back(fmt::format("{} packets refused as malformed or foreign", out.refused));
  if (out.outside_segment) probs.push_back(fmt::format("{} aggregator touches outside a job's segment", out.outside_segment));
  out.ok = probs.empty();
  for (size_t i = 0; i < probs.size(); ++i) out.problems += (i ? "; " : "") + probs[i];
  return out;
}

}  // namespace ina::exp
