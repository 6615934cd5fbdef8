// Ps and PsIna collectives on a multi-switch topology (see collective_ps.hpp).
#include "experiment/collective_ps.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "host/dsa_priority.hpp"
#include "host/profile.hpp"
#include "host/tensor_io.hpp"
#include "cluster/cluster.hpp"
#include "experiment/queue_trace.hpp"
#include "sim/engine.hpp"
#include "sim/partition.hpp"
#include "workload/model.hpp"

namespace ina::exp::detail {
namespace {

// Shard k of a host's gradient: values [offset, offset + len) of the whole.
class ShardView final : public host::TensorIO {
 public:
  ShardView(std::shared_ptr<host::TensorIO> whole, uint64_t offset) : whole_(std::move(whole)), off_(offset) {}
  void read_gradient(uint64_t o, std::span<int32_t> out) override { whole_->read_gradient(off_ + o, out); }
  void write_result(uint64_t o, std::span<const int32_t> in) override { whole_->write_result(off_ + o, in); }
  void read_result(uint64_t o, std::span<int32_t> out) override { whole_->read_result(off_ + o, out); }

 private:
  std::shared_ptr<host::TensorIO> whole_;
  uint64_t off_;
};

struct HostPlan {
  unsigned rank = 0, n = 0;                    // in its job
  size_t first_shard = 0;                      // the cluster's shard of its job's rank 0 (job id first_shard + 1)
  std::vector<host::WorkerConfig> transports;  // by shard of its job
  host::PsConfig ps;                           // the PS of shard `rank`
  std::vector<NodeId> ps_children;             // its tree: the INA switches whose parent the PS is
  RankBits ps_direct;                          // and the ranks whose first hop it is (its own excluded)
  std::vector<uint64_t> offset, len;           // by shard: its values of the gradient
  uint64_t data_seed = 0;
  int iterations = 1;
  Time compute = 0;
  uint32_t header_bytes = 50, min_bytes = 64;
  // DSA's Eq. 1 priorities (scheme eq1_priority): one tensor per iteration
  // (L = l = 1), T the iteration's estimated time left.
  bool eq1 = false;
  bool eq1_per_tensor = true;  // one value per shard and iteration (CollectiveSettings::eq1_per_tensor)
  host::Eq1Estimates eq1_estimates{0, 1};  // T_j and Comm_j / Comp_j, from the plan (never re-measured)
};

// One worker host: a worker transport per shard of its job and the PS of its
// own shard. Packets are dispatched by job (= shard) and role: Data, FetchReply
// and Reminder of its own shard to the PS, everything else to that shard's
// transport. What the parts send to this host is delivered here, after the
// handler that sent it returns (no part is re-entered). The PS's result goes
// down its shard's tree: a copy to each child INA switch, one multicast to
// the workers whose first hop the PS is, one local copy.
class ShardHost final : public Node, private host::PriorityFn {
 public:
  static constexpr int kShift = 56;  // timer tokens: part << kShift | the part's own token
  static constexpr uint64_t kOwner = 0, kPs = 1;  // parts; transport k is part 2 + k

  ShardHost(HostPlan plan, NodeId self) : plan_(std::move(plan)), self_(self), ps_(plan_.ps) {
    ps_.set_id(self);
    for (const auto& w : plan_.transports) {
      tx_.push_back(std::make_unique<host::WorkerTransport>(w));
      if (plan_.eq1) tx_.back()->set_priority_fn(this);
    }
    done_.assign(plan_.n, 0);
    priced_.assign(tx_.size(), {SIZE_MAX, 0});
    start_.assign(static_cast<size_t>(plan_.iterations), -1);
    finish_.assign(static_cast<size_t>(plan_.iterations), -1);
  }

