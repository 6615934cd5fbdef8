// Zebra's hot values in a shared pool beside dense jobs (ours):
// dp::ZebraConfig::kv_pool on the ATP and DSA programs.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "dataplane/zebra_layout.hpp"
#include "schemes/registry.hpp"
#include "wire/kv.hpp"
#include "fake_effects.hpp"

using namespace ina;
namespace z = ina::dp::zebra;

namespace {

constexpr uint16_t kValues = 64;

// A pool program with `aggregators` aggregators of 64 values and kv_pool;
// sparse job 1 (worker node 1, PS 3, CPU 4), dense job 2 (workers 5 and 6, PS 7).
std::unique_ptr<dp::SwitchProgram> pool_switch(const std::string& scheme, uint32_t aggregators) {
  dp::SwitchConfig cfg;
  cfg.payload_values = kValues;
  cfg.memory_bytes = 4ull * kValues * aggregators;
  cfg.zebra.kv_pool = true;
  auto sw = schemes::find(scheme).make_switch(cfg);
  sw->set_id(0);
  dp::SwitchJob s;
  s.job = 1;
  s.workers = {1};
  s.ps = 3;
  s.zebra.cpu = 4;
  sw->add_job(s);
  dp::SwitchJob d;
  d.job = 2;
  d.workers = {5, 6};
  d.ps = 7;
  sw->add_job(d);
  return sw;
}

dp::SparseTable table(size_t keys, uint32_t registers) {
  std::vector<uint64_t> ranked(keys);
  std::iota(ranked.begin(), ranked.end(), 0);
  auto hot = std::make_shared<const z::HotSet>(z::HotSet::from_ranked(std::move(ranked), 1));
  auto lay = std::make_shared<const z::Layout>(z::Layout::make(keys, registers, z::Placement::Heat, 1));
  return {0, hot, lay};
}

// Dense job 2's gradient packet: rank 0 (node 5), task psn, a high priority.
Packet* dense(test::FakeEffects& fx, uint32_t psn) {
  Packet* p = fx.alloc();
  p->h = Header{};
  p->h.type = PktType::Data;
  p->h.job = 2;
  p->h.psn = psn;
  p->h.src = 5;
  p->h.dst = 0;
  p->h.rank = 0;
  p->h.nworkers = 2;
  p->h.bitmap = 1;
  p->h.count = kValues;
  p->h.priority = 1u << 30;
  for (uint16_t i = 0; i < kValues; ++i) p->payload()[i] = 1000 + i;
  return p;
}

}  // namespace

