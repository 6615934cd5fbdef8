// Job isolation in the sans-I/O nodes, and the contract of the DSA/GRID
// packet swap. Each probe is one forged packet from a member of another job
// (or of the same job, claiming what is not its own): it must change nothing,
// be answered by nothing, and be counted under its reason. Then the victim's
// honest traffic must still produce the exact result.
#include <gtest/gtest.h>

#include <memory>

#include "cluster_fixture.hpp"
#include "dataplane/switch.hpp"
#include "host/ps.hpp"
#include "host/tensor_io.hpp"
#include "host/worker.hpp"

namespace ina::test {
namespace {

constexpr NodeId kSw = 0;
// Job 4: workers 1, 2 (ranks 0, 1), PS 20. Job 99: worker 3, PS 21.
// Job 7: workers 5, 6, 8 (three ranks), PS 22.
constexpr NodeId kPs4 = 20, kPs99 = 21, kPs7 = 22, kIntruder = 3;

std::unique_ptr<dp::SwitchProgram> shared_switch(const std::string& scheme, uint64_t aggregators, uint32_t evict_after = 8) {
  dp::SwitchConfig c;
  c.payload_values = 64;
  c.memory_bytes = aggregators * 256;
  c.grid.evict_after = evict_after;
  auto sw = schemes::find(scheme).make_switch(c);
  sw->set_id(kSw);
  auto add = [&](uint16_t job, std::vector<NodeId> w, NodeId ps) {
    dp::SwitchJob j;
    j.job = job;
    j.workers = std::move(w);
    j.ps = ps;
    j.agg_mask = full_bitmap(static_cast<unsigned>(j.workers.size()));
    sw->add_job(j);
  };
  add(4, {1, 2}, kPs4);
  add(99, {kIntruder}, kPs99);
  add(7, {5, 6, 8}, kPs7);
  return sw;
}

Packet* make(FakeEffects& fx, PktType t, uint16_t job, uint32_t psn, NodeId src, NodeId dst, uint8_t rank,
             uint8_t nworkers, uint64_t bitmap, const std::vector<int32_t>& vals = {}, uint16_t flags = 0) {
  Packet* p = make_data(fx, job, psn, rank, nworkers, src, vals, 0, flags, dst);
  p->h.type = t;
  p->h.bitmap = bitmap;
  return p;
}

// ---- swap_with: the evicted partial is the victim's, whole

TEST(SwapWith, EvictedPartialCarriesTheVictimsWorkerCountRankAndTheSwitchAsSource) {
  // Catches the bug where the evicted partial kept the winner's worker count
  // and rank (the victim's PS then refused it as malformed).
  FakeEffects fx;
  auto sw = shared_switch("dsa", 1);  // one aggregator: every task collides
  const auto g0 = ramp(16, 100), g2 = ramp(16, -40, 3), h1 = ramp(16, 7);
  sw->on_packet(make_data(fx, 7, 11, 0, 3, 5, g0, 10), 0, fx);
  sw->on_packet(make_data(fx, 7, 11, 2, 3, 8, g2, 10), 0, fx);
  ASSERT_TRUE(fx.take().empty());
  sw->on_packet(make_data(fx, 4, 2, 1, 2, 2, h1, 500), 0, fx);  // job 4 (2 workers) wins
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  const Header& e = out[0].h;
  EXPECT_EQ(e.type, PktType::Data);
  EXPECT_EQ(e.job, 7);
  EXPECT_EQ(e.psn, 11u);
  EXPECT_EQ(e.nworkers, 3);   // the victim's, not the winner's 2
  EXPECT_EQ(e.rank, 0);       // the lowest contributor of bitmap 0b101
  EXPECT_EQ(e.bitmap, 0b101u);
  EXPECT_EQ(e.src, kSw);      // the switch's packet, not worker 2's
  EXPECT_EQ(e.dst, kPs7);
  EXPECT_EQ(e.priority, 10u);
  EXPECT_EQ(e.flags, flag::kPartial | flag::kEvicted);
  EXPECT_EQ(out[0].v, add(g0, g2));
  EXPECT_EQ(sw->holder_of(4, 2), 0);
  EXPECT_EQ(sw->holder_of(7, 11), -1);

  // The victim's PS takes it as it is: nothing malformed, nothing foreign.
  host::PsConfig pc;
  pc.job = 7;
  pc.workers = {5, 6, 8};
  pc.sw = kSw;
  host::ParameterServer ps(pc);
  ps.set_id(kPs7);
  Packet* p = fx.alloc();
  p->h = e;
  for (size_t k = 0; k < out[0].v.size(); ++k) p->payload()[k] = out[0].v[k];
  ps.on_packet(p, 0, fx);
  EXPECT_EQ(ps.stats().malformed, 0u);
  EXPECT_EQ(ps.stats().foreign, 0u);
  ASSERT_EQ(ps.entries(), 1u);
  EXPECT_EQ(ps.open_entries()[0].bitmap, 0b101u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

TEST(SwapWith, GridEvictionHandsTheVictimJobsOwnHeaderToItsPs) {
  FakeEffects fx;
  auto sw = shared_switch("grid", 1, /*evict_after=*/2);
  sw->on_packet(make_data(fx, 7, 3, 1, 3, 6, ramp(8, 1)), 0, fx);
  sw->on_packet(make_data(fx, 4, 9, 0, 2, 1, ramp(8, 2)), 0, fx);  // collision 1: rate sync
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::RateSync);
  sw->on_packet(make_data(fx, 4, 9, 0, 2, 1, ramp(8, 2)), 0, fx);  // collision 2: evict
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.job, 7);
  EXPECT_EQ(out[0].h.nworkers, 3);
  EXPECT_EQ(out[0].h.rank, 1);
  EXPECT_EQ(out[0].h.bitmap, 0b10u);
  EXPECT_EQ(out[0].h.src, kSw);
  EXPECT_EQ(out[0].h.dst, kPs7);
  EXPECT_EQ(out[0].v, ramp(8, 1));
}

// ---- the switch refuses what a source is not bound to

TEST(SwitchIsolation, ForgedDataFromAnotherJobsMemberIsNotAggregated) {
  // The probe: a member of job 99 sends Data for job 4, rank 1.
  for (auto policy : {"atp", "dsa", "grid"}) {
    SCOPED_TRACE(policy);
    FakeEffects fx;
    auto sw = shared_switch(policy, 64);
    sw->on_packet(make_data(fx, 4, 0, 1, 2, kIntruder, ramp(8, 1000), 1u << 30), 0, fx);
    // Also a member of job 4 claiming the other rank's slot.
    sw->on_packet(make_data(fx, 4, 0, 1, 2, 1, ramp(8, 1000), 1u << 30), 0, fx);
    EXPECT_TRUE(fx.take().empty());
    EXPECT_EQ(sw->stats().foreign_data, 2u);
    EXPECT_EQ(sw->occupied(), 0u);
    EXPECT_EQ(sw->stats().data_in, 0u);
    // Honest traffic still sums exactly.
    const auto g0 = ramp(8, 5), g1 = ramp(8, -3, 2);
    sw->on_packet(make_data(fx, 4, 0, 0, 2, 1, g0), 0, fx);
    sw->on_packet(make_data(fx, 4, 0, 1, 2, 2, g1), 0, fx);
    auto out = fx.take();
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out[0].v, add(g0, g1));
    EXPECT_EQ(fx.pool.in_use(), 0u);
  }
}

TEST(SwitchIsolation, ForgedResultAckIsNotMulticastAndFreesNothing) {
  FakeEffects fx;
  auto sw = shared_switch("atp", 64);
  sw->on_packet(make_data(fx, 4, 6, 0, 2, 1, ramp(8, 1)), 0, fx);  // job 4 holds an aggregator
  ASSERT_EQ(sw->occupied_by(4), 1u);
  // A member of job 99 forges job 4's result, and so does job 4's own worker.
  for (NodeId from : {kIntruder, NodeId{2}}) {
    sw->on_packet(make(fx, PktType::Ack, 4, 6, from, kMulticast, 0, 2, 0b11, ramp(8, 0), flag::kResult), 0, fx);
  }
  EXPECT_TRUE(fx.take().empty());
  EXPECT_EQ(sw->stats().foreign_ack, 2u);
  EXPECT_EQ(sw->stats().acks_multicast, 0u);
  EXPECT_EQ(sw->occupied_by(4), 1u);
  // The real PS's Ack frees it and reaches both workers.
  sw->on_packet(make(fx, PktType::Ack, 4, 6, kPs4, kMulticast, 0, 2, 0b11, ramp(8, 9), flag::kResult), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].h.dst, 2);  // unicast copies: rank 1 first, rank 0 last
  EXPECT_EQ(out[1].h.dst, 1);
  EXPECT_EQ(sw->occupied_by(4), 0u);
}