  void on_start(Time, Effects& fx) override { fx.set_timer(plan_.compute, token(kOwner, 0)); }
  void on_packet(Packet* p, Time now, Effects& fx) override {
    dispatch(p, now, fx);
    drain(now, fx);
  }
  void on_timer(uint64_t tok, Time now, Effects& fx) override {
    const uint64_t part = tok >> kShift, inner = tok & ((1ULL << kShift) - 1);
    if (part == kOwner) {
      begin(static_cast<size_t>(inner), now, fx);
    } else if (part == kPs) {
      PartFx pf(*this, fx, kPs);
      ps_.on_timer(inner, now, pf);
    } else {
      const size_t k = part - 2;
      PartFx pf(*this, fx, part);
      tx_[k]->on_timer(inner, now, pf);
      collect(k, now, fx);
    }
    drain(now, fx);
  }

  bool finished() const { return next_ == static_cast<size_t>(plan_.iterations) && finish_.back() >= 0; }
  Time start_time(size_t it) const { return start_[it]; }
  Time finish_time(size_t it) const { return finish_[it]; }
  const host::ParameterServer& ps() const { return ps_; }
  const host::WorkerTransport& transport(size_t k) const { return *tx_[k]; }
  size_t transports() const { return tx_.size(); }
  uint64_t sent_bytes() const { return sent_bytes_; }
  uint64_t local_packets() const { return local_packets_; }
  uint64_t refused() const { return refused_; }
  uint64_t checked() const {
    uint64_t c = 0;
    for (const auto& t : tensors_) c += t->checked();
    return c;
  }
  uint64_t mismatches() const {
    uint64_t m = 0;
    for (const auto& t : tensors_) m += t->mismatches();
    return m;
  }

 private:
  static uint64_t token(uint64_t part, uint64_t inner) { return part << kShift | inner; }

  // The tag is the shard: per tensor, a shard's packets of one iteration
  // share the value its first packet took.
  uint32_t priority(uint32_t shard, Time now) override {
    const size_t it = std::min(next_, start_.size() - 1);
    auto& [at, value] = priced_[shard];
    if (plan_.eq1_per_tensor && at == it) return value;
    at = it;
    value = plan_.eq1_estimates.field(to_us(now - start_[it]), 1, 1);
    return value;
  }

  // The Effects a part sees: its timers tagged with the part, its packets through the host.
  class PartFx final : public Effects {
   public:
    PartFx(ShardHost& h, Effects& base, uint64_t part) : h_(h), base_(base), part_(part) {}
    Packet* alloc() override { return base_.alloc(); }
    void free(Packet* p) override { base_.free(p); }
    void set_timer(Time at, uint64_t t) override { base_.set_timer(at, token(part_, t)); }
    void send(Packet* p) override { h_.out(p, base_); }

   private:
    ShardHost& h_;
    Effects& base_;
    uint64_t part_;
  };

  void out(Packet* p, Effects& base) {
    if (p->h.dst == self_) {
      local_.push_back(p);
      return;
    }
    if (p->h.dst == kMulticast) {  // the PS's result
      fan_out(p, base);
      return;
    }
    wire(p, base);
  }

  void fan_out(Packet* p, Effects& base) {
    auto copy = [&](NodeId dst) {
      Packet* c = base.alloc();
      c->h = p->h;
      std::memcpy(c->payload(), p->payload(), 4u * p->h.count);
      c->h.dst = dst;
      return c;
    };
    local_.push_back(copy(self_));
    for (NodeId c : plan_.ps_children) wire(copy(c), base);
    if (!plan_.ps_direct) {
      base.free(p);
      return;
    }
    p->mcast = plan_.ps_direct;  // the engine's multicast tree, restricted to these ranks
    wire(p, base);
  }

  void wire(Packet* p, Effects& base) {
    sent_bytes_ += std::max<uint32_t>(plan_.min_bytes, plan_.header_bytes + 4u * p->h.count);
    base.send(p);
  }

