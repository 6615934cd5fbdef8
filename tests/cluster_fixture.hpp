#pragma once
// Test helpers shared by the end-to-end, switch, PS, worker and simulator tests:
//  - Cluster: a star of one switch program, WorkerNodes holding random int32
//    gradients (VectorTensor) and, for ATP/DSA, one ParameterServer per job,
//    with the exact reference sum computed independently of the protocol;
//  - make_data and friends: hand-made packets for a switch program or PS
//    driven directly through FakeEffects (fake_effects.hpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.hpp"
#include "core/time.hpp"
#include "dataplane/switch.hpp"
#include "host/ps.hpp"
#include "host/tensor_io.hpp"
#include "host/worker_node.hpp"
#include "proto/node.hpp"
#include "schemes/registry.hpp"
#include "sim/engine.hpp"
#include "cluster/cluster.hpp"
#include "wire/packet.hpp"
#include "fake_effects.hpp"

namespace ina::test {

// ---------------------------------------------------------------- hand-made packets

// A gradient packet from `rank` of `job` (worker node id `src`) to the switch `sw`.
inline Packet* make_data(FakeEffects& fx, uint16_t job, uint32_t psn, uint8_t rank, uint8_t nworkers, NodeId src,
                         const std::vector<int32_t>& vals, uint32_t priority = 0, uint16_t flags = 0,
                         NodeId dst = 0) {
  Packet* p = fx.alloc();
  p->h.type = PktType::Data;
  p->h.job = job;
  p->h.psn = psn;
  p->h.rank = rank;
  p->h.nworkers = nworkers;
  p->h.src = src;
  p->h.dst = dst;
  p->h.bitmap = 1ULL << rank;
  p->h.priority = priority;
  p->h.flags = flags;
  p->h.count = static_cast<uint16_t>(vals.size());
  for (size_t i = 0; i < vals.size(); ++i) p->payload()[i] = vals[i];
  return p;
}

inline std::vector<int32_t> ramp(size_t n, int32_t base, int32_t step = 1) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<int32_t>(i) * step;
  return v;
}

inline std::vector<int32_t> add(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = a[i] + b[i];
  return r;
}

// ---------------------------------------------------------------- Cluster

struct Faults {
  std::string name = "clean";
  double loss = 0, dup = 0, reorder = 0;
  Time reorder_delay = 3 * kUs;
  bool late_copies() const { return dup > 0 || reorder > 0; }
};

// Constant priority per job (DSA priorities without the Eq. 1 policy).
class JobPriority final : public host::PriorityFn {
 public:
  explicit JobPriority(uint32_t p) : p_(p) {}
  uint32_t priority(uint32_t, Time) override { return p_; }

 private:
  uint32_t p_;
};

struct ClusterConfig {
  std::string scheme = "dsa";  // of the registry (schemes/registry.hpp), which fixes the preemption mode
  std::vector<int> workers_per_job = {2};
  // Per job: the sizes (values) of the allreduce ops every worker submits.
  // A job without an entry uses the last one.
  std::vector<std::vector<uint64_t>> ops = {{1000, 64, 2500, 130}};
  std::vector<uint32_t> job_priority;  // per job; empty = no PriorityFn (priority 0)
  std::vector<Time> job_start;         // per job; missing = 0
  Time rank_stagger = 0;               // extra start offset per rank
  uint64_t aggregators = 32;
  uint16_t payload = 64;
  Faults faults;
  uint64_t seed = 1;
  bool track_tasks = false;
  Time link_delay = 1 * kUs;
  size_t retain_ops = 0;  // 0 = the WorkerConfig default
  double init_window = 0; // packets; 0 = the WorkerConfig default
  std::vector<cluster::Segment> segments;  // schemes with segments (p4inc-aoi): per job; empty = equal split
  // Optional: wraps each worker and PS node before it is added (e.g. in a
  // DropNth that drops one chosen packet on arrival). The node keeps its id.
  std::function<std::unique_ptr<Node>(NodeId, std::unique_ptr<Node>)> wrap_host;
};

