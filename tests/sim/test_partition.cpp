// The simulator on several threads (sim::Simulator::set_partitions,
// set_threads, sim::partition_by_racks): every scheme's run on a fat-tree,
// with and without link faults and with a ring failure mid-run, gives the
// same digest, event and hop counts and metrics on one partition, on two
// threads, and on three partitions run by one or by two threads; the
// rack split keeps a pod together; what cannot be partitioned is refused.
// (The golden traces, tests/cluster/test_golden.cpp, are also compared
// event by event on three partitions.)
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "experiment/runner.hpp"
#include "experiment/scenario.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "sim/partition.hpp"
#include "split_fixture.hpp"
#include "topo/graph.hpp"

namespace ina::test {
namespace {

void expect_same_on_any_thread_count(exp::Settings s, const std::string& scheme) {
  SCOPED_TRACE(scheme);
  s.threads = 1;
  const exp::RunOutput one = exp::run_point(s, scheme, 3);
  ASSERT_TRUE(one.ok) << one.problems;
  // (threads, partitions): a partition per thread; three partitions on one
  // thread, one after another; three on two threads, one thread running two.
  for (const auto& [t, p] : {std::pair{2, 0}, std::pair{1, 3}, std::pair{2, 3}}) {
    SCOPED_TRACE(testing::Message() << t << " threads, " << p << " partitions");
    s.threads = t;
    s.partitions = p;
    const exp::RunOutput par = exp::run_point(s, scheme, 3);
    ASSERT_TRUE(par.ok) << par.problems;
    EXPECT_EQ(par.digest, one.digest);
    EXPECT_EQ(par.metrics, one.metrics);  // events, hops, sync_ms, retransmits, ...
    // Every event ran in exactly one partition (runs.json sim_partitions).
    ASSERT_EQ(par.partitions.size(), static_cast<size_t>(std::max(t, p)));
    uint64_t events = 0;
    for (const auto& [n, busy] : par.partitions) events += n;
    EXPECT_EQ(events, static_cast<uint64_t>(one.metrics.at("events")));
    EXPECT_GT(par.windows, 0u);
    if (t == 1) {
      EXPECT_EQ(par.helper_cpu_s, 0.0) << "one thread started others";
    }
  }
}

TEST(Partitioned, EverySchemeGivesTheSameRunOnAnySplit) {
  for (const char* scheme : {"ps", "atp", "dsa", "rar", "h-ar", "rina"}) expect_same_on_any_thread_count(fat_tree_two_jobs(), scheme);
}

// Loss, duplication and reordering on every link: dropped packets, copies,
// and reordered packets that become their own events cross the threads.
TEST(Partitioned, LinkFaultsGiveTheSameRunOnAnyThreadCount) {
  exp::Settings s = fat_tree_two_jobs();
  s.loss = 0.002;
  s.dup = 0.002;
  s.reorder = 0.02;
  for (const char* scheme : {"atp", "rar"}) expect_same_on_any_thread_count(s, scheme);
}

// A ring worker fails mid-run (in op 1): the run stops at the failure and at its
// detection (Simulator::run(until)), the control plane crashes the worker
// and reconfigures the survivors (Simulator::call), then the run goes on.
TEST(Partitioned, ARingFailureMidRunGivesTheSameRunOnAnyThreadCount) {
  expect_same_on_any_thread_count(ring_failure_in_op_1(), "rina");
}

// By default (run.partitions = 0) a run has one partition per 64 of its
// jobs' hosts (exp::RunSplit): two for 128 on a k = 8 fat-tree, none below,
// and none where links delay packets less than 0.5 us.
TEST(Partitioned, ByDefaultOnePartitionPer64OfTheJobsHosts) {
  exp::Settings s = fat_tree_two_jobs();
  s.k = 8;
  s.workers = 64;
  s.gradient_mb = 0.02;
  const exp::RunOutput by_default = exp::run_point(s, "atp", 1);
  ASSERT_TRUE(by_default.ok) << by_default.problems;
  EXPECT_EQ(by_default.partitions.size(), 2u);
  EXPECT_GT(by_default.windows, 0u);
  s.partitions = 1;
  const exp::RunOutput one = exp::run_point(s, "atp", 1);
  EXPECT_TRUE(one.partitions.empty());
  EXPECT_EQ(one.digest, by_default.digest);
  EXPECT_EQ(one.metrics, by_default.metrics);
  s.partitions = 0;
  s.rtt_us = 1.6;  // links of 0.4 us: windows that short would multiply
  EXPECT_TRUE(exp::run_point(s, "atp", 1).partitions.empty());
  s.rtt_us = 2;  // 0.5 us
  EXPECT_EQ(exp::run_point(s, "atp", 1).partitions.size(), 2u);
  s.workers = 63;  // 126 hosts
  EXPECT_TRUE(exp::run_point(s, "atp", 1).partitions.empty());
}

TEST(Partitioned, ByRacksKeepsEachPodOnOneThreadAndSpreadsTheCores) {
  const topo::Graph g = topo::fat_tree(4);  // 16 hosts, 8 edge, 8 aggregation, 4 core switches
  sim::Simulator sim(1, 64);
  sim::build_network(sim, g, [](topo::NodeId) { return std::make_unique<sim::Forwarder>(); }, sim::LinkParams{});
  const auto part = sim::partition_by_racks(sim, 2);
  ASSERT_EQ(part.size(), g.num_nodes());
  std::set<topo::NodeId> tors;
  for (const auto& rack : sim::racks(g)) {
    tors.insert(rack.tor);
    for (const auto h : rack.hosts) EXPECT_EQ(part[h], part[rack.tor]) << "rack of " << g.node(rack.tor).name << " split";
  }
  ASSERT_EQ(tors.size(), 8u);
  size_t per_part[2] = {0, 0}, cores[2] = {0, 0};
  for (topo::NodeId v = 0; v < g.num_nodes(); ++v) {
    ASSERT_LT(part[v], 2);
    ++per_part[part[v]];
    if (g.is_host(v) || tors.count(v)) continue;
    size_t edges = 0, with = 0;  // an aggregation switch is with both edge switches of its pod
    for (const auto& nb : g.neighbors(v))
      if (tors.count(nb.peer)) {
        ++edges;
        with += part[nb.peer] == part[v];
      }
    if (edges == 0) ++cores[part[v]];
    else EXPECT_EQ(with, edges) << g.node(v).name << " away from its pod";
  }
  EXPECT_EQ(cores[0], 2u);
  EXPECT_EQ(cores[1], 2u);
  EXPECT_EQ(per_part[0], per_part[1]);
}

// A run split over processes splits its graph before the network exists
// (each process builds only its own nodes): the graph's split is the
// built network's.
TEST(Partitioned, TheGraphSplitsAsItsNetworkDoes) {
  for (const topo::Graph& g : {topo::fat_tree(4), topo::fat_tree(8), topo::leaf_spine(4, 2, 3)}) {
    SCOPED_TRACE(g.name);
    sim::Simulator sim(1, 64);
    sim::build_network(sim, g, [](topo::NodeId) { return std::make_unique<sim::Forwarder>(); }, sim::LinkParams{});
    for (const unsigned parts : {2u, 3u, 5u, 16u})
      EXPECT_EQ(sim::partition_by_racks(g, parts), sim::partition_by_racks(sim, parts)) << parts << " parts";
  }
}

// Jobs on a few racks of a large fabric split by their hosts: on a k = 8
// fat-tree (32 racks of 4), busy hosts in racks 0-3 only give two racks
// to each partition, and every idle rack goes to the last one; counted by
// all hosts, the busy racks would all be in the first. The graph's split
// is the network's with the same busy hosts.
TEST(Partitioned, BusyHostsWeighTheRacksIdleOnesDoNot) {
  const topo::Graph g = topo::fat_tree(8);
  sim::Simulator sim(1, 64);
  sim::build_network(sim, g, [](topo::NodeId) { return std::make_unique<sim::Forwarder>(); }, sim::LinkParams{});
  const auto rk = sim::racks(g);
  ASSERT_EQ(rk.size(), 32u);
  std::vector<NodeId> busy;
  for (size_t r = 0; r < 4; ++r)
    for (const auto h : rk[r].hosts) busy.push_back(static_cast<NodeId>(h));
  const auto part = sim::partition_by_racks(g, 2, busy);
  EXPECT_EQ(part, sim::partition_by_racks(sim, 2, busy));
  for (size_t r = 0; r < 4; ++r) EXPECT_EQ(part[rk[r].tor], r < 2 ? 0 : 1) << "rack " << r;
  // The 28 idle racks hold state and no events: 14 on each side.
  size_t idle_on_0 = 0;
  for (size_t r = 4; r < rk.size(); ++r) {
    idle_on_0 += part[rk[r].tor] == 0;
    for (const auto h : rk[r].hosts) EXPECT_EQ(part[h], part[rk[r].tor]) << "a rack stays together";
  }
  EXPECT_EQ(idle_on_0, 14u);
  const auto unweighted = sim::partition_by_racks(g, 2);
  for (size_t r = 0; r < 4; ++r) EXPECT_EQ(unweighted[rk[r].tor], 0) << "rack " << r;
  EXPECT_THROW(sim::partition_by_racks(g, 2, std::vector<NodeId>{static_cast<NodeId>(rk[0].tor)}), std::invalid_argument);
}

TEST(Partitioned, RefusesWhatCannotBeSplit) {
  sim::Simulator sim(1, 64);
  const auto a = sim.add_node(std::make_unique<sim::Forwarder>(), true);
  const auto b = sim.add_node(std::make_unique<sim::Forwarder>(), true);
  sim::LinkParams back;
  back.delay = -1;  // a packet would arrive before it left
  EXPECT_THROW(sim.connect(a, b, back, back), std::invalid_argument);
  sim::LinkParams near;
  near.delay = 0;
  near.gbps = 1e6;  // a 64 B frame in 1 ps (rounded up): the least window there is
  sim.connect(a, b, near, near);
  EXPECT_THROW(sim.set_partitions({0}), std::invalid_argument);  // an entry per node
  sim.set_partitions({0, 1});
  EXPECT_EQ(sim.partitions(), 2u);
  EXPECT_EQ(sim.lookahead(), 1);
  sim.set_partitions({0, 0});  // both on one thread
  EXPECT_EQ(sim.partitions(), 1u);
  EXPECT_EQ(sim.lookahead(), kNever);
  sim.set_partitions({0, 1});
  EXPECT_THROW(sim.connect(a, b, near, near), std::logic_error);  // the window would not know it
  EXPECT_THROW(sim.set_partitions(std::vector<uint16_t>{0, 300}), std::invalid_argument);  // at most 256
  sim.run();
  EXPECT_THROW(sim.set_partitions({0, 1}), std::logic_error);  // after the start
}

// A node that throws on a partition's thread: the run stops and run()
// rethrows it, as one thread would, instead of ending the process or
// leaving the other threads waiting.
TEST(Partitioned, ANodeThatThrowsStopsTheRunAndRunRethrows) {
  for (const unsigned threads : {0u, 1u, 2u}) {  // 0: one partition; else two on that many threads
    SCOPED_TRACE(threads);
    sim::Simulator sim(1, 16);
    const auto a = sim.add_node(std::make_unique<EveryMicrosecond>(1), false);
    const auto b = sim.add_node(std::make_unique<ThrowsOnTheThird>(), false);
    sim.connect(a, b, sim::LinkParams{}, sim::LinkParams{});
    if (threads > 0) {
      sim.set_partitions({0, 1});
      sim.set_threads(threads);
    }
    try {
      sim.run(1 * kMs);
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "the third packet");
    }
    EXPECT_EQ(sim.node<ThrowsOnTheThird>(b).seen, 3);
  }
}

TEST(Partitioned, ThreadsOnTheStarAreRefusedNamingTheField) {
  try {
    exp::parse_scenario("[run]\nthreads = 2\nschemes = [\"atp\"]\n", "star.toml");
    ADD_FAILURE() << "run.threads on the star was accepted";
  } catch (const std::exception& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("star.toml"), std::string::npos) << m;
    EXPECT_NE(m.find("run.threads"), std::string::npos) << m;
    EXPECT_NE(m.find("multi-switch"), std::string::npos) << m;
  }
}