  void dispatch(Packet* p, Time now, Effects& base) {
    const size_t shard = static_cast<size_t>(p->h.job) - 1;  // job 0: wraps, refused below
    if (shard < plan_.first_shard || shard - plan_.first_shard >= plan_.n) {  // no shard of this job: a protocol bug
      ++refused_;
      base.free(p);
      return;
    }
    const size_t k = shard - plan_.first_shard;
    const PktType t = p->h.type;
    if (k == plan_.rank && (t == PktType::Data || t == PktType::FetchReply || t == PktType::Reminder)) {
      PartFx pf(*this, base, kPs);
      ps_.on_packet(p, now, pf);
      return;
    }
    PartFx pf(*this, base, 2 + k);
    tx_[k]->on_packet(p, now, pf);
    collect(k, now, base);
  }

  void drain(Time now, Effects& base) {
    while (!local_.empty()) {
      Packet* p = local_.front();
      local_.pop_front();
      ++local_packets_;
      dispatch(p, now, base);
    }
  }

  // Iteration `it`: one allreduce per shard, each a view of this iteration's gradient.
  void begin(size_t it, Time now, Effects& base) {
    start_[it] = now;
    auto whole = std::make_shared<host::SyntheticTensor>(mix(plan_.data_seed, it), plan_.rank, plan_.n);
    tensors_.push_back(whole);
    // Shards in rank order from the next one on, so that the hosts' first
    // windows go to different PSes rather than all to PS 0 first.
    for (size_t i = 1; i <= plan_.n; ++i) {
      const size_t k = (plan_.rank + i) % plan_.n;
      tx_[k]->submit(std::make_shared<ShardView>(whole, plan_.offset[k]), plan_.len[k], static_cast<uint32_t>(k));
      PartFx pf(*this, base, 2 + k);
      tx_[k]->pump(now, pf);
    }
  }

  void collect(size_t k, Time now, Effects& base) {
    if (tx_[k]->has_completed()) done_[k] += tx_[k]->take_completed().size();
    const auto iters = static_cast<size_t>(plan_.iterations);
    if (next_ >= iters) return;
    for (uint64_t d : done_)
      if (d <= next_) return;
    finish_[next_] = now;
    ++next_;
    if (next_ < iters) base.set_timer(now + plan_.compute, token(kOwner, next_));
  }

  HostPlan plan_;
  NodeId self_;  // this host (also when a test wraps the node)
  host::ParameterServer ps_;
  std::vector<std::unique_ptr<host::WorkerTransport>> tx_;
  std::vector<std::shared_ptr<host::SyntheticTensor>> tensors_;
  std::deque<Packet*> local_;
  std::vector<uint64_t> done_;   // by shard: ops completed
  std::vector<std::pair<size_t, uint32_t>> priced_;  // by transport: (iteration, its Eq. 1 priority)
  std::vector<Time> start_, finish_;
  size_t next_ = 0;              // the iteration in progress
  uint64_t sent_bytes_ = 0, local_packets_ = 0, refused_ = 0;
};

// What a run's result is read from: per shard host, and sums over the
// switches and the idle nodes. A run split over processes fills each part
// where it ran; join() gives every process all of it.
struct HostTally {
  bool here = false;  // this process ran it
  bool finished = false;
  uint64_t mismatches = 0, checked = 0, sent_bytes = 0, ps_entries = 0, refused = 0;
  uint64_t retransmits = 0, timeouts = 0, fast_retransmits = 0;  // over its transports
  std::vector<Time> start, end;                                    // by iteration, once finished
};
struct PsTally {
  std::vector<HostTally> hosts;  // by shard host
  uint64_t aggs_left = 0, collisions = 0, preempt_won = 0, preempt_lost = 0, dropped = 0;
  cluster::Refusals refused;
};

// Every process's part of `t` (the hosts it ran, its sums) into everyone's.
void join(sim::Ranks& ranks, PsTally& t) {
  nlohmann::json hosts = nlohmann::json::array();
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    const HostTally& h = t.hosts[i];
    if (!h.here) continue;
    hosts.push_back({i, h.finished, h.mismatches, h.checked, h.sent_bytes, h.ps_entries, h.refused, h.retransmits,
                     h.timeouts, h.fast_retransmits, h.start, h.end});
  }
  const nlohmann::json mine = {{"hosts", hosts},
                               {"sums",
                                {t.aggs_left, t.collisions, t.preempt_won, t.preempt_lost, t.dropped, t.refused.switches,
                                 t.refused.servers, t.refused.workers}}};
  for (const nlohmann::json& j : share_json(ranks, mine, "tally")) {
    for (const auto& e : j.at("hosts")) {
      HostTally& h = t.hosts.at(e.at(0).get<size_t>());
      h = {true, e.at(1).get<bool>(), e.at(2).get<uint64_t>(), e.at(3).get<uint64_t>(), e.at(4).get<uint64_t>(),
           e.at(5).get<uint64_t>(), e.at(6).get<uint64_t>(), e.at(7).get<uint64_t>(), e.at(8).get<uint64_t>(),
           e.at(9).get<uint64_t>(), e.at(10).get<std::vector<Time>>(), e.at(11).get<std::vector<Time>>()};
    }
    const auto& v = j.at("sums");
    t.aggs_left += v.at(0).get<uint64_t>();
    t.collisions += v.at(1).get<uint64_t>();
    t.preempt_won += v.at(2).get<uint64_t>();
    t.preempt_lost += v.at(3).get<uint64_t>();
    t.dropped += v.at(4).get<uint64_t>();
    t.refused.switches += v.at(5).get<uint64_t>();
    t.refused.servers += v.at(6).get<uint64_t>();
    t.refused.workers += v.at(7).get<uint64_t>();
  }
}

}  // namespace