// Hands every packet and timer to `inner`, except the nth packet (1-based)
// delivered to this node that matches `match`: that one is dropped, as if
// lost on the last link. A targeted fault, unlike random loss.
class DropNth final : public Node {
 public:
  DropNth(std::unique_ptr<Node> inner, std::function<bool(const Header&)> match, int nth = 1)
      : inner_(std::move(inner)), match_(std::move(match)), nth_(nth) {}
  void on_start(Time now, Effects& fx) override {
    inner_->set_id(id());
    inner_->on_start(now, fx);
  }
  void on_packet(Packet* p, Time now, Effects& fx) override {
    if (match_(p->h) && ++seen_ == nth_) {
      ++dropped;
      fx.free(p);
      return;
    }
    inner_->on_packet(p, now, fx);
  }
  void on_timer(uint64_t token, Time now, Effects& fx) override { inner_->on_timer(token, now, fx); }
  int dropped = 0;

 private:
  std::unique_ptr<Node> inner_;
  std::function<bool(const Header&)> match_;
  int nth_, seen_ = 0;
};

class Cluster {
 public:
  explicit Cluster(const ClusterConfig& c) : cfg(c), sim(c.seed, c.payload) {
    const schemes::Scheme& scheme = schemes::find(c.scheme);
    const bool with_ps = scheme.has_ps;
    dp::SwitchConfig swc;
    swc.memory_bytes = c.aggregators * 4ULL * c.payload;
    swc.payload_values = c.payload;
    swc.seed = mix(c.seed, 0x5);
    swc.track_tasks = c.track_tasks;
    star = std::make_unique<cluster::StarCluster>(sim, scheme, c.workers_per_job, swc, c.segments);  // the one builder
    plan = star->plan();
    sw = &star->sw();
    slots_per_pool = star->slots_per_pool();

    const size_t njobs = plan.jobs.size();
    workers.resize(njobs);
    tensors.resize(njobs);
    expected.resize(njobs);
    for (size_t j = 0; j < njobs; ++j) {
      const auto& job = plan.jobs[j];
      const auto& sizes = c.ops[std::min(j, c.ops.size() - 1)];
      const size_t n = job.workers.size();
      // Gradients and the exact reference sum (int64, then narrowed: the
      // values are small enough that the sum always fits int32).
      tensors[j].resize(n);
      expected[j].resize(sizes.size());
      for (size_t o = 0; o < sizes.size(); ++o) {
        std::vector<int64_t> sum(sizes[o], 0);
        for (size_t r = 0; r < n; ++r) {
          Rng rng(mix(c.seed, (j + 1) * 1'000'003ULL + r * 1009ULL + o));
          std::vector<int32_t> g(sizes[o]);
          for (auto& x : g) x = static_cast<int32_t>(rng.below(2001)) - 1000;
          for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
          tensors[j][r].push_back(std::make_shared<host::VectorTensor>(std::move(g)));
        }
        expected[j][o].assign(sum.begin(), sum.end());
      }
      if (!c.job_priority.empty())
        prio.push_back(std::make_unique<JobPriority>(c.job_priority[std::min(j, c.job_priority.size() - 1)]));
      const Time jstart = j < c.job_start.size() ? c.job_start[j] : 0;
      for (size_t r = 0; r < n; ++r) {
        host::WorkerConfig w;
        w.payload_values = c.payload;
        if (c.retain_ops) w.retain_ops = c.retain_ops;
        if (c.init_window > 0) w.init_window = c.init_window;
        w = star->worker(j, r, w);
        auto node = std::make_unique<host::WorkerNode>(w, jstart + static_cast<Time>(r) * c.rank_stagger);
        if (!prio.empty() && !c.job_priority.empty()) node->transport().set_priority_fn(prio.back().get());
        for (size_t o = 0; o < sizes.size(); ++o) node->submit(tensors[j][r][o], sizes[o], static_cast<uint32_t>(o));
        workers[j].push_back(node.get());
        star->add_host(job.workers[r], wrap(job.workers[r], std::move(node)));
      }
    }
    if (with_ps) {
      for (size_t j = 0; j < plan.jobs.size(); ++j) {
        host::PsConfig pc;
        pc.payload_values = c.payload;
        auto node = std::make_unique<host::ParameterServer>(star->ps(j, pc));
        servers.push_back(node.get());
        star->add_host(plan.jobs[j].ps, wrap(plan.jobs[j].ps, std::move(node)));
      }
    }
    sim::LinkParams lp;
    lp.gbps = 100;
    lp.delay = c.link_delay;
    lp.loss = c.faults.loss;
    lp.dup = c.faults.dup;
    lp.reorder = c.faults.reorder;
    lp.reorder_delay = c.faults.reorder_delay;
    star->wire([&](NodeId) { return std::make_pair(lp, lp); });
  }

