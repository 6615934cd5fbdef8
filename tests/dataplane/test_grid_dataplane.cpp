// GRID's data plane in the simulator (GRID §5): workers address fragments to
// their aggregation node, switches aggregate only their own fragments, drop
// on collision with a rate-sync, the PS completes. Exactness under
// collisions, capacity limits and loss, on a multi-switch topology.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "dataplane/switch.hpp"
#include "host/ps.hpp"
#include "host/worker_node.hpp"
#include "sim/engine.hpp"
#include "schemes/registry.hpp"

using namespace ina;

namespace {

struct GridNet {
  // Node ids: 0 = S1 (PS side), 1 = S2, 2 = S3, 3 = PS, 4.. = workers.
  static constexpr NodeId S1 = 0, S2 = 1, S3 = 2, PS = 3;
  sim::Simulator sim;
  std::vector<dp::SwitchProgram*> sw;
  host::ParameterServer* ps = nullptr;
  std::vector<host::WorkerNode*> workers;
  std::vector<std::shared_ptr<host::VectorTensor>> tensors;
  std::vector<int64_t> expected;

  // assign[r] = aggregation node of rank r (S1, S2, S3 or PS).
  GridNet(uint64_t seed, const std::vector<NodeId>& assign, size_t elems, uint64_t memory_bytes, double loss,
          double capacity_gbps = 0, double rate_gbps = 0)
      : sim(seed, 64, 50) {
    const size_t n = assign.size();
    std::vector<NodeId> wid(n);
    for (size_t r = 0; r < n; ++r) wid[r] = static_cast<NodeId>(4 + r);
    for (NodeId s = 0; s < 3; ++s) {
      dp::SwitchConfig c;
      c.memory_bytes = memory_bytes;
      c.grid.capacity_gbps = capacity_gbps;
      c.seed = seed + s;
      auto prog = schemes::find("grid").make_switch(c);
      dp::SwitchJob j;
      j.job = 1;
      j.workers = wid;
      j.ps = PS;
      for (size_t r = 0; r < n; ++r)
        if (assign[r] == s) j.agg_mask |= 1ULL << r;
      prog->add_job(j);
      for (NodeId peer = 0; peer < 3; ++peer)
        if (peer != s) prog->add_peer(peer);
      sw.push_back(prog.get());
      sim.add_node(std::move(prog), true);
    }
    host::PsConfig pc;
    pc.job = 1;
    pc.workers = wid;
    pc.sw = S1;
    pc.more_switches = {S2, S3};
    auto psn = std::make_unique<host::ParameterServer>(pc);
    ps = psn.get();
    sim.add_node(std::move(psn), false);
    Rng rng(seed * 7 + 1);
    expected.assign(elems, 0);
    for (size_t r = 0; r < n; ++r) {
      std::vector<int32_t> g(elems);
      for (auto& v : g) v = static_cast<int32_t>(rng.below(2001)) - 1000;
      for (size_t k = 0; k < elems; ++k) expected[k] += g[k];
      host::WorkerConfig w;
      w.job = 1;
      w.rank = static_cast<uint8_t>(r);
      w.nworkers = static_cast<uint8_t>(n);
      w.self = wid[r];
      w.aggregator = assign[r];
      w.switches = {0, 1, 2};
      w.ps = PS;
      w.init_window = 16;
      w.rate_gbps = rate_gbps;
      auto node = std::make_unique<host::WorkerNode>(w, static_cast<Time>(rng.below(20)) * kUs);
      tensors.push_back(std::make_shared<host::VectorTensor>(std::move(g)));
      node->submit(tensors.back(), elems);
      workers.push_back(node.get());
      sim.add_node(std::move(node), false);
    }
    sim::LinkParams lp;
    lp.delay = 1 * kUs;
    lp.loss = loss;
    sim.connect(S1, S2, lp, lp);
    sim.connect(S1, S3, lp, lp);
    sim.connect(PS, S1, lp, lp);
    for (size_t r = 0; r < n; ++r) sim.connect(wid[r], r < n / 2 ? S2 : S3, lp, lp);
    sim.build_routes();
  }

  void check() {
    for (auto* w : workers) ASSERT_EQ(w->completed(), 1u) << "a worker did not finish";
    for (const auto& t : tensors)
      for (size_t k = 0; k < expected.size(); ++k) ASSERT_EQ(t->result[k], expected[k]) << "element " << k;
    EXPECT_EQ(ps->entries(), 0u);
    EXPECT_EQ(sim.packets_in_use(), 0u);
    EXPECT_EQ(sim.misrouted(), 0u);
  }
};

}  // namespace