TEST(SwitchIsolation, ForgedFetchGetsNoPartialAndFreesNothing) {
  FakeEffects fx;
  auto sw = shared_switch("dsa", 64);
  sw->on_packet(make_data(fx, 4, 10, 0, 2, 1, ramp(8, 42)), 0, fx);
  sw->on_packet(make(fx, PktType::Fetch, 4, 10, kIntruder, kSw, 0, 2, 0), 0, fx);
  sw->on_packet(make(fx, PktType::Fetch, 4, 10, kPs99, kSw, 0, 2, 0), 0, fx);  // another job's PS
  EXPECT_TRUE(fx.take().empty());
  EXPECT_EQ(sw->stats().foreign_fetch, 2u);
  EXPECT_EQ(sw->stats().fetches, 0u);
  EXPECT_EQ(sw->occupied_by(4), 1u);
  sw->on_packet(make(fx, PktType::Fetch, 4, 10, kPs4, kSw, 0, 2, 0), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::FetchReply);
  EXPECT_EQ(out[0].h.dst, kPs4);
  EXPECT_EQ(out[0].v, ramp(8, 42));
  EXPECT_EQ(sw->occupied_by(4), 0u);
}

TEST(SwitchIsolation, ForwardsOnlyBetweenMembersOfTheSameJob) {
  FakeEffects fx;
  auto sw = shared_switch("dsa", 64);
  // Job 99's member addresses job 4's PS in job 4's name; job 4's worker
  // addresses job 99's PS; a GradRequest in job 4's name to job 4's worker.
  sw->on_packet(make(fx, PktType::Data, 4, 1, kIntruder, kPs4, 0, 2, 1, ramp(4, 1), flag::kToPs), 0, fx);
  sw->on_packet(make(fx, PktType::Data, 4, 1, 1, kPs99, 0, 2, 1, ramp(4, 1), flag::kToPs), 0, fx);
  sw->on_packet(make(fx, PktType::GradRequest, 4, 1, kIntruder, 1, 0, 2, 0), 0, fx);
  EXPECT_TRUE(fx.take().empty());
  EXPECT_EQ(sw->stats().foreign_forward, 3u);
  sw->on_packet(make(fx, PktType::GradRequest, 4, 1, kPs4, 1, 0, 2, 0), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, 1);
  EXPECT_EQ(sw->stats().forwarded, 1u);
}