CollectiveResult run_ps_family(const topo::Graph& g, const schemes::Scheme& scheme, const sim::Placement& pl,
                               const CollectiveSettings& s) {
  return run_ps_family(g, scheme, pl, s, {}, nullptr);
}

CollectiveResult run_ps_family(const topo::Graph& g, const schemes::Scheme& scheme, const sim::Placement& pl,
                               const CollectiveSettings& s, const PsFamilyHooks& hooks, PsFamilyDetail* detail) {
  const auto wall0 = std::chrono::steady_clock::now();
  if (scheme.collective != schemes::Collective::Ps && scheme.collective != schemes::Collective::PsIna)
    throw std::invalid_argument(fmt::format("scheme '{}' does not run a PS collective", scheme.name));
  check_settings(s, pl, true);
  const bool ina = scheme.collective == schemes::Collective::PsIna;
  std::vector<std::vector<NodeId>> jobs;
  for (const auto& job : pl.jobs) jobs.emplace_back(job.begin(), job.end());
  cluster::ShardedPsCluster cl(g, jobs, ina);
  if (s.atp_pool != "hashed" && s.atp_pool != "contiguous")
    throw std::invalid_argument(fmt::format("atp_pool = '{}' (hashed or contiguous)", s.atp_pool));
  cluster::ShardedPsCluster::Provision prov;
  prov.pool = s.atp_pool == "contiguous" ? dp::PoolAddressing::Contiguous : dp::PoolAddressing::Hashed;
  prov.fewest_aggregators = smallest_memory_bytes(s, g, cl.ina_switches()) / (4ULL * s.payload_values);
  prov.ina_gbps = s.ina_gbps;
  cl.provision(scheme, prov);
  const size_t hosts_n = cl.shards();  // host i holds the PS of shard i
  const auto elems = static_cast<uint64_t>(std::llround(s.gradient_mb * workload::kMiB / 4));
  for (const auto& job : jobs)
    if (elems < job.size())
      throw std::invalid_argument(fmt::format("a gradient of {} values cannot be cut into {} shards", elems, job.size()));

  // By job: the values of each of its shards.
  std::vector<std::vector<uint64_t>> offset(jobs.size()), len(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    const size_t n = jobs[j].size();
    for (size_t k = 0; k < n; ++k) {
      len[j].push_back(elems / n + (k < elems % n ? 1 : 0));
      offset[j].push_back(k ? offset[j][k - 1] + len[j][k - 1] : 0);
    }
  }
  const host::Profile& profile = host::kPaperProfile;
  const double pkt_bytes = 4.0 * s.payload_values + s.header_bytes;
  host::WorkerConfig wbase;
  profile.apply(wbase);
  wbase.payload_values = s.payload_values;
  wbase.wire_bytes = static_cast<uint32_t>(pkt_bytes);
  // Under Rina's paper transport every host's NIC paces as DCQCN's does, the
  // PS family's senders too (the ring endpoints: host::RingConfig).
  wbase.window_paced = s.rina_transport == "paper";
  host::PsConfig pbase;
  profile.apply(pbase);
  pbase.payload_values = s.payload_values;
  // A result goes down the tree each time, which is what frees the switches' aggregators.
  pbase.targeted_known_results = false;
  if (hooks.ps) hooks.ps(pbase);

  sim::Simulator sim(s.seed, s.payload_values, s.header_bytes);
  std::vector<int> index_of(g.num_nodes(), -1);
  for (size_t h = 0; h < hosts_n; ++h) {
    const size_t j = cl.job_index(h);
    index_of[jobs[j][h - cl.first_shard(j)]] = static_cast<int>(h);
  }
  std::vector<ShardHost*> hosts(hosts_n, nullptr);
  std::vector<dp::SwitchProgram*> programs;
  std::vector<NodeId> program_ids;
  std::vector<sim::Forwarder*> forwarders;
  const uint64_t data_seed = mix(s.seed, 0x9d1d);
  const RunSplit split(g, pl, s);
  if (split.processes > 1 && detail) throw std::logic_error("a run split over processes gives no per-node detail");
  auto make_node = [&](topo::NodeId v) -> std::unique_ptr<Node> {
    if (!split.builds(v)) return std::make_unique<sim::RemoteNode>();
    std::unique_ptr<Node> node;
    const auto id = static_cast<NodeId>(v);
    if (!g.is_host(v)) {
      if (cl.runs_program(id)) {
        dp::SwitchConfig c;
        c.memory_bytes = static_cast<uint64_t>(switch_memory_mb(s, g, v) * workload::kMiB);
        c.payload_values = s.payload_values;
        c.seed = mix(s.seed, v);
        c.track_tasks = false;  // DSA's per-task marks feed the star's reports only (a cache miss per packet here)
        auto prog = cl.make_switch(scheme, id, c);
        programs.push_back(prog.get());
        program_ids.push_back(id);
        node = std::move(prog);
      } else {
        auto fw = std::make_unique<sim::Forwarder>();
        forwarders.push_back(fw.get());
        node = std::move(fw);
      }
    } else if (index_of[v] >= 0) {
      const auto h = static_cast<size_t>(index_of[v]);
      const size_t j = cl.job_index(h);
      const auto n = static_cast<unsigned>(jobs[j].size());
      const cluster::ShardTree& own = cl.tree(h);
      HostPlan hp;
      hp.rank = static_cast<unsigned>(h - cl.first_shard(j));
      hp.n = n;
      hp.first_shard = cl.first_shard(j);
      host::WorkerConfig w = wbase;
      w.nic_gbps = g.arc_gbps(g.neighbors(v).front().arc);
      // The host's initial window, shared by its N shard streams.
      w.init_window = std::max(1.0, s.init_window_kb * 1000 / pkt_bytes / n);
      if (hooks.worker) hooks.worker(w);  // the hook last: it may override init_window too
      for (unsigned k = 0; k < n; ++k) hp.transports.push_back(cl.worker(hp.first_shard + k, hp.rank, w));
      hp.ps = cl.ps(h, pbase);
      hp.ps_children = own.children(id);
      hp.ps_direct = own.direct(id);
      hp.offset = offset[j];
      hp.len = len[j];
      hp.data_seed = j ? mix(data_seed, j) : data_seed;  // each job its own gradients (job 0's as with one job)
      hp.iterations = s.iterations;
      hp.compute = from_ms(s.compute_ms) + static_cast<Time>(s.step_overhead_us * kUs);
      hp.header_bytes = s.header_bytes;
      if (scheme.eq1_priority) {
        // Eq. 1's T and Comm/Comp from the host's own link, as TrainingWorker estimates them.
        const double comm_us = 8.0 * 4.0 * static_cast<double>(elems) / (g.arc_gbps(g.neighbors(v).front().arc) * 1e3);
        hp.eq1 = true;
        hp.eq1_per_tensor = s.eq1_per_tensor;
        hp.eq1_estimates = host::Eq1Estimates(comm_us + s.compute_ms * 1e3,
                                              s.compute_ms > 0 ? comm_us / (s.compute_ms * 1e3) : 1);
      }
      auto host = std::make_unique<ShardHost>(std::move(hp), id);
      hosts[h] = host.get();
      node = std::move(host);
    } else {
      auto idle = std::make_unique<sim::Forwarder>();  // a host outside the jobs: sinks what reaches it
      forwarders.push_back(idle.get());
      node = std::move(idle);
    }
    return hooks.wrap ? hooks.wrap(v, std::move(node)) : std::move(node);
  };
  sim::build_network(sim, g, make_node, link_params(s), s.host_ecn);
  for (size_t k = 0; k < cl.shards(); ++k)
    sim.set_multicast_group(cluster::ShardedPsCluster::job_of(k), cl.workers(cl.job_index(k)));
  split.apply(sim, s.ranks);
  const std::vector<uint32_t> traced = start_queue_trace(sim, g, s);
  sim.run(from_ms(s.max_sim_ms));
  if (hooks.inspect) hooks.inspect(sim);

  // What the result is read from: the nodes this process ran (with ranks,
  // every process's, joined).
  PsTally t;
  t.hosts.resize(hosts_n);
  for (size_t i = 0; i < hosts_n; ++i) {
    const ShardHost* h = hosts[i];
    if (!h) continue;  // another process's
    HostTally& x = t.hosts[i];
    x.here = true;
    x.finished = h->finished();
    x.mismatches = h->mismatches();
    x.checked = h->checked();
    x.sent_bytes = h->sent_bytes();
    x.ps_entries = h->ps().entries();
    x.refused = h->refused();
    for (size_t k = 0; k < h->transports(); ++k) {
      x.retransmits += h->transport(k).stats().retransmits;
      x.timeouts += h->transport(k).stats().timeouts;
      x.fast_retransmits += h->transport(k).stats().fast_retransmits;
    }
    if (x.finished)
      for (size_t it = 0; it < static_cast<size_t>(s.iterations); ++it) {
        x.start.push_back(h->start_time(it));
        x.end.push_back(h->finish_time(it));
      }
  }
  {
    std::vector<const dp::SwitchProgram*> sws;
    std::vector<const host::ParameterServer*> servers;
    std::vector<const host::WorkerTransport*> transports;
    for (const auto* h : hosts)
      if (h) {
        servers.push_back(&h->ps());
        for (size_t k = 0; k < h->transports(); ++k) transports.push_back(&h->transport(k));
      }
    for (const auto* p : programs) {  // (this process's)
      sws.push_back(p);
      t.aggs_left += p->occupied();
      const dp::SwitchStats& st = p->stats();
      t.collisions += st.collisions;
      t.preempt_won += st.preempt_won;
      t.preempt_lost += st.preempt_lost;
    }
    t.refused = cluster::count_refusals(sws, servers, transports);
    t.dropped = dropped_by({forwarders.begin(), forwarders.end()});
  }
  if (split.processes > 1) join(*s.ranks, t);

  CollectiveResult out;
  const auto iters = static_cast<size_t>(s.iterations);
  size_t unfinished = 0;
  uint64_t checked = 0, expected = 0;
  double sent_sum = 0;
  std::vector<WorkerTimes> times;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const size_t n = jobs[j].size();
    expected += static_cast<uint64_t>(n) * elems * iters;
    std::vector<WorkerTimes> mine;
    for (size_t r = 0; r < n; ++r) {
      const HostTally& h = t.hosts[cl.first_shard(j) + r];
      out.verify_errors += h.mismatches;
      checked += h.checked;
      sent_sum += static_cast<double>(h.sent_bytes);
      out.max_bytes_per_worker = std::max(out.max_bytes_per_worker, static_cast<double>(h.sent_bytes) / s.iterations);
      out.retransmits += h.retransmits;
      out.timeouts += h.timeouts;
      out.fast_retransmits += h.fast_retransmits;
      if (!h.finished) {
        ++unfinished;
        continue;
      }
      mine.push_back({h.start, h.end});
    }
    if (jobs.size() > 1 && mine.size() == n) {
      CollectiveResult one;
      summarize_times(mine, elems, s.iterations, one);
      out.job_throughput_gbps.push_back(one.throughput_gbps);
      out.job_sync_ms.push_back(one.sync_ms);
    }
    times.insert(times.end(), mine.begin(), mine.end());
  }
  const bool all_finished = unfinished == 0;
  if (all_finished) summarize_times(times, elems, s.iterations, out);
  out.bytes_per_worker = sent_sum / static_cast<double>(hosts_n) / s.iterations;
  out.hops = sim.hops();
  out.events = sim.events();
  out.digest = sim.digest();
  finish_queue_trace(sim, g, s, out.digest, traced);
  out.windows = sim.windows();
  out.helper_cpu_s = sim.helper_cpu_s();
  if (sim.partitions() > 1)
    for (const auto& l : sim.partition_loads()) out.partitions.emplace_back(l.events, l.busy_s);

  size_t ps_entries = 0;
  uint64_t host_refused = 0;
  for (const HostTally& h : t.hosts) {
    ps_entries += h.ps_entries;
    host_refused += h.refused;
  }
  const size_t aggs_left = t.aggs_left;

  std::vector<std::string> probs;
  if (unfinished)
    probs.push_back(fmt::format("{} of {} workers did not finish {} iterations within max_sim_ms = {}", unfinished,
                                hosts_n, iters, s.max_sim_ms));
  if (out.verify_errors) probs.push_back(fmt::format("{} result values differ from the exact sum", out.verify_errors));
  if (all_finished && checked != expected)
    probs.push_back(fmt::format("{} result values checked, {} expected", checked, expected));
  if (all_finished && ps_entries) probs.push_back(fmt::format("{} PS entries left", ps_entries));
  if (all_finished && aggs_left) probs.push_back(fmt::format("{} aggregators still held", aggs_left));
  // Every node is honest: anything refused or misrouted is a protocol bug.
  if (all_finished) check_network(sim, t.dropped, false, probs);
  count_link_stats(sim, g, out);
  if (t.refused.total()) probs.push_back(t.refused.text());
  if (host_refused) probs.push_back(fmt::format("hosts refused {} packets of no shard", host_refused));
  set_problems(out, probs);
  out.collisions = t.collisions;
  out.evictions = t.preempt_won;
  out.preempt_lost = t.preempt_lost;

  if (detail) {
    PsFamilyDetail& d = *detail;
    d = PsFamilyDetail{};
    for (size_t i = 0; i < hosts_n; ++i) {
      const ShardHost& h = *hosts[i];
      d.ps.push_back(h.ps().stats());
      d.ps_entries.push_back(h.ps().entries());
      d.worker.emplace_back();
      for (size_t k = 0; k < h.transports(); ++k) d.worker.back().push_back(h.transport(k).stats());
      const size_t j = cl.job_index(i);
      d.ps_link_in_bytes.push_back(sim.link(sim.uplink(jobs[j][i - cl.first_shard(j)]) ^ 1).st.bytes);
      d.host_sent_bytes.push_back(h.sent_bytes());
      d.local_packets.push_back(h.local_packets());
    }
    for (size_t i = 0; i < programs.size(); ++i) d.switches.emplace_back(program_ids[i], programs[i]->stats());
    d.aggregators_left = aggs_left;
    d.misrouted = sim.misrouted();
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return out;
}

}  // namespace ina::exp::detail
