// RAR, H-AR and Rina jobs on a multi-switch topology (experiment/collective.hpp).
#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "dataplane/switch.hpp"
#include "experiment/collective_impl.hpp"
#include "host/ring.hpp"
#include "sim/cluster.hpp"
#include "workload/model.hpp"

namespace ina::exp::detail {

CollectiveResult run_ring_family(const topo::Graph& g, const schemes::Scheme& scheme, const sim::Placement& pl,
                                 const CollectiveSettings& s) {
  const auto wall0 = std::chrono::steady_clock::now();
  check_settings(s, pl);
  const auto& hosts = pl.jobs[0];
  const size_t n = hosts.size();
  if (s.fail_rank >= 0 && static_cast<size_t>(s.fail_rank) >= n)
    throw std::invalid_argument(fmt::format("fail_rank = {}: the job has ranks 0..{}", s.fail_rank, n - 1));
  if (s.fail_rank >= 0 && scheme.collective == schemes::Collective::Hierarchical)
    throw std::invalid_argument(fmt::format("fail_rank = {}: {} needs equal racks, which a failure breaks (not modelled)",
                                            s.fail_rank, scheme.name));
  if (s.fail_rank >= 0 && n < 3)
    throw std::invalid_argument(fmt::format("fail_rank = {}: a ring of {} workers cannot lose one", s.fail_rank, n));
  if (s.fail_rank >= 0 && (s.fail_at_ms < 0 || s.fail_detect_ms <= 0))
    throw std::invalid_argument(fmt::format("fail_at_ms = {}, fail_detect_ms = {}: must be >= 0 and > 0", s.fail_at_ms,
                                            s.fail_detect_ms));
  if (n > kMaxRingWorkers)
    throw std::invalid_argument(fmt::format("{}: {} workers, at most {}", scheme.name, n, kMaxRingWorkers));
  const auto elems = static_cast<uint64_t>(s.gradient_mb * static_cast<double>(workload::kMiB) / 4);
  if (elems == 0) throw std::invalid_argument(fmt::format("gradient_mb = {} gives no values", s.gradient_mb));
  const uint16_t job = 1;

  // Racks of the job, in rank order (placement is rack-packed: ranks of a rack are contiguous).
  std::vector<std::vector<uint16_t>> racks;
  std::vector<NodeId> tors;
  int last_rack = -1;
  for (size_t r = 0; r < n; ++r) {
    const int rk = pl.rack_of.at(hosts[r]);
    if (rk != last_rack) {
      racks.emplace_back();
      const topo::NodeId tor = g.neighbors(hosts[r])[0].peer;
      tors.push_back(scheme.collective == schemes::Collective::RingIna && g.is_ina(tor) ? static_cast<NodeId>(tor)
                                                                                         : kNoNode);
      last_rack = rk;
    }
    racks.back().push_back(static_cast<uint16_t>(r));
  }
  auto make_plan = [&](size_t m, const std::vector<std::vector<uint16_t>>& rk, const std::vector<NodeId>& tr) {
    switch (scheme.collective) {
      case schemes::Collective::Ring: return host::plan_rar(m, elems);
      case schemes::Collective::Hierarchical: return host::plan_hierarchical(rk, elems);
      default: return host::plan_rina(rk, tr, elems);
    }
  };
  const std::vector<std::vector<host::RingStage>> plan = make_plan(n, racks, tors);
  // The ToRs that serve an abstracted worker.
  std::vector<NodeId> ina_tors;
  for (size_t r = 0; r < racks.size(); ++r)
    if (tors[r] != kNoNode && racks[r].size() >= 2) ina_tors.push_back(tors[r]);

  std::vector<NodeId> nodes(n);
  std::vector<int> rank_of(g.num_nodes(), -1);
  for (size_t r = 0; r < n; ++r) {
    nodes[r] = static_cast<NodeId>(hosts[r]);
    rank_of[hosts[r]] = static_cast<int>(r);
  }
  const double pkt_bytes = 4.0 * s.payload_values + s.header_bytes;
  dp::SwitchConfig swc;
  swc.memory_bytes = detail::smallest_memory_bytes(s, g, ina_tors);
  swc.payload_values = s.payload_values;
  const uint32_t region = static_cast<uint32_t>(swc.memory_bytes / (4ULL * s.payload_values));
  if (!ina_tors.empty() && region == 0) throw std::invalid_argument("memory_mb gives no aggregator");

  sim::Simulator sim(s.seed, s.payload_values, s.header_bytes);
  std::vector<host::RingEndpoint*> eps(n, nullptr);
  std::vector<std::shared_ptr<host::SyntheticTensor>> tensors(n);
  std::vector<dp::SwitchProgram*> switches;
  std::vector<const sim::Forwarder*> idle;
  auto forwarder = [&] {
    auto f = std::make_unique<sim::Forwarder>();
    idle.push_back(f.get());
    return f;
  };
  const uint64_t data_seed = mix(s.seed, 0x7a11);
  const Time mean = n ? static_cast<Time>(s.straggler_k_us / static_cast<double>(n) * kUs) : 0;
  sim::build_network(
      sim, g,
      [&](topo::NodeId v) -> std::unique_ptr<Node> {
        if (g.is_host(v)) {
          const int r = rank_of[v];
          if (r < 0) return forwarder();
          host::RingConfig c;
          c.job = job;
          c.rank = static_cast<uint16_t>(r);
          c.nodes = nodes;
          c.stages = plan[static_cast<size_t>(r)];
          c.payload_values = s.payload_values;
          c.region = region;
          c.init_window = std::max(1.0, s.init_window_kb * 1000 / pkt_bytes);
          c.allgather_from_zero = scheme.collective == schemes::Collective::RingIna;
          c.ina_gbps = scheme.collective == schemes::Collective::RingIna ? s.ina_gbps : 0;
          c.wire_bytes = static_cast<uint32_t>(pkt_bytes);
          c.straggler_mean = mean;
          c.straggler_sigma = static_cast<Time>(s.straggler_sigma_us * kUs);
          c.seed = mix(s.seed, static_cast<uint64_t>(r));
          auto ep = std::make_unique<host::RingEndpoint>(std::move(c));
          tensors[static_cast<size_t>(r)] = std::make_shared<host::SyntheticTensor>(data_seed, r, static_cast<unsigned>(n));
          for (int it = 0; it < s.iterations; ++it)
            ep->submit(tensors[static_cast<size_t>(r)], elems, from_ms(s.compute_ms));
          eps[static_cast<size_t>(r)] = ep.get();
          return ep;
        }
        const auto it = std::find(ina_tors.begin(), ina_tors.end(), static_cast<NodeId>(v));
        if (it == ina_tors.end()) return forwarder();
        dp::SwitchConfig c = swc;
        c.seed = mix(s.seed, v);
        auto sw = scheme.make_switch(c);
        sw->set_id(static_cast<NodeId>(v));
        dp::SwitchJob sj;
        sj.job = job;
        sj.workers = nodes;
        sj.region_offset = 0;
        sj.region_size = region;
        for (size_t r = 0; r < racks.size(); ++r)
          if (tors[r] == static_cast<NodeId>(v) && racks[r].size() >= 2) sj.rack = racks[r];
        sj.upstream = host::upstream_of(plan[sj.rack[0]], sj.rack[0]);
        sw->add_job(sj);
        for (NodeId o : ina_tors)
          if (o != v) sw->add_peer(o);
        switches.push_back(sw.get());
        return sw;
      },
      link_params(s));

  // A failure (Rina §IV-C): the worker stops; after the detection delay the
  // control node re-plans the job among the survivors (new ranks in the old
  // order), the ToRs get the job again under epoch 1 (a rack without its
  // agent gets no rack: it only forwards), and every survivor restarts the
  // first op not all of them finished.
  std::vector<size_t> alive(n);
  for (size_t r = 0; r < n; ++r) alive[r] = r;
  int restarted = -1;
  uint64_t steps = host::ring_steps(plan[0], 0);  // rank 0's (after a failure: the new rank 0's)
  if (s.fail_rank >= 0) {
    const auto f = static_cast<size_t>(s.fail_rank);
    sim.run(from_ms(s.fail_at_ms));
    sim.call(nodes[f], from_ms(s.fail_at_ms), [&](Effects&) { eps[f]->crash(); });
    const Time at = from_ms(s.fail_at_ms + s.fail_detect_ms);
    sim.run(at);
    alive.erase(alive.begin() + static_cast<std::ptrdiff_t>(f));
    std::vector<uint16_t> new_rank(n, 0);
    std::vector<NodeId> nodes2;
    for (size_t i = 0; i < alive.size(); ++i) {
      new_rank[alive[i]] = static_cast<uint16_t>(i);
      nodes2.push_back(nodes[alive[i]]);
    }
    std::vector<std::vector<uint16_t>> racks2;
    std::vector<NodeId> tors2;
    for (size_t q = 0; q < racks.size(); ++q) {
      std::vector<uint16_t> rk;
      for (uint16_t r : racks[q])
        if (r != f) rk.push_back(new_rank[r]);
      if (rk.empty()) continue;
      const bool agent_failed = racks[q][0] == f;
      racks2.push_back(rk);
      tors2.push_back(agent_failed ? kNoNode : tors[q]);  // the rack falls back to RAR members
    }
    const auto plan2 = make_plan(alive.size(), racks2, tors2);
    steps = host::ring_steps(plan2[0], 0);
    size_t restart = SIZE_MAX;
    for (size_t r : alive) restart = std::min(restart, eps[r]->op());
    restarted = static_cast<int>(restart);
    std::vector<unsigned> contributors(alive.begin(), alive.end());
    for (size_t i = 0; i < alive.size(); ++i) {
      const size_t r = alive[i];
      tensors[r]->set_contributors(contributors);
      sim.call(nodes[r], at, [&](Effects& fx) { eps[r]->reconfigure(nodes2, static_cast<uint16_t>(i), plan2[i], 1, restart, at, fx); });
    }
    for (auto* sw : switches) {
      sw->remove_job(job);
      dp::SwitchJob sj;
      sj.job = job;
      sj.workers = nodes2;
      sj.region_offset = 0;
      sj.region_size = region;
      sj.epoch = 1;
      for (size_t q = 0; q < racks2.size(); ++q)
        if (tors2[q] == sw->id() && racks2[q].size() >= 2) sj.rack = racks2[q];
      if (!sj.rack.empty()) sj.upstream = host::upstream_of(plan2[sj.rack[0]], sj.rack[0]);
      sw->add_job(sj);
    }
  }
  sim.run(from_ms(s.max_sim_ms));

  CollectiveResult out;
  std::vector<std::string> probs;
  size_t unfinished = 0;
  double bytes = 0;
  std::vector<WorkerTimes> times;
  const uint64_t ops_checked = static_cast<uint64_t>(s.iterations - std::max(restarted, 0));
  for (size_t r : alive) {
    const auto* e = eps[r];
    if (!e->done()) ++unfinished;
    else times.push_back({e->op_start(), e->op_end()});
    const double mine = static_cast<double>(e->stats().bytes_sent) + static_cast<double>(e->stats().sent) * s.header_bytes;
    bytes += mine;
    out.max_bytes_per_worker = std::max(out.max_bytes_per_worker, mine / s.iterations);
    out.retransmits += e->stats().retransmits;
    out.verify_errors += tensors[r]->mismatches();
    if (e->done() && tensors[r]->checked() != elems * ops_checked)
      probs.push_back(fmt::format("rank {} wrote {} of {} results", r, tensors[r]->checked(), elems * ops_checked));
    if (e->stats().malformed || e->stats().foreign)
      probs.push_back(fmt::format("rank {} refused {} malformed and {} foreign packets", r, e->stats().malformed,
                                  e->stats().foreign));
  }
  if (unfinished) probs.push_back(fmt::format("{} workers did not finish within {} ms", unfinished, s.max_sim_ms));
  for (size_t r = 0, shown = 0; r < n && shown < 3; ++r)
    if (!eps[r]->done() && !eps[r]->crashed()) {
      probs.push_back(fmt::format("rank {} stopped at {}", r, eps[r]->describe()));
      ++shown;
    }
  if (out.verify_errors) probs.push_back(fmt::format("{} result values differ from the exact sum", out.verify_errors));
  if (!unfinished) {
    summarize_times(times, elems, s.iterations, out);
    for (auto* sw : switches)
      if (sw->occupied()) probs.push_back(fmt::format("{} aggregators left in switch {}", sw->occupied(), sw->id()));
    check_network(sim, idle, true, probs);
  }
  std::vector<const dp::SwitchProgram*> sws(switches.begin(), switches.end());
  if (const sim::Refusals refused = sim::count_refusals(sws, {}, {}); refused.total()) probs.push_back(refused.text());
  out.bytes_per_worker = alive.empty() ? 0 : bytes / static_cast<double>(alive.size()) / s.iterations;
  out.restarted_op = restarted;
  out.steps = steps;
  out.hops = sim.hops();
  out.events = sim.events();
  set_problems(out, probs);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return out;
}

}  // namespace ina::exp::detail