// Every aggregator of the pool pinned by the sparse job's table: each dense
// packet maps to a pinned one. ATP sends it to the PS (first come, first
// served); DSA sends it to the PS without a compare, although its priority
// is far above the pinned row's (0): no preemption, no downgrade. The sparse
// iteration that follows reads back its exact sums from the pool's lanes.
TEST(ZebraPool, DensePacketsOnPinnedAggregatorsGoToThePsAndTheHotSumsStayExact) {
  for (const char* scheme : {"atp", "dsa"}) {
    SCOPED_TRACE(scheme);
    test::FakeEffects fx(kValues);
    auto sw = pool_switch(scheme, 2);
    sw->set_sparse_table(1, table(128, kValues));  // 128 keys over 64 lanes: 2 rows, the whole pool
    ASSERT_EQ(sw->pinned(), 2u);
    ASSERT_EQ(sw->occupied(), 2u);
    for (uint32_t psn = 0; psn < 10; ++psn) sw->on_packet(dense(fx, psn), 0, fx);
    const auto& st = sw->stats();
    EXPECT_EQ(st.pinned_hits, 10u);
    EXPECT_EQ(st.to_ps, 10u);
    EXPECT_EQ(st.preempt_won, 0u);
    EXPECT_EQ(st.downgrades, 0u);
    ASSERT_EQ(fx.sent.size(), 10u);
    for (const test::Sent& p : fx.sent) {
      EXPECT_EQ(p.h.dst, 7);
      EXPECT_EQ(p.h.job, 2);
      EXPECT_TRUE(p.h.has(flag::kCollision));
      EXPECT_EQ(p.v.at(5), 1005);  // its own gradient, not a pinned row's values
    }
    fx.take();
    EXPECT_EQ(sw->pinned(), 2u);
    // The sparse job's worker may not send dense gradients.
    Packet* own = dense(fx, 0);
    own->h.job = 1;
    own->h.src = 1;
    own->h.nworkers = 1;
    sw->on_packet(own, 0, fx);
    EXPECT_EQ(st.malformed, 1u);
    EXPECT_TRUE(fx.sent.empty());
    // One worker's iteration 0: keys 3 (lane 3, row 0), 64 (lane 0, row 1), 70 (lane 6, row 1).
    Packet* p = fx.alloc();
    p->h = Header{};
    p->h.type = PktType::KvData;
    p->h.job = 1;
    p->h.src = 1;
    p->h.dst = 0;
    p->h.nworkers = 1;
    p->h.flags = flag::kLast;
    kv::init(*p, 3, 1);
    kv::set(*p, 0, 3, 5);
    kv::set(*p, 1, 64, -7);
    kv::set(*p, 2, 70, 11);
    p->payload()[1] = 1;  // the hot stream's packet count
    sw->on_packet(p, 0, fx);
    // The sweep's result packets, one per pass time: each pass fires at the
    // earliest timer the switch set since the last one fired.
    size_t seen = 0;
    auto earliest_new_timer = [&] {
      Time t = kNever;
      for (; seen < fx.timers.size(); ++seen) t = std::min(t, fx.timers[seen].first);
      return t;
    };
    Time t = earliest_new_timer();
    ASSERT_NE(t, kNever);
    for (; t != kNever; t = earliest_new_timer()) sw->on_timer(0, t, fx);
    // The sweep reads K = 9 indices per pass: index 3 in the first packet, 64
    // and 70 in the eighth; the results go to the job's PS (node 3).
    std::vector<std::pair<uint64_t, int32_t>> got;
    for (const test::Sent& s : fx.sent)
      if (s.h.type == PktType::KvResult && s.h.dst == 3) {
        const auto q = s.packet();
        for (unsigned i = 0; i < kv::pairs(*q); ++i) got.emplace_back(kv::key(*q, i), kv::value(*q, i));
      }
    EXPECT_EQ(got, (std::vector<std::pair<uint64_t, int32_t>>{{3, 5}, {64, -7}, {70, 11}}));
    EXPECT_EQ(st.kv_aggregated, 3u);
    fx.take();
    // The receipts of a result: the PS's (receiver 0) goes to the CPU (node
    // 4); the worker's is refused, it is not the receiver on this route.
    for (const NodeId from : {NodeId{3}, NodeId{1}}) {
      Packet* a = fx.alloc();
      a->h = Header{};
      a->h.type = PktType::KvAck;
      a->h.flags = flag::kResult;
      a->h.job = 1;
      a->h.src = from;
      a->h.dst = 0;
      a->h.nworkers = 1;
      sw->on_packet(a, 0, fx);
    }
    ASSERT_EQ(fx.sent.size(), 1u);
    EXPECT_EQ(fx.sent[0].h.dst, 4);
    EXPECT_EQ(fx.sent[0].h.src, 3);
    EXPECT_EQ(st.foreign_data, 1u);
    fx.take();
    // The sparse job's PS cannot free a pinned row with a Fetch or a result Ack
    // naming its key (job 1, the first row's PSN): refused, the row stays.
    for (const PktType t : {PktType::Fetch, PktType::Ack}) {
      Packet* q = fx.alloc();
      q->h = Header{};
      q->h.type = t;
      q->h.job = 1;
      q->h.src = 3;
      q->h.dst = t == PktType::Fetch ? 0 : kMulticast;
      q->h.psn = 0xFFFF0000u;
      q->h.nworkers = 1;
      sw->on_packet(q, 0, fx);
    }
    EXPECT_EQ(st.malformed, 3u);
    EXPECT_EQ(sw->pinned(), 2u);
    EXPECT_TRUE(fx.sent.empty());
    // The sweep cleared the lanes: only the reservation is left, and leaving frees it.
    EXPECT_EQ(sw->occupied(), 2u);
    EXPECT_EQ(sw->remove_job(1), 2u);
    EXPECT_EQ(sw->occupied(), 0u);
    EXPECT_EQ(sw->pinned(), 0u);
    EXPECT_EQ(fx.live(), 0u);
    EXPECT_TRUE(fx.violations().empty()) << fx.violations().front();
  }
}

