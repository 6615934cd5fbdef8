// DSA's switch program driven directly: preemption, downgrading, fetches,
// retransmissions, and the split-task join (scheme dsa-join).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cluster_fixture.hpp"
#include "schemes/registry.hpp"
#include "switch_rig.hpp"

namespace ina::test {
namespace {

// ---- DSA

TEST(DsaSwitch, HigherPriorityEvictsPartialToItsPs) {
  FakeEffects fx;
  auto sw = make_sw("dsa", 1);  // one aggregator: every task collides
  add_shared_jobs(*sw);
  const auto g0 = ramp(64, -100, 3), g1 = ramp(64, 5, -2);
  sw->on_packet(make_data(fx, 1, 5, 0, 3, 1, g0, 10), 0, fx);
  sw->on_packet(make_data(fx, 1, 5, 1, 3, 2, g1, 10), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  EXPECT_EQ(sw->occupied_by(1), 1u);
  // Job 2, higher priority and a shorter packet: takes the aggregator.
  const auto h0 = ramp(10, 1000), h1 = ramp(10, -7, 11);
  sw->on_packet(make_data(fx, 2, 7, 0, 2, 4, h0, 500), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  const Sent& ev = out[0];
  EXPECT_EQ(ev.h.type, PktType::Data);
  EXPECT_EQ(ev.h.dst, kPs1) << "the evicted partial goes to its own job's PS";
  EXPECT_TRUE(ev.h.has(flag::kPartial));
  EXPECT_TRUE(ev.h.has(flag::kEvicted));
  EXPECT_FALSE(ev.h.has(flag::kResend));
  EXPECT_EQ(ev.h.job, 1);
  EXPECT_EQ(ev.h.psn, 5u);
  EXPECT_EQ(ev.h.bitmap, 0b011u);
  EXPECT_EQ(ev.h.priority, 10u);
  EXPECT_EQ(ev.v, add(g0, g1));
  EXPECT_EQ(sw->occupied_by(1), 0u);
  EXPECT_EQ(sw->occupied_by(2), 1u);
  // Job 2 completes in the switch with only its own values.
  sw->on_packet(make_data(fx, 2, 7, 1, 2, 5, h1, 500), 0, fx);
  expect_multicast(fx.take(), kJob2, 2, 7, add(h0, h1));
  EXPECT_EQ(sw->occupied(), 0u);
  const auto& st = sw->stats();
  EXPECT_EQ(st.preempt_won, 1u);
  EXPECT_EQ(st.resubmits, 1u);
  EXPECT_EQ(st.preempt_lost, 0u);
  EXPECT_EQ(st.completed, 1u);
  EXPECT_EQ(st.to_ps, 1u);
  const auto t = sw->task_types();
  EXPECT_EQ(t[1], 1u);  // job 2 psn 7 won
  EXPECT_EQ(t[2], 1u);  // job 1 psn 5 lost
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(DsaSwitch, LowerPriorityGoesToPsAndHalvesAggregatorPriority) {
  FakeEffects fx;
  auto sw = make_sw("dsa", 1);
  add_shared_jobs(*sw);
  const auto g0 = ramp(64, 1);
  sw->on_packet(make_data(fx, 1, 3, 0, 3, 1, g0, 100), 0, fx);
  const auto h = ramp(64, -50);
  sw->on_packet(make_data(fx, 2, 9, 0, 2, 4, h, 10), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs2);
  EXPECT_EQ(out[0].h.job, 2);
  EXPECT_EQ(out[0].h.psn, 9u);
  EXPECT_TRUE(out[0].h.has(flag::kCollision));
  EXPECT_FALSE(out[0].h.has(flag::kEvicted));
  EXPECT_EQ(out[0].h.bitmap, 0b01u);
  EXPECT_EQ(out[0].v, h);
  EXPECT_EQ(sw->stats().preempt_lost, 1u);
  EXPECT_EQ(sw->stats().downgrades, 1u);
  // Priority is now 50: 49 still loses (and halves it to 25), 30 then wins.
  sw->on_packet(make_data(fx, 2, 11, 0, 2, 4, h, 49), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].h.has(flag::kCollision));
  EXPECT_EQ(sw->stats().downgrades, 2u);
  EXPECT_EQ(sw->occupied_by(1), 1u);
  sw->on_packet(make_data(fx, 2, 13, 0, 2, 4, h, 30), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].h.has(flag::kEvicted));
  EXPECT_EQ(out[0].h.job, 1);
  EXPECT_EQ(out[0].h.psn, 3u);
  EXPECT_EQ(out[0].h.priority, 25u) << "the evicted aggregator carried the downgraded priority";
  EXPECT_EQ(out[0].v, g0);
  EXPECT_EQ(sw->occupied_by(2), 1u);
  EXPECT_EQ(sw->stats().preempt_won, 1u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(DsaSwitch, DuplicateBitIsNotAddedTwice) {
  FakeEffects fx;
  auto sw = make_sw("dsa", 4);
  add_shared_jobs(*sw);
  const auto g0 = ramp(20, 1), g1 = ramp(20, 100), g2 = ramp(20, -1000, 7);
  sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, g0), 0, fx);
  sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, g0), 0, fx);                  // duplicate
  sw->on_packet(make_data(fx, 1, 0, 0, 3, 1, g0, 0, flag::kResend), 0, fx);  // retransmission
  sw->on_packet(make_data(fx, 1, 0, 1, 3, 2, g1), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  sw->on_packet(make_data(fx, 1, 0, 1, 3, 2, g1), 0, fx);  // duplicate
  EXPECT_TRUE(fx.sent.empty());
  sw->on_packet(make_data(fx, 1, 0, 2, 3, 3, g2), 0, fx);
  expect_multicast(fx.take(), kJob1, 1, 0, add(add(g0, g1), g2));
  EXPECT_EQ(sw->stats().duplicates, 3u);
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(DsaSwitch, CompletionMulticastsToEveryWorkerAndFrees) {
  FakeEffects fx;
  auto sw = make_sw("dsa", 4);
  add_shared_jobs(*sw);
  for (uint32_t psn : {0u, 1u, 2u, 3u, 4u, 5u}) {
    const auto g0 = ramp(64, static_cast<int32_t>(psn)), g1 = ramp(64, -3, 2), g2 = ramp(64, 9, -5);
    sw->on_packet(make_data(fx, 1, psn, 2, 3, 3, g2), 0, fx);
    sw->on_packet(make_data(fx, 1, psn, 0, 3, 1, g0), 0, fx);
    EXPECT_EQ(sw->occupied(), 1u);
    sw->on_packet(make_data(fx, 1, psn, 1, 3, 2, g1), 0, fx);
    expect_multicast(fx.take(), kJob1, 1, psn, add(add(g0, g1), g2));
    EXPECT_EQ(sw->occupied(), 0u);
  }
  EXPECT_EQ(sw->stats().completed, 6u);
  EXPECT_EQ(sw->stats().to_ps, 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(DsaSwitch, FetchReturnsPartialAndFrees) {
  FakeEffects fx;
  auto sw = make_sw("dsa", 1);
  add_shared_jobs(*sw);
  const auto g1 = ramp(33, 17, -3);
  sw->on_packet(make_data(fx, 1, 8, 1, 3, 2, g1), 0, fx);
  auto fetch = [&](uint32_t psn) {
    Packet* f = fx.alloc();
    f->h.type = PktType::Fetch;
    f->h.job = 1;
    f->h.psn = psn;
    f->h.src = kPs1;
    f->h.dst = kSw;
    f->h.nworkers = 3;
    sw->on_packet(f, 0, fx);
  };
  fetch(9);  // not held
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::FetchReply);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(out[0].h.bitmap, 0u);
  EXPECT_EQ(out[0].h.count, 0u);
  EXPECT_EQ(sw->occupied(), 1u);
  fetch(8);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::FetchReply);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(out[0].h.job, 1);
  EXPECT_EQ(out[0].h.psn, 8u);
  EXPECT_EQ(out[0].h.bitmap, 0b010u);
  EXPECT_TRUE(out[0].h.has(flag::kPartial));
  EXPECT_EQ(out[0].v, g1);
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(sw->stats().fetches, 2u);
  EXPECT_EQ(sw->stats().fetch_hits, 1u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(DsaSwitch, RetransmissionNeverReservesOrPreempts) {
  FakeEffects fx;
  auto sw = make_sw("dsa", 1);
  add_shared_jobs(*sw);
  const auto g = ramp(64, 3);
  sw->on_packet(make_data(fx, 1, 4, 0, 3, 1, g, 1000, flag::kResend), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(out[0].v, g);
  EXPECT_EQ(sw->occupied(), 0u) << "a retransmission reserved a free aggregator";
  // Nor does it preempt, whatever its priority, nor downgrade the holder.
  sw->on_packet(make_data(fx, 2, 6, 0, 2, 4, g, 1), 0, fx);
  EXPECT_EQ(sw->occupied_by(2), 1u);
  sw->on_packet(make_data(fx, 1, 4, 0, 3, 1, g, 1000, flag::kResend), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, kPs1);
  EXPECT_EQ(out[0].h.job, 1);
  EXPECT_EQ(sw->occupied_by(2), 1u);
  EXPECT_EQ(sw->stats().preempt_won, 0u);
  EXPECT_EQ(sw->stats().downgrades, 0u);
  // A retransmission joins its own task.
  sw->on_packet(make_data(fx, 2, 6, 1, 2, 5, g, 1, flag::kResend), 0, fx);
  expect_multicast(fx.take(), kJob2, 2, 6, add(g, g));
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(DsaSwitch, PsAckPassingByReleasesStalePartial) {
  FakeEffects fx;
  auto sw = make_sw("dsa", 1);
  add_shared_jobs(*sw);
  sw->on_packet(make_data(fx, 1, 2, 0, 3, 1, ramp(64, 0)), 0, fx);
  sw->on_packet(ps_result(fx, 1, 2, kPs1, 3, ramp(64, 0, 3)), 0, fx);
  expect_multicast(fx.take(), kJob1, 1, 2, ramp(64, 0, 3));
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

// dsa-join's flush: one Data packet to `ps` carrying the switch's half (ranks `bitmap`, values `v`).
void expect_flush(const std::vector<Sent>& out, NodeId ps, uint64_t bitmap, const std::vector<int32_t>& v) {
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.dst, ps);
  EXPECT_EQ(out[0].h.bitmap, bitmap);
  EXPECT_EQ(out[0].v, v);
}

// Split tasks. Job 1's task (psn 5) is evicted with rank
// 0's value; job 2's task completes and frees the aggregator; then job 1's
// ranks 1 and 2 arrive and take the free aggregator. The paper's DSA keeps
// them there: the task is split between the PS (rank 0) and the switch
// (ranks 1, 2) until the PS's timeout fetches it. dsa-join (ours) knows that
// rank 0 is at the PS, so when rank 2 arrives the halves cover the job and
// the switch sends its half (ranks 1, 2) to the PS at once.
TEST(DsaJoin, AnEvictedTaskJoinsAtThePsOnItsLastPacket) {
  const auto g0 = ramp(64, 1), g1 = ramp(64, 2), g2 = ramp(64, 3), h = ramp(64, 9);
  for (const std::string scheme : {"dsa", "dsa-join"}) {
    SCOPED_TRACE(scheme);
    FakeEffects fx;
    auto sw = make_sw(scheme, 1);
    add_shared_jobs(*sw);
    sw->on_packet(make_data(fx, 1, 5, 0, 3, 1, g0, 10), 0, fx);
    sw->on_packet(make_data(fx, 2, 7, 0, 2, 4, h, 500), 0, fx);  // evicts job 1's partial (rank 0)
    sw->on_packet(make_data(fx, 2, 7, 1, 2, 5, h, 500), 0, fx);  // job 2 completes: the aggregator is free
    EXPECT_EQ(fx.take().size(), 1u + kJob2.size());             // the evicted partial, the multicast result
    sw->on_packet(make_data(fx, 1, 5, 1, 3, 2, g1, 10), 0, fx);
    EXPECT_TRUE(fx.take().empty());
    EXPECT_EQ(sw->occupied_by(1), 1u);  // both: rank 1 reserves (ranks 0 and 1 do not cover the job)
    sw->on_packet(make_data(fx, 1, 5, 2, 3, 3, g2, 10), 0, fx);
    const auto out = fx.take();
    if (scheme == "dsa") {
      EXPECT_TRUE(out.empty());
      EXPECT_EQ(sw->occupied_by(1), 1u) << "the paper's switch holds its half until the PS fetches it";
      EXPECT_EQ(sw->stats().split_joins, 0u);
    } else {
      expect_flush(out, kPs1, 0b110u, add(g1, g2));
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].h.job, 1);
      EXPECT_EQ(out[0].h.psn, 5u);
      EXPECT_EQ(out[0].h.rank, 1u);
      EXPECT_EQ(out[0].h.src, kSw);
      EXPECT_TRUE(out[0].h.has(flag::kPartial));
      EXPECT_EQ(sw->occupied(), 0u);
      EXPECT_EQ(sw->stats().split_joins, 1u);
    }
    EXPECT_EQ(sw->stats().resubmits, 1u) << "the eviction's second pass writes the register too";
    EXPECT_EQ(sw->stats().completed, 1u);
    EXPECT_EQ(fx.pool.in_use(), 0u);
  }
}

// A first packet that loses the compare goes to the PS; once the holder has
// completed, the loser's next packet finds the aggregator free. For a job of
// two workers that packet and the PS's rank cover the job: dsa-join sends it
// on at once; the paper's DSA reserves the aggregator with it and waits.
TEST(DsaJoin, ATaskThatLostTheCompareJoinsAtThePs) {
  for (const std::string scheme : {"dsa", "dsa-join"}) {
    SCOPED_TRACE(scheme);
    FakeEffects fx;
    auto sw = make_sw(scheme, 1);
    add_shared_jobs(*sw);
    const auto g = ramp(64, 4), k = ramp(64, -8);
    sw->on_packet(make_data(fx, 1, 3, 0, 3, 1, g, 100), 0, fx);
    sw->on_packet(make_data(fx, 2, 9, 0, 2, 4, g, 10), 0, fx);  // loses: to PS 2
    sw->on_packet(make_data(fx, 1, 3, 1, 3, 2, g, 100), 0, fx);
    sw->on_packet(make_data(fx, 1, 3, 2, 3, 3, g, 100), 0, fx);  // job 1 completes
    EXPECT_EQ(fx.take().size(), 1u + kJob1.size());
    sw->on_packet(make_data(fx, 2, 9, 1, 2, 5, k, 10), 0, fx);
    const auto out = fx.take();
    if (scheme == "dsa") {
      EXPECT_TRUE(out.empty());
      EXPECT_EQ(sw->occupied_by(2), 1u);
    } else {
      expect_flush(out, kPs2, 0b10u, k);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].h.psn, 9u);
      EXPECT_EQ(sw->occupied(), 0u);
      EXPECT_EQ(sw->stats().split_joins, 1u);
    }
    // The lost compare's register write costs dsa-join a second pass.
    EXPECT_EQ(sw->stats().resubmits, scheme == "dsa" ? 0u : 1u);
    EXPECT_EQ(fx.pool.in_use(), 0u);
  }
}

// A PS's fetch (its timeout) takes a partial out of the aggregator: the
// fetched ranks are at the PS. When the task's remaining packets take the
// aggregator again, dsa-join flushes them on the last one; the paper's DSA
// holds them until the next fetch.
TEST(DsaJoin, AFetchedPartialJoinsAtThePsOnTheLastPacket) {
  const auto g0 = ramp(64, 1), g1 = ramp(64, 2), g2 = ramp(64, 3);
  for (const std::string scheme : {"dsa", "dsa-join"}) {
    SCOPED_TRACE(scheme);
    FakeEffects fx;
    auto sw = make_sw(scheme, 1);
    add_shared_jobs(*sw);
    sw->on_packet(make_data(fx, 1, 5, 0, 3, 1, g0, 10), 0, fx);
    Packet* f = fx.alloc();
    f->h.type = PktType::Fetch;
    f->h.job = 1;
    f->h.psn = 5;
    f->h.src = kPs1;
    f->h.dst = kSw;
    f->h.nworkers = 3;
    sw->on_packet(f, 0, fx);
    auto out = fx.take();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].h.type, PktType::FetchReply);
    EXPECT_EQ(out[0].h.bitmap, 0b001u);
    sw->on_packet(make_data(fx, 1, 5, 1, 3, 2, g1, 10), 0, fx);
    sw->on_packet(make_data(fx, 1, 5, 2, 3, 3, g2, 10), 0, fx);
    out = fx.take();
    if (scheme == "dsa") {
      EXPECT_TRUE(out.empty());
      EXPECT_EQ(sw->occupied_by(1), 1u);
    } else {
      expect_flush(out, kPs1, 0b110u, add(g1, g2));
      EXPECT_EQ(sw->occupied(), 0u);
    }
    EXPECT_EQ(fx.pool.in_use(), 0u);
  }
}

// While another task holds the aggregator, a task with contributions at the
// PS does not compete for it, however high its priority: the paper's DSA
// lets it evict the holder and splits it again; dsa-join sends it to the PS
// and the holder keeps the aggregator.
TEST(DsaJoin, ARegisteredTaskDoesNotPreemptTheHolder) {
  for (const std::string scheme : {"dsa", "dsa-join"}) {
    SCOPED_TRACE(scheme);
    FakeEffects fx;
    auto sw = make_sw(scheme, 1);
    add_shared_jobs(*sw);
    const auto g = ramp(64, 6);
    sw->on_packet(make_data(fx, 1, 5, 0, 3, 1, g, 10), 0, fx);
    sw->on_packet(make_data(fx, 2, 7, 0, 2, 4, g, 500), 0, fx);  // evicts job 1's rank 0
    EXPECT_EQ(fx.take().size(), 1u);
    sw->on_packet(make_data(fx, 1, 5, 1, 3, 2, g, 1000), 0, fx);
    const auto out = fx.take();
    ASSERT_EQ(out.size(), 1u);
    if (scheme == "dsa") {
      EXPECT_TRUE(out[0].h.has(flag::kEvicted));
      EXPECT_EQ(out[0].h.job, 2);
      EXPECT_EQ(sw->occupied_by(1), 1u);
    } else {
      EXPECT_EQ(out[0].h.dst, kPs1);
      EXPECT_EQ(out[0].h.job, 1);
      EXPECT_EQ(out[0].h.bitmap, 0b010u);
      EXPECT_FALSE(out[0].h.has(flag::kEvicted));
      EXPECT_EQ(sw->occupied_by(2), 1u);
      EXPECT_EQ(sw->stats().preempt_won, 1u);  // only job 2's
    }
    EXPECT_EQ(fx.pool.in_use(), 0u);
  }
}

TEST(DsaSwitch, AlwaysModePreemptsEvenAtLowerPriority) {
  FakeEffects fx;
  auto sw = make_sw("dsa-always", 1);
  add_shared_jobs(*sw);
  sw->on_packet(make_data(fx, 1, 2, 0, 3, 1, ramp(64, 0), 1000), 0, fx);
  sw->on_packet(make_data(fx, 2, 3, 0, 2, 4, ramp(64, 1), 1), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].h.has(flag::kEvicted));
  EXPECT_EQ(out[0].h.job, 1);
  EXPECT_EQ(sw->occupied_by(2), 1u);
}

}  // namespace
}  // namespace ina::test