  std::unique_ptr<Node> wrap(NodeId id, std::unique_ptr<Node> n) {
    if (!cfg.wrap_host) return n;
    n->set_id(id);
    return cfg.wrap_host(id, std::move(n));
  }

  // Runs until no event is left (or the bound); true if the simulator went idle.
  bool run(Time bound = 10 * kSec) {
    sim.run(bound);
    return sim.idle();
  }

  size_t total_ops() const {
    size_t t = 0;
    for (size_t j = 0; j < workers.size(); ++j) t += workers[j].size() * expected[j].size();
    return t;
  }

  // Number of workers that did not complete all their ops.
  size_t unfinished() const {
    size_t u = 0;
    for (size_t j = 0; j < workers.size(); ++j)
      for (auto* w : workers[j]) u += w->completed() != expected[j].size();
    return u;
  }

  // Values (over all workers and ops) that differ from the exact sum; `first`
  // describes the first one.
  size_t mismatches(std::string* first = nullptr) const {
    size_t bad = 0;
    for (size_t j = 0; j < tensors.size(); ++j)
      for (size_t r = 0; r < tensors[j].size(); ++r)
        for (size_t o = 0; o < tensors[j][r].size(); ++o) {
          const auto& got = tensors[j][r][o]->result;
          const auto& want = expected[j][o];
          for (size_t i = 0; i < want.size(); ++i) {
            if (got[i] == want[i]) continue;
            if (bad == 0 && first)
              *first = "job " + std::to_string(j + 1) + " rank " + std::to_string(r) + " op " + std::to_string(o) +
                       " value " + std::to_string(i) + " (psn-relative packet " + std::to_string(i / cfg.payload) +
                       "): got " + std::to_string(got[i]) + ", want " + std::to_string(want[i]);
            ++bad;
          }
        }
    return bad;
  }

  size_t ps_entries() const {
    size_t e = 0;
    for (auto* p : servers) e += p->entries();
    return e;
  }

  // Every check of the reliability contract after a run that went idle.
  // Returns the number of aggregators remove_job had to reclaim.
  size_t check_all(const std::string& what) {
    SCOPED_TRACE(what);
    EXPECT_TRUE(sim.idle()) << "simulation did not go idle within the bound (now=" << to_ms(sim.now()) << " ms)";
    EXPECT_EQ(unfinished(), 0u) << "workers that did not complete every op";
    std::string first;
    EXPECT_EQ(mismatches(&first), 0u) << "first mismatch: " << first;
    for (size_t j = 0; j < servers.size(); ++j)
      EXPECT_EQ(servers[j]->entries(), 0u) << "PS of job " << j + 1 << " still has dictionary entries";
    EXPECT_EQ(sim.packets_in_use(), 0u) << "packets leaked";
    EXPECT_EQ(sim.misrouted(), 0u);
    // Every node is honest: nothing may be refused as malformed or foreign.
    std::vector<const host::WorkerTransport*> transports;
    for (const auto& job : workers)
      for (const auto* w : job) transports.push_back(&w->transport());
    const auto refused = cluster::count_refusals({sw}, std::vector<const host::ParameterServer*>(servers.begin(), servers.end()), transports);
    EXPECT_EQ(refused.total(), 0u) << refused.text();
    const size_t occ = sw->occupied();
    if (!schemes::find(cfg.scheme).isolated && !cfg.faults.late_copies()) {
      EXPECT_EQ(occ, 0u) << "aggregators still held after every job ended";
    }
    size_t freed = 0;
    for (const auto& job : plan.jobs) freed += sw->remove_job(job.id);
    EXPECT_EQ(freed, occ) << "remove_job must reclaim exactly the aggregators still held";
    EXPECT_EQ(sw->occupied(), 0u);
    return freed;
  }

  ClusterConfig cfg;
  sim::Simulator sim;
  std::unique_ptr<cluster::StarCluster> star;
  cluster::StarPlan plan;
  dp::SwitchProgram* sw = nullptr;
  uint32_t slots_per_pool = 0;
  std::vector<std::vector<host::WorkerNode*>> workers;                             // [job][rank]
  std::vector<host::ParameterServer*> servers;                                     // [job]
  std::vector<std::vector<std::vector<std::shared_ptr<host::VectorTensor>>>> tensors;  // [job][rank][op]
  std::vector<std::vector<std::vector<int32_t>>> expected;                         // [job][op]
  std::vector<std::unique_ptr<JobPriority>> prio;
};

}  // namespace ina::test