TEST(Partitioned, PartitionsOnTheStarOrBelowTheThreadsAreRefusedNamingTheField) {
  struct Case {
    const char* text;
    const char* why;
  };
  const Case cases[] = {
      {"[run]\npartitions = 4\nschemes = [\"atp\"]\n", "has one switch (value: 4)"},
      {"[topology]\nkind = \"fat-tree\"\nk = 4\n[run]\nthreads = 3\npartitions = 2\nschemes = [\"atp\"]\n",
       "must be at least run.threads (3), or 0 for the default (one per 64 of the jobs' hosts) (value: 2)"},
  };
  for (const auto& [text, why] : cases) {
    try {
      exp::parse_scenario(text, "s.toml");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const std::exception& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("s.toml"), std::string::npos) << m;
      EXPECT_NE(m.find("run.partitions"), std::string::npos) << m;
      EXPECT_NE(m.find(why), std::string::npos) << m;
    }
  }
}

TEST(PacketPoolGiveFree, MovesFreePacketsAndKeepsCounts) {
  PacketPool a(16, 8), b(16, 8);
  Packet* p = a.get();
  EXPECT_EQ(a.free_count(), 7u);
  b.put(p);  // freed into the other pool: each count is off, their sum is right
  EXPECT_EQ(a.in_use() + b.in_use(), 0u);
  EXPECT_EQ(b.free_count(), 1u);
  a.give_free(b, 5);
  EXPECT_EQ(a.free_count(), 2u);
  EXPECT_EQ(b.free_count(), 6u);
  for (int i = 0; i < 6; ++i) b.get();
  EXPECT_EQ(b.allocated(), 0u) << "b served every get from what it was given";
  PacketPool c(32, 8);
  EXPECT_THROW(a.give_free(c, 1), std::invalid_argument);
}

}  // namespace
}  // namespace ina::test
