// Ring collectives (host/ring.hpp) and Rina's ToR (dataplane/rina.cpp) on
// multi-switch topologies, through exp::run_collective.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

#include "experiment/collective.hpp"
#include "ring_settings.hpp"
#include "experiment/runner.hpp"
#include "experiment/scenario.hpp"
#include "host/ring.hpp"
#include "host/ring_failover.hpp"
#include "topo/graph.hpp"

namespace ina {
namespace {

// The Rina testbed (Fig. 12): two ToRs, 4 hosts each, one inter-rack link.
topo::Graph testbed(bool ina0, bool ina1) {
  topo::Graph g;
  g.name = "rina-testbed";
  const auto t0 = g.add_switch("tor0", ina0, ina0 ? 100 : 0);
  const auto t1 = g.add_switch("tor1", ina1, ina1 ? 100 : 0);
  for (int i = 0; i < 8; ++i) g.add_link(g.add_host("h" + std::to_string(i)), i < 4 ? t0 : t1, 100);
  g.add_link(t0, t1, 100);
  return g;
}

topo::Graph fat_tree4(bool ina_tors) {
  auto g = *topo::generate("fat-tree:4");
  if (ina_tors)
    for (auto t : g.tor_switches()) g.set_ina(t, true, 100);
  return g;
}

exp::CollectiveSettings small(double mb = 0.0625) { return test::small_ring(mb); }

TEST(Ring, RarIsExactOnAFatTree) {
  const auto g = fat_tree4(false);
  auto s = small();
  s.workers_per_job = {8};
  const auto r = exp::run_collective(g, "rar", s);
  ASSERT_TRUE(r.ok) << r.problems;
  EXPECT_EQ(r.steps, 2u * (8 - 1));
  EXPECT_EQ(r.retransmits, 0u);
  // 2(N-1) steps of S/N: 16384 values, shards of 2048 = 32 packets of 64
  // values; 14 * 32 packets of 256 B payload + 50 B header.
  EXPECT_EQ(r.bytes_per_worker, 14.0 * 32 * (256 + 50));
  EXPECT_EQ(r.queue_drops, 0u);
}

// The busiest links of a run, from its link counters: a ring whose hosts
// sit on a line of switches s0-s1-s2-s3 in the order s0, s2, s1, s3 sends
// two of its four flows over s1->s2 (s0's host to s2's, s1's to s3's) and
// the acknowledgements of the two others (s2's host to s1's, s3's to
// s0's); s2->s1 likewise. Every other link carries one flow's data and
// another's acknowledgements: half as much. Equal loads keep link order
// (the switch links were added first).
TEST(Ring, BusiestLinksAreTheOnesTwoFlowsCross) {
  topo::Graph g;
  topo::NodeId sw[4];
  for (int i = 0; i < 4; ++i) sw[i] = g.add_switch(fmt::format("s{}", i));
  for (int i = 0; i < 3; ++i) g.add_link(sw[i], sw[i + 1], 100);
  for (const int at : {0, 2, 1, 3}) g.add_link(g.add_host(fmt::format("h{}", at)), sw[at], 100);
  auto s = small();
  s.workers_per_job = {4};
  const auto r = exp::run_collective(g, "rar", s);
  ASSERT_TRUE(r.ok) << r.problems;
  ASSERT_EQ(r.retransmits, 0u);
  ASSERT_EQ(r.busiest_links.size(), exp::kBusiestLinks);  // of 14 links with traffic
  std::vector<std::string> names;
  for (const auto& l : r.busiest_links) names.push_back(l.link);
  EXPECT_EQ(names, (std::vector<std::string>{"s1->s2", "s2->s1", "s0->s1", "s1->s0", "s2->s3", "s3->s2", "h0->s0",
                                             "s0->h0"}));
  const uint64_t one = r.busiest_links[2].bytes;
  EXPECT_EQ(r.busiest_links[0].bytes, 2 * one);
  EXPECT_EQ(r.busiest_links[1].bytes, 2 * one);
  for (size_t i = 2; i < r.busiest_links.size(); ++i) EXPECT_EQ(r.busiest_links[i].bytes, one) << names[i];
  EXPECT_DOUBLE_EQ(r.busiest_links[0].busy_ms, 2 * r.busiest_links[2].busy_ms);
}

// Queue drops are counted: with 2 KB queues (six packets) and a 60 KB
// window, drop-tail drops at the senders' own NICs, and every retransmission
// then answers a loss. Catches: a lossless claim that never looked.
TEST(Ring, QueueDropsAreCountedAndRecovered) {
  const auto g = fat_tree4(false);
  auto s = small();
  s.workers_per_job = {8};
  s.queue_kb = 2;
  const auto r = exp::run_collective(g, "rar", s);
  ASSERT_TRUE(r.ok) << r.problems;
  EXPECT_EQ(r.verify_errors, 0u);
  EXPECT_GT(r.queue_drops, 0u);
  EXPECT_GE(r.retransmits, r.queue_drops);
}

// ECN marks at switch ports, never in a host's own NIC queue. On the
// testbed every link carries one RAR flow per direction, so a 400 KB window
// (above the 100 KB threshold), unpaced (the aimd transport; the paper's
// paces every send at the NIC's rate and queues nothing there), builds a
// queue only at the sender's NIC: nothing may be marked, and the run is
// the ECN-off run to the nanosecond. With host_ecn the NICs mark each
// step's start burst (docs/results/rina.md: on the fat-tree that cost RAR 2.4x).
TEST(Ring, NicsDoNotEcnMarkTheirOwnQueue) {
  auto s = small(4);
  s.init_window_kb = 400;
  s.rina_transport = "aimd";
  const auto r = exp::run_collective(testbed(false, false), "rar", s);
  ASSERT_TRUE(r.ok) << r.problems;
  EXPECT_EQ(r.ecn_marks_host, 0u);
  EXPECT_EQ(r.ecn_marks_switch, 0u);
  auto off = s;
  off.ecn_kb = 0;
  const auto o = exp::run_collective(testbed(false, false), "rar", off);
  ASSERT_TRUE(o.ok) << o.problems;
  EXPECT_EQ(r.sync_ms, o.sync_ms);
  auto nic = s;
  nic.host_ecn = true;
  const auto m = exp::run_collective(testbed(false, false), "rar", nic);
  ASSERT_TRUE(m.ok) << m.problems;
  EXPECT_GT(m.ecn_marks_host, 0u);
  EXPECT_EQ(m.ecn_marks_switch, 0u);
}

// Rina on the testbed with both ToRs INA: G = 2 groups. Every worker sends
// its half of the gradient to the ToR twice (ScatterReduce, then the step
// that completes the rack's own shard); the agent also broadcasts the
// complete half once, which its ToR copies to the rack and the other group
// (the other half reaches the rack through the ToR, from the other group).
// RAR's 8 workers send 2 * 7/8 of the gradient each. Steps: 2G - 1.
TEST(Ring, RinaShortensTheChainOnTheTestbed) {
  const auto r = exp::run_collective(testbed(true, true), "rina", small());
  ASSERT_TRUE(r.ok) << r.problems;
  const double half = 128 * (256 + 50);  // 8192 values = 128 packets
  EXPECT_EQ(r.bytes_per_worker, (2 * 3 * half + 6 * 2 * half) / 8);
  EXPECT_EQ(r.max_bytes_per_worker, 3 * half);
  EXPECT_EQ(r.steps, 3u);  // the agent's: 2G - 1 (rank 0 is an agent)
  const auto rar = exp::run_collective(testbed(true, true), "rar", small());
  ASSERT_TRUE(rar.ok) << rar.problems;
  EXPECT_EQ(rar.steps, 14u);
  EXPECT_EQ(rar.max_bytes_per_worker, rar.bytes_per_worker);
}

// Every ToR of the k = 4 fat-tree INA: G = 8 racks of 2. ScatterReduce:
// every worker sends G shards of S/G. AllGather: the agent broadcasts its
// rack's shard (step 0); the G - 2 = 6 shards received later are relayed by
// the rack's members in turn (steps 1, 3, 5 by the second member, 2, 4, 6
// by the agent), so the busiest uplink carries G + 4 shards, not the
// G + 1 + (G - 2) = 15 of an agent relaying everything (the next test).
TEST(Ring, RinaSpreadsAllGatherRelaysOverTheRack) {
  const auto r = exp::run_collective(fat_tree4(true), "rina", small());
  ASSERT_TRUE(r.ok) << r.problems;
  const double shard = 32 * (256 + 50);  // 16384 / 8 values = 32 packets
  EXPECT_EQ(r.steps, 2u * 8 - 1);
  EXPECT_EQ(r.max_bytes_per_worker, (8 + 4) * shard);
  EXPECT_EQ(r.bytes_per_worker, (8 + 3.5) * shard);
}

// The same with the agent relaying alone (rina_ag_relay = "agent"): its
// uplink carries G shards of ScatterReduce, the broadcast and all G - 2 = 6
// relays (15), the member's uplink its 8 ScatterReduce shards alone; the
// mean and the steps stay, and every sum is exact.
TEST(Ring, RinaAgentAloneRelaysEveryAllGatherShard) {
  auto s = small();
  s.rina_ag_relay = "agent";
  const auto r = exp::run_collective(fat_tree4(true), "rina", s);
  ASSERT_TRUE(r.ok) << r.problems;
  const double shard = 32 * (256 + 50);
  EXPECT_EQ(r.steps, 2u * 8 - 1);
  EXPECT_EQ(r.max_bytes_per_worker, (8 + 1 + 6) * shard);
  EXPECT_EQ(r.bytes_per_worker, (8 + 3.5) * shard);
  s.rina_ag_relay = "leader";
  EXPECT_THROW(exp::run_collective(fat_tree4(true), "rina", s), std::invalid_argument);
}

// Rina §IV-C: in ScatterReduce members send at "full speed", capped at the
// INA rate (switch.ina_gbps). What is paced (host/ring_transfer.cpp, pump): every
// ScatterReduce send of an INA rack's member to its own ToR (Step::to_tor,
// the agent's too, both steps 0..G-1); not AllGather, not retransmissions,
// not autonomous workers. Rule: a packet leaves only if now >= next_tx_,
// then next_tx_ = now + gap, gap = 8 * wire_bytes / ina_gbps (whole ps).
// Testbed with both ToRs INA: G = 2 groups, gradient S = 4 MiB = 2^20
// values; each rank sends shard S/2 in SR step 0 and S/2 in step 1 (to the
// agent): n = 2^19 / 64 = 8192 packets of 306 B per step, 2n = 16384 paced.
//   gap(20 Gbps) = 2448 bits / 20 Gbps = 122.4 ns, gap(40) = 61.2 ns,
//   line rate (100 Gbps) serialization ser = 24.48 ns.
// (1) Cap respected: each rank's last SR packet leaves >= (2n-1) gap after
//     its first; then the agent's AllGather broadcast of n packets needs
//     >= n ser on its uplink: sync >= 16383 * 122.4 ns + 8192 * 24.48 ns
//     = 2.00528 + 0.20054 = 2.20582 ms. The cap is per rank: the ToR gets
//     4 x 20 Gbps and sums them into one 20 Gbps partial (the BOM's reading,
//     control/rina_time.cpp); an SR rate above it would finish sooner.
// (2) The SR time is the pacing's: 20 vs 40 Gbps differ by exactly
//     2n (gap20 - gap40) = 16384 * 61.2 ns = 1.00270 ms (0.2 %; an AllGather
//     paced too would add n * 61.2 ns more, a wrong rate a different slope).
// (3) Uncapped, SR runs near line rate: 20 Gbps minus uncapped is
//     2n (gap20 - ser) = 16384 * 97.92 ns = 1.60432 ms if SR ran at exactly
//     100 Gbps; uncapped SR is a little below line rate (measured 1.5005 ms,
//     -6.5 %; the 60 KB window vs the ack path's RTT, inferred): 10 %.
// Under rina_transport "aimd", where ina_gbps = 0 does not pace ("paper"
// would pace at its 20 Gbps full speed).
TEST(Ring, RinaScatterReduceIsCappedAtTheInaRate) {
  auto run = [](double gbps) {
    auto s = small(4);
    s.ina_gbps = gbps;
    s.rina_transport = "aimd";
    const auto r = exp::run_collective(testbed(true, true), "rina", s);
    EXPECT_TRUE(r.ok) << gbps << ": " << r.problems;
    EXPECT_EQ(r.retransmits, 0u) << gbps;  // retransmissions are not paced
    return r;
  };
  const auto c20 = run(20), c40 = run(40), free = run(0);
  const double n = 8192, ms_per_ns = 1e-6;
  const double gap20 = 122.4, gap40 = 61.2, ser = 24.48;  // ns
  std::printf("sync: 20 Gbps %.6f ms, 40 Gbps %.6f ms, uncapped %.6f ms\n", c20.sync_ms, c40.sync_ms, free.sync_ms);
  EXPECT_GE(c20.sync_ms, ((2 * n - 1) * gap20 + n * ser) * ms_per_ns);
  const double slope = 2 * n * (gap20 - gap40) * ms_per_ns;
  EXPECT_NEAR(c20.sync_ms - c40.sync_ms, slope, 0.002 * slope);
  const double saved = 2 * n * (gap20 - ser) * ms_per_ns;
  EXPECT_NEAR(c20.sync_ms - free.sync_ms, saved, 0.10 * saved);
  // The same bytes and steps either way: the cap changes time only.
  EXPECT_EQ(c20.bytes_per_worker, free.bytes_per_worker);
  EXPECT_EQ(c20.steps, free.steps);
  // At most one pace timer per paced packet: 8 ranks * 2n = 131072 events
  // more than uncapped (measured: 131120; the rest of the run differs by a
  // few dozen). A timer per pump call (each re-arming when it fired early)
  // piled up with the packets: ~10^8 events, minutes per run.
  EXPECT_LE(c20.events, free.events + 8 * 2 * 8192 + 1000);

  // switch.ina_gbps reaches the endpoints through the scenario layer: bound
  // (1) holds there too (it does not depend on the scenario's 2.5 us links),
  // and without the cap (workload.rina_transport = "aimd", switch.ina_gbps
  // = 0) the same point ends before that bound.
  exp::Settings sc;
  sc.topology_kind = "testbed";
  sc.jobs = 1;
  sc.ina = "all";
  sc.gradient_mb = 4;
  sc.max_sim_ms = 2000;
  sc.ina_gbps = 20;
  const exp::RunOutput capped = exp::run_point(sc, "rina", 1);
  sc.ina_gbps = 0;
  sc.rina_transport = "aimd";
  const exp::RunOutput line = exp::run_point(sc, "rina", 1);
  ASSERT_TRUE(capped.ok && line.ok) << capped.problems << line.problems;
  std::printf("scenario layer: 20 Gbps %.6f ms, uncapped %.6f ms\n", capped.metrics.at("sync_ms"),
              line.metrics.at("sync_ms"));
  EXPECT_GE(capped.metrics.at("sync_ms"), ((2 * n - 1) * gap20 + n * ser) * ms_per_ns);
  EXPECT_LT(line.metrics.at("sync_ms"), ((2 * n - 1) * gap20 + n * ser) * ms_per_ns);
}

// Rank 0 (h0, under tor0) is an agent when tor0 is INA, else an autonomous
// worker. Both INA: G = 2 groups; one INA rack: G = 1 + 4 autonomous
// workers = 5. An agent takes 2G - 1 steps, an autonomous worker 2(G - 1).
TEST(Ring, RinaOnTheTestbedIsExact) {
  struct Case {
    bool ina0, ina1;
    uint64_t steps;
  };
  for (const Case c : {Case{true, true, 2 * 2 - 1}, Case{true, false, 2 * 5 - 1}, Case{false, true, 2 * (5 - 1)}}) {
    SCOPED_TRACE(testing::Message() << c.ina0 << c.ina1);
    const auto r = exp::run_collective(testbed(c.ina0, c.ina1), "rina", small());
    ASSERT_TRUE(r.ok) << r.problems;  // includes: every rank wrote all 16384 results
    EXPECT_EQ(r.verify_errors, 0u);
    EXPECT_EQ(r.steps, c.steps);
    EXPECT_EQ(r.retransmits, 0u);  // no faults: nothing to recover
    EXPECT_EQ(r.dup_received, 0u);
  }
}

// H-AR on the testbed (R = 2 racks of k = 4): a ReduceScatter ring in each
// rack (k-1 = 3 sends of S/4), one inter-rack ring per rank position over
// that position's S/4 (2(R-1) = 2 sends of S/8), an AllGather ring in each
// rack (3 sends of S/4): 8 steps, 1.75 S per worker like RAR (14 of S/8).
// S = 16384 values: 3 * 64 + 2 * 32 + 3 * 64 = 448 packets of 306 B.
TEST(Ring, HierarchicalIsExact) {
  const auto r = exp::run_collective(testbed(false, false), "h-ar", small());
  ASSERT_TRUE(r.ok) << r.problems;
  EXPECT_EQ(r.steps, 3u + 2 + 3);
  EXPECT_EQ(r.bytes_per_worker, 448.0 * (256 + 50));
  EXPECT_EQ(r.max_bytes_per_worker, r.bytes_per_worker);
}

TEST(Ring, RinaWithoutInaRacksIsRar) {
  const auto g = fat_tree4(false);
  const auto rina = exp::run_collective(g, "rina", small());
  const auto rar = exp::run_collective(g, "rar", small());
  ASSERT_TRUE(rina.ok) << rina.problems;
  ASSERT_TRUE(rar.ok) << rar.problems;
  EXPECT_EQ(rina.steps, rar.steps);
  EXPECT_EQ(rina.bytes_per_worker, rar.bytes_per_worker);
  EXPECT_EQ(rina.sync_ms, rar.sync_ms);
}

TEST(Ring, AllSchemesExactUnderLossDuplicationReordering) {
  for (const char* scheme : {"rar", "h-ar", "rina"}) {
    auto s = small();
    s.loss = s.dup = s.reorder = 0.01;
    s.iterations = 2;
    const auto r = exp::run_collective(fat_tree4(true), scheme, s);
    ASSERT_TRUE(r.ok) << scheme << ": " << r.problems;
    EXPECT_EQ(r.verify_errors, 0u) << scheme;
    // The faults happened and were recovered from: lost packets were sent
    // again, duplicates arrived and were recognised.
    EXPECT_GT(r.retransmits, 0u) << scheme;
    EXPECT_GT(r.dup_received, 0u) << scheme;
  }
}

}  // namespace
}  // namespace ina

