// ATP provisioned as the Rina paper's §VI-A4 compares it with Rina: INA
// switches without a memory bottleneck (a contiguous region per job, §V,
// instead of Hash(job, PSN) over a shared pool) and aggregating no faster
// than Rina's (switch.ina_gbps: a host paces what it sends to INA switches,
// as a Rina member paces what it sends to its ToR).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster/cluster.hpp"
#include "cluster_fixture.hpp"
#include "core/rng.hpp"
#include "experiment/collective_ps.hpp"
#include "experiment/network_point.hpp"
#include "experiment/scenario.hpp"
#include "schemes/admission.hpp"
#include "schemes/registry.hpp"
#include "sim/network.hpp"
#include "switch_rig.hpp"
#include "topo/graph.hpp"

namespace ina::test {
namespace {

using schemes::Admission;

// The Rina testbed (Fig. 12): tor0 (h0..h3) and tor1 (h4..h7), both INA, 100 Gbps links.
topo::Graph testbed() {
  topo::Graph g = topo::rina_testbed();
  for (const topo::NodeId t : g.tor_switches()) g.set_ina(t, true, 100);
  return g;
}

std::unique_ptr<dp::SwitchProgram> atp_switch(uint64_t aggregators, dp::PoolAddressing pool) {
  dp::SwitchConfig c;
  c.payload_values = 64;
  c.memory_bytes = aggregators * 256;
  c.pool = pool;
  auto sw = schemes::find("atp").make_switch(c);
  sw->set_id(kSw);
  return sw;
}

// Job 1 (3 workers) and job 2 (2 workers) of switch_rig.hpp on 16
// aggregators. Under "hashed", task (1, 0) and task (2, p2) address the same
// aggregator (p2: the first PSN of job 2 whose Hash(2, PSN) mod 16 equals
// Hash(1, 0) mod 16): job 2's ranks both go to its PS as collisions and only
// job 1's task completes in the switch. Under "contiguous" the admission
// gives job 1 aggregators [0, 8) and job 2 [8, 16) (16 / 2 jobs, one pool
// each: the window cap is the whole region), task (1, 0) sits at 0 and task
// (2, p2) at 8 + p2 mod 8, and both complete in the switch.
TEST(AtpProvision, ContiguousRegionsSeparateTasksThatHashedPutTogether) {
  constexpr uint64_t kAggs = 16;
  const uint32_t h1 = static_cast<uint32_t>(splitmix64(dp::SwitchProgram::key_of(1, 0)) % kAggs);
  uint32_t p2 = 0;
  while (splitmix64(dp::SwitchProgram::key_of(2, p2)) % kAggs != h1) ++p2;

  // The admission's regions for the contiguous pool (the one rule, schemes/admission.hpp).
  const schemes::Scheme& atp = schemes::find("atp");
  EXPECT_EQ(schemes::memory_of(atp), schemes::Memory::Pool);
  EXPECT_EQ(schemes::memory_of(atp, dp::PoolAddressing::Contiguous), schemes::Memory::Regions);
  EXPECT_EQ(schemes::memory_of(schemes::find("switchml"), dp::PoolAddressing::Contiguous), schemes::Memory::Regions);
  Admission a(Admission::config_of(atp, kAggs, 2, 1, dp::PoolAddressing::Contiguous));
  EXPECT_EQ(a.config().pools, 1u);
  EXPECT_EQ(a.region_size(), 8u);
  EXPECT_EQ(a.window_cap(), 8u);
  const auto g1 = std::get<Admission::Grant>(a.admit({1, kJob1, kPs1, std::nullopt}));
  const auto g2 = std::get<Admission::Grant>(a.admit({2, kJob2, kPs2, std::nullopt}));
  EXPECT_EQ(g1.region_offset, 0u);
  EXPECT_EQ(g1.region_size, 8u);
  EXPECT_EQ(g2.region_offset, 8u);
  EXPECT_EQ(g2.region_size, 8u);

  const auto v1 = ramp(64, 1), v2 = ramp(64, 100);
  // The targeted sequence: job 1's rank 0, job 2's ranks 0 and 1, job 1's ranks 1 and 2.
  auto drive = [&](dp::SwitchProgram& sw, FakeEffects& fx) {
    sw.on_packet(make_data(fx, 1, 0, 0, 3, kJob1[0], v1), 0, fx);
    sw.on_packet(make_data(fx, 2, p2, 0, 2, kJob2[0], v2), 0, fx);
    sw.on_packet(make_data(fx, 2, p2, 1, 2, kJob2[1], v2), 0, fx);
    sw.on_packet(make_data(fx, 1, 0, 1, 3, kJob1[1], v1), 0, fx);
    sw.on_packet(make_data(fx, 1, 0, 2, 3, kJob1[2], v1), 0, fx);
  };
  {
    SCOPED_TRACE("hashed");
    FakeEffects fx;
    auto sw = atp_switch(kAggs, dp::PoolAddressing::Hashed);
    add_shared_jobs(*sw);
    drive(*sw, fx);
    // A completed task keeps its aggregator until the PS's result passes.
    EXPECT_EQ(sw->holder_of(1, 0), static_cast<int64_t>(h1));
    EXPECT_EQ(sw->holder_of(2, p2), -1);
    EXPECT_EQ(sw->stats().collisions, 2u);
    EXPECT_EQ(sw->stats().completed, 1u);
    const auto out = fx.take();
    ASSERT_EQ(out.size(), 3u);  // job 2's two ranks as collisions, job 1's aggregate
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(out[k].h.dst, kPs2);
      EXPECT_TRUE(out[k].h.has(flag::kCollision));
    }
    EXPECT_EQ(out[2].h.dst, kPs1);
    EXPECT_EQ(out[2].h.bitmap, 0b111u);
    EXPECT_EQ(out[2].v, add(add(v1, v1), v1));
  }
  {
    SCOPED_TRACE("contiguous");
    FakeEffects fx;
    auto sw = atp_switch(kAggs, dp::PoolAddressing::Contiguous);
    sw->add_job(g1.switch_job());
    sw->add_job(g2.switch_job());
    drive(*sw, fx);
    EXPECT_EQ(sw->holder_of(1, 0), 0);
    EXPECT_EQ(sw->holder_of(2, p2), static_cast<int64_t>(8 + p2 % 8));
    EXPECT_EQ(sw->stats().collisions, 0u);
    EXPECT_EQ(sw->stats().completed, 2u);
    const auto out = fx.take();
    ASSERT_EQ(out.size(), 2u);  // both aggregates, complete, to their PSes
    EXPECT_EQ(out[0].h.dst, kPs2);
    EXPECT_EQ(out[0].h.bitmap, 0b11u);
    EXPECT_EQ(out[0].v, add(v2, v2));
    EXPECT_EQ(out[1].h.dst, kPs1);
    EXPECT_EQ(out[1].h.bitmap, 0b111u);
    EXPECT_EQ(out[1].v, add(add(v1, v1), v1));
    // Contiguous addressing needs a region: a job without one is refused.
    dp::SwitchJob none;
    none.job = 3;
    none.workers = {6, 7};
    none.ps = 12;
    EXPECT_THROW(sw->add_job(none), std::invalid_argument);
  }
}

// The sharded PS on the testbed, contiguous: every INA switch gives shard k
// (job k + 1) the k-th of 8 regions of its 20480 aggregators (5 MiB / 256 B),
// 2560 each, and every transport's window is capped at 2560; hashed: no
// region, no cap.
TEST(AtpProvision, EveryShardGetsItsRegionOnEveryInaSwitch) {
  const topo::Graph g = testbed();
  const std::vector<NodeId> workers = {2, 3, 4, 5, 6, 7, 8, 9};
  const schemes::Scheme& atp = schemes::find("atp");
  dp::SwitchConfig c;
  c.memory_bytes = 5ULL << 20;
  c.payload_values = 64;
  for (const auto pool : {dp::PoolAddressing::Hashed, dp::PoolAddressing::Contiguous}) {
    const bool contiguous = pool == dp::PoolAddressing::Contiguous;
    SCOPED_TRACE(contiguous ? "contiguous" : "hashed");
    cluster::ShardedPsCluster cl(g, workers, true);
    cl.provision(atp, {pool, 20480, 0});
    EXPECT_EQ(cl.window_cap(), contiguous ? 2560u : 0u);
    EXPECT_EQ(cl.worker(0, 1).window_cap, contiguous ? 2560u : 0u);
    for (const NodeId sw : {NodeId{0}, NodeId{1}}) {
      const auto prog = cl.make_switch(atp, sw, c);
      EXPECT_EQ(prog->aggregators(), 20480u);
      EXPECT_EQ(prog->config().pool, pool);
      for (size_t k = 0; k < 8; ++k) {
        const dp::SwitchJob* j = prog->job(cluster::ShardedPsCluster::job_of(k));
        ASSERT_NE(j, nullptr);
        EXPECT_EQ(j->region_offset, contiguous ? 2560u * k : 0u) << k;
        EXPECT_EQ(j->region_size, contiguous ? 2560u : 0u) << k;
      }
    }
  }
  // A scheme with no shared pool keeps its own memory: `ps` runs no program, so no cap.
  cluster::ShardedPsCluster plain(g, workers, false);
  plain.provision(schemes::find("ps"), {dp::PoolAddressing::Contiguous, 20480, 0});
  EXPECT_EQ(plain.window_cap(), 0u);
}

exp::detail::PsFamilyDetail run_atp(exp::CollectiveSettings s, exp::CollectiveResult& r) {
  const topo::Graph g = testbed();
  s.workers_per_job = {8};
  exp::detail::PsFamilyDetail d;
  r = exp::detail::run_ps_family(g, schemes::find("atp"), sim::place_rack_packed(g, {8}), s, {}, &d);
  return d;
}

// End to end on the testbed with a pool small enough for the 8 shards'
// windows to meet under Hash(job, PSN): 0.05 MiB = 204 aggregators, 25 per
// shard when contiguous. Hashed collides (measured: > 0); contiguous never
// does, by construction, and both give the exact sums with nothing left.
TEST(AtpProvision, ContiguousShardsNeverCollideEndToEnd) {
  exp::CollectiveSettings s;
  s.gradient_mb = 0.25;
  s.memory_mb = 0.05;
  s.max_sim_ms = 2000;
  exp::CollectiveResult hashed, contiguous;
  run_atp(s, hashed);
  s.atp_pool = "contiguous";
  const auto d = run_atp(s, contiguous);
  ASSERT_TRUE(hashed.ok) << hashed.problems;
  ASSERT_TRUE(contiguous.ok) << contiguous.problems;
  std::printf("hashed: %.3f Gbps, %llu collisions; contiguous: %.3f Gbps, %llu collisions\n", hashed.throughput_gbps,
              static_cast<unsigned long long>(hashed.collisions), contiguous.throughput_gbps,
              static_cast<unsigned long long>(contiguous.collisions));
  EXPECT_GT(hashed.collisions, 0u);
  EXPECT_EQ(contiguous.collisions, 0u);
  EXPECT_EQ(d.aggregators_left, 0u);
  s.atp_pool = "regions";
  exp::CollectiveResult bad;
  EXPECT_THROW(run_atp(s, bad), std::invalid_argument);
}

// The point `ina plan rina --topology scenarios/rina/testbed.json --workers 8
// --ina tor0,tor1 --gradient-mb 0.25 --vs-sim --schemes atp [--atp-pool P]`
// simulates (its settings are CollectiveSettings' defaults): 8 shards of 128
// packets in 20480 aggregators. Contiguous: no collision; hashed: whatever
// Hash(job, PSN) gives (printed with the rest of the switches' story).
TEST(AtpProvision, ThePlansTestbedPointUnderBothPools) {
  exp::CollectiveSettings s;
  s.gradient_mb = 0.25;
  for (const char* pool : {"hashed", "contiguous"}) {
    s.atp_pool = pool;
    exp::CollectiveResult r;
    const auto d = run_atp(s, r);
    ASSERT_TRUE(r.ok) << pool << ": " << r.problems;
    uint64_t to_ps = 0, completed = 0;
    for (const auto& [id, st] : d.switches) {
      to_ps += st.to_ps;
      completed += st.completed;
    }
    std::printf("%s: %.6f Gbps, collisions %llu, completed %llu, to PS %llu, retransmits %llu, timeouts %llu\n", pool,
                r.throughput_gbps, static_cast<unsigned long long>(r.collisions),
                static_cast<unsigned long long>(completed), static_cast<unsigned long long>(to_ps),
                static_cast<unsigned long long>(r.retransmits), static_cast<unsigned long long>(r.timeouts));
    if (std::string(pool) == "contiguous") {
      EXPECT_EQ(r.collisions, 0u);
    }
  }
}

// switch.ina_gbps = 20 on 100 G links: network_run gives each INA switch
// capacity 20 (for ATP as for Rina), and a host paces what it sends over
// the trees at 20 Gbps in all, as a Rina member does toward its ToR. On the
// testbed host h1 (rank 1) has 8 transports, one per shard: shard 1's PS is
// h1 itself (no wire), the other 7 go to tor0 first, so each paces at
// 20/7 Gbps: a 306 B packet every 2448 bits / (20/7 Gbps) = 856.8 ns, the
// host's 7 on the wire together one every 122.4 ns (Rina's gap at 20 Gbps).
// The local one goes at the same rate (the PsOwnRank test below says why).
// Without ina_gbps nothing is paced.
TEST(AtpProvision, InaSwitchesHonourTheInaRate) {
  exp::Settings st;
  st.topology_kind = "testbed";
  st.jobs = 1;
  st.ina = "all";
  st.link_gbps = 100;
  st.gradient_mb = 4;
  st.ina_gbps = 20;
  const schemes::Scheme& atp = schemes::find("atp");
  const exp::NetworkRun run = exp::network_run(st, atp, 1, "test");
  ASSERT_EQ(run.ina.size(), 2u);
  for (const auto sw : run.ina) EXPECT_EQ(run.graph.node(sw).capacity_gbps, 20.0) << run.graph.node(sw).name;
  EXPECT_EQ(run.settings.ina_gbps, 20.0);

  const auto placed = sim::place_rack_packed(run.graph, {8}).jobs.at(0);
  const std::vector<NodeId> workers(placed.begin(), placed.end());
  cluster::ShardedPsCluster cl(run.graph, workers, true);
  cl.provision(atp, {dp::PoolAddressing::Hashed, 0, run.settings.ina_gbps});
  host::WorkerConfig base;
  for (size_t k = 0; k < 8; ++k) {
    const host::WorkerConfig w = cl.worker(k, 1, base);
    EXPECT_EQ(w.rate_gbps, 20.0 / 7) << k;
    EXPECT_NEAR(w.wire_bytes * 8.0 / w.rate_gbps, 856.8, 1e-9) << k;  // ns between its packets
  }
  cluster::ShardedPsCluster free(run.graph, workers, true);
  free.provision(atp, {dp::PoolAddressing::Hashed, 0, 0});
  EXPECT_EQ(free.worker(0, 1, base).rate_gbps, 0.0);

  // End to end: 4 MiB per worker = 2^20 values, 2^17 per shard = 2048
  // packets; each paced transport sends its 2048 first transmissions at
  // least 856.8 ns apart, so the sync takes >= 2047 * 856.8 ns = 1.7539 ms;
  // unpaced the same run ends sooner (measured 0.729 ms, and 1.763 ms with an
  // ATP program that stalled: the bound is the pacing's, the gap the cap's).
  exp::CollectiveSettings s = run.settings;
  s.max_sim_ms = 2000;
  exp::CollectiveResult capped, line;
  run_atp(s, capped);
  s.ina_gbps = 0;
  run_atp(s, line);
  ASSERT_TRUE(capped.ok) << capped.problems;
  ASSERT_TRUE(line.ok) << line.problems;
  std::printf("sync: 20 Gbps %.6f ms (%.3f Gbps), uncapped %.6f ms (%.3f Gbps)\n", capped.sync_ms,
              capped.throughput_gbps, line.sync_ms, line.throughput_gbps);
  EXPECT_GE(capped.sync_ms, 2047 * 856.8e-6);
  EXPECT_LT(line.sync_ms, capped.sync_ms);
  EXPECT_EQ(line.bytes_per_worker, capped.bytes_per_worker);  // the cap changes time only
}

// Shard k's PS is host k, whose own rank hands its gradient to the PS
// without the wire. Paced like its peers it keeps their pace; unpaced (line
// rate into its own PS) it ran ahead, its lead waiting at the PS for the
// tree's sum: with no queue to mark, its window and RTT grew until its RTO
// (1 ms floor, srtt + 4 rttvar with rttvar ~ 0) fired for packets nothing
// had lost. On the testbed at 0.5 Gbps per host (0.5/7 per transport: an
// RTT of 1 ms is a window of 29 packets) a 4 MiB allreduce timed out
// 8634 times with no drop; it must time out never.
TEST(AtpProvision, ThePsOwnRankKeepsPaceWithItsShard) {
  exp::CollectiveSettings s;
  s.gradient_mb = 4;
  s.ina_gbps = 0.5;
  s.atp_pool = "contiguous";
  s.max_sim_ms = 5000;
  exp::CollectiveResult r;
  const auto d = run_atp(s, r);
  ASSERT_TRUE(r.ok) << r.problems;
  EXPECT_EQ(r.queue_drops, 0u);
  EXPECT_EQ(r.timeouts, 0u);
  EXPECT_EQ(r.retransmits, 0u);
  EXPECT_EQ(d.aggregators_left, 0u);
}

// atp.pool: "hashed" by default (every scenario as before), "contiguous" in
// the Rina scenarios that compare ATP with Rina (with switch.ina_gbps = 20,
// the full speed both aggregate at), through network_run into the
// collective's settings; refused on the star and for any other value.
TEST(AtpProvision, TheScenarioKeyReachesTheCollective) {
  exp::Settings st;
  EXPECT_EQ(st.atp_pool, "hashed");
  EXPECT_EQ(exp::CollectiveSettings{}.atp_pool, "hashed");
  EXPECT_THROW(exp::apply_setting(st, "atp.pool", "regions", "test"), exp::ScenarioError);
  exp::apply_setting(st, "atp.pool", "contiguous", "test");
  EXPECT_THROW(exp::validate(st, {"atp"}, "test"), exp::ScenarioError);  // the star has no sharded PSes
  st.topology_kind = "testbed";
  st.jobs = 1;
  st.gradient_mb = 1;
  EXPECT_NO_THROW(exp::validate(st, {"atp"}, "test"));
  EXPECT_EQ(exp::network_run(st, schemes::find("atp"), 1, "test").settings.atp_pool, "contiguous");
  for (const char* f : {"fig10.toml", "fig10_full.toml", "fig11.toml", "fig11_dragonfly.toml", "testbed.toml"}) {
    const exp::Scenario sc = exp::load_scenario_file(std::string(INA_SOURCE_DIR) + "/scenarios/rina/" + f);
    EXPECT_EQ(sc.base.atp_pool, "contiguous") << f;
    EXPECT_EQ(sc.base.ina_gbps, 20.0) << f;
  }
}

}  // namespace
}  // namespace ina::test