// ---- the PS and the workers

TEST(PsIsolation, AcceptsOnlyItsSwitchAndTheWorkerOfTheClaimedRank) {
  FakeEffects fx;
  host::PsConfig pc;
  pc.job = 4;
  pc.workers = {1, 2};
  pc.sw = kSw;
  host::ParameterServer ps(pc);
  ps.set_id(kPs4);
  // Worker 2 claims rank 0; worker 1 claims both bits; a worker sends a FetchReply.
  ps.on_packet(make(fx, PktType::Data, 4, 3, 2, kPs4, 0, 2, 0b01, ramp(4, 1), flag::kToPs), 0, fx);
  ps.on_packet(make(fx, PktType::Data, 4, 3, 1, kPs4, 0, 2, 0b11, ramp(4, 1), flag::kToPs), 0, fx);
  ps.on_packet(make(fx, PktType::FetchReply, 4, 3, 1, kPs4, 0, 2, 0b01, ramp(4, 1), flag::kPartial), 0, fx);
  ps.on_packet(make(fx, PktType::Reminder, 4, 3, kIntruder, kPs4, 0, 2, 0b01), 0, fx);
  EXPECT_EQ(ps.stats().foreign, 4u);
  EXPECT_EQ(ps.stats().malformed, 0u);
  EXPECT_EQ(ps.entries(), 0u);
  EXPECT_TRUE(fx.take().empty());
  // Honest: rank 1's own gradient, and the switch's partial of rank 0.
  ps.on_packet(make(fx, PktType::Data, 4, 3, 2, kPs4, 1, 2, 0b10, ramp(4, 10), flag::kToPs), 0, fx);
  ps.on_packet(make(fx, PktType::Data, 4, 3, kSw, kPs4, 0, 2, 0b01, ramp(4, 1), flag::kPartial), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::Ack);
  EXPECT_EQ(out[0].v, add(ramp(4, 10), ramp(4, 1)));
  EXPECT_EQ(ps.stats().foreign, 4u);
}

TEST(WorkerIsolation, ResultsOnlyFromItsSwitchOrPsRequestsOnlyFromItsPs) {
  FakeEffects fx;
  host::WorkerConfig wc;
  wc.job = 4;
  wc.rank = 0;
  wc.nworkers = 2;
  wc.self = 1;
  wc.aggregator = kSw;
  wc.ps = kPs4;
  host::WorkerTransport w(wc);
  auto t = std::make_shared<host::VectorTensor>(ramp(8, 3));
  w.submit(t, 8);
  w.pump(0, fx);
  ASSERT_EQ(fx.take().size(), 1u);
  // A forged result from worker 2 (same job) and a GradRequest from job 99's PS.
  w.on_packet(make(fx, PktType::Ack, 4, 0, 2, 1, 0, 2, 0b11, ramp(8, 0), flag::kResult), 0, fx);
  w.on_packet(make(fx, PktType::GradRequest, 4, 0, kPs99, 1, 0, 2, 0), 0, fx);
  EXPECT_EQ(w.stats().foreign, 2u);
  EXPECT_TRUE(fx.take().empty());
  EXPECT_TRUE(w.busy());
  EXPECT_EQ(t->result, std::vector<int32_t>(8, 0));
  w.on_packet(make(fx, PktType::Ack, 4, 0, kSw, 1, 0, 2, 0b11, ramp(8, 77), flag::kResult), kMs, fx);
  EXPECT_FALSE(w.busy());
  EXPECT_EQ(t->result, ramp(8, 77));
}

}  // namespace
}  // namespace ina::test
