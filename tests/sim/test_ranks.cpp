// One simulation split over processes (sim::Ranks; `mpirun ... ina sim
// --partition`), here as threads of this process (sim::local_ranks, the same
// protocol): every scheme's run on a fat-tree gives the digest, the metrics
// and the event counts of one process, on 2 and 3 processes and with
// threads in each, with link faults and a ring failure too; a node that
// throws in one process stops them all, and each reports it; what cannot
// be split over processes is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "experiment/runner.hpp"
#include "experiment/scenario.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "sim/ranks.hpp"
#include "split_fixture.hpp"

namespace ina::test {
namespace {

TEST(LocalRanks, ExchangeDeliversEachRanksBytesByRank) {
  auto ranks = sim::local_ranks(3);
  std::vector<std::vector<std::string>> got(3);
  std::vector<std::jthread> th;
  for (unsigned r = 0; r < 3; ++r)
    th.emplace_back([&, r] {
      for (int round = 0; round < 2; ++round) {
        std::vector<std::string> out(3);
        for (unsigned to = 0; to < 3; ++to) out[to] = std::to_string(round) + ":" + std::to_string(r) + ">" + std::to_string(to);
        got[r] = ranks[r]->exchange(out, "test");
      }
    });
  th.clear();
  for (unsigned r = 0; r < 3; ++r)
    for (unsigned from = 0; from < 3; ++from)
      EXPECT_EQ(got[r][from], from == r ? "" : "1:" + std::to_string(from) + ">" + std::to_string(r));
}

// `body(rank)` on n threads at once, one per rank; what each returned.
template <typename T>
std::vector<T> on_ranks(unsigned n, const std::function<T(sim::Ranks&)>& body) {
  auto ranks = sim::local_ranks(n);
  std::vector<T> out(n);
  std::vector<std::jthread> th;
  for (unsigned r = 0; r < n; ++r) th.emplace_back([&, r] { out[r] = body(*ranks[r]); });
  th.clear();
  return out;
}

void expect_same_over_processes(exp::Settings s, const std::string& scheme) {
  SCOPED_TRACE(scheme);
  s.threads = 1;
  const exp::RunOutput one = exp::run_point(s, scheme, 3);
  ASSERT_TRUE(one.ok) << one.problems;
  // (processes, threads, partitions per process): one partition per
  // thread, or two on one thread beside the other process's two.
  for (const auto& [procs, threads, parts] : {std::tuple{2u, 1, 0}, {3u, 1, 0}, {2u, 2, 0}, {2u, 1, 2}}) {
    SCOPED_TRACE(fmt::format("{} processes x {} threads, {} partitions each", procs, threads, parts));
    s.threads = threads;
    s.partitions = parts;
    const auto outs =
        on_ranks<exp::RunOutput>(procs, [&](sim::Ranks& r) { return exp::run_point(s, scheme, 3, &r); });
    for (const exp::RunOutput& o : outs) {
      ASSERT_TRUE(o.ok) << o.problems;
      EXPECT_EQ(o.digest, one.digest);
      EXPECT_EQ(o.metrics, one.metrics);  // events, hops, sync_ms, retransmits, ...
      EXPECT_EQ(o.marked_links.size(), one.marked_links.size());
      ASSERT_EQ(o.partitions.size(), procs * static_cast<unsigned>(std::max(threads, parts)));
      uint64_t events = 0;
      for (const auto& [n, busy] : o.partitions) events += n;
      EXPECT_EQ(events, static_cast<uint64_t>(one.metrics.at("events")));
      EXPECT_EQ(o.windows, outs[0].windows);
    }
  }
}

TEST(SplitOverProcesses, EverySchemeGivesTheRunOfOneProcess) {
  for (const char* scheme : {"ps", "atp", "dsa", "rar", "h-ar", "rina"})
    expect_same_over_processes(fat_tree_two_jobs(), scheme);
}

// A ring worker fails mid-run, in the second op: the control plane reads
// every survivor's op over the processes (the survivors restart op 1, not
// 0), crashes the worker and re-plans the survivors where each runs, then
// the run goes on.
TEST(SplitOverProcesses, ARingFailureMidRunGivesTheRunOfOneProcess) {
  expect_same_over_processes(ring_failure_in_op_1(), "rina");
}

// Loss, duplication and reordering on every link: lost packets, copies and
// reordered packets cross the processes as bytes.
TEST(SplitOverProcesses, LinkFaultsGiveTheRunOfOneProcess) {
  exp::Settings s = fat_tree_two_jobs();
  s.loss = 0.002;
  s.dup = 0.002;
  s.reorder = 0.02;
  for (const char* scheme : {"atp", "rar"}) expect_same_over_processes(s, scheme);
}

// A node in one process throws: every process stops at the next window and
// run() throws in each, the others naming the rank and its error.
TEST(SplitOverProcesses, ANodeThatThrowsInOneProcessStopsThemAll) {
  const auto what = on_ranks<std::string>(2, [](sim::Ranks& r) -> std::string {
    sim::Simulator sim(1, 16);
    const auto a = sim.add_node(std::make_unique<EveryMicrosecond>(1), false);
    const auto b = sim.add_node(std::make_unique<ThrowsOnTheThird>(), false);
    sim.connect(a, b, sim::LinkParams{}, sim::LinkParams{});
    sim.set_partitions({0, 1}, &r);
    EXPECT_EQ(sim.local(a), r.rank() == 0);
    EXPECT_EQ(sim.local(b), r.rank() == 1);
    try {
      sim.run(1 * kMs);
    } catch (const std::runtime_error& e) {
      if (r.rank() == 1) {
        EXPECT_EQ(sim.node<ThrowsOnTheThird>(b).seen, 3);
        EXPECT_EQ(sim.node<ThrowsOnTheThird>(b).last_value, 14);  // the payload crossed: 7 x 2 + PSN 0
      }
      return e.what();
    }
    return "no exception";
  });
  EXPECT_EQ(what[0], "rank 1: the third packet");
  EXPECT_EQ(what[1], "the third packet");
}

// A node that throws as the run starts, before any window, and one whose
// error has no text: the other process still stops and names the rank.
TEST(SplitOverProcesses, AFailureAtTheStartOrWithoutTextStopsEveryProcess) {
  struct ThrowsAtStart final : Node {
    std::string text;
    explicit ThrowsAtStart(std::string t) : text(std::move(t)) {}
    void on_start(Time, Effects&) override { throw std::runtime_error(text); }
    void on_timer(uint64_t, Time, Effects&) override {}
    void on_packet(Packet* p, Time, Effects& fx) override { fx.free(p); }
  };
  for (const std::string text : {"no start", ""}) {
    SCOPED_TRACE(text);
    const auto what = on_ranks<std::string>(2, [&](sim::Ranks& r) -> std::string {
      sim::Simulator sim(1, 16);
      const auto a = sim.add_node(std::make_unique<EveryMicrosecond>(1), false);
      const auto b = sim.add_node(std::make_unique<ThrowsAtStart>(text), false);
      sim.connect(a, b, sim::LinkParams{}, sim::LinkParams{});
      sim.set_partitions({0, 1}, &r);
      try {
        sim.run(1 * kMs);
      } catch (const std::runtime_error& e) {
        return e.what();
      }
      return "no exception";
    });
    EXPECT_EQ(what[0], "rank 1: " + text);
    EXPECT_EQ(what[1], text);
  }
}

// Ranks at different steps of the protocol (one left a run the other is
// in) cannot go on: both say which steps they are at.
TEST(LocalRanks, RanksAtDifferentStepsAreOutOfStep) {
  const auto what = on_ranks<std::string>(2, [](sim::Ranks& r) -> std::string {
    try {
      r.share("x", r.rank() == 0 ? "posts" : "run 3");
    } catch (const std::logic_error& e) {
      return e.what();
    }
    return "no exception";
  });
  EXPECT_EQ(what[0], "ranks out of step: rank 0 is at exchange 1 posts, rank 1 at 1 run 3");
  EXPECT_EQ(what[1], "ranks out of step: rank 1 is at exchange 1 run 3, rank 0 at 1 posts");
}

TEST(SplitOverProcesses, RefusesWhatRunsInOneProcess) {
  auto ranks = sim::local_ranks(2);  // nothing is exchanged: each refuses before the run
  exp::Settings star;
  try {
    exp::run_point(star, "atp", 1, ranks[0].get());
    ADD_FAILURE() << "a star run was split over processes";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("topology.kind = \"star\""), std::string::npos) << e.what();
  }
  sim::Simulator sim(1, 16);
  sim.add_node(std::make_unique<sim::Forwarder>(), true);
  sim.add_node(std::make_unique<sim::Forwarder>(), true);
  sim.connect(0, 1, sim::LinkParams{}, sim::LinkParams{});
  EXPECT_THROW(sim.set_partitions({0, 0}, ranks[0].get()), std::invalid_argument);  // a partition per process at least
}

}  // namespace
}  // namespace ina::test
