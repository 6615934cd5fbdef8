// Simulator: determinism, the link model (timing, drop-tail, ECN, loss),
// and experiment::run_point for every scheme.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cluster_fixture.hpp"
#include "experiment/runner.hpp"
#include "experiment/scenario.hpp"
#include "schemes/registry.hpp"

namespace ina::test {
namespace {

// ---------------------------------------------------------------- determinism

ClusterConfig lossy_dsa(uint64_t seed) {
  ClusterConfig c;
  c.scheme = "dsa";
  c.workers_per_job = {3, 2};
  c.ops = {{1500, 200}, {900, 640}};
  c.job_priority = {1u << 16, 1u << 8};
  c.job_start = {0, 4 * kUs};
  c.rank_stagger = 500 * kNs;
  c.aggregators = 16;
  c.faults.name = "lossy";
  c.faults.loss = 0.03;
  c.faults.dup = 0.01;
  c.faults.reorder = 0.03;
  c.seed = seed;
  return c;
}

struct Trace {
  uint64_t digest, events, hops;
  Time end;  // last worker finish time
};

Trace run_trace(uint64_t seed) {
  Cluster cl(lossy_dsa(seed));
  EXPECT_TRUE(cl.run());
  cl.check_all("determinism seed " + std::to_string(seed));
  Time last = -1;
  for (const auto& job : cl.workers)
    for (auto* w : job) last = std::max(last, w->finish_time());
  return {cl.sim.digest(), cl.sim.events(), cl.sim.hops(), last};
}

TEST(Determinism, SameSeedSameTraceDifferentSeedDifferentTrace) {
  const Trace a = run_trace(42), b = run_trace(42), c = run_trace(43);
  EXPECT_EQ(a.digest, b.digest);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.hops, b.hops);
  EXPECT_EQ(a.end, b.end);
  EXPECT_GT(a.hops, 100u);
  EXPECT_GT(a.end, 0);
  EXPECT_NE(a.digest, c.digest);
}

// ---------------------------------------------------------------- link model

// Sends `n` packets of `count` values to `dst`: all at start (gap 0, back to
// back in the link's queue) or one every `gap`.
class Source final : public Node {
 public:
  Source(NodeId dst, int n, uint16_t count, Time gap = 0) : dst_(dst), n_(n), count_(count), gap_(gap) {}
  void on_start(Time now, Effects& fx) override {
    if (gap_ == 0) {
      while (sent_ < n_) send_one(fx);
    } else {
      fx.set_timer(now, 0);
    }
  }
  void on_packet(Packet* p, Time, Effects& fx) override { fx.free(p); }
  void on_timer(uint64_t, Time now, Effects& fx) override {
    send_one(fx);
    if (sent_ < n_) fx.set_timer(now + gap_, 0);
  }