TEST(GridDataPlane, AggregatesWhereRoutedAndTheRestAtThePs) {
  // Ranks 0-1 at S2 (their ToR), 2-3 at S1 (upstream), 4-5 at S3, 6-7 at the PS.
  const std::vector<NodeId> assign = {1, 1, 0, 0, 2, 2, 3, 3};
  GridNet net(1, assign, 64 * 200 + 5, 1 << 20, 0);
  net.sim.run(5 * kSec);
  net.check();
  // Every fragment aggregated once per switch: 201 fragments per switch, no collision.
  for (auto* s : net.sw) {
    EXPECT_EQ(s->stats().completed, 201u);
    EXPECT_EQ(s->stats().rate_syncs, 0u);
  }
  EXPECT_EQ(net.ps->stats().completions, 201u);
}

TEST(GridDataPlane, ExactUnderCollisionsAndLoss) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    Rng rng(seed);
    std::vector<NodeId> assign(8);
    for (auto& a : assign) a = static_cast<NodeId>(rng.below(4));
    // 4 aggregators per switch: collisions all the time; 1 % loss on every link.
    GridNet net(seed, assign, 64 * 300, 4 * 256, 0.01);
    net.sim.run(20 * kSec);
    net.check();
    uint64_t syncs = 0;
    for (auto* s : net.sw) syncs += s->stats().rate_syncs;
    if (seed == 1) {
      EXPECT_GT(syncs, 0u) << "collisions must trigger rate synchronization";
    }
  }
}

// Without loss, every rate-sync a switch sends reaches a worker of the job
// (the worker's reaction is unit-tested in tests/host/test_worker.cpp).
// Catches: rate-syncs addressed to the wrong node (misrouted, or dropped as
// malformed by a node of another job) or lost inside the simulator.
TEST(GridDataPlane, EveryRateSyncReachesItsWorkerAndIsResentAtOnce) {
  Rng rng(11);
  std::vector<NodeId> assign(8);
  for (auto& a : assign) a = static_cast<NodeId>(rng.below(3));  // switches only
  GridNet net(11, assign, 64 * 300, 4 * 256, 0);
  net.sim.run(20 * kSec);
  net.check();
  uint64_t syncs = 0, collisions = 0;
  for (auto* s : net.sw) {
    syncs += s->stats().rate_syncs;
    collisions += s->stats().collisions;
    EXPECT_EQ(s->stats().malformed, 0u);
  }
  ASSERT_GT(collisions, 0u) << "4 units per switch: the scenario must collide";
  uint64_t worker_syncs = 0;
  for (auto* w : net.workers) {
    worker_syncs += w->transport().stats().rate_syncs;
    EXPECT_EQ(w->transport().stats().malformed, 0u);
  }
  EXPECT_EQ(worker_syncs, syncs);
  EXPECT_EQ(net.sim.misrouted(), 0u);
}

TEST(GridDataPlane, ProcessingCapacityIsEnforced) {
  // All 8 workers aggregate at S1 whose capacity is 10 Gbps: it must not
  // aggregate faster, and the excess is rate-synced, yet results stay exact.
  const std::vector<NodeId> assign(8, 0);
  GridNet net(3, assign, 64 * 2000, 1 << 20, 0, /*capacity_gbps=*/10);
  net.sim.run(20 * kSec);
  net.check();
  const auto& st = net.sw[0]->stats();
  EXPECT_GT(st.capacity_drops, 0u);
  const double bits = 8.0 * 4 * 64 * 2000 * 8;  // every worker's gradient bits aggregated at S1
  const double secs = static_cast<double>(net.sim.now()) / kSec;
  EXPECT_LE(bits / secs / 1e9, 10.0 * 1.1 + 64 * 1024 * 8 / secs / 1e9) << "aggregation rate above C_s";
}

TEST(GridDataPlane, PacingHoldsThePlannedRate) {
  const std::vector<NodeId> assign = {1, 1, 2, 2};
  GridNet net(4, assign, 64 * 4000, 1 << 20, 0, 0, /*rate_gbps=*/5);
  net.sim.run(20 * kSec);
  net.check();
  for (auto* w : net.workers) {
    const double secs = static_cast<double>(w->finish_time()) / kSec;
    const double gbps = 4000.0 * 306 * 8 / secs / 1e9;
    EXPECT_LT(gbps, 5.0 * 1.02);
    EXPECT_GT(gbps, 5.0 * 0.85);
  }
}
