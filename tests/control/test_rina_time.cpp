// The allreduce time model (control/rina_time.hpp) against the packet
// simulator (exp::run_collective), and the straggler model (Rina Eq. 1).
#include <cstdio>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "control/rina_time.hpp"
#include "core/time.hpp"
#include "experiment/collective.hpp"
#include "schemes/registry.hpp"
#include "topo/graph.hpp"

namespace ina {
namespace {

namespace rina = control::rina;

topo::Graph file(const char* name) {
  return topo::load_topology_file(std::string(INA_SOURCE_DIR) + "/scenarios/rina/" + name).graph;
}

// `g` with exactly the switches named in `ina` able to aggregate.
topo::Graph with_ina(topo::Graph g, const std::vector<topo::NodeId>& ina) {
  for (const topo::NodeId s : g.switches()) {
    const bool on = std::find(ina.begin(), ina.end(), s) != ina.end();
    g.set_ina(s, on, on ? 100 : 0);
  }
  return g;
}

struct Case {
  std::string what;
  topo::Graph g;
  int workers = 0;
  std::vector<topo::NodeId> ina;
  std::string scheme;
};

struct Pair {
  double model = 0, sim = 0;
};

Pair compare(const Case& c, double mb, host::RinaTransport t = host::RinaTransport::Paper, double ina_gbps = 0,
             const std::string& atp_pool = "hashed", double link_delay_us = 1) {
  std::vector<topo::NodeId> workers = c.g.hosts();
  workers.resize(static_cast<size_t>(c.workers));
  rina::TimeParams p;
  p.gradient_mb = mb;
  p.rina_transport = t;
  p.ina_gbps = ina_gbps;
  p.link_delay_us = link_delay_us;
  exp::CollectiveSettings s;
  s.gradient_mb = mb;
  s.link_delay_us = link_delay_us;
  s.ina_gbps = ina_gbps;
  s.atp_pool = atp_pool;
  s.rina_transport = t == host::RinaTransport::Aimd ? "aimd" : "paper";
  s.workers_per_job = {c.workers};
  s.max_sim_ms = 2000;
  const auto r = exp::run_collective(with_ina(c.g, c.ina), c.scheme, s);
  EXPECT_TRUE(r.ok) << c.what << ": " << r.problems;
  EXPECT_EQ(r.retransmits, 0u) << c.what;
  const double model = rina::allreduce_time(c.g, workers, c.ina, schemes::find(c.scheme).collective, p).gbps;
  return {model, r.throughput_gbps};
}

// The model within 5 % of the simulator for `c` (compare's arguments).
void expect_within_five_percent(const Case& c, double mb, host::RinaTransport t = host::RinaTransport::Paper,
                                double ina_gbps = 0, const std::string& atp_pool = "hashed", double link_delay_us = 1) {
  const Pair p = compare(c, mb, t, ina_gbps, atp_pool, link_delay_us);
  EXPECT_NEAR(p.model / p.sim, 1.0, 0.05) << c.what << ": model " << p.model << " Gbps, simulator " << p.sim;
}

// At 0.25 MiB per worker (shards of 64-8192 values: small enough that the
// ring's 60 KB window covers most shards, large enough that bandwidth is
// 30-70 % of the time). Within 5 %: RAR on the three topologies, H-AR on
// the fat-tree and the leaf-spine, PS on the testbed. Not asserted (see
// docs/results/rina_bom.md): ATP unpaced over hashed pools, our previous
// settings (the model's fluid bound is 32-90 % above the simulator: testbed
// 67.31 vs 50.95, fat-tree 56.31 vs 29.59, leaf-spine 63.19 vs 41.21 Gbps;
// ATP as the paper provisions it is asserted below), H-AR on the testbed
// (+9.9 %: its four inter-rack rings share one link and their windows cycle
// under ECN there; +2.2 % at 97.5 MiB), PS on the fat-tree and the
// leaf-spine (+18.5 % and +13.5 %: the busiest port's bytes are the
// simulator's, but incast and ECN back-off at the hosts' downlinks leave it
// idle longer than the streams' synchronized halving alone; +3.5 % and
// +5.9 % at 97.5 MiB).
std::vector<Case> cases() {
  const topo::Graph tb = file("testbed.json");
  const topo::Graph ls = file("leaf-spine-2x4x4.json");
  const topo::Graph ft = *topo::generate("fat-tree:4");
  return {
      {"testbed ps", tb, 8, {}, "ps"},
      {"testbed rar", tb, 8, {}, "rar"},
      {"fat-tree:4 rar", ft, 16, {}, "rar"},
      {"fat-tree:4 h-ar", ft, 16, {}, "h-ar"},
      {"leaf-spine rar", ls, 16, {}, "rar"},
      {"leaf-spine h-ar", ls, 16, {}, "h-ar"},
  };
}

TEST(RinaTime, ExpectedMaxOfNormals) {
  // Closed forms: E[max of 2] = 1 / sqrt(pi), E[max of 3] = 3 / (2 sqrt(pi)).
  EXPECT_NEAR(rina::expected_max_normal(2), 1 / std::sqrt(M_PI), 1e-4);
  EXPECT_NEAR(rina::expected_max_normal(3), 1.5 / std::sqrt(M_PI), 1e-4);
  EXPECT_EQ(rina::expected_max_normal(1), 0);
  EXPECT_THROW(rina::expected_max_normal(0), rina::BomError);
}

TEST(RinaTime, ModelWithinFivePercentOfTheSimulator) {
  for (const Case& c : cases()) {
    expect_within_five_percent(c, 0.25);
  }
}

// H-AR within one rack (testbed, h0..h3, 24 MiB): every host's downlink
// carries its predecessor's packets (306 B) and its successor's
// acknowledgements of its own (64 B), so a ring step takes P (306 + 64) B
// / 100 Gbps = 727.45 us for P = 24576 packets, not the 601.62 us of the
// packets alone (simulator: 732.44 us, the windows grown past the pipe).
// The model counts the acknowledgements on the reverse arcs: 45.93 Gbps
// against the simulator's 44.90 (without them 55.40, +23 %).
TEST(RinaTime, HarAcknowledgementsTakeTheirShareOfTheLinks) {
  const topo::Graph tb = file("testbed.json");
  const Case c{"testbed h-ar, one rack", tb, 4, {}, "h-ar"};
  const Pair p = compare(c, 24);
  EXPECT_NEAR(p.model / p.sim, 1.0, 0.05) << "model " << p.model << " Gbps, simulator " << p.sim;
  exp::CollectiveSettings s;
  s.gradient_mb = 24;
  s.workers_per_job = {4};
  const auto r = exp::run_collective(with_ina(tb, {}), "h-ar", s);
  ASSERT_TRUE(r.ok) << r.problems;
  ASSERT_EQ(r.step_log.size(), 4u);
  const auto third = std::find_if(r.step_log[0].begin(), r.step_log[0].end(),
                                  [](const host::RingStepRecord& x) { return x.code == 2; });
  ASSERT_NE(third, r.step_log[0].end());
  ASSERT_EQ(third->send_pkts, 24576u);
  const double us = static_cast<double>(third->done - third->current) / kUs;
  EXPECT_NEAR(us / 727.45, 1.0, 0.01) << us << " us";
}

// H-AR on the fat-tree (k = 4, 16 workers, racks of 2) at 8 MiB: its two
// in-rack steps are as above, its 14 inter-rack steps share the
// aggregation and core links. Model 23.76, simulator 23.65 Gbps (+0.5 %;
// at the paper's 97.5 MiB 25.04 against 23.38, +7.1 %:
// docs/results/rina_bom.md).
TEST(RinaTime, HarFatTreeWithinFivePercentOfTheSimulator) {
  const Case c{"fat-tree:4 h-ar", *topo::generate("fat-tree:4"), 16, {}, "h-ar"};
  const Pair p = compare(c, 8);
  EXPECT_NEAR(p.model / p.sim, 1.0, 0.05) << "model " << p.model << " Gbps, simulator " << p.sim;
}

// RAR and H-AR under the paper's transport (every send paced at its
// window's rate, at most at the NIC's, as DCQCN's rate limiter sends: no
// window queues behind its own NIC, nor the acknowledgements the worker
// sends) at 8 MiB, the windows carried from step to step: testbed RAR
// 37.86 model vs 37.47 simulator, H-AR 27.12 / 27.30; fat-tree H-AR
// 23.76 / 23.65; leaf-spine H-AR 26.42 / 25.86 Gbps. Unpaced, the
// simulator's windows grow without bound behind the NICs and the
// acknowledgements wait there: 34.77 and 25.23 on the testbed (+8.9 and
// +6.0 %). Not asserted: fat-tree RAR at 8 MiB (+8.7 %: its windows still
// grow towards the pipe; +3.3 % at the paper's 97.5 MiB, docs/results/rina_bom.md).
TEST(RinaTime, RingsAtTheNicRateWithinFivePercentOfTheSimulator) {
  const topo::Graph tb = file("testbed.json");
  const topo::Graph ls = file("leaf-spine-2x4x4.json");
  const topo::Graph ft = *topo::generate("fat-tree:4");
  const std::vector<Case> cs = {{"testbed rar", tb, 8, {}, "rar"},
                                {"testbed h-ar", tb, 8, {}, "h-ar"},
                                {"fat-tree:4 h-ar", ft, 16, {}, "h-ar"},
                                {"leaf-spine h-ar", ls, 16, {}, "h-ar"}};
  for (const Case& c : cs) {
    expect_within_five_percent(c, 8);
  }
}

// The testbed at the scenarios' 2.5 us per link (topology.rtt_us = 10),
// 4 MiB, the paper's transport, its rings paced at their windows' rate
// (host::window_pace_gbps): H-AR 18.85 model vs 18.62 simulator, RAR 17.58
// / 17.92, Rina with tor0 12.34 / 12.31 Gbps. Paced at the NIC's rate
// only, H-AR's inter-rack windows left as bursts whenever their
// acknowledgements bunched up behind the reverse direction's data, and
// tor0 <-> tor1 marked with less than its pipe in flight: 15.20 Gbps in
// the simulator, the model +24.6 %.
TEST(RinaTime, RingsAtTheScenariosLinkDelayWithinFivePercentOfTheSimulator) {
  const topo::Graph tb = file("testbed.json");
  const topo::NodeId tor0 = tb.at("tor0", "test");
  const std::vector<Case> cs = {{"testbed h-ar", tb, 8, {}, "h-ar"},
                                {"testbed rar", tb, 8, {}, "rar"},
                                {"testbed rina (tor0)", tb, 8, {tor0}, "rina"}};
  for (const Case& c : cs) {
    expect_within_five_percent(c, 4, host::RinaTransport::Paper, 0, "hashed", 2.5);
  }
}

// A sender's window carries over to its next step, and so does its
// smoothed round trip: the first round of a step is paced over the round
// trip of the sender's previous step. H-AR on the k = 4 fat-tree at 24 MiB
// and 2.5 us per link: both workers of a rack leave their in-rack step
// (a 10 us round trip) with 370 packets and send them at the NIC's rate
// into the same edge uplink (a 20-30 us way to the next rack), which
// queues 113 KB, above the 100 KB threshold: the simulator marks there,
// the windows halve and every inter-rack step is slower (17.22 Gbps).
// Model 17.13 (-0.5 %); a model pacing the first round over the new way's
// round trip sees no queue and says 21.64 (+25.7 %). At 16 MiB the windows
// are 322 packets, the queue 93 KB, and neither marks (19.07 / 18.94).
TEST(RinaTime, CarriedWindowsBurstOverTheLastRoundTrip) {
  const Case c{"fat-tree:4 h-ar", *topo::generate("fat-tree:4"), 16, {}, "h-ar"};
  expect_within_five_percent(c, 24, host::RinaTransport::Paper, 0, "hashed", 2.5);
}

// Dragonfly 4,5,2 with every router an INA ToR (20 groups of 2), Rina at
// `mb` MiB, the INA rate 20 Gbps and the scenarios' 2.5 us per link.
void expect_dragonfly_452_within_five_percent(double mb) {
  const topo::Graph df = *topo::generate("dragonfly:4,5,2");
  const Case c{"dragonfly:4,5,2 rina, every router", df, 40, df.switches(), "rina"};
  expect_within_five_percent(c, mb, host::RinaTransport::Paper, 20, "hashed", 2.5);
}

// A ring sender's window grows no further than it covers its link's rate
// over its least round trip (RingEndpoint::growth_ceiling), and a Rina
// member's later AllGather sends go on with the window its previous send
// ended with. Dragonfly 4,5,2 with every router an INA ToR (20 groups of
// 2), 8 MiB at the scenarios' 2.5 us per link: 10.22 model vs 9.89 Gbps
// (+3.3 %; the other sizes in docs/results/rina_bom.md). With the window
// unbounded and a member's later sends at its whole shard (2049 packets)
// the model put each shard's bytes in flight at once, the ports' queues
// halved the others' windows in the model only, and it said 6.97 (-27 %;
// the 72-host dragonfly at 97.5 MiB, 100 % INA: -50 %).
TEST(RinaTime, RinaWindowsStopWhereTheyCoverTheLink) {
  expect_dragonfly_452_within_five_percent(8);
}

// A flow's bytes in flight pass every switch port on its way, not only
// its bottleneck: off it, at most its rate over its round trip per copy,
// and an echo comes from whichever port passes the threshold first (the
// simulator marks at any switch port). Dragonfly 4,5,2 with every router
// an INA ToR, 10 MiB at 2.5 us per link: 10.48 model vs 10.35 Gbps
// (+1.3 %). With bytes in flight at the bottleneck alone the model sees
// no queue where two AllGather broadcasts meet on a ToR's port down to a
// rack member, and says 9.37 (-9.5 %; the 72-host dragonfly at 97.49 MiB,
// 50 % INA: +7.6 %, against +2.8 % with them).
TEST(RinaTime, BytesInFlightAtEverySwitchPortOnTheWay) {
  expect_dragonfly_452_within_five_percent(10);
}

// A window halved within a round keeps in flight only what the halved
// window holds: the round's episodes at its port end at the echo, and the
// rounds after it start from there. Dragonfly 4,5,2 with every router an
// INA ToR, 4 MiB at 2.5 us per link: 8.62 model vs 8.64 Gbps. A model that
// leaves the round's episodes to its planned end counts both windows: the
// two members of a rack, which send their AllGather shards together
// through their ToR's uplink, each see the other's window twice at that
// port, unhalved beside halved, halve a second time and go on at a
// quarter: 8.03 (-7.0 %).
TEST(RinaTime, AHalvedWindowsBytesInFlightEndAtTheEcho) {
  expect_dragonfly_452_within_five_percent(4);
}

// The link-sharing fixed point settles where an echo comes and goes from
// one round to the next. Dragonfly 4,5,2 with every router an INA ToR,
// 6 MiB at 2.5 us per link: the loads never stop moving within the 200
// rounds, while the last 8 rounds' completions lie within 3e-8 of each
// other (5.3582 ms): converged. A rule requiring the loads themselves to
// stop reports no convergence here.
TEST(RinaTime, LinkSharingSettlesWhereAnEchoComesAndGoes) {
  const topo::Graph g = *topo::generate("dragonfly:4,5,2");
  rina::TimeParams p;
  p.gradient_mb = 6;
  p.ina_gbps = 20;
  p.link_delay_us = 2.5;
  const auto m = rina::allreduce_time(g, g.hosts(), g.switches(), schemes::Collective::RingIna, p);
  EXPECT_TRUE(m.sharing_converged) << m.sharing_rounds << " rounds, spread " << m.sharing_spread;
  EXPECT_EQ(m.sharing_rounds, 200) << "the loads stopped: not the case this test is for";
  EXPECT_LE(m.sharing_spread, 1e-5);
  EXPECT_NEAR(m.seconds, 5.3582e-3, 0.001e-3);
}

// A model that does not settle in its 200 rounds reports each worker's
// mean completion over the last 100, not the last round's draw. The
// leaf-spine with leaf0 and leaf1 INA (two racks as groups, eight
// autonomous workers), 24 MiB at 1 us per link: the last 8 rounds spread
// over several percent; the mean says 12.32 against the simulator's 12.85
// Gbps (-4.1 %), the last round alone 11.87 (-7.6 %).
TEST(RinaTime, AnUnsettledModelIsItsLastRoundsMean) {
  const topo::Graph ls = file("leaf-spine-2x4x4.json");
  const Case c{"leaf-spine rina, leaf0 and leaf1", ls, 16, {ls.at("leaf0", "test"), ls.at("leaf1", "test")}, "rina"};
  std::vector<topo::NodeId> workers = ls.hosts();
  workers.resize(16);
  rina::TimeParams p;
  p.gradient_mb = 24;
  p.ina_gbps = 20;
  const auto m = rina::allreduce_time(ls, workers, c.ina, schemes::Collective::RingIna, p);
  ASSERT_FALSE(m.sharing_converged) << "settled: not the case this test is for";
  EXPECT_EQ(m.sharing_mean_rounds, 100);
  expect_within_five_percent(c, 24, host::RinaTransport::Paper, 20);
}

// A Rina member's later AllGather sends go on in slow start when its
// previous send ended in it, as the endpoint does (RingEndpoint::begin_send
// neither restarts nor ends it), up to the window covering its link over
// its least round trip. Dragonfly 4,5,2 with every router an INA ToR,
// 4 MiB at 2.5 us per link, h38 (the first member of group 19): its
// AllGather sends start at 1, 821, 1027.5 (the ceiling: 100 Gbps over its
// least round trip, 25.15 us, / 306 B), 1027.5 and, halved, 513.7 in the
// simulator; the model within a packet. A model that ends slow start with
// the first send says 821, 822, 823, 412. Other members' windows part
// where the model's queues differ: h31's third send grows to 1641 over a
// round trip with 15 us of queue that the simulator's least sample lacks
// (1027.4); at 8 MiB h22's first AllGather send ends at 514 on an echo
// the simulator's does not get (1027.3).
TEST(RinaTime, AllGatherSlowStartGoesOnAcrossAMembersSends) {
  topo::Graph g = *topo::generate("dragonfly:4,5,2");
  const std::vector<topo::NodeId> workers = g.hosts();
  ASSERT_EQ(workers.size(), 40u);
  exp::CollectiveSettings s;
  s.gradient_mb = 4;
  s.link_delay_us = 2.5;
  s.ina_gbps = 20;
  s.workers_per_job = {40};
  s.max_sim_ms = 2000;
  const auto r = exp::run_collective(with_ina(g, g.switches()), "rina", s);
  ASSERT_TRUE(r.ok) << r.problems;
  rina::TimeParams p;
  p.gradient_mb = 4;
  p.ina_gbps = 20;
  p.link_delay_us = 2.5;
  const auto m = rina::allreduce_time(g, workers, g.switches(), schemes::find("rina").collective, p);
  constexpr size_t kH38 = 38;
  std::vector<double> sim;
  for (const auto& st : r.step_log[kH38])
    if (st.send_pkts > 0) sim.push_back(st.cwnd);
  const auto& model = m.send_windows[kH38];
  // The AllGather sends: from the one that starts from one packet on.
  const auto first = std::find(model.begin(), model.end(), 1.0);
  ASSERT_NE(first, model.end());
  const size_t k = static_cast<size_t>(model.end() - first);
  ASSERT_GE(sim.size(), k);
  ASSERT_GE(k, 5u);
  for (size_t i = 0; i < k; ++i)
    EXPECT_NEAR(first[static_cast<std::ptrdiff_t>(i)], sim[sim.size() - k + i], 1.0) << "AllGather send " << i;
}

// The PS's streams halve together at the busiest port (a switch's, which
// marks ECN above 100 KB), and it idles part of each cycle: on the k = 4
// fat-tree at 97.5 MiB and 2.5 us per link (agg6->edge6, a 377 KB pipe) the
// model keeps it busy 89.9 % of the time, 32.48 vs 32.85 Gbps; as a fluid
// round always busy it said 36.13 (+10.0 %).
TEST(RinaTime, PsStreamsHalvingTogetherWithinFivePercentOfTheSimulator) {
  const Case c{"fat-tree:4 ps", *topo::generate("fat-tree:4"), 16, {}, "ps"};
  expect_within_five_percent(c, 97.5, host::RinaTransport::Paper, 0, "hashed", 2.5);
}

// Under the paper's transport the PS's senders pace at their windows' rate
// over the smoothed RTT, as the ring workers on the same NICs do (DCQCN's
// rate limiter). The testbed at 97.5 MiB and 2.5 us per link: 32.43 model
// vs 33.04 Gbps (-1.9 %). Unpaced (the "aimd" transport's PS), a result
// leaves the PS when the last of its 8 contributions is in and the uploads
// it clocks go in bursts a round trip apart: tor0 -> tor1's queue rises
// and drains within each round trip and the port idles 2.5 ms of the
// 27.5 ms round, 29.78 Gbps (the model +8.9 %).
TEST(RinaTime, PsSendersPacedAsTheRingsWithinFivePercentOfTheSimulator) {
  const Case c{"testbed ps", file("testbed.json"), 8, {}, "ps"};
  expect_within_five_percent(c, 97.5, host::RinaTransport::Paper, 0, "hashed", 2.5);
}

// The PS's result goes down its multicast tree: the simulator replicates
// at each switch to the first equal-cost next hop towards each member
// (sim::Simulator::multicast_from), not back up the uploads' hashed ways.
// On the k = 4 fat-tree (16 workers, 24 MiB) the busiest port is
// agg6->edge6: 37 shards of 6144 packets of 306 B (69 562 368 B, the
// simulator's sim::LinkStats::bytes there, printed once by a scratch build): 23 uploads to h12 and h13 by ECMP and the results
// of all 14 other PSes down pod 3's trees. With the results on the uploads'
// ways reversed the model's busiest port held 34 shards (model 39.28 Gbps
// against the simulator's 34.19; 36.10 now).
TEST(RinaTime, PsResultsTakeTheMulticastTree) {
  const topo::Graph ft = *topo::generate("fat-tree:4");
  std::vector<topo::NodeId> workers = ft.hosts();
  rina::TimeParams p;
  p.gradient_mb = 24;
  const auto r = rina::allreduce_time(ft, workers, {}, schemes::Collective::Ps, p);
  EXPECT_NEAR(r.bandwidth_s * 100e9 / 8, 37.0 * 6144 * 306, 1e-3);
}

// ATP as the Rina paper compares it with Rina (§VI-A4: aggregating at the
// same 20 Gbps, without memory bottleneck: switch.ina_gbps = 20, atp.pool =
// "contiguous"): every host paces each shard's transport at 20 / (N - 1)
// Gbps, which bounds the round (testbed 18.12 model vs 18.22 simulator,
// fat-tree with every switch 16.17 / 16.32, with edges, agg0 and core0
// 16.17 / 16.31, leaf-spine 16.69 / 16.86 Gbps at 0.25 MiB). Without the
// pacing in the model its fluid bound said 56-67 Gbps.
TEST(RinaTime, AtpAtTheInaRateWithinFivePercentOfTheSimulator) {
  const topo::Graph tb = file("testbed.json");
  const topo::Graph ls = file("leaf-spine-2x4x4.json");
  const topo::Graph ft = *topo::generate("fat-tree:4");
  std::vector<topo::NodeId> ft_some = ft.tor_switches();
  for (const char* n : {"agg0", "core0"}) ft_some.push_back(ft.at(n, "test"));
  const std::vector<Case> cs = {{"testbed atp", tb, 8, tb.tor_switches(), "atp"},
                                {"fat-tree:4 atp (every switch)", ft, 16, ft.switches(), "atp"},
                                {"fat-tree:4 atp (edges, agg0, core0)", ft, 16, ft_some, "atp"},
                                {"leaf-spine atp (every switch)", ls, 16, ls.switches(), "atp"}};
  for (const Case& c : cs) {
    expect_within_five_percent(c, 0.25, host::RinaTransport::Paper, 20, "contiguous");
  }
}

// The model within 5 % of the simulator at 0.25 MiB, for every case, under
// Rina's paper transport and under plain AIMD.
void expect_within_five_percent_under_both_transports(const std::vector<Case>& cs) {
  for (const auto t : {host::RinaTransport::Paper, host::RinaTransport::Aimd})
    for (const Case& c : cs) {
      const Pair p = compare(c, 0.25, t);
      EXPECT_NEAR(p.model / p.sim, 1.0, 0.05)
          << c.what << (t == host::RinaTransport::Paper ? " paper" : " aimd") << ": model " << p.model
          << " Gbps, simulator " << p.sim;
    }
}

// Rina with the ToR's AllGather copy (Fig. 8, host/ring.hpp): a shard for
// an INA rack goes to its ToR, which copies it to every member; the agent's
// step-0 send (slow-started) also feeds its own rack; later AllGather sends
// rotate over the rack's members; 2G - 1 steps. Both transports
// (host::RinaTransport): "aimd", unpaced, testbed with both ToRs (model
// 19.60, simulator 19.24 Gbps) and leaf-spine with all leaves (12.43,
// 12.23) at 0.25 MiB; "paper", ScatterReduce paced at 20 Gbps and every INA
// rack worker's first AllGather send slow-started (testbed 10.25, 10.29).
TEST(RinaTime, RinaWithinFivePercentOfTheSimulator) {
  const topo::Graph tb = file("testbed.json");
  const topo::Graph ls = file("leaf-spine-2x4x4.json");
  const std::vector<Case> cs = {{"testbed rina (both ToRs)", tb, 8, tb.tor_switches(), "rina"},
                                {"leaf-spine rina (leaves)", ls, 16, ls.tor_switches(), "rina"}};
  expect_within_five_percent_under_both_transports(cs);
}

// The groups' steps differ here (tor0: a 4-member INA rack beside four
// autonomous workers; fat-tree: every other group-to-group hop crosses the
// core, 6 links against 4). The step-sum model gave 13.26 (simulator 14.40)
// and 6.57 (7.57) Gbps; measured with the endpoints' step records
// (docs/results/rina_bom.md), two causes: (1) the workers finish at
// different times (tor0: the agent at 124 us, rank 4 at 158 us, the
// step sum's 158.1 us being the last one) and the simulator's throughput is
// the mean over workers of 8 S / own completion; (2) an INA rack's
// AllGather step s + 1 is sent by another member as soon as shard s has
// arrived (fat-tree: the six AllGather steps after the slow-started one take
// ~50 us, a step sum would charge 6 x 15.3 us). The model is a per-worker
// dependency graph with time-overlap sharing, averaged as the simulator:
// 14.67 and 7.66 Gbps (transport "aimd"); under "paper" the fat-tree's
// members slow-start their first AllGather forward too (4.56, 4.56).
TEST(RinaTime, RinaUnequalStepsWithinFivePercentOfTheSimulator) {
  const topo::Graph tb = file("testbed.json");
  const topo::Graph ft = *topo::generate("fat-tree:4");
  const std::vector<Case> cs = {{"testbed rina (tor0)", tb, 8, {tb.tor_switches()[0]}, "rina"},
                                {"fat-tree:4 rina (edge)", ft, 16, ft.tor_switches(), "rina"}};
  expect_within_five_percent_under_both_transports(cs);
}

// Above the ToR (Rina §IV-D; control/rina_bom.hpp's groups, as the
// simulator runs them): fat-tree k = 4, the 8 edges plus the deployment
// order's next switches. With agg0, core0 (and agg2, agg4) the group
// {h2..h15} aggregates through its edges and core0 into agg0: G = 2, 3
// steps (model 7.24, simulator 7.20 Gbps at 0.25 MiB, "paper"); with agg6
// too every hop of the tree carries one copy (7.52, 7.67). agg0 alone
// (G = 3) is asserted from 2 MiB (model 8.41, simulator 8.17, +3.0 %; at
// 4 MiB -0.9 %, at the paper's 97.5 MiB 9.13 / 9.21, -0.9 %): at 0.25 MiB
// (5.41 / 4.99, +8.4 %) agg0 copies both groups' slow-started AllGather
// broadcasts through its core ports, the queue there passes the ECN
// threshold (1306 marks) and h2's window halves twice; the model halves it
// once at the same time, and its queue drains later than the simulator's
// (docs/results/rina_bom.md). That transient is a larger part of a short
// transfer.
TEST(RinaTime, RinaAboveTheTorWithinFivePercentOfTheSimulator) {
  const topo::Graph ft = *topo::generate("fat-tree:4");
  auto with = [&](std::vector<std::string> more) {
    std::vector<topo::NodeId> ina = ft.tor_switches();
    for (const auto& n : more) ina.push_back(ft.at(n, "test"));
    return ina;
  };
  struct AboveCase {
    Case c;
    double mb;
    int groups, steps;
  };
  const std::vector<AboveCase> cs = {
      {{"fat-tree:4 rina (edges, agg0, core0)", ft, 16, with({"agg0", "core0"}), "rina"}, 0.25, 2, 3},
      {{"fat-tree:4 rina (edges, agg0, core0, agg2, agg4, agg6)", ft, 16,
        with({"agg0", "core0", "agg2", "agg4", "agg6"}), "rina"},
       0.25, 2, 3},
      {{"fat-tree:4 rina (edges, agg0), 2 MiB", ft, 16, with({"agg0"}), "rina"}, 2, 2, 3}};
  for (const AboveCase& a : cs) {
    const auto m = rina::allreduce_time(a.c.g, a.c.g.hosts(), a.c.ina, schemes::Collective::RingIna, [&] {
      rina::TimeParams p;
      p.gradient_mb = a.mb;
      return p;
    }());
    EXPECT_EQ(m.groups, a.groups) << a.c.what;
    EXPECT_EQ(m.steps, a.steps) << a.c.what;
    expect_within_five_percent(a.c, a.mb);
  }
}

// A group above the ToR whose members send through regular leaves
// (leaf-spine, 16 workers, INA spine0, or leaf1 and spine0: h0..h3
// autonomous, spine0's group {h4..h15}, G = 5), 0.25 MiB, "paper". h3, the
// last autonomous worker, sends its AllGather shards with its fixed window
// (200 packets, paced at 1.2 windows per round trip) into spine0, which
// copies each packet to 4 members per leaf: its rate is a quarter of a
// spine port, and what it sends beyond that waits in spine0's ports to
// leaf1..3. The group's ScatterReduce step running then has its pull or
// its last acknowledgements come down those ports: 45.4 us in the
// simulator against 37.2 us for the others (spine0 only). The model has
// those ports' queues (control/rina_time.hpp): +1.2 % and -1.9 %.
TEST(RinaTime, RinaGroupThroughRegularLeavesWithinFivePercentOfTheSimulator) {
  const topo::Graph ls = file("leaf-spine-2x4x4.json");
  const topo::NodeId spine0 = ls.at("spine0", "test"), leaf1 = ls.at("leaf1", "test");
  const std::vector<Case> cs = {{"leaf-spine rina (spine0)", ls, 16, {spine0}, "rina"},
                                {"leaf-spine rina (leaf1, spine0)", ls, 16, {leaf1, spine0}, "rina"}};
  for (const Case& c : cs) {
    expect_within_five_percent(c, 0.25);
  }
  // The cost, in the simulator: the agent's (rank 4) second ScatterReduce
  // step (code 1) over h3's copies, against its first (code 0).
  exp::CollectiveSettings s;
  s.gradient_mb = 0.25;
  s.workers_per_job = {16};
  const auto r = exp::run_collective(with_ina(ls, {spine0}), "rina", s);
  ASSERT_TRUE(r.ok) << r.problems;
  ASSERT_GE(r.step_log.size(), 5u);
  const auto& agent = r.step_log[4];
  ASSERT_GE(agent.size(), 2u);
  ASSERT_EQ(agent[0].code, 0);
  ASSERT_EQ(agent[1].code, 1);
  const double first = static_cast<double>(agent[0].done - agent[0].current) / kUs;
  const double second = static_cast<double>(agent[1].done - agent[1].current) / kUs;
  EXPECT_GT(second - first, 5.0) << first << " us, then " << second << " us";
  EXPECT_GT(r.ecn_marks_switch, 0u);
}

// Testbed, tor0 only (G = 5: the rack h0-h3, then h4..h7 autonomous),
// 0.25 MiB: every worker's completion, from the simulator's step records
// (host::RingStepRecord), against the model's worker_s; and two steps
// checked from first principles. Shard S / 5 = 13107 values = 205 packets
// of 306 B; at 100 Gbps s = 24.48 ns a packet, an acknowledgement (64 B)
// 5.12 ns a link, 1 us propagation.
//  - A member's ScatterReduce send starts after the agent's pull: h0 -> tor0
//    -> member, 2 x (5.12 ns + 1 us) = 2010.24 ns after the step begins.
//  - The agent's AllGather step 0 (slow start from one packet, §IV-C)
//    reaches h4 over h0 -> tor0 -> tor1 -> h4: R = 3 x (24.48 + 5.12 ns +
//    2 us) = 6088.8 ns. Windows 1, 2, ..., 64 send 127 packets in 7 round
//    trips; the 8th (window 128) sends the other 78 back to back: 8 R +
//    77 s = 50.595 us, whatever the model says.
// The agent finishes when its broadcast is acknowledged, the autonomous
// worker after the rack (rank 4) about a quarter later: the simulator's
// throughput, the mean of the workers' rates, is not 8 S over the last one.
// Transport "aimd" (unpaced), where these numbers were measured.
TEST(RinaTime, RinaWorkersFinishWhenTheModelSays) {
  const topo::Graph tb = file("testbed.json");
  const std::vector<topo::NodeId> ina = {tb.tor_switches()[0]};
  std::vector<topo::NodeId> workers = tb.hosts();
  workers.resize(8);
  exp::CollectiveSettings s;
  s.gradient_mb = 0.25;
  s.workers_per_job = {8};
  s.rina_transport = "aimd";
  const auto r = exp::run_collective(with_ina(tb, ina), "rina", s);
  ASSERT_TRUE(r.ok) << r.problems;
  ASSERT_EQ(r.step_log.size(), 8u);
  rina::TimeParams p;
  p.gradient_mb = 0.25;
  p.rina_transport = host::RinaTransport::Aimd;
  const auto m = rina::allreduce_time(tb, workers, ina, schemes::Collective::RingIna, p);
  ASSERT_EQ(m.worker_s.size(), 8u);
  EXPECT_TRUE(m.sharing_converged) << m.sharing_rounds << " rounds";
  std::vector<double> sim_us;
  for (size_t k = 0; k < 8; ++k) {
    sim_us.push_back(static_cast<double>(r.step_log[k].back().done) / static_cast<double>(kUs));
    EXPECT_NEAR(m.worker_s[k] * 1e6 / sim_us[k], 1.0, 0.05) << "rank " << k << ": model " << m.worker_s[k] * 1e6
                                                            << " us, simulator " << sim_us[k];
  }
  EXPECT_GT(sim_us[4], 1.2 * sim_us[0]);
  EXPECT_GT(m.worker_s[4], 1.2 * m.worker_s[0]);
  // Rank 1's first step (ScatterReduce code 0) waits for the pull.
  const host::RingStepRecord& member = r.step_log[1][0];
  EXPECT_EQ(member.code, 0);
  EXPECT_NEAR(static_cast<double>(member.send_begin - member.current) / kNs, 2010.24, 1.0);
  // The agent's AllGather step 0 (code G = 5): a slow-started broadcast.
  const auto& agent = r.step_log[0];
  const auto bc = std::find_if(agent.begin(), agent.end(), [](const host::RingStepRecord& x) { return x.code == 5; });
  ASSERT_NE(bc, agent.end());
  EXPECT_EQ(bc->send_pkts, 205u);
  EXPECT_EQ(bc->cwnd, 1.0);
  const double R = 3 * (24.48 + 5.12 + 2000), want = 8 * R + 77 * 24.48;
  EXPECT_NEAR(static_cast<double>(bc->send_done - bc->send_begin) / kNs / want, 1.0, 0.01);
}

// E[max of n iid N(0, 1)] by Monte Carlo (independent of the library's quadrature).
double mc_max_normal(int n, int draws = 200000) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> z;
  double sum = 0;
  for (int d = 0; d < draws; ++d) {
    double m = -1e300;
    for (int i = 0; i < n; ++i) m = std::max(m, z(rng));
    sum += m;
  }
  return sum / draws;
}

// Eq. 1 (straggler model): every send waits ~ N(k/N, sigma^2). Per-iteration
// time on the testbed (N = 8, both ToRs INA for Rina: G = 2) at sigma = 0
// and 10 us (k/N = 20 us, so the truncation at 0 is 2 % of draws), 3 seeds x
// 20 back-to-back iterations each: the standard error of the mean growth is
// ~1 us (per-iteration spread ~10 us / sqrt(60)), against growths of 30-80 us.
TEST(RinaTime, StragglersLengthenRarFarMoreThanRina) {
  const topo::Graph g = with_ina(file("testbed.json"), file("testbed.json").tor_switches());
  const int N = 8;
  const double sigma = 10;
  auto iteration_us = [&](const char* scheme, double sig) {
    double sum = 0;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      exp::CollectiveSettings s;
      s.gradient_mb = 0.0625;
      s.iterations = 20;
      s.seed = seed;
      s.straggler_sigma_us = sig;
      s.straggler_k_us = N * 20;
      s.rina_transport = "aimd";  // the table's transport (RAR has none)
      const auto r = exp::run_collective(g, scheme, s);
      EXPECT_TRUE(r.ok) << scheme << ": " << r.problems;
      sum += r.iteration_ms * 1000;
    }
    return sum / 3;
  };
  const double rar0 = iteration_us("rar", 0), rar1 = iteration_us("rar", sigma);
  const double rina0 = iteration_us("rina", 0), rina1 = iteration_us("rina", sigma);
  const double rar = rar1 - rar0, rina_growth = rina1 - rina0;
  // The figures of docs/results/rina_bom.md's straggler table.
  std::printf("iteration us at sigma 0 / %g us: rar %.1f / %.1f, rina %.1f / %.1f\n", sigma, rar0, rar1, rina0, rina1);
  // Eq. 1 with its per-step barrier: 2 (N - 1) steps, each the max of N
  // delays: 14 * sigma * E[M_8] ~ 199 us (the asymptotic sqrt(2 ln 8) = 2.04
  // would say 285 us). The simulator has no global barrier: a worker waits
  // for its own acknowledgement and its predecessor's shard only, and the
  // acknowledgement's turnaround absorbs part of a predecessor's delay, so
  // RAR's growth is below the barrier's (measured ~77 us, 39 %), yet above
  // one sigma-free step's worth (it must grow).
  const double barrier = 2 * (N - 1) * sigma * mc_max_normal(N);
  EXPECT_LT(rar, barrier);
  EXPECT_GT(rar, 0.25 * barrier);
  // Rina's chain at the agent is 2G - 1 = 3 steps (ScatterReduce G, AllGather G - 1)
  // against RAR's 14: with the same per-step growth Rina would grow 3/14 of
  // RAR; its ScatterReduce steps take the max over a whole rack (a ToR
  // waits for all four members), so it grows more per step (measured ~31 us,
  // 0.40 of RAR); far less than RAR in any case.
  EXPECT_LT(rina_growth, 0.5 * rar);
  EXPECT_GT(rina_growth, 3.0 / 14 * 0.5 * rar);
}

}  // namespace
}  // namespace ina