namespace ina {
namespace {

// Many seeds, every scheme, INA on some racks only, two iterations with
// compute between them, loss + duplication + reordering: every run exact,
// nothing left in a switch, no packet or timer left.
topo::Graph half_ina_fat_tree() {
  auto g = *topo::generate("fat-tree:4");
  const auto tors = g.tor_switches();
  for (size_t i = 0; i < tors.size(); i += 2) g.set_ina(tors[i], true, 100);
  return g;
}

exp::CollectiveSettings lossy(uint64_t seed) {
  exp::CollectiveSettings s;
  s.seed = seed;
  s.gradient_mb = 0.03;
  s.iterations = 2;
  s.compute_ms = 0.05;
  s.loss = s.dup = s.reorder = 0.01;
  s.memory_mb = 0.01;  // 40 aggregators: the window to a ToR is capped by the region
  s.max_sim_ms = 5000;
  return s;
}

// Steps of rank 0 on half_ina_fat_tree (8 racks of 2, INA on racks 0, 2, 4,
// 6): RAR over 16 ranks 2(16 - 1); H-AR (k - 1) + 2(R - 1) + (k - 1) with
// k = 2, R = 8; Rina G = 4 INA groups + 8 autonomous workers = 12, and rank
// 0 is rack 0's agent: 2G - 1.
uint64_t half_ina_steps(const std::string& scheme) {
  if (scheme == "rar") return 2 * (16 - 1);
  if (scheme == "h-ar") return 1 + 2 * (8 - 1) + 1;
  return 2 * 12 - 1;
}

TEST(Ring, SeedsSchemesAndPartialIna) {
  const auto g = half_ina_fat_tree();
  for (uint64_t seed = 1; seed <= 6; ++seed)
    for (const char* scheme : {"rar", "h-ar", "rina"}) {
      const auto r = exp::run_collective(g, scheme, lossy(seed));
      SCOPED_TRACE(testing::Message() << scheme << " seed " << seed);
      ASSERT_TRUE(r.ok) << r.problems;  // includes: every rank wrote 2 iterations of results
      EXPECT_EQ(r.verify_errors, 0u);
      EXPECT_EQ(r.steps, half_ina_steps(scheme));
      EXPECT_GT(r.retransmits, 0u);  // the injected loss happened and was recovered from
      EXPECT_GT(r.dup_received, 0u);  // and the duplicates were recognised
    }
}

// The same with the step barrier (host/ring.hpp) and straggler draws (a
// report may wait for a late rank; reports, releases and their resends cross
// the lossy links too). The barrier's own tests: test_ring_barrier.cpp.
TEST(Ring, StepBarrierExactUnderLossDuplicationReordering) {
  const auto g = half_ina_fat_tree();
  for (uint64_t seed : {1, 2})
    for (const char* scheme : {"rar", "h-ar", "rina"}) {
      auto s = lossy(seed);
      s.step_barrier = true;
      s.straggler_k_us = 100;
      s.straggler_sigma_us = 20;
      const auto r = exp::run_collective(g, scheme, s);
      SCOPED_TRACE(testing::Message() << scheme << " seed " << seed);
      ASSERT_TRUE(r.ok) << r.problems;  // includes: every rank wrote 2 iterations of results
      EXPECT_EQ(r.verify_errors, 0u);
      EXPECT_EQ(r.steps, half_ina_steps(scheme));
      EXPECT_GT(r.retransmits, 0u);
      EXPECT_GT(r.dup_received, 0u);
    }
}

TEST(Ring, DragonflyRinaAndRar) {
  auto g = *topo::generate("dragonfly:4,9,2");
  for (auto t : g.tor_switches()) g.set_ina(t, true, 100);
  for (const char* scheme : {"rar", "rina"}) {
    exp::CollectiveSettings s;
    s.gradient_mb = 0.05;
    s.loss = 0.01;
    const auto r = exp::run_collective(g, scheme, s);
    SCOPED_TRACE(scheme);
    ASSERT_TRUE(r.ok) << r.problems;  // includes: every rank wrote all results
    EXPECT_EQ(r.verify_errors, 0u);
    // 36 routers with p = 2 hosts each: RAR over 72 ranks takes 2(72 - 1)
    // steps; Rina over G = 36 INA racks, 2G - 1 for rank 0's agent.
    EXPECT_EQ(r.steps, std::string(scheme) == "rar" ? 2u * (72 - 1) : 2u * 36 - 1);
    EXPECT_GT(r.retransmits, 0u);  // the injected loss happened and was recovered from
  }
}

// The shared re-plan (host::ring_failover, Rina §IV-C) on the testbed's
// membership: racks {0..3} and {4..7} under INA ToRs 9 and 10. A failed
// agent takes its rack's INA group with it (its members become autonomous
// workers, its ToR keeps the job with no rack); a failed member only leaves
// its rack. Survivors keep their order; the restart op is the lowest op any
// survivor is at.
TEST(RingFailoverPlan, AgentAndMemberFailuresOnTheTestbed) {
  const host::RingMembership m{{1, 2, 3, 4, 5, 6, 7, 8}, {{0, 1, 2, 3}, {4, 5, 6, 7}}, {9, 10}, 0};
  const host::RingPlanner rina = [](size_t, const auto& rk, const auto& tr) { return host::plan_rina(rk, tr, 4096); };
  const auto agent = host::ring_failover(m, {4}, {2, 2, 1, 2, 1, 2, 2, 2}, rina);
  EXPECT_EQ(agent.next.epoch, 1);
  EXPECT_EQ(agent.survivors, (std::vector<uint16_t>{0, 1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(agent.next.nodes, (std::vector<NodeId>{1, 2, 3, 4, 6, 7, 8}));
  EXPECT_EQ(agent.new_rank, (std::vector<int>{0, 1, 2, 3, -1, 4, 5, 6}));
  EXPECT_EQ(agent.next.racks, (std::vector<std::vector<uint16_t>>{{0, 1, 2, 3}, {4, 5, 6}}));
  EXPECT_EQ(agent.next.tors, (std::vector<NodeId>{9, kNoNode}));
  EXPECT_EQ(agent.restart_op, 1u);  // rank 2's op; the failed rank 4's is ignored
  ASSERT_EQ(agent.tors.size(), 2u);
  EXPECT_EQ(agent.tors[0].tor, 9);
  EXPECT_EQ(agent.tors[0].rack, (std::vector<uint16_t>{0, 1, 2, 3}));
  EXPECT_EQ(agent.tors[0].upstream, (std::vector<uint16_t>{6}));  // the last autonomous worker sends to rack 0
  EXPECT_EQ(agent.tors[1].tor, 10);
  EXPECT_FALSE(agent.tors[1].aggregates());
  // Four groups now: rack 0 and three autonomous workers.
  EXPECT_EQ(agent.plan[0].back().groups.size(), 4u);

  const auto member = host::ring_failover(m, {2}, std::vector<size_t>(8, 1), rina);
  EXPECT_EQ(member.next.racks, (std::vector<std::vector<uint16_t>>{{0, 1, 2}, {3, 4, 5, 6}}));
  EXPECT_EQ(member.next.tors, (std::vector<NodeId>{9, 10}));
  ASSERT_EQ(member.tors.size(), 2u);
  EXPECT_EQ(member.tors[0].rack, (std::vector<uint16_t>{0, 1, 2}));
  EXPECT_EQ(member.tors[0].upstream, (std::vector<uint16_t>{3, 4, 5, 6}));
  EXPECT_EQ(member.tors[1].rack, (std::vector<uint16_t>{3, 4, 5, 6}));
  EXPECT_EQ(member.tors[1].upstream, (std::vector<uint16_t>{0, 1, 2}));

  EXPECT_THROW(host::ring_failover(m, {8}, std::vector<size_t>(8, 0), rina), std::invalid_argument);
  EXPECT_THROW(host::ring_failover(m, {0}, std::vector<size_t>(7, 0), rina), std::invalid_argument);
  EXPECT_THROW(host::ring_failover(m, {0, 1, 2, 3, 4, 5, 6}, std::vector<size_t>(8, 0), rina), std::invalid_argument);
}

// A second failure after rack 1's agent failed: rack 1's ToR (10) holds the
// job with no rack since epoch 1 and still gets epoch 2's workers (it
// forwards their packets); rack 0's ToR keeps aggregating its rack.
TEST(RingFailoverPlan, SecondFailureReregistersTheForwardOnlyToR) {
  const host::RingMembership m{{1, 2, 3, 4, 5, 6, 7, 8}, {{0, 1, 2, 3}, {4, 5, 6, 7}}, {9, 10}, 0};
  const host::RingPlanner rina = [](size_t, const auto& rk, const auto& tr) { return host::plan_rina(rk, tr, 4096); };
  const auto first = host::ring_failover(m, {4}, std::vector<size_t>(8, 1), rina);
  EXPECT_EQ(first.next.serving, (std::vector<NodeId>{9, 10}));
  const auto second = host::ring_failover(first.next, {5}, std::vector<size_t>(7, 2), rina);  // old rank 6, node 7
  EXPECT_EQ(second.next.epoch, 2);
  EXPECT_EQ(second.next.nodes, (std::vector<NodeId>{1, 2, 3, 4, 6, 8}));
  EXPECT_EQ(second.next.racks, (std::vector<std::vector<uint16_t>>{{0, 1, 2, 3}, {4, 5}}));
  EXPECT_EQ(second.next.tors, (std::vector<NodeId>{9, kNoNode}));
  EXPECT_EQ(second.next.serving, (std::vector<NodeId>{9, 10}));
  ASSERT_EQ(second.tors.size(), 2u);
  EXPECT_EQ(second.tors[0].tor, 9);
  EXPECT_EQ(second.tors[0].rack, (std::vector<uint16_t>{0, 1, 2, 3}));
  EXPECT_EQ(second.tors[1].tor, 10);
  EXPECT_FALSE(second.tors[1].aggregates());
}

// A survivor checks the membership it is handed (the runtime's
// membership.E.json) against its own; each problem names the field and value.
TEST(RingFailoverPlan, MembershipProblemsNameTheFieldAndValue) {
  const host::RingMembership m{{1, 2, 3, 4, 5, 6, 7, 8}, {{0, 1, 2, 3}, {4, 5, 6, 7}}, {9, 10}, 0};
  const host::RingPlanner rina = [](size_t, const auto& rk, const auto& tr) { return host::plan_rina(rk, tr, 4096); };
  const auto fo = host::ring_failover(m, {4}, std::vector<size_t>(8, 1), rina);
  const std::vector<uint16_t> members{0, 1, 2, 3, 4, 5, 6, 7};
  auto problem = [&](auto change) {
    host::RingMembership next = fo.next;
    std::vector<uint16_t> survivors = fo.survivors;
    size_t restart = 1;
    change(next, survivors, restart);
    return host::membership_problem(m, members, next, survivors, restart, 4);
  };
  using M = host::RingMembership;
  using S = std::vector<uint16_t>;
  EXPECT_EQ(problem([](M&, S&, size_t&) {}), "");
  EXPECT_EQ(problem([](M& n, S&, size_t&) { n.racks[1] = {4, 5}; }), "field 'racks': rank 6 is in no rack");
  EXPECT_EQ(problem([](M& n, S&, size_t&) { n.racks[1] = {4, 5, 7}; }),
            "field 'racks': racks[1] names rank 7, beyond the 7 survivors");
  EXPECT_EQ(problem([](M& n, S&, size_t&) { n.racks[1] = {3, 4, 5, 6}; }),
            "field 'racks': rank 3 is in two racks (again in racks[1])");
  EXPECT_EQ(problem([](M& n, S&, size_t&) { n.racks[1] = {6, 5, 4}; }), "field 'racks': racks[1] = [6, 5, 4] must ascend");
  EXPECT_EQ(problem([](M& n, S&, size_t&) { n.nodes.pop_back(); }), "field 'nodes' has 6 entries for 7 survivors");
  EXPECT_EQ(problem([](M& n, S&, size_t&) { n.nodes[4] = 5; }), "field 'nodes': entry 4 is node 5, but survivor 5 is node 6");
  EXPECT_EQ(problem([](M& n, S&, size_t&) { n.tors = {9, 11}; }), "field 'tors': tors[1] = 11 is not a ToR of the job");
  EXPECT_EQ(problem([](M& n, S&, size_t&) { n.tors = {9}; }), "field 'tors' has 1 entries for 2 racks");
  EXPECT_EQ(problem([](M& n, S&, size_t&) { n.serving = {9}; }), "field 'serving' = [9]: the ToRs holding the job are [9, 10]");
  EXPECT_EQ(problem([](M&, S& s, size_t&) { s.back() = 8; }), "field 'survivors': rank 8 is not a member (members [0, 1, 2, 3, 4, 5, 6, 7])");
  EXPECT_EQ(problem([](M&, S& s, size_t&) { std::swap(s[0], s[1]); }), "field 'survivors' = [1, 0, 2, 3, 5, 6, 7]: must ascend");
  EXPECT_EQ(problem([](M&, S& s, size_t&) { s = {3}; }), "field 'survivors' = [3]: a ring needs two");
  EXPECT_EQ(problem([](M&, S&, size_t& r) { r = 4; }), "");  // every survivor had finished: nothing to redo
  EXPECT_EQ(problem([](M&, S&, size_t& r) { r = 5; }), "field 'restart_op' = 5: the job runs ops 0..3 (4: none to redo)");
}

// host::FailureAgreement with a scripted clock: the runtime's detection,
// its guards and the choice of the control node (docs/architecture.md,
// "Failures"). Detection time 400 ms; looks every 10 ms unless a test
// stalls the observer.
namespace agreement {

using Agreement = host::FailureAgreement;
constexpr Time kDetect = 400 * kMs;

std::vector<uint16_t> ranks(size_t n) {
  std::vector<uint16_t> v;
  for (size_t r = 0; r < n; ++r) v.push_back(static_cast<uint16_t>(r));
  return v;
}

// Heartbeats of every rank but `me`: counters advance except the silent ones'.
struct Beats {
  std::map<uint16_t, uint64_t> count;
  std::vector<host::FailureAgreement::Beat> next(const Agreement& a, const std::vector<uint16_t>& silent) {
    std::vector<host::FailureAgreement::Beat> v;
    for (uint16_t r : a.members()) {
      if (r == a.me()) continue;
      if (std::find(silent.begin(), silent.end(), r) == silent.end()) ++count[r];
      v.push_back({r, count[r], false});
    }
    return v;
  }
};

// An observer that has watched `silent` not beat for the detection time (looks every detect/4).
Agreement observer(uint16_t me, size_t n, const std::vector<uint16_t>& silent) {
  Agreement a(me, kDetect, ranks(n));
  Beats b;
  for (int k = 0; k <= 4; ++k) a.observe(kSec + k * kDetect / 4, b.next(a, silent));
  return a;
}

TEST(RingFailureAgreement, SilentRankIsSuspectedAfterTheDetectionTimeAndWithdrawnWhenItBeats) {
  Agreement a(0, kDetect, ranks(8));
  Beats b;
  const Time t0 = kSec;
  Time t = t0;
  for (; t < t0 + kDetect; t += 10 * kMs) {
    a.observe(t, b.next(a, {4}));
    ASSERT_TRUE(a.suspects().empty()) << "at " << (t - t0) / kMs << " ms";
  }
  EXPECT_TRUE(a.observe(t, b.next(a, {4})));  // 400 ms after rank 4's last change
  EXPECT_EQ(a.suspects(), (std::vector<uint16_t>{4}));
  EXPECT_EQ(a.control(), 0);
  // Rank 4 beats again: the suspicion is withdrawn.
  t += 10 * kMs;
  EXPECT_TRUE(a.observe(t, b.next(a, {})));
  EXPECT_TRUE(a.suspects().empty());
  EXPECT_EQ(a.withdrawn(), 1u);
  // A rank done with the epoch is not watched even if it stops beating.
  Agreement d(0, kDetect, ranks(4));
  for (Time u = t0; u <= t0 + 2 * kDetect; u += 10 * kMs) d.observe(u, {{1, 5, true}, {2, 5, true}, {3, b.count[3]++, false}});
  EXPECT_TRUE(d.suspects().empty());
}

TEST(RingFailureAgreement, StalledObserverRestartsItsClocksAndAccusesNobody) {
  Agreement a(0, kDetect, ranks(8));
  Beats b;
  a.observe(kSec, b.next(a, {}));
  // The observer does not look for 1 s (more than detect/2); the whole host
  // stalled, so nobody's counter moved: it finds them unchanged but accuses nobody.
  Time t = 2 * kSec;
  EXPECT_FALSE(a.observe(t, b.next(a, ranks(8))));
  EXPECT_TRUE(a.suspects().empty());
  // Its clocks restarted at the stall: rank 4, silent from here on, is
  // suspected 400 ms later, not at once.
  for (t += 10 * kMs; t < 2 * kSec + kDetect; t += 10 * kMs) {
    a.observe(t, b.next(a, {4}));
    ASSERT_TRUE(a.suspects().empty()) << "at " << (t - 2 * kSec) / kMs << " ms after the stall";
  }
  a.observe(t, b.next(a, {4}));
  EXPECT_EQ(a.suspects(), (std::vector<uint16_t>{4}));
  // A gap of exactly detect/2 is not a stall.
  Agreement c(0, kDetect, ranks(4));
  Beats bc;
  c.observe(kSec, bc.next(c, {}));
  c.observe(kSec + kDetect / 2, bc.next(c, {2}));
  c.observe(kSec + kDetect, bc.next(c, {2}));
  EXPECT_EQ(c.suspects(), (std::vector<uint16_t>{2}));
}

TEST(RingFailureAgreement, ObserverFindingMoreThanHalfTheOthersSilentSuspectsNobody) {
  // 8 ranks: 7 others. 3 silent (3 * 2 <= 7) are suspected, 4 (4 * 2 > 7) are not.
  EXPECT_EQ(observer(0, 8, {1, 2, 3}).suspects(), (std::vector<uint16_t>{1, 2, 3}));
  EXPECT_TRUE(observer(0, 8, {1, 2, 3, 4}).suspects().empty());
  EXPECT_TRUE(observer(5, 8, {0, 1, 2, 3, 4, 6, 7}).suspects().empty());
}

TEST(RingFailureAgreement, ControlNodeIsTheLowestNotSilentAndActsOnlyWhenAllItTrustsAgree) {
  const Agreement a = observer(1, 8, {0});  // rank 0 failed: rank 1 is the control node
  EXPECT_EQ(a.control(), 1);
  EXPECT_TRUE(a.is_control());
  std::map<uint16_t, Agreement::Published> pub;
  for (uint16_t r = 2; r < 8; ++r) pub[r] = {{0}, size_t{r < 5 ? 2u : 1u}};
  pub[5].suspects = {};  // rank 5 has not found rank 0 silent yet
  auto d = a.decide(pub, 2);
  EXPECT_FALSE(d.act);
  EXPECT_EQ(d.waiting, (std::vector<uint16_t>{5}));
  pub.erase(6);  // nor published at all
  EXPECT_EQ(a.decide(pub, 2).waiting, (std::vector<uint16_t>{5, 6}));
  pub[5].suspects = {0};
  pub[6] = {{0}, 1};
  d = a.decide(pub, 2);
  EXPECT_TRUE(d.act);
  EXPECT_TRUE(d.waiting.empty());
  EXPECT_EQ(d.failed, (std::vector<uint16_t>{0}));  // positions in members()
  EXPECT_EQ(d.ops, (std::vector<size_t>{0, 2, 2, 2, 2, 1, 1, 1}));
  // A rank that is not the control node never acts, even when all agree.
  const Agreement b = observer(2, 8, {0});
  EXPECT_EQ(b.control(), 1);
  pub.erase(2);
  pub[1] = {{0}, 2};
  EXPECT_FALSE(b.decide(pub, 2).act);
  // Nor does one that suspects nobody.
  EXPECT_FALSE(observer(0, 8, {}).decide({}, 0).act);
  // After the membership changes, positions are in the survivors' order.
  Agreement c = observer(1, 8, {0});
  c.adopt({1, 2, 3, 5, 6, 7});
  EXPECT_TRUE(c.suspects().empty());
  Beats bc;
  for (int k = 0; k <= 4; ++k) c.observe(5 * kSec + k * kDetect / 4, bc.next(c, {3}));
  EXPECT_EQ(c.suspects(), (std::vector<uint16_t>{3}));
  std::map<uint16_t, Agreement::Published> p2;
  for (uint16_t r : {2, 5, 6, 7}) p2[r] = {{3}, 4};
  d = c.decide(p2, 4);
  EXPECT_TRUE(d.act);
  EXPECT_EQ(d.failed, (std::vector<uint16_t>{2}));
}

// Every combination of views on 5 ranks (each suspects at most 2 others, the
// guard's limit): no two observers ever both act on different sets.
TEST(RingFailureAgreement, TwoObserversWithDifferentViewsNeverBothActOnDifferentSets) {
  constexpr size_t n = 5;
  std::vector<std::vector<std::vector<uint16_t>>> sets(n);  // by rank: every set it may suspect
  std::vector<std::vector<Agreement>> obs(n);
  for (uint16_t me = 0; me < n; ++me)
    for (unsigned mask = 0; mask < (1u << n); ++mask) {
      if (mask & (1u << me) || __builtin_popcount(mask) > 2) continue;
      std::vector<uint16_t> s;
      for (uint16_t r = 0; r < n; ++r)
        if (mask & (1u << r)) s.push_back(r);
      obs[me].push_back(observer(me, n, s));
      ASSERT_EQ(obs[me].back().suspects(), s);
      sets[me].push_back(s);
    }
  const size_t k = sets[0].size();  // 11
  size_t combos = 0;
  std::vector<size_t> pick(n, 0);
  for (;;) {
    std::map<uint16_t, Agreement::Published> pub;
    for (uint16_t r = 0; r < n; ++r)
      if (!sets[r][pick[r]].empty()) pub[r] = {sets[r][pick[r]], 0};
    int actor = -1;
    for (uint16_t r = 0; r < n; ++r) {
      if (!obs[r][pick[r]].decide(pub, 0).act) continue;
      if (actor >= 0) {
        ASSERT_EQ(sets[r][pick[r]], sets[actor][pick[actor]]) << "ranks " << actor << " and " << r << " both act";
      }
      actor = r;
    }
    ++combos;
    size_t i = 0;
    while (i < n && ++pick[i] == k) pick[i++] = 0;
    if (i == n) break;
  }
  EXPECT_EQ(combos, 161051u);  // 11^5
  // Not vacuous: when ranks 1..4 all name {0}, rank 1 acts whatever rank 0 thinks.
  std::map<uint16_t, Agreement::Published> all;
  for (uint16_t r = 1; r < n; ++r) all[r] = {{0}, 0};
  EXPECT_TRUE(obs[1][1].decide(all, 0).act);
  ASSERT_EQ(sets[1][1], (std::vector<uint16_t>{0}));
}

}  // namespace agreement

// Failures (Rina §IV-C) on the testbed with both ToRs INA (racks {0..3},
// {4..7}, agents 0 and 4), 3 allreduces with compute time between them. The
// worker fails inside the second allreduce (a quarter into its measured
// time); after the detection delay every survivor restarts it under the new
// plan. Every survivor's results of ops 1 and 2 are checked against the
// survivors' sum (run_collective's checks: exact, all written, no
// aggregator left in either ToR, no packet or timer left, no refusal).
struct FailCase {
  const char* scheme;
  bool ina0, ina1;
  int fail_rank;
  uint64_t steps_after;  // the new rank 0's steps per op
};

void expect_survives(const FailCase& c) {
  exp::CollectiveSettings s = small();
  s.iterations = 3;
  s.compute_ms = 0.05;
  s.loss = 0.005;  // the old epoch's and the new one's transfers also recover losses
  const auto whole = exp::run_collective(testbed(c.ina0, c.ina1), c.scheme, s);
  ASSERT_TRUE(whole.ok) << whole.problems;
  s.fail_rank = c.fail_rank;
  // Inside op 1 (op 0 stays done): a quarter into it by the mean, as the
  // ops under 0.5 % loss differ in length.
  s.fail_at_ms = 1.25 * whole.iteration_ms;
  s.fail_detect_ms = 0.02;
  const auto r = exp::run_collective(testbed(c.ina0, c.ina1), c.scheme, s);
  ASSERT_TRUE(r.ok) << c.scheme << " fail " << c.fail_rank << ": " << r.problems;
  EXPECT_EQ(r.restarted_op, 1);
  EXPECT_EQ(r.steps, c.steps_after);
}

// The agent of rack 1 fails: its rack falls back to three RAR members, so
// the ring has G = 1 + 3 groups and the agent of rack 0 takes 2G - 1 = 7
// steps (3 before); rack 1's ToR only forwards.
TEST(RingFailure, AgentFailureRackFallsBackToRar) { expect_survives({"rina", true, true, 4, 7}); }
// A member of rack 0 fails: its agent excludes it; still G = 2, 3 steps.
TEST(RingFailure, MemberFailureIsExcludedByItsAgent) { expect_survives({"rina", true, true, 1, 3}); }
// An autonomous worker (rack 1 without INA) fails: the ring bypasses it:
// G = 1 + 3 groups, 7 steps for the agent of rack 0.
TEST(RingFailure, AutonomousWorkerIsBypassed) { expect_survives({"rina", true, false, 5, 7}); }
// RAR: a 7-worker ring, 2 x 6 steps.
TEST(RingFailure, RarSurvivesAWorker) { expect_survives({"rar", false, false, 2, 12}); }

// On a k = 4 fat-tree (racks of 2, every ToR INA) rank 2, the agent of
// rack {2, 3}, fails early in op 0, while rack {0, 1}'s ToR holds complete
// sums of step tag 1 that rank 3 has not acknowledged yet. The ToR's job
// registered again at the new epoch starts from clean slots (these slots'
// step tag equals the job id, which once freed them without clearing
// their "complete" mark: rank 3 then took the new sums' second halves for
// duplicates and every survivor stalled).
TEST(RingFailure, ASumCompleteAtTheFailureDoesNotStallTheNewEpoch) {
  exp::Settings s;
  s.topology_kind = "fat-tree";
  s.k = 4;
  s.ina = "tors";
  s.jobs = 1;
  s.workers = 8;
  s.gradient_mb = 0.05;
  s.iterations = 2;
  s.fail_rank = 2;
  for (const double at : {0.03, 0.05}) {
    s.fail_at_ms = at;
    const exp::RunOutput r = exp::run_point(s, "rina", 3);
    EXPECT_TRUE(r.ok) << "fail_at_ms = " << at << ": " << r.problems;
  }
}

TEST(RingFailure, BadFailureSettingsNameTheValue) {
  exp::CollectiveSettings s = small();
  s.fail_rank = 8;
  try {
    (void)exp::run_collective(testbed(true, true), "rina", s);
    ADD_FAILURE() << "fail_rank 8 of 8 workers accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fail_rank = 8"), std::string::npos) << e.what();
  }
  s.fail_rank = 1;
  EXPECT_THROW((void)exp::run_collective(testbed(true, true), "atp", s), std::invalid_argument);
  EXPECT_THROW((void)exp::run_collective(testbed(false, false), "h-ar", s), std::invalid_argument);
}

}  // namespace
}  // namespace ina

namespace ina {
namespace {
// Rina §IV-C's "AllGather starting from zero" for every AllGather send of an
// INA rack (rina_allgather_start = "rack"). On the k = 4 fat-tree with all 8
// ToRs INA, the default (the agent's broadcast only) has the previous
// group's full-window shard and the agent's broadcast meet at the members'
// downlinks, which marks ECN; starting every INA-rack AllGather send from
// one packet removes those marks. Autonomous workers are untouched: without
// INA racks Rina is still RAR to the picosecond.
TEST(Ring, RinaRackWideAllGatherSlowStartRemovesTheToRMarks) {
  auto s = small(2);
  const auto agent = exp::run_collective(fat_tree4(true), "rina", s);
  s.rina_allgather_start = "rack";
  const auto rack = exp::run_collective(fat_tree4(true), "rina", s);
  ASSERT_TRUE(agent.ok) << agent.problems;
  ASSERT_TRUE(rack.ok) << rack.problems;
  std::printf("fat-tree, 8 INA ToRs, 2 MiB: agent %.3f ms (%llu switch marks), rack %.3f ms (%llu)\n", agent.sync_ms,
              static_cast<unsigned long long>(agent.ecn_marks_switch), rack.sync_ms,
              static_cast<unsigned long long>(rack.ecn_marks_switch));
  EXPECT_GT(agent.ecn_marks_switch, 0u);
  EXPECT_EQ(rack.ecn_marks_switch, 0u);
  EXPECT_EQ(rack.steps, agent.steps);
  const auto rar = exp::run_collective(fat_tree4(false), "rar", s);
  const auto none = exp::run_collective(fat_tree4(false), "rina", s);
  EXPECT_EQ(none.sync_ms, rar.sync_ms);
  s.rina_allgather_start = "all";
  EXPECT_THROW((void)exp::run_collective(fat_tree4(true), "rina", s), std::invalid_argument);
}
// Rina Eq. 1's O (workload.step_overhead_us): a fixed host cost before each
// ring step's send. RAR over 8 ranks is a chain of 2(N - 1) = 14 steps, each
// waiting for its predecessor's shard, so O = 50 us lengthens the allreduce
// by 14 x 50 us = 700 us (every rank's steps are delayed alike; the
// transfers themselves do not change). Catches: O ignored, or charged once.
TEST(Ring, StepOverheadLengthensTheChainByStepsTimesO) {
  const auto g = fat_tree4(false);
  auto s = small();
  s.workers_per_job = {8};
  const auto base = exp::run_collective(g, "rar", s);
  s.step_overhead_us = 50;
  const auto slow = exp::run_collective(g, "rar", s);
  ASSERT_TRUE(base.ok && slow.ok) << base.problems << slow.problems;
  EXPECT_EQ(slow.steps, 14u);
  EXPECT_NEAR(slow.sync_ms - base.sync_ms, 14 * 0.050, 0.005) << base.sync_ms << " -> " << slow.sync_ms;
  EXPECT_EQ(slow.bytes_per_worker, base.bytes_per_worker);
}

}  // namespace
}  // namespace ina
