// RAR, H-AR and Rina jobs on a multi-switch topology (experiment/collective.hpp).
#include <algorithm>
#include <chrono>
#include <map>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "control/rina_bom.hpp"
#include "dataplane/switch.hpp"
#include "experiment/collective_impl.hpp"
#include "experiment/queue_trace.hpp"
#include "experiment/step_records.hpp"
#include "host/ring.hpp"
#include "host/ring_failover.hpp"
#include "host/rina_levels.hpp"
#include "schemes/admission.hpp"
#include "schemes/registry.hpp"
#include "schemes/ring_plan.hpp"
#include "cluster/cluster.hpp"
#include "workload/model.hpp"

namespace ina::exp::detail {

namespace {

// One ring job: its racks (rank order), their ToRs (kNoNode: not INA), its plan and nodes.
struct RingJob {
  uint16_t id = 1;
  std::vector<NodeId> nodes;  // by rank
  std::vector<std::vector<uint16_t>> racks;
  std::vector<NodeId> tors;
  std::vector<std::vector<host::RingStage>> plan;
  std::vector<host::RingEndpoint*> eps;
  std::vector<std::shared_ptr<host::SyntheticTensor>> tensors;
  std::vector<size_t> alive;  // ranks that did not fail
  std::vector<host::RinaLevel> levels;  // groups above the ToR: their tops and levels
  std::vector<bool> merged;       // by rank: in a group above the ToR
};

// Rina's groups above the ToR (control/rina_bom.hpp, Aggregation::Tree,
// the job's ranks in order and the graph's INA switches): merges them into
// the job's plan and keeps each switch's entry (J.levels) and the merged
// ranks (J.merged). A job whose groups are all racks (INA only at ToRs)
// keeps its plan.
void merge_groups_above_tor(const topo::Graph& g, RingJob& J) {
  namespace rina = control::rina;
  std::vector<topo::NodeId> workers(J.nodes.begin(), J.nodes.end());
  const rina::RinaResult rr = rina::rina_throughput(g, workers, g.ina_switches(), rina::Aggregation::Tree);
  J.merged.assign(J.nodes.size(), false);
  auto rank_of = [&](topo::NodeId n) {
    return static_cast<uint16_t>(std::find(workers.begin(), workers.end(), n) - workers.begin());
  };
  for (const rina::Group& grp : rr.groups) {
    if (grp.hops.empty() || g.is_host(grp.sender)) continue;
    bool above = false;  // a rack's group has its members' hops only, all to its ToR
    for (const rina::Hop& h : grp.hops) above = above || !g.is_host(h.from);
    if (!above) {
      std::vector<topo::NodeId> tors;
      for (const auto m : grp.members) tors.push_back(g.neighbors(m)[0].peer);
      above = std::any_of(tors.begin(), tors.end(), [&](topo::NodeId t) { return t != grp.sender; });
    }
    if (!above) continue;
    std::vector<uint16_t> ranks;
    for (const auto m : grp.members) ranks.push_back(rank_of(m));
    std::vector<host::RinaHop> hops;
    for (const rina::Hop& h : grp.hops)
      hops.push_back(g.is_host(h.from) ? host::RinaHop{true, rank_of(h.from), kNoNode, static_cast<NodeId>(h.to)}
                                       : host::RinaHop{false, 0, static_cast<NodeId>(h.from), static_cast<NodeId>(h.to)});
    host::RinaGroupTree t = host::rina_group_tree(std::move(ranks), static_cast<NodeId>(grp.sender), hops);
    host::merge_rina_group(J.plan, t.ranks, t.top, t.entry);
    for (const uint16_t r : t.ranks) J.merged[r] = true;
    J.levels.insert(J.levels.end(), t.levels.begin(), t.levels.end());
  }
}

// Job J's ranks (`hosts`, in rank order), its racks and their INA ToRs, and
// its plan, with Rina's groups above the ToR merged in.
void shape_job(const topo::Graph& g, const schemes::Scheme& scheme, const sim::Placement& pl,
               const std::vector<topo::NodeId>& hosts, uint64_t elems, RingJob& J) {
  const bool ina = scheme.collective == schemes::Collective::RingIna;
  const size_t n = hosts.size();
  // Racks of the job, in rank order (both placements keep a rack's ranks contiguous).
  int last_rack = -1;
  for (size_t r = 0; r < n; ++r) {
    const int rk = pl.rack_of.at(hosts[r]);
    if (rk != last_rack) {
      J.racks.emplace_back();
      const topo::NodeId tor = g.neighbors(hosts[r])[0].peer;
      J.tors.push_back(ina && g.is_ina(tor) ? static_cast<NodeId>(tor) : kNoNode);
      last_rack = rk;
    }
    J.racks.back().push_back(static_cast<uint16_t>(r));
    J.nodes.push_back(static_cast<NodeId>(hosts[r]));
  }
  J.plan = schemes::ring_plan(scheme, n, J.racks, J.tors, elems);
  if (ina && n >= 2) merge_groups_above_tor(g, J);
}

// What a run's result is read from: per endpoint, per switch, and sums.
// A run split over processes fills each part where it ran; join() gives
// every process all of it.
struct EndpointTally {
  bool here = false;  // this process ran it
  bool done = false, crashed = false;
  host::RingStats stats;
  uint64_t mismatches = 0, checked = 0;
  std::vector<Time> start, end;                // by op
  std::string describe;                        // where it stopped (neither done nor crashed)
  std::vector<host::RingStepRecord> step_log;  // job 0's
};
struct RingTally {
  std::vector<std::vector<EndpointTally>> eps;  // by job, by rank
  std::map<NodeId, size_t> occupied;            // by switch id: aggregators held (where any are)
  uint64_t collisions = 0, evictions = 0, preempt_lost = 0, bypassed = 0, flushed = 0, dropped = 0;
  cluster::Refusals refused;
};

// Trivially copyable records as bytes (the ranks run one build).
template <typename T>
nlohmann::json as_binary(const T* p, size_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto* b = reinterpret_cast<const uint8_t*>(p);
  return nlohmann::json::binary(std::vector<uint8_t>(b, b + n * sizeof(T)));
}
template <typename T>
std::vector<T> from_binary(const nlohmann::json& j) {
  const auto& b = j.get_binary();
  if (b.size() % sizeof(T)) throw std::runtime_error("a rank's tally holds a record of another size");
  std::vector<T> out(b.size() / sizeof(T));
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

// Every process's part of `t` (the endpoints and switches it ran, its sums) into everyone's.
void join(sim::Ranks& ranks, RingTally& t) {
  nlohmann::json eps = nlohmann::json::array();
  for (size_t k = 0; k < t.eps.size(); ++k)
    for (size_t r = 0; r < t.eps[k].size(); ++r) {
      const EndpointTally& e = t.eps[k][r];
      if (!e.here) continue;
      eps.push_back({k, r, e.done, e.crashed, as_binary(&e.stats, 1), e.mismatches, e.checked, e.start, e.end,
                     e.describe, as_binary(e.step_log.data(), e.step_log.size())});
    }
  const nlohmann::json mine = {
      {"eps", eps},
      {"occupied", std::vector<std::pair<NodeId, size_t>>(t.occupied.begin(), t.occupied.end())},
      {"sums", {t.collisions, t.evictions, t.preempt_lost, t.bypassed, t.flushed, t.dropped, t.refused.switches}}};
  for (const nlohmann::json& j : share_json(ranks, mine, "tally")) {
    for (const auto& x : j.at("eps")) {
      EndpointTally& e = t.eps.at(x.at(0).get<size_t>()).at(x.at(1).get<size_t>());
      e.here = true;
      e.done = x.at(2).get<bool>();
      e.crashed = x.at(3).get<bool>();
      e.stats = from_binary<host::RingStats>(x.at(4)).at(0);
      e.mismatches = x.at(5).get<uint64_t>();
      e.checked = x.at(6).get<uint64_t>();
      e.start = x.at(7).get<std::vector<Time>>();
      e.end = x.at(8).get<std::vector<Time>>();
      e.describe = x.at(9).get<std::string>();
      e.step_log = from_binary<host::RingStepRecord>(x.at(10));
    }
    for (const auto& [id, n] : j.at("occupied").get<std::vector<std::pair<NodeId, size_t>>>()) t.occupied[id] += n;
    const auto& v = j.at("sums");
    t.collisions += v.at(0).get<uint64_t>();
    t.evictions += v.at(1).get<uint64_t>();
    t.preempt_lost += v.at(2).get<uint64_t>();
    t.bypassed += v.at(3).get<uint64_t>();
    t.flushed += v.at(4).get<uint64_t>();
    t.dropped += v.at(5).get<uint64_t>();
    t.refused.switches += v.at(6).get<uint64_t>();
  }
}

}  // namespace

std::vector<std::vector<std::vector<host::RingStage>>> ring_plans(const topo::Graph& g, const schemes::Scheme& scheme,
                                                                  const sim::Placement& pl, double gradient_mb) {
  const auto elems = static_cast<uint64_t>(gradient_mb * static_cast<double>(workload::kMiB) / 4);
  std::vector<std::vector<std::vector<host::RingStage>>> out;
  for (const auto& hosts : pl.jobs) {
    RingJob J;
    shape_job(g, scheme, pl, hosts, elems, J);
    out.push_back(std::move(J.plan));
  }
  return out;
}

CollectiveResult run_ring_family(const topo::Graph& g, const schemes::Scheme& scheme, const sim::Placement& pl,
                                 const CollectiveSettings& s) {
  const auto wall0 = std::chrono::steady_clock::now();
  check_settings(s, pl, true);
  if (s.fail_rank >= 0 && static_cast<size_t>(s.fail_rank) >= pl.jobs[0].size())
    throw std::invalid_argument(fmt::format("fail_rank = {}: job 0 has ranks 0..{}", s.fail_rank, pl.jobs[0].size() - 1));
  if (s.fail_rank >= 0 && scheme.collective == schemes::Collective::Hierarchical)
    throw std::invalid_argument(fmt::format("fail_rank = {}: {} needs equal racks, which a failure breaks (not modelled)",
                                            s.fail_rank, scheme.name));
  if (s.fail_rank >= 0 && pl.jobs[0].size() < 3)
    throw std::invalid_argument(fmt::format("fail_rank = {}: a ring of {} workers cannot lose one", s.fail_rank,
                                            pl.jobs[0].size()));
  if (s.fail_rank >= 0 && (s.fail_at_ms < 0 || s.fail_detect_ms <= 0))
    throw std::invalid_argument(fmt::format("fail_at_ms = {}, fail_detect_ms = {}: must be >= 0 and > 0", s.fail_at_ms,
                                            s.fail_detect_ms));
  const auto elems = static_cast<uint64_t>(s.gradient_mb * static_cast<double>(workload::kMiB) / 4);
  if (elems == 0) throw std::invalid_argument(fmt::format("gradient_mb = {} gives no values", s.gradient_mb));
  const bool ina = scheme.collective == schemes::Collective::RingIna;

  const host::RingPlanner make_plan = [&](size_t m, const std::vector<std::vector<uint16_t>>& rk,
                                          const std::vector<NodeId>& tr) {
    return schemes::ring_plan(scheme, m, rk, tr, elems);
  };
  std::vector<RingJob> jobs(pl.jobs.size());
  std::vector<std::pair<int, int>> who(g.num_nodes(), {-1, -1});  // host -> (job, rank)
  std::vector<NodeId> ina_tors;  // the ToRs that serve an abstracted worker of some job
  for (size_t k = 0; k < jobs.size(); ++k) {
    RingJob& J = jobs[k];
    J.id = static_cast<uint16_t>(k + 1);
    const auto& hosts = pl.jobs[k];
    const size_t n = hosts.size();
    if (n > kMaxRingWorkers)
      throw std::invalid_argument(fmt::format("{}: job {} has {} workers, at most {}", scheme.name, k, n, kMaxRingWorkers));
    shape_job(g, scheme, pl, hosts, elems, J);
    for (size_t r = 0; r < n; ++r) who[hosts[r]] = {static_cast<int>(k), static_cast<int>(r)};
    if (s.fail_rank >= 0 && !J.levels.empty())
      throw std::invalid_argument(fmt::format("fail_rank = {}: a Rina group above the ToR cannot lose a worker "
                                              "(not modelled)", s.fail_rank));
    auto merged_rack = [&](size_t r) { return !J.merged.empty() && J.merged[J.racks[r][0]]; };
    for (size_t r = 0; r < J.racks.size(); ++r)
      if (J.tors[r] != kNoNode && J.racks[r].size() >= 2 && !merged_rack(r) &&
          std::find(ina_tors.begin(), ina_tors.end(), J.tors[r]) == ina_tors.end())
        ina_tors.push_back(J.tors[r]);
    for (const host::RinaLevel& l : J.levels)
      if (std::find(ina_tors.begin(), ina_tors.end(), l.sw) == ina_tors.end()) ina_tors.push_back(l.sw);
    J.eps.assign(n, nullptr);
    J.tensors.resize(n);
    for (size_t r = 0; r < n; ++r) J.alive.push_back(r);
  }

  const double pkt_bytes = 4.0 * s.payload_values + s.header_bytes;
  dp::SwitchConfig swc;
  swc.memory_bytes = detail::smallest_memory_bytes(s, g, ina_tors);
  swc.payload_values = s.payload_values;
  swc.rina.ring_memory = detail::ring_memory_of(s.ring_memory, s.pool_policy);
  // Each job's region (or, with a shared pool, its members' window): 1/J of
  // the aggregators, one window slot each (schemes/admission.hpp), the same
  // on every INA ToR of the job.
  schemes::Admission::Config ac;
  ac.memory = schemes::Memory::Regions;
  ac.aggregators = swc.memory_bytes / (4ULL * s.payload_values);
  ac.regions = static_cast<unsigned>(jobs.size());
  ac.pools = 1;
  ac.policy = scheme.policy;
  schemes::Admission admission(ac);
  const uint32_t region = admission.region_size();
  if (!ina_tors.empty() && region == 0)
    throw std::invalid_argument(fmt::format("memory_mb = {} gives no aggregator per job", s.memory_mb));
  std::vector<schemes::Admission::Grant> grants;  // by job
  if (!ina_tors.empty())
    for (const RingJob& J : jobs) {
      auto answer = admission.admit({J.id, J.nodes, kNoNode, std::nullopt});
      if (auto* no = std::get_if<schemes::Admission::Refusal>(&answer)) throw std::invalid_argument(no->reason);
      grants.push_back(std::get<schemes::Admission::Grant>(answer));
    }

  sim::Simulator sim(s.seed, s.payload_values, s.header_bytes);
  if (s.trace) sim.set_trace(s.trace);
  std::vector<dp::SwitchProgram*> switches;
  std::vector<const sim::Forwarder*> idle;
  auto forwarder = [&] {
    auto f = std::make_unique<sim::Forwarder>();
    idle.push_back(f.get());
    return f;
  };
  const RunSplit split(g, pl, s);  // (another process's endpoints stay null here)
  sim::build_network(
      sim, g,
      [&](topo::NodeId v) -> std::unique_ptr<Node> {
        if (!split.builds(v)) return std::make_unique<sim::RemoteNode>();
        if (g.is_host(v)) {
          const auto [k, r] = who[v];
          if (k < 0) return forwarder();
          RingJob& J = jobs[static_cast<size_t>(k)];
          const size_t n = J.nodes.size();
          host::RingConfig c;
          c.job = J.id;
          c.rank = static_cast<uint16_t>(r);
          c.nodes = J.nodes;
          c.stages = J.plan[static_cast<size_t>(r)];
          c.payload_values = s.payload_values;
          c.region = region;
          c.init_window = std::max(1.0, s.init_window_kb * 1000 / pkt_bytes);
          if (s.ring_min_rto_us > 0) c.min_rto = static_cast<Time>(s.ring_min_rto_us * kUs);
          c.allgather_from_zero = ina;
          if (ina && s.rina_allgather_start == "rack") {
            // Is rank r in an INA rack (an abstracted worker)?
            for (size_t q = 0; q < J.racks.size(); ++q)
              if (std::find(J.racks[q].begin(), J.racks[q].end(), static_cast<uint16_t>(r)) != J.racks[q].end())
                c.allgather_all_from_zero = J.tors[q] != kNoNode && J.racks[q].size() >= 2;
            if (!J.merged.empty() && J.merged[static_cast<size_t>(r)]) c.allgather_all_from_zero = true;
          }
          c.agent_relays = s.rina_ag_relay == "agent";
          c.rina_transport = s.rina_transport == "aimd" ? host::RinaTransport::Aimd : host::RinaTransport::Paper;
          c.ina_gbps = ina ? host::rina_pace_gbps(s.ina_gbps, c.rina_transport) : 0;
          c.wire_bytes = static_cast<uint32_t>(pkt_bytes);
          c.ack_wire_bytes = sim.wire_bytes(uint16_t{0});
          c.nic_gbps = g.ingress_gbps(v);  // a host's one link
          // Eq. 1 per step: O (fixed) + C's fluctuation around k/N.
          c.straggler_mean = static_cast<Time>((s.straggler_k_us / static_cast<double>(n) + s.step_overhead_us) * kUs);
          c.straggler_sigma = static_cast<Time>(s.straggler_sigma_us * kUs);
          c.step_barrier = s.step_barrier;
          // Job 0 keeps the single-job seeds (results of one job do not change).
          c.seed = k == 0 ? mix(s.seed, static_cast<uint64_t>(r)) : mix(mix(s.seed, 0x10b + static_cast<uint64_t>(k)), static_cast<uint64_t>(r));
          auto ep = std::make_unique<host::RingEndpoint>(std::move(c));
          const uint64_t data_seed = k == 0 ? mix(s.seed, 0x7a11) : mix(mix(s.seed, 0x7a11), static_cast<uint64_t>(k));
          auto& t = J.tensors[static_cast<size_t>(r)];
          t = std::make_shared<host::SyntheticTensor>(data_seed, r, static_cast<unsigned>(n));
          for (int it = 0; it < s.iterations; ++it) ep->submit(t, elems, from_ms(s.compute_ms));
          J.eps[static_cast<size_t>(r)] = ep.get();
          return ep;
        }
        if (std::find(ina_tors.begin(), ina_tors.end(), static_cast<NodeId>(v)) == ina_tors.end()) return forwarder();
        dp::SwitchConfig c = swc;
        c.seed = mix(s.seed, v);
        auto sw = scheme.make_switch(c);
        sw->set_id(static_cast<NodeId>(v));
        for (size_t k = 0; k < jobs.size(); ++k) {
          const RingJob& J = jobs[k];
          for (const host::RinaLevel& l : J.levels) {
            if (l.sw != static_cast<NodeId>(v)) continue;
            dp::SwitchJob sj = grants[k].switch_job();
            sj.rina.priority = s.job_priority.empty() ? 1 : s.job_priority[k];
            host::rina_level_job(l, J.plan, sj);
            sw->add_job(sj);
          }
          for (size_t r = 0; r < J.racks.size(); ++r) {
            if (J.tors[r] != static_cast<NodeId>(v) || J.racks[r].size() < 2) continue;
            if (!J.merged.empty() && J.merged[J.racks[r][0]]) continue;
            dp::SwitchJob sj = grants[k].switch_job();
            sj.rina.priority = s.job_priority.empty() ? 1 : s.job_priority[k];
            sj.rina.rack = J.racks[r];
            sj.rina.upstream = host::upstream_of(J.plan[sj.rina.rack[0]], sj.rina.rack[0]);
            sw->add_job(sj);
          }
        }
        for (NodeId o : ina_tors)
          if (o != v) sw->add_peer(o);
        switches.push_back(sw.get());
        return sw;
      },
      link_params(s), s.host_ecn);

  // A failure in job 0 (Rina §IV-C): the worker stops; after the detection
  // delay the control node re-plans the job among the survivors
  // (host::ring_failover, shared with the runtime), the ToRs get the job
  // again under the new epoch, and every survivor restarts the first op not
  // all of them finished.
  split.apply(sim, s.ranks);
  const std::vector<uint32_t> traced = start_queue_trace(sim, g, s);
  int restarted = -1;
  uint64_t steps = host::ring_steps(jobs[0].plan[0], 0);  // job 0's rank 0 (after a failure: the new rank 0)
  if (s.fail_rank >= 0) {
    RingJob& J = jobs[0];
    const auto f = static_cast<size_t>(s.fail_rank);
    sim.run(from_ms(s.fail_at_ms));
    sim.call(J.nodes[f], from_ms(s.fail_at_ms), [&](Effects&) { J.eps[f]->crash(); });
    const Time at = from_ms(s.fail_at_ms + s.fail_detect_ms);
    sim.run(at);
    std::vector<size_t> ops(J.nodes.size(), 0);
    nlohmann::json mine = nlohmann::json::array();  // (split over processes: each its own ranks')
    for (size_t r = 0; r < J.nodes.size(); ++r)
      if (J.eps[r]) {  // (this process's)
        ops[r] = J.eps[r]->op();
        mine.push_back({r, ops[r]});
      }
    if (split.processes > 1)
      for (const nlohmann::json& theirs : share_json(*s.ranks, mine, "ring ops"))
        for (const auto& e : theirs) ops.at(e.at(0).get<size_t>()) = e.at(1).get<size_t>();
    const host::RingFailover fo =
        host::ring_failover({J.nodes, J.racks, J.tors, 0, {}}, {static_cast<uint16_t>(f)}, ops, make_plan);
    J.alive.assign(fo.survivors.begin(), fo.survivors.end());
    steps = host::ring_steps(fo.plan[0], 0);
    restarted = static_cast<int>(fo.restart_op);
    const std::vector<unsigned> contributors(J.alive.begin(), J.alive.end());
    for (size_t i = 0; i < J.alive.size(); ++i) {
      const size_t r = J.alive[i];
      if (J.tensors[r]) J.tensors[r]->set_contributors(contributors);  // (this process's)
      sim.call(J.nodes[r], at, [&, i, r](Effects& fx) {
        J.eps[r]->reconfigure(fo.next.nodes, static_cast<uint16_t>(i), fo.plan[i], fo.next.epoch, fo.restart_op, at, fx);
      });
    }
    for (auto* sw : switches) {
      const dp::SwitchJob* old = sw->job(J.id);
      if (!old) continue;  // this ToR serves only other jobs
      std::vector<uint16_t> rack, upstream;  // none: it only forwards
      for (const auto& t : fo.tors)
        if (t.tor == sw->id()) {
          rack = t.rack;
          upstream = t.upstream;
        }
      sw->replace_job(dp::ring_job_at_epoch(*old, fo.next.nodes, fo.next.epoch, rack, upstream));
    }
  }
  sim.run(from_ms(s.max_sim_ms));

  // What the result is read from: the endpoints and switches this process
  // ran (with ranks, every process's, joined).
  RingTally t;
  t.eps.resize(jobs.size());
  for (size_t k = 0; k < jobs.size(); ++k) {
    const RingJob& J = jobs[k];
    t.eps[k].resize(J.nodes.size());
    for (size_t r = 0; r < J.nodes.size(); ++r) {
      if (!J.eps[r]) continue;  // another process's
      const host::RingEndpoint& e = *J.eps[r];
      EndpointTally& x = t.eps[k][r];
      x.here = true;
      x.done = e.done();
      x.crashed = e.crashed();
      x.stats = e.stats();
      x.mismatches = J.tensors[r]->mismatches();
      x.checked = J.tensors[r]->checked();
      x.start = e.op_start();
      x.end = e.op_end();
      if (!x.done && !x.crashed) x.describe = e.describe();
      if (k == 0) x.step_log = e.step_log();
    }
  }
  for (const dp::SwitchProgram* sw : switches) {  // (this process's)
    if (sw->occupied()) t.occupied[sw->id()] = sw->occupied();
    const auto& st = sw->stats();
    t.collisions += st.collisions;
    t.evictions += st.evictions;
    t.preempt_lost += st.preempt_lost;
    t.bypassed += st.bypassed;
    t.flushed += st.flushed;
  }
  t.refused = cluster::count_refusals({switches.begin(), switches.end()}, {}, {});
  t.dropped = dropped_by(idle);
  if (split.processes > 1) join(*s.ranks, t);

  CollectiveResult out;
  std::vector<std::string> probs;
  size_t unfinished = 0, workers = 0;
  double bytes = 0;
  std::vector<WorkerTimes> times;
  for (size_t k = 0; k < jobs.size(); ++k) {
    const RingJob& J = jobs[k];
    const size_t n = J.alive.size();
    const uint64_t ops_checked = static_cast<uint64_t>(s.iterations - (k == 0 ? std::max(restarted, 0) : 0));
    workers += n;
    // Rank names carry the job when there are several.
    auto who_is = [&](size_t r) { return jobs.size() > 1 ? fmt::format("job {} rank {}", J.id - 1, r) : fmt::format("rank {}", r); };
    std::vector<WorkerTimes> mine_t;
    for (size_t r : J.alive) {
      const EndpointTally& e = t.eps[k][r];
      if (!e.done) ++unfinished;
      else mine_t.push_back({e.start, e.end});
      const double mine = static_cast<double>(e.stats.bytes_sent) + static_cast<double>(e.stats.sent) * s.header_bytes;
      bytes += mine;
      out.max_bytes_per_worker = std::max(out.max_bytes_per_worker, mine / s.iterations);
      out.retransmits += e.stats.retransmits;
      out.timeouts += e.stats.timeouts;
      out.refused += e.stats.early;
      out.fast_retransmits += e.stats.fast_retransmits;
      out.dup_received += e.stats.duplicates;
      out.verify_errors += e.mismatches;
      if (e.done && e.checked != elems * ops_checked)
        probs.push_back(fmt::format("{} wrote {} of {} results", who_is(r), e.checked, elems * ops_checked));
      if (e.stats.malformed || e.stats.foreign)
        probs.push_back(fmt::format("{} refused {} malformed and {} foreign packets", who_is(r), e.stats.malformed,
                                    e.stats.foreign));
    }
    for (size_t r = 0, shown = 0; r < J.nodes.size() && shown < 3; ++r)
      if (!t.eps[k][r].done && !t.eps[k][r].crashed) {
        probs.push_back(fmt::format("{} stopped at {}", who_is(r), t.eps[k][r].describe));
        ++shown;
      }
    if (mine_t.size() == n) {
      CollectiveResult one;
      summarize_times(mine_t, elems, s.iterations, one);
      out.job_throughput_gbps.push_back(one.throughput_gbps);
      out.job_sync_ms.push_back(one.sync_ms);
    }
    times.insert(times.end(), mine_t.begin(), mine_t.end());
  }
  if (unfinished) probs.push_back(fmt::format("{} workers did not finish within {} ms", unfinished, s.max_sim_ms));
  if (out.verify_errors) probs.push_back(fmt::format("{} result values differ from the exact sum", out.verify_errors));
  if (!unfinished) {
    summarize_times(times, elems, s.iterations, out);
    for (const auto& [id, n] : t.occupied) probs.push_back(fmt::format("{} aggregators left in switch {}", n, id));
    check_network(sim, t.dropped, true, probs);
  }
  count_link_stats(sim, g, out);
  out.collisions = t.collisions;
  out.evictions = t.evictions;
  out.preempt_lost = t.preempt_lost;
  out.bypassed = t.bypassed;
  out.flushed = t.flushed;
  if (t.refused.total()) probs.push_back(t.refused.text());
  out.bytes_per_worker = workers ? bytes / static_cast<double>(workers) / s.iterations : 0;
  out.steps = steps;
  for (const EndpointTally& e : t.eps[0]) out.step_log.push_back(e.step_log);
  out.restarted_op = restarted;
  out.hops = sim.hops();
  out.events = sim.events();
  out.digest = sim.digest();
  finish_queue_trace(sim, g, s, out.digest, traced);
  if (!s.step_records.empty() && (!s.ranks || s.ranks->rank() == 0)) write_step_records(s.step_records, out.digest, out.step_log);
  out.windows = sim.windows();
  out.helper_cpu_s = sim.helper_cpu_s();
  if (sim.partitions() > 1)
    for (const auto& l : sim.partition_loads()) out.partitions.emplace_back(l.events, l.busy_s);
  set_problems(out, probs);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return out;
}

}  // namespace ina::exp::detail