// A table is pinned from free aggregators only: a dense task in flight keeps
// its aggregator; a table that does not fit is refused naming the numbers and
// pins nothing; a layout that is not one register per lane is refused.
TEST(ZebraPool, TablesPinFreeAggregatorsOnlyAndARefusedTablePinsNothing) {
  for (const char* scheme : {"atp", "dsa"}) {
    SCOPED_TRACE(scheme);
    test::FakeEffects fx(kValues);
    auto sw = pool_switch(scheme, 4);
    sw->on_packet(dense(fx, 0), 0, fx);  // rank 0 of 2: the task reserves an aggregator and waits
    ASSERT_TRUE(fx.sent.empty());
    const int64_t held = sw->holder_of(2, 0);
    ASSERT_GE(held, 0);
    try {
      sw->set_sparse_table(1, table(256, kValues));  // 4 rows, 3 free
      ADD_FAILURE() << "a table larger than the free pool was installed";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("needs 4 aggregators"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("3 of the pool's 4 are free"), std::string::npos) << e.what();
    }
    EXPECT_EQ(sw->pinned(), 0u);
    EXPECT_EQ(sw->occupied(), 1u);
    try {
      sw->set_sparse_table(1, table(128, 16));
      ADD_FAILURE() << "a 16-register layout was installed in a pool of 64-lane aggregators";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("64 value lanes"), std::string::npos) << e.what();
    }
    EXPECT_EQ(sw->occupied(), 1u);  // still only the dense task
    sw->set_sparse_table(1, table(192, kValues));  // 3 rows: exactly the free ones
    EXPECT_EQ(sw->pinned(), 3u);
    EXPECT_EQ(sw->holder_of(2, 0), held);
    // The dense task completes where it was: its second rank's packet joins it.
    Packet* second = dense(fx, 0);
    second->h.src = 6;
    second->h.rank = 1;
    second->h.bitmap = 2;
    sw->on_packet(second, 0, fx);
    EXPECT_EQ(sw->stats().completed, 1u);
    // ATP hands the aggregate to the PS; DSA multicasts it to both workers.
    ASSERT_EQ(fx.sent.size(), std::string(scheme) == "dsa" ? 2u : 1u);
    EXPECT_EQ(fx.sent[0].v.at(0), 2000);  // both ranks' 1000
    fx.take();
    EXPECT_EQ(sw->remove_job(1), 3u);
    EXPECT_EQ(sw->pinned(), 0u);
  }
}

// kv_pool is for shared pools: every other program (the zebra program has
// registers of its own; SwitchML's regions, GRID's routing and Rina's ToR
// have no pool to pin from) is refused by the registry, and a program
// without a sparse pipeline refuses a table.
TEST(ZebraPool, OnlyPoolProgramsTakeKvPool) {
  dp::SwitchConfig cfg;
  cfg.zebra.kv_pool = true;
  for (const auto& s : schemes::all()) {
    if (!s.factory) continue;
    if (s.hosts_sparse) EXPECT_TRUE(s.make_switch(cfg)->runs_sparse()) << s.name;
    else EXPECT_THROW(s.make_switch(cfg), std::invalid_argument) << s.name;
  }
  cfg.zebra.kv_pool = false;
  auto atp = schemes::find("atp").make_switch(cfg);
  dp::SwitchJob j;
  j.job = 1;
  j.workers = {1};
  j.ps = 3;
  atp->add_job(j);
  EXPECT_THROW(atp->set_sparse_table(1, table(64, kValues)), std::invalid_argument);
  std::vector<std::string> hosts;
  for (const auto& s : schemes::all())
    if (s.hosts_sparse) hosts.push_back(s.name);
  EXPECT_EQ(hosts, (std::vector<std::string>{"atp", "dsa"}));
}