 private:
  void send_one(Effects& fx) {
    Packet* p = fx.alloc();
    p->h.type = PktType::Data;
    p->h.dst = dst_;
    p->h.psn = static_cast<uint32_t>(sent_++);
    p->h.count = count_;
    fx.send(p);
  }
  NodeId dst_;
  int n_;
  uint16_t count_;
  Time gap_;
  int sent_ = 0;
};

// Records (arrival time, psn, flags) of everything it receives.
class Sink final : public Node {
 public:
  struct Rx {
    Time t;
    uint32_t psn;
    uint16_t flags;
  };
  void on_packet(Packet* p, Time now, Effects& fx) override {
    rx.push_back({now, p->h.psn, p->h.flags});
    fx.free(p);
  }
  void on_timer(uint64_t, Time, Effects&) override {}
  std::vector<Rx> rx;
};

struct LinkRig {
  LinkRig(const sim::LinkParams& p, int n, uint16_t count = 64, uint64_t seed = 1, Time gap = 0, bool host_ecn = false)
      : sim(seed, 64) {
    sim.set_host_ecn(host_ecn);
    auto s = std::make_unique<Sink>();
    sink = s.get();
    sim.add_node(std::move(s), true);  // node 0 (a "switch": receives from the host's link)
    sim.add_node(std::make_unique<Source>(0, n, count, gap), false);
    link = sim.connect(1, 0, p, p);
    sim.build_routes();
  }
  sim::Simulator sim;
  Sink* sink;
  uint32_t link;
};

// docs/results/simulator.md ("Large topologies") states the memory of a
// packet in flight and of a link from these sizes (GCC 12, x86-64), and
// docs/architecture.md that of a traced packet: a change of layout must
// change the pages too.
TEST(SimSizes, WhatSimulatorMdStates) {
  EXPECT_EQ(sizeof(Packet), 64u);              // + the payload: a 320 B pool slot at 64 values
  EXPECT_EQ(sizeof(sim::Link), 256u);
  EXPECT_EQ(sizeof(std::pair<Time, Packet*>), 16u);  // a link's in-flight ring entry
  EXPECT_EQ(sizeof(sim::QueueSample), 40u);  // a traced packet (docs/architecture.md, run.queue_trace)
}

TEST(Link, SerializationPlusPropagationIsExact) {
  sim::LinkParams p;
  p.gbps = 100;
  p.delay = 2500 * kNs;
  LinkRig rig(p, 3);  // 64 values + 50 B header = 306 B
  rig.sim.run();
  ASSERT_EQ(rig.sink->rx.size(), 3u);
  EXPECT_EQ(serialization_time(306, 100'000'000'000ULL), 24480);
  // Back to back: each packet waits for the previous one's serialization.
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(rig.sink->rx[k].psn, k);
    EXPECT_EQ(rig.sink->rx[k].t, static_cast<Time>(k + 1) * 24480 + 2500 * kNs);
  }
  const auto& st = rig.sim.link(rig.link).st;
  EXPECT_EQ(st.packets, 3u);
  EXPECT_EQ(st.bytes, 3u * 306);
  EXPECT_EQ(st.busy, 3 * 24480);
  EXPECT_EQ(rig.sim.packets_in_use(), 0u);
}

// End-host latency (Simulator::set_host_delay): a packet
// spends the delay in the host that sends it and again in the host that
// receives it; a link between two switches has neither.
TEST(Link, HostDelayAddsToEveryHostEndOfALink) {
  const Time d = 7 * kUs;
  sim::Simulator sim(1, 64);
  sim.set_host_delay(d);
  auto add_sink = [&](bool is_switch) {
    auto s = std::make_unique<Sink>();
    Sink* raw = s.get();
    sim.add_node(std::move(s), is_switch);
    return raw;
  };
  Sink* at_switch = add_sink(true);                           // 0
  sim.add_node(std::make_unique<Source>(0, 1, 64), false);    // 1: host -> switch 0
  sim.add_node(std::make_unique<Source>(3, 1, 64), true);     // 2: switch -> host 3
  Sink* at_host = add_sink(false);                            // 3
  Sink* at_switch2 = add_sink(true);                          // 4
  sim.add_node(std::make_unique<Source>(4, 1, 64), true);     // 5: switch -> switch 4
  sim::LinkParams p;
  p.delay = 2500 * kNs;
  sim.connect(1, 0, p, p);
  sim.connect(2, 3, p, p);
  sim.connect(5, 4, p, p);
  sim.build_routes();
  sim.run();
  const Time wire = 24480 + 2500 * kNs;  // 306 B at 100 Gbps, plus propagation
  ASSERT_EQ(at_switch->rx.size(), 1u);
  ASSERT_EQ(at_host->rx.size(), 1u);
  ASSERT_EQ(at_switch2->rx.size(), 1u);
  EXPECT_EQ(at_switch->rx[0].t, wire + d) << "the sending host's share";
  EXPECT_EQ(at_host->rx[0].t, wire + d) << "the receiving host's share";
  EXPECT_EQ(at_switch2->rx[0].t, wire) << "no host on a switch-to-switch link";
}

TEST(Link, MinimumPacketSizeAndOtherRates) {
  sim::LinkParams p;
  p.gbps = 40;
  p.delay = 1 * kUs;
  LinkRig rig(p, 1, 1);  // 54 B -> padded to 64 B
  rig.sim.run();
  ASSERT_EQ(rig.sink->rx.size(), 1u);
  EXPECT_EQ(rig.sink->rx[0].t, 64 * 8 * 25 + 1 * kUs);  // 25 ps per bit at 40 Gbps
}

TEST(Link, DropTailWhenBacklogExceedsQueue) {
  sim::LinkParams p;
  p.queue_bytes = 1000;
  p.ecn_bytes = 0;
  LinkRig rig(p, 10);
  rig.sim.run();
  // Packet k finds k * 306 B of backlog; it is dropped when that exceeds 1000 B.
  size_t expect = 0;
  for (int k = 0; k < 10; ++k) expect += k * 306 <= 1000;
  ASSERT_EQ(expect, 4u);
  EXPECT_EQ(rig.sink->rx.size(), expect);
  const auto& st = rig.sim.link(rig.link).st;
  EXPECT_EQ(st.drop_queue, 10 - expect);
  EXPECT_EQ(st.ecn_marked, 0u);
  for (size_t k = 0; k < rig.sink->rx.size(); ++k) EXPECT_EQ(rig.sink->rx[k].psn, k) << "drop-tail keeps the head";
  EXPECT_EQ(rig.sim.packets_in_use(), 0u);
}

// The queue's marking rule, on the host's link (set_host_ecn: a NIC's queue
// marks only when asked; by default ECN marks at switch ports only).
TEST(Link, EcnMarksWhenBacklogExceedsThreshold) {
  sim::LinkParams p;
  p.ecn_bytes = 700;
  LinkRig nic(p, 8);
  nic.sim.run();
  EXPECT_EQ(nic.sim.link(nic.link).st.ecn_marked, 0u);
  LinkRig rig(p, 8, 64, 1, 0, true);
  rig.sim.run();
  ASSERT_EQ(rig.sink->rx.size(), 8u);
  size_t marked = 0;
  for (const auto& r : rig.sink->rx) {
    const bool want = r.psn * 306 > 700;  // backlog seen by packet psn
    EXPECT_EQ((r.flags & flag::kEcn) != 0, want) << "psn " << r.psn;
    marked += want;
  }
  EXPECT_EQ(rig.sim.link(rig.link).st.ecn_marked, marked);
  EXPECT_EQ(marked, 5u);
}

TEST(Link, LossRateIsRoughlyTheConfiguredOne) {
  sim::LinkParams p;
  p.loss = 0.1;
  p.ecn_bytes = 0;
  const int n = 20000;
  LinkRig rig(p, n, 64, 7, 100 * kNs);  // paced: no queueing
  rig.sim.run();
  const auto& st = rig.sim.link(rig.link).st;
  const double frac = static_cast<double>(st.drop_loss) / n;
  EXPECT_NEAR(frac, 0.1, 0.015);
  EXPECT_EQ(st.drop_loss + rig.sink->rx.size(), static_cast<size_t>(n));
  EXPECT_EQ(st.drop_queue, 0u);
  EXPECT_EQ(rig.sim.packets_in_use(), 0u);
}

TEST(Link, DuplicationAndReorderingAreInjected) {
  sim::LinkParams p;
  p.dup = 0.05;
  p.reorder = 0.05;
  p.reorder_delay = 5 * kUs;
  p.ecn_bytes = 0;
  const int n = 5000;
  LinkRig rig(p, n, 64, 9, 100 * kNs);  // paced: no queueing
  rig.sim.run();
  const auto& st = rig.sim.link(rig.link).st;
  EXPECT_EQ(rig.sink->rx.size(), n + st.duplicated);
  EXPECT_NEAR(static_cast<double>(st.duplicated) / n, 0.05, 0.015);
  EXPECT_NEAR(static_cast<double>(st.reordered) / n, 0.05, 0.015);
  size_t inversions = 0;
  for (size_t k = 1; k < rig.sink->rx.size(); ++k) inversions += rig.sink->rx[k].psn < rig.sink->rx[k - 1].psn;
  EXPECT_GT(inversions, 0u);
  EXPECT_EQ(rig.sim.packets_in_use(), 0u);
}

TEST(Time, SerializationTimeIsExactForLargeSizes) {
  // 2^30 B at 100 Gbps: 2^33 bits / 1e11 bit/s = 85.89934592 ms.
  EXPECT_EQ(serialization_time(1ULL << 30, 100'000'000'000ULL), 85'899'345'920);
  EXPECT_EQ(serialization_time(4'000'000, 100'000'000'000ULL), 320'000'000);    // a 4 MB buffer
  EXPECT_EQ(serialization_time(16'000'000, 100'000'000'000ULL), 1'280'000'000);  // a 16 MB buffer
  EXPECT_EQ(serialization_time(2'000'000, 100'000'000'000ULL), 160'000'000);
  EXPECT_EQ(serialization_time(306, 40'000'000'000ULL), 61'200);
  EXPECT_EQ(serialization_time(1, 3), 2'666'666'666'667);  // rounded up
}

TEST(Link, LargeQueueDoesNotDropBelowItsSize) {
  // A 4 MB buffer (e.g. topology.queue_kb = 4000) and a 1.5 MB burst: nothing may be dropped.
  sim::LinkParams p;
  p.queue_bytes = 4'000'000;
  p.ecn_bytes = 0;
  const int n = 12000;  // 12000 * 306 B = 3.67 MB of backlog
  LinkRig rig(p, n);
  rig.sim.run();
  EXPECT_EQ(rig.sim.link(rig.link).st.drop_queue, 0u);
  EXPECT_EQ(rig.sink->rx.size(), static_cast<size_t>(n));
}

// A queue trace (Simulator::watch_link): every packet offered to the
// watched link's queue, with the backlog it found and its fate, and the run
// the same as without it.
TEST(Link, AWatchedQueueRecordsEveryPacketAndChangesNothing) {
  sim::LinkParams p;
  p.queue_bytes = 1000;
  p.ecn_bytes = 700;
  LinkRig plain(p, 10, 64, 1, 0, true), watched(p, 10, 64, 1, 0, true);
  watched.sim.watch_link(watched.link);
  plain.sim.run();
  watched.sim.run();
  const auto& q = watched.sim.link_samples(watched.link);
  ASSERT_EQ(q.size(), 10u);
  // Packet k finds k packets of 306 B (24480 ps each) ahead of it until the
  // fifth (1224 B > 1000 B): it and the rest are dropped and find 4.
  for (size_t k = 0; k < q.size(); ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(q[k].t, 0);
    EXPECT_EQ(q[k].backlog, static_cast<Time>(std::min<size_t>(k, 4)) * 24480);
    EXPECT_EQ(q[k].fate, k < 4 ? sim::QueueSample::kSent : sim::QueueSample::kDropped);
    EXPECT_EQ(q[k].marked, k == 3) << "marked above 700 B of backlog";
    EXPECT_EQ(q[k].psn, k);
    EXPECT_EQ(q[k].bytes, 306u);
    EXPECT_EQ(q[k].src, 1u);
    EXPECT_EQ(q[k].dst, 0u);
    EXPECT_EQ(q[k].type, PktType::Data);
  }
  EXPECT_TRUE(plain.sim.link_samples(plain.link).empty());
  EXPECT_EQ(watched.sim.digest(), plain.sim.digest());
  ASSERT_EQ(watched.sink->rx.size(), plain.sink->rx.size());
  for (size_t k = 0; k < plain.sink->rx.size(); ++k) {
    EXPECT_EQ(watched.sink->rx[k].t, plain.sink->rx[k].t);
    EXPECT_EQ(watched.sink->rx[k].flags, plain.sink->rx[k].flags);
  }
}

TEST(Link, AWatchedQueueCountsRandomLossAndDrawsNothingMore) {
  sim::LinkParams p;
  p.loss = 0.2;
  p.ecn_bytes = 0;
  const int n = 2000;
  LinkRig plain(p, n, 64, 5, 100 * kNs), watched(p, n, 64, 5, 100 * kNs);  // paced: no queueing
  watched.sim.watch_link(watched.link);
  plain.sim.run();
  watched.sim.run();
  const auto& q = watched.sim.link_samples(watched.link);
  ASSERT_EQ(q.size(), static_cast<size_t>(n));
  size_t lost = 0;
  for (size_t k = 0; k < q.size(); ++k) {
    lost += q[k].fate == sim::QueueSample::kLost;
    EXPECT_EQ(q[k].t, static_cast<Time>(k) * 100 * kNs);
    EXPECT_EQ(q[k].backlog, 0);
  }
  EXPECT_EQ(lost, watched.sim.link(watched.link).st.drop_loss);
  EXPECT_EQ(lost, plain.sim.link(plain.link).st.drop_loss) << "the same random draws";
  EXPECT_EQ(watched.sink->rx.size(), n - lost);
  EXPECT_EQ(watched.sim.digest(), plain.sim.digest());
  EXPECT_THROW(watched.sim.watch_link(99), std::out_of_range);
}

TEST(Link, AWatchedQueueRecordsItsWindowOnly) {
  sim::LinkParams p;
  p.ecn_bytes = 0;
  LinkRig rig(p, 40, 64, 1, 100 * kNs);  // one packet every 100 ns from 0
  rig.sim.watch_link(rig.link, 1 * kUs, 2 * kUs);
  rig.sim.run();
  const auto& q = rig.sim.link_samples(rig.link);
  ASSERT_EQ(q.size(), 10u);
  for (size_t k = 0; k < q.size(); ++k) EXPECT_EQ(q[k].psn, 10 + k);
  EXPECT_EQ(rig.sink->rx.size(), 40u);
  EXPECT_THROW(rig.sim.watch_link(rig.link, 5, 5), std::invalid_argument);
  EXPECT_THROW(rig.sim.watch_link(rig.link), std::logic_error) << "not once the run has started";
}

// A link watched before the nodes are split keeps its samples when both its
// ends fall in one partition (a link inside a partition takes the fast path).
TEST(Link, AWatchedQueueInsideAPartitionStillRecords) {
  sim::Simulator sim(1, 64);
  auto sink = std::make_unique<Sink>();
  Sink* at = sink.get();
  sim.add_node(std::move(sink), true);                      // 0
  sim.add_node(std::make_unique<Source>(0, 5, 64), false);  // 1 -> 0
  sim.add_node(std::make_unique<Sink>(), true);             // 2: another partition
  sim::LinkParams p;
  const uint32_t watched = sim.connect(1, 0, p, p);
  sim.connect(0, 2, p, p);
  sim.build_routes();
  sim.watch_link(watched);
  sim.set_partitions({0, 0, 1});
  sim.run();
  EXPECT_EQ(at->rx.size(), 5u);
  EXPECT_EQ(sim.link_samples(watched).size(), 5u);
}

TEST(Engine, TimersFireInOrderAndTiesByInsertion) {
  struct T final : Node {
    void on_start(Time, Effects& fx) override {
      fx.set_timer(30, 3);
      fx.set_timer(10, 1);
      fx.set_timer(30, 4);
      fx.set_timer(20, 2);
    }
    void on_packet(Packet* p, Time, Effects& fx) override { fx.free(p); }
    void on_timer(uint64_t tok, Time now, Effects&) override { fired.emplace_back(now, tok); }
    std::vector<std::pair<Time, uint64_t>> fired;
  };
  sim::Simulator s(1, 64);
  auto t = std::make_unique<T>();
  T* tp = t.get();
  s.add_node(std::move(t), false);
  s.run(25);
  EXPECT_EQ(tp->fired.size(), 2u);
  EXPECT_FALSE(s.idle());
  s.run();
  EXPECT_TRUE(s.idle());
  const std::vector<std::pair<Time, uint64_t>> want = {{10, 1}, {20, 2}, {30, 3}, {30, 4}};
  EXPECT_EQ(tp->fired, want);
}

// Every packet takes at least 1 ps on a link (the engine's order of
// deliveries rests on it): a frame of 0 bytes is refused.
TEST(Engine, AMinimumFrameOfZeroBytesIsRefused) {
  EXPECT_THROW(sim::Simulator(1, 64, 0, 0), std::invalid_argument);
  EXPECT_NO_THROW(sim::Simulator(1, 64, 0, 1));
}

// Deliveries that fall on one picosecond go in their keys' order (by
// receiving node) even when one of them sets a timer for that picosecond:
// the timer runs after its node's deliveries and before the next node's.
// The switch (node 0) sends one packet to each host at once, so all four
// arrive together; each host answers on its idle uplink (a re-key while
// the four are delivered), and the answers reach the switch together.
// Catches: the same-time deliveries run past the timer (1, 2, 3, 4, then
// host 2's timer), or a tree left stale by them (an answer delivered late,
// out of order, or never).
TEST(Engine, SameTimeDeliveriesYieldToATimerSetForNow) {
  struct Sw final : Node {
    void on_start(Time, Effects& fx) override {
      for (NodeId h = 1; h <= 4; ++h) {
        Packet* p = fx.alloc();
        p->h.dst = h;
        p->h.psn = h;
        fx.send(p);
      }
    }
    void on_packet(Packet* p, Time, Effects& fx) override { fx.free(p); }
    void on_timer(uint64_t, Time, Effects&) override {}
  };
  struct Host final : Node {
    void on_packet(Packet* p, Time now, Effects& fx) override {
      if (id() == 2) fx.set_timer(now, 7);
      p->h.dst = 0;
      p->h.src = id();
      p->h.psn = 10 + id();
      fx.send(p);
    }
    void on_timer(uint64_t, Time, Effects&) override {}
  };
  sim::Simulator s(1, 64);
  s.add_node(std::make_unique<Sw>(), true);
  for (int h = 1; h <= 4; ++h) s.add_node(std::make_unique<Host>(), false);
  sim::LinkParams lp;
  lp.gbps = 100;
  lp.delay = 1000;
  for (NodeId h = 1; h <= 4; ++h) s.connect(h, 0, lp, lp);
  s.build_routes();
  std::vector<sim::TraceRecord> trace;
  s.set_trace(&trace);
  s.run();
  const Time t1 = 1000 + 5120;  // 64 B at 100 Gbit/s, then the delay
  const Time t2 = 2 * t1;
  struct Ev {
    Time t;
    NodeId node;
    bool timer;
    uint32_t psn;
    bool operator==(const Ev&) const = default;
  };
  std::vector<Ev> got;
  for (const auto& r : trace) got.push_back({r.t, r.node, r.timer, r.timer ? 0u : r.psn});
  const std::vector<Ev> want = {{t1, 1, false, 1},  {t1, 2, false, 2},  {t1, 2, true, 0},   {t1, 3, false, 3},
                                {t1, 4, false, 4},  {t2, 0, false, 11}, {t2, 0, false, 12}, {t2, 0, false, 13},
                                {t2, 0, false, 14}};
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i], want[i]) << "event " << i << ": t " << got[i].t << " node " << got[i].node << " timer "
                               << got[i].timer << " psn " << got[i].psn;
  EXPECT_EQ(s.packets_in_use(), 0u);
}

// ---------------------------------------------------------------- multicast tree

// A switch that multicasts one result packet per group at start (the root)
// and re-multicasts any multicast packet it receives (inner switches).
class McastSwitch final : public Node {
 public:
  explicit McastSwitch(std::vector<uint16_t> groups = {}) : groups_(std::move(groups)) {}
  void on_start(Time, Effects& fx) override {
    for (uint16_t g : groups_) {
      Packet* p = fx.alloc();
      p->h.type = PktType::Ack;
      p->h.job = g;
      p->h.psn = 100 + g;
      p->h.dst = kMulticast;
      p->h.count = 3;
      for (int k = 0; k < 3; ++k) p->payload()[k] = 7 * g + k;
      ASSERT_TRUE(fx.multicast(p));
    }
  }
  void on_packet(Packet* p, Time, Effects& fx) override {
    if (p->h.dst == kMulticast) {
      ++relayed;
      ASSERT_TRUE(fx.multicast(p));
    } else {
      fx.send(p);
    }
  }
  void on_timer(uint64_t, Time, Effects&) override {}
  int relayed = 0;

 private:
  std::vector<uint16_t> groups_;
};

class McastHost final : public Node {
 public:
  void on_packet(Packet* p, Time, Effects& fx) override {
    got.push_back({p->h.job, p->h.psn, p->h.dst, std::vector<int32_t>(p->payload(), p->payload() + p->h.count)});
    fx.free(p);
  }
  void on_timer(uint64_t, Time, Effects&) override {}
  struct Rx {
    uint16_t job;
    uint32_t psn;
    NodeId dst;
    std::vector<int32_t> v;
  };
  std::vector<Rx> got;
};

// Root R (0) with inner switches A (1) and B (2); hosts 3, 4, 8 under A,
// 5, 6 under B, 7 directly under R; the root multicasts one packet for each
// of `groups` at start.
struct McastTree {
  explicit McastTree(std::vector<uint16_t> groups) {
    auto root = std::make_unique<McastSwitch>(std::move(groups));
    auto a = std::make_unique<McastSwitch>();
    auto b = std::make_unique<McastSwitch>();
    ap = a.get();
    bp = b.get();
    s.add_node(std::move(root), true);
    s.add_node(std::move(a), true);
    s.add_node(std::move(b), true);
    for (NodeId h = 3; h <= 8; ++h) {
      auto n = std::make_unique<McastHost>();
      hosts[h] = n.get();
      s.add_node(std::move(n), false);
    }
    sim::LinkParams lp;
    ra = s.connect(0, 1, lp, lp);
    rb = s.connect(0, 2, lp, lp);
    for (NodeId h : {3, 4, 8}) down[h] = s.connect(h, 1, lp, lp) + 1;
    for (NodeId h : {5, 6}) down[h] = s.connect(h, 2, lp, lp) + 1;
    down[7] = s.connect(7, 0, lp, lp) + 1;
    s.build_routes();
  }
  sim::Simulator s{1, 64};
  McastSwitch *ap = nullptr, *bp = nullptr;
  std::vector<McastHost*> hosts = std::vector<McastHost*>(9, nullptr);
  uint32_t ra = 0, rb = 0;              // root -> A, root -> B
  std::vector<uint32_t> down = std::vector<uint32_t>(9);  // switch -> host link of each host
};

// Group 1 = {7, 3, 5, 4, 6} (in that rank order), group 2 = {3, 5}. Host 8
// is in no group.
// Catches: the root sending one copy per member instead of one per branch,
// a member missed or served twice, copies to non-members or to branches
// without members, or a wrong member mask handed down the tree.
TEST(Multicast, OneCopyPerBranchAndExactlyOnePerMember) {
  McastTree t({1, 2});
  auto& s = t.s;
  auto& hosts = t.hosts;
  auto& down = t.down;
  const uint32_t ra = t.ra, rb = t.rb;
  McastSwitch* ap = t.ap;
  McastSwitch* bp = t.bp;
  s.set_multicast_group(1, {7, 3, 5, 4, 6});
  s.set_multicast_group(2, {3, 5});
  s.run();
  ASSERT_TRUE(s.idle());
  EXPECT_EQ(s.link(ra).st.packets, 2u) << "one copy per group on the R -> A branch";
  EXPECT_EQ(s.link(rb).st.packets, 2u);
  EXPECT_EQ(s.link(down[7]).st.packets, 1u);
  EXPECT_EQ(s.link(down[3]).st.packets, 2u);
  EXPECT_EQ(s.link(down[4]).st.packets, 1u);
  EXPECT_EQ(s.link(down[5]).st.packets, 2u);
  EXPECT_EQ(s.link(down[6]).st.packets, 1u);
  EXPECT_EQ(s.link(down[8]).st.packets, 0u) << "host 8 is in no group";
  EXPECT_EQ(ap->relayed, 2);
  EXPECT_EQ(bp->relayed, 2);
  auto jobs_of = [&](NodeId h) {
    std::vector<uint16_t> j;
    for (const auto& r : hosts[h]->got) {
      EXPECT_EQ(r.dst, h) << "the last hop is a unicast copy for that member";
      EXPECT_EQ(r.psn, 100u + r.job);
      EXPECT_EQ(r.v, (std::vector<int32_t>{7 * r.job, 7 * r.job + 1, 7 * r.job + 2}));
      j.push_back(r.job);
    }
    std::sort(j.begin(), j.end());
    return j;
  };
  EXPECT_EQ(jobs_of(3), (std::vector<uint16_t>{1, 2}));
  EXPECT_EQ(jobs_of(4), (std::vector<uint16_t>{1}));
  EXPECT_EQ(jobs_of(5), (std::vector<uint16_t>{1, 2}));
  EXPECT_EQ(jobs_of(6), (std::vector<uint16_t>{1}));
  EXPECT_EQ(jobs_of(7), (std::vector<uint16_t>{1}));
  EXPECT_TRUE(hosts[8]->got.empty());
  EXPECT_EQ(s.packets_in_use(), 0u);
  EXPECT_EQ(s.misrouted(), 0u);
}

// The same tree; group 1 multicast once as {7, 3, 5, 4, 6}, then its members
// changed to {7, 3, 5, 8, 6} (host 8 takes rank 3 from host 4) and multicast
// again. Catches: a switch's multicast split kept from the first membership
// (the same member count and ranks under A, so only the members differ).
TEST(Multicast, ANewMembershipIsServedNotTheSplitOfTheOldOne) {
  McastTree t({1});
  auto& s = t.s;
  auto& hosts = t.hosts;
  s.set_multicast_group(1, {7, 3, 5, 4, 6});
  s.run();
  s.set_multicast_group(1, {7, 3, 5, 8, 6});
  s.call(0, s.now() + 1 * kUs, [](Effects& fx) {
    Packet* p = fx.alloc();
    p->h.type = PktType::Ack;
    p->h.job = 1;
    p->h.psn = 200;
    p->h.dst = kMulticast;
    p->h.count = 1;
    p->payload()[0] = 9;
    ASSERT_TRUE(fx.multicast(p));
  });
  s.run();
  ASSERT_TRUE(s.idle());
  auto psns = [&](NodeId h) {
    std::vector<uint32_t> v;
    for (const auto& r : hosts[h]->got) v.push_back(r.psn);
    return v;
  };
  EXPECT_EQ(psns(4), (std::vector<uint32_t>{101})) << "host 4 left the group";
  EXPECT_EQ(psns(8), (std::vector<uint32_t>{200})) << "host 8 joined it";
  for (NodeId h : {3, 5, 6, 7}) EXPECT_EQ(psns(h), (std::vector<uint32_t>{101, 200})) << "host " << h;
  EXPECT_EQ(s.packets_in_use(), 0u);
}

// ---------------------------------------------------------------- unicast copies

// Sends one packet's copies at start: send_copies(p, to).
class CopySender final : public Node {
 public:
  explicit CopySender(std::vector<NodeId> to) : to_(std::move(to)) {}
  void on_start(Time, Effects& fx) override {
    if (to_.empty()) return;
    Packet* p = fx.alloc();
    p->h.type = PktType::Ack;
    p->h.job = 9;
    p->h.psn = 41;
    p->h.count = 3;
    for (int k = 0; k < 3; ++k) p->payload()[k] = 10 + k;
    fx.send_copies(p, to_);
  }
  void on_packet(Packet* p, Time, Effects& fx) override { fx.send(p); }  // (a transit switch)
  void on_timer(uint64_t, Time, Effects&) override {}

 private:
  std::vector<NodeId> to_;
};

// Records, in one log shared by every host, who got what when.
class CopyHost final : public Node {
 public:
  struct Rx {
    Time t;
    NodeId at, dst;
    uint32_t psn;
    std::vector<int32_t> v;
  };
  explicit CopyHost(std::vector<Rx>& log) : log_(log) {}
  void on_packet(Packet* p, Time now, Effects& fx) override {
    log_.push_back({now, id(), p->h.dst, p->h.psn, std::vector<int32_t>(p->payload(), p->payload() + p->h.count)});
    fx.free(p);
  }
  void on_timer(uint64_t, Time, Effects&) override {}

 private:
  std::vector<Rx>& log_;
};

// Switch S (0) sends copies to hosts 3, 4 and 2 (to = {2, 3, 4}) through
// switch T (1), all over the one link S -> T, so their arrival order is
// their send order. Catches: the simulator's one-pass copies sending in
// another order than the contract's (to[1], to[2], ..., then the original
// to to[0]) or than the alloc()/send() path's, a copy without the values,
// a copy to the wrong node, a packet leaked.
TEST(SendCopies, InTheContractsOrderWithTheValuesAndNothingLeaked) {
  sim::Simulator s{1, 64};
  std::vector<CopyHost::Rx> log;
  s.add_node(std::make_unique<CopySender>(std::vector<NodeId>{2, 3, 4}), true);
  s.add_node(std::make_unique<CopySender>(std::vector<NodeId>{}), true);  // T: forwards only
  for (int h = 0; h < 3; ++h) s.add_node(std::make_unique<CopyHost>(log), false);
  sim::LinkParams lp;
  s.connect(0, 1, lp, lp);
  for (NodeId h : {2, 3, 4}) s.connect(h, 1, lp, lp);
  s.build_routes();
  s.run();
  ASSERT_EQ(log.size(), 3u);
  const NodeId order[] = {3, 4, 2};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(log[i].at, order[i]) << i;
    EXPECT_EQ(log[i].dst, order[i]) << i;
    EXPECT_EQ(log[i].psn, 41u);
    EXPECT_EQ(log[i].v, (std::vector<int32_t>{10, 11, 12}));
    if (i) {
      EXPECT_LT(log[i - 1].t, log[i].t);  // one after another on S -> T
    }
  }
  EXPECT_EQ(s.packets_in_use(), 0u);

  // The contract's own path (alloc() and send() per copy) in the same order.
  struct Recorder final : Effects {
    PacketPool pool{64};
    std::vector<std::pair<NodeId, std::vector<int32_t>>> sent;
    Packet* alloc() override { return pool.get(); }
    void send(Packet* p) override {
      sent.push_back({p->h.dst, std::vector<int32_t>(p->payload(), p->payload() + p->h.count)});
      pool.put(p);
    }
    void free(Packet* p) override { pool.put(p); }
    void set_timer(Time, uint64_t) override {}
  } fx;
  CopySender(std::vector<NodeId>{2, 3, 4}).on_start(0, fx);
  ASSERT_EQ(fx.sent.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(fx.sent[i].first, order[i]) << i;
    EXPECT_EQ(fx.sent[i].second, (std::vector<int32_t>{10, 11, 12}));
  }
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

// ---------------------------------------------------------------- run_point

exp::Settings small_settings() {
  exp::Settings s;
  s.jobs = 2;
  s.workers_per_job = 4;
  s.hosts = 8;
  s.partition_mb = 0.05;
  s.max_sim_ms = 2000;
  return s;
}

class RunPoint : public ::testing::TestWithParam<std::string> {};

TEST_P(RunPoint, OkVerifiedAndReproducible) {
  const exp::Settings s = small_settings();
  const std::string scheme = GetParam();
  const exp::RunOutput a = exp::run_point(s, scheme, 5);
  EXPECT_TRUE(a.ok) << a.problems;
  EXPECT_EQ(a.metrics.at("verify_errors"), 0);
  EXPECT_EQ(a.metrics.at("unfinished_workers"), 0);
  EXPECT_GT(a.metrics.at("verified_values"), 0);
  EXPECT_EQ(a.metrics.at("ps_entries_left"), 0);
  EXPECT_EQ(a.metrics.at("packets_leaked"), 0);
  EXPECT_GT(a.metrics.at("avg_jct_ms"), 0);
  // Each of 8 workers verified 4 partitions of 0.05 MiB.
  const double values = 4.0 * std::llround(0.05 * (1 << 20) / 4);
  EXPECT_EQ(a.metrics.at("verified_values"), 8 * values);
  const exp::RunOutput b = exp::run_point(s, scheme, 5);
  EXPECT_EQ(a.digest, b.digest);
  EXPECT_EQ(a.metrics.at("events"), b.metrics.at("events"));
  EXPECT_EQ(a.metrics.at("avg_jct_ms"), b.metrics.at("avg_jct_ms"));
}

INSTANTIATE_TEST_SUITE_P(Schemes, RunPoint, ::testing::Values("switchml", "atp", "dsa", "dsa-join", "dsa-always", "dsa-coin"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// DSA §VII-C counts task types per LOST packet: each task packet a link's
// loss drops is charged to the type its task ended with. One job with ample
// memory (64 MiB: no two in-flight tasks share an aggregator) never
// preempts, so every lost packet belongs to a type-1 task; two jobs on
// scarce memory preempt, and lost packets of won and lost tasks appear.
TEST(RunPoint, LostPacketsAreChargedToTheirTaskType) {
  exp::Settings s = small_settings();
  s.jobs = 1;
  s.memory_mb = 64;
  s.worker_loss = 0.02;
  const exp::RunOutput one = exp::run_point(s, "dsa", 5);
  ASSERT_TRUE(one.ok) << one.problems;
  EXPECT_GT(one.metrics.at("lost_type1"), 0);
  EXPECT_EQ(one.metrics.at("lost_type2"), 0);
  EXPECT_EQ(one.metrics.at("lost_type3"), 0);
  EXPECT_EQ(one.metrics.at("lost_untracked"), 0);
  EXPECT_EQ(one.metrics.at("tasks_type2") + one.metrics.at("tasks_type3"), 0);
  s.jobs = 2;
  s.memory_mb = 0.01;  // 40 aggregators for 2 jobs: collisions and preemptions
  const exp::RunOutput two = exp::run_point(s, "dsa", 5);
  ASSERT_TRUE(two.ok) << two.problems;
  EXPECT_GT(two.metrics.at("tasks_type2") + two.metrics.at("tasks_type3"), 0);
  EXPECT_GT(two.metrics.at("lost_type2") + two.metrics.at("lost_type3"), 0);
  // Schemes that do not track tasks report no such metric.
  EXPECT_EQ(exp::run_point(s, "atp", 5).metrics.count("lost_type1"), 0u);
}

// DSA §VII-A: "The packet size of ATP and DSA is 306 B, and that of SwitchML
// is 180 B." With switch.packets = "per-scheme", SwitchML's packets carry 32
// values (128 B + 52 B of headers), so a 0.05 MiB partition (13107 values)
// takes ceil(13107 / 32) = 410 packets instead of ceil(13107 / 64) = 205;
// ATP and DSA keep 306 B and their runs are unchanged, event for event.
TEST(RunPoint, PerSchemePacketsFollowTheirPapers) {
  exp::Settings s = small_settings();  // 2 jobs x 4 workers, 4 partitions of 0.05 MiB
  const exp::RunOutput uniform = exp::run_point(s, "switchml", 5);
  s.packets = "per-scheme";
  const exp::RunOutput own = exp::run_point(s, "switchml", 5);
  ASSERT_TRUE(own.ok) << own.problems;
  EXPECT_EQ(uniform.metrics.at("switch_completions"), 2 * 4 * 205);
  EXPECT_EQ(own.metrics.at("switch_completions"), 2 * 4 * 410);
  EXPECT_EQ(own.metrics.at("verify_errors"), 0);
  for (const char* scheme : {"atp", "dsa"}) {
    exp::Settings t = small_settings();
    const exp::RunOutput a = exp::run_point(t, scheme, 5);
    t.packets = "per-scheme";
    const exp::RunOutput b = exp::run_point(t, scheme, 5);
    EXPECT_EQ(a.digest, b.digest) << scheme;
    EXPECT_EQ(a.metrics.at("avg_jct_ms"), b.metrics.at("avg_jct_ms")) << scheme;
  }
  // The registry holds the sizes (one name, one place).
  EXPECT_EQ(schemes::find("switchml").paper_payload_bytes + schemes::find("switchml").paper_header_bytes, 180);
  EXPECT_EQ(schemes::find("atp").paper_payload_bytes + schemes::find("atp").paper_header_bytes, 306);
  EXPECT_EQ(schemes::find("dsa").paper_payload_bytes + schemes::find("dsa").paper_header_bytes, 306);
}

TEST(RunPointLossy, DsaUnderLossIsOkAndSeedMatters) {
  exp::Settings s = small_settings();
  s.loss = 0.01;
  s.memory_mb = 0.01;  // ~39 aggregators: collisions and preemptions
  const exp::RunOutput a = exp::run_point(s, "dsa", 3);
  EXPECT_TRUE(a.ok) << a.problems;
  EXPECT_EQ(a.metrics.at("verify_errors"), 0);
  EXPECT_GT(a.metrics.at("retransmits"), 0);
  const exp::RunOutput b = exp::run_point(s, "dsa", 4);
  EXPECT_TRUE(b.ok) << b.problems;
  EXPECT_NE(a.digest, b.digest);
}

}  // namespace
}  // namespace ina::test
