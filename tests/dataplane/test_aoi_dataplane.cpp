// P4INC-AOI's data plane (dataplane/aoi.cpp, the segment addressing of
// host/worker.hpp, exp::run_aoi_unit): the switch program driven packet by
// packet, the workers' index choice, runs on the star with targeted faults
// and random loss, and the scenario's segment errors.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "cluster_fixture.hpp"
#include "experiment/aoi_unit.hpp"
#include "experiment/runner.hpp"
#include "experiment/scenario.hpp"

namespace ina {
namespace {

using test::Cluster;
using test::ClusterConfig;
using test::DropNth;
using test::FakeEffects;
using test::make_data;
using test::ramp;

constexpr uint16_t kW = 4;  // values per packet in the unit tests

// A p4inc-aoi switch of 16 aggregators with job 1 (workers 11, 12) in segment [4, 8).
std::unique_ptr<dp::SwitchProgram> unit_switch() {
  dp::SwitchConfig cfg;
  cfg.payload_values = kW;
  cfg.memory_bytes = 16 * 4 * kW;
  auto sw = schemes::find("aoi").make_switch(cfg);
  sw->set_id(0);
  dp::SwitchJob j;
  j.job = 1;
  j.workers = {11, 12};
  j.region_offset = 4;
  j.region_size = 4;
  sw->add_job(j);
  return sw;
}

Packet* data_at(FakeEffects& fx, uint32_t psn, uint8_t rank, uint32_t index, const std::vector<int32_t>& v,
                uint16_t flags = 0) {
  Packet* p = make_data(fx, 1, psn, rank, 2, static_cast<NodeId>(11 + rank), v, 0, flags);
  p->h.agg_index = index;
  return p;
}

TEST(AoiSwitch, AggregatesInTheNamedIndexMulticastsAndFrees) {
  FakeEffects fx;
  auto sw = unit_switch();
  sw->on_packet(data_at(fx, 0, 0, 6, ramp(kW, 10)), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  EXPECT_EQ(sw->occupied(), 1u);
  EXPECT_EQ(sw->holder_of(1, 0), 6);  // the worker's index, no hashing at the switch
  sw->on_packet(data_at(fx, 0, 1, 6, ramp(kW, 100)), 0, fx);
  const auto out = fx.take();
  ASSERT_EQ(out.size(), 2u);  // one copy per worker (FakeEffects has no multicast tree)
  std::set<NodeId> to;
  for (const auto& s : out) {
    EXPECT_EQ(s.h.type, PktType::Ack);
    EXPECT_TRUE(s.h.has(flag::kResult));
    EXPECT_EQ(s.v, (std::vector<int32_t>{110, 112, 114, 116}));
    to.insert(s.h.dst);
  }
  EXPECT_EQ(to, (std::set<NodeId>{11, 12}));
  EXPECT_EQ(sw->occupied(), 0u);  // freed at once: no PS, the result lives on in the shadow copy
  EXPECT_EQ(sw->stats().completed, 1u);
}

TEST(AoiSwitch, ShadowCopyAnswersARetransmissionAfterTheAggregatorIsReused) {
  FakeEffects fx;
  auto sw = unit_switch();
  sw->on_packet(data_at(fx, 0, 0, 6, ramp(kW, 10)), 0, fx);
  sw->on_packet(data_at(fx, 0, 1, 6, ramp(kW, 100)), 0, fx);
  fx.take();
  // Rank 1 lost the result; meanwhile rank 0 starts fragment 9 in the same aggregator.
  sw->on_packet(data_at(fx, 9, 0, 6, ramp(kW, 1)), 0, fx);
  EXPECT_EQ(sw->holder_of(1, 9), 6);
  sw->on_packet(data_at(fx, 0, 1, 6, ramp(kW, 100), flag::kResend), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, 12);
  EXPECT_EQ(out[0].h.psn, 0u);
  EXPECT_EQ(out[0].v, (std::vector<int32_t>{110, 112, 114, 116}));
  EXPECT_EQ(sw->stats().resend_served, 1u);
  EXPECT_EQ(sw->holder_of(1, 9), 6);  // fragment 9 untouched
  // Fragment 9 completes; a late copy of fragment 0 is now stale, dropped.
  sw->on_packet(data_at(fx, 9, 1, 6, ramp(kW, 2)), 0, fx);
  EXPECT_EQ(fx.take().size(), 2u);
  sw->on_packet(data_at(fx, 0, 0, 6, ramp(kW, 10), flag::kResend), 0, fx);
  EXPECT_TRUE(fx.take().empty());
  EXPECT_EQ(sw->stats().stale, 1u);
  EXPECT_EQ(sw->stats().resend_served, 1u);
}

TEST(AoiSwitch, GreaterFragmentOnABusyAggregatorIsAnAsynchronousError) {
  FakeEffects fx;
  auto sw = unit_switch();
  sw->on_packet(data_at(fx, 0, 0, 5, ramp(kW, 10)), 0, fx);
  sw->on_packet(data_at(fx, 3, 1, 5, ramp(kW, 1000)), 0, fx);  // fragment 3 while 0 is incomplete
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::RateSync);
  EXPECT_TRUE(out[0].h.has(flag::kEcn));
  EXPECT_EQ(out[0].h.dst, 12);  // the sender of the mismatching id
  EXPECT_EQ(out[0].h.psn, 3u);
  EXPECT_EQ(sw->stats().async_errors, 1u);
  // Fragment 0 is unharmed by the refused packet.
  sw->on_packet(data_at(fx, 0, 1, 5, ramp(kW, 100)), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].v, (std::vector<int32_t>{110, 112, 114, 116}));
}

TEST(AoiSwitch, BehindSenderIsRefusedOnAFreeAggregator) {
  FakeEffects fx;
  auto sw = unit_switch();
  sw->on_packet(data_at(fx, 0, 0, 7, ramp(kW, 10)), 0, fx);
  sw->on_packet(data_at(fx, 0, 1, 7, ramp(kW, 100)), 0, fx);
  fx.take();
  // Rank 0 has not got fragment 0's result yet: its fragment 4 for the same aggregator may not count.
  sw->on_packet(data_at(fx, 4, 0, 7, ramp(kW, 1), flag::kBehind), 0, fx);
  const auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::RateSync);
  EXPECT_EQ(sw->occupied(), 0u);
  EXPECT_EQ(sw->stats().async_errors, 1u);
  // The same packet without kBehind takes the aggregator.
  sw->on_packet(data_at(fx, 4, 0, 7, ramp(kW, 1)), 0, fx);
  EXPECT_EQ(sw->holder_of(1, 4), 7);
}

TEST(AoiSwitch, IndexOutsideTheSegmentIsRefused) {
  FakeEffects fx;
  auto sw = unit_switch();
  for (uint32_t index : {3u, 8u, 1000000u}) sw->on_packet(data_at(fx, 0, 0, index, ramp(kW, 1)), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  EXPECT_EQ(sw->stats().out_of_segment, 3u);
  EXPECT_EQ(sw->stats().malformed, 3u);
  EXPECT_EQ(sw->occupied(), 0u);
  const auto* slots = dp::aoi_slots(*sw);
  ASSERT_NE(slots, nullptr);
  for (const auto& s : *slots) EXPECT_TRUE(s.jobs.empty());
}

TEST(AoiSwitch, SegmentsMustFitAndNotOverlapAndJobsHaveNoPs) {
  auto sw = unit_switch();  // job 1 in [4, 8) of 16
  dp::SwitchJob j;
  j.job = 2;
  j.workers = {21};
  j.region_offset = 7;
  j.region_size = 2;
  EXPECT_THROW(sw->add_job(j), std::invalid_argument);  // overlaps [4, 8)
  j.region_offset = 12;
  j.region_size = 5;
  EXPECT_THROW(sw->add_job(j), std::invalid_argument);  // beyond 16
  j.region_size = 0;
  EXPECT_THROW(sw->add_job(j), std::invalid_argument);  // empty
  j.region_size = 4;
  j.ps = 30;
  EXPECT_THROW(sw->add_job(j), std::invalid_argument);  // full PS offload
  j.ps = kNoNode;
  EXPECT_NO_THROW(sw->add_job(j));
  EXPECT_EQ(dp::aoi_slots(*schemes::find("atp").make_switch({})), nullptr);
}

// ---------------------------------------------------------------- worker

host::WorkerConfig aoi_worker(uint8_t rank, uint32_t mem, uint32_t size) {
  host::WorkerConfig w;
  w.job = 3;
  w.rank = rank;
  w.nworkers = 2;
  w.self = static_cast<NodeId>(10 + rank);
  w.aggregator = 0;
  w.payload_values = kW;
  w.init_window = 1000;
  w.segment_mem_id = mem;
  w.segment_size = size;
  return w;
}

std::vector<uint32_t> indices_sent(uint8_t rank, uint32_t mem, uint32_t size, uint32_t fragments) {
  FakeEffects fx;
  host::WorkerTransport t(aoi_worker(rank, mem, size));
  t.submit(std::make_shared<host::VectorTensor>(std::vector<int32_t>(fragments * kW, 1)), fragments * kW);
  t.pump(0, fx);
  std::vector<uint32_t> idx;
  for (const auto& s : fx.sent) {
    EXPECT_EQ(s.h.psn, idx.size());
    idx.push_back(s.h.agg_index);
  }
  return idx;
}

TEST(AoiWorker, EveryWorkerPicksTheSameIndicesInItsSegmentWithoutRecentCollisions) {
  const uint32_t mem = 100, size = 10, h = size / 2;
  const auto a = indices_sent(0, mem, size, 200), b = indices_sent(1, mem, size, 200);
  ASSERT_EQ(a.size(), 200u);
  EXPECT_EQ(a, b);  // the ranks agree on every aggregator
  std::set<uint32_t> used;
  for (size_t f = 0; f < a.size(); ++f) {
    EXPECT_GE(a[f], mem);
    EXPECT_LT(a[f], mem + size);
    used.insert(a[f]);
    for (size_t g = f + 1; g < std::min(a.size(), f + h); ++g) EXPECT_NE(a[f], a[g]) << f << " " << g;
  }
  EXPECT_EQ(used.size(), size);  // hashed over the whole segment, not a fixed subset
  // Whole run: the hash spreads, it is not fragment id mod Size.
  size_t plain = 0;
  for (size_t f = 0; f < a.size(); ++f) plain += a[f] == mem + f % size;
  EXPECT_LT(plain, a.size() / 2);
}

TEST(AoiWorker, PacketBehindTheAggregatorsLastResultIsMarked) {
  FakeEffects fx;
  host::WorkerTransport t(aoi_worker(0, 0, 1));  // one aggregator: every fragment follows the previous one
  t.submit(std::make_shared<host::VectorTensor>(std::vector<int32_t>(3 * kW, 1)), 3 * kW);
  t.pump(0, fx);
  const auto out = fx.take();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_FALSE(out[0].h.has(flag::kBehind));
  EXPECT_TRUE(out[1].h.has(flag::kBehind));
  EXPECT_TRUE(out[2].h.has(flag::kBehind));
  EXPECT_EQ(t.stats().behind, 2u);
}

TEST(AoiWorker, EcnNotificationHalvesTheWindowAndSetsTheThresholdWithoutResending) {
  FakeEffects fx;
  host::WorkerTransport t(aoi_worker(0, 0, 64));  // threshold H = 32
  EXPECT_EQ(t.threshold(), 32);
  t.submit(std::make_shared<host::VectorTensor>(std::vector<int32_t>(8 * kW, 1)), 8 * kW);
  t.pump(0, fx);
  fx.take();
  const double before = t.cwnd();
  Packet* n = fx.alloc();
  n->h.type = PktType::RateSync;
  n->h.flags = flag::kEcn;
  n->h.job = 3;
  n->h.nworkers = 2;
  n->h.psn = 5;
  n->h.src = 0;
  n->h.dst = 10;
  t.on_packet(n, 1000, fx);
  EXPECT_EQ(t.cwnd(), before / 2);
  EXPECT_EQ(t.threshold(), before / 2);
  EXPECT_EQ(t.stats().ecn_notices, 1u);
  EXPECT_EQ(t.stats().decreases, 1u);
  EXPECT_TRUE(fx.sent.empty());  // the refused packet waits: a retransmission now would meet the same aggregator
}

// The paper's AIMD: the window grows by one per result "until reaching a
// threshold" set from the job's aggregators, bandwidth and RTT, and stops
// there: min(Size / 2, the bandwidth-delay product).
TEST(AoiWorker, TheWindowStopsAtTheThresholdOfSegmentAndBandwidthDelay) {
  for (const double bdp : {0.0, 10.0}) {
    SCOPED_TRACE(bdp);
    host::WorkerConfig cfg = aoi_worker(0, 0, 64);  // Size / 2 = 32
    cfg.init_window = 2;
    cfg.bdp_packets = bdp;
    host::WorkerTransport t(cfg);
    const double want = bdp > 0 ? 10 : 32;
    EXPECT_EQ(t.threshold(), want);
    const uint32_t n = 400;
    t.submit(std::make_shared<host::VectorTensor>(std::vector<int32_t>(n * kW, 1)), n * kW);
    FakeEffects fx;
    t.pump(0, fx);
    double most = 0;
    Time now = 0;
    // Every round trip, the switch's result for each packet sent (both ranks' sum).
    for (auto sent = fx.take(); !sent.empty(); sent = fx.take()) {
      now += 10 * kUs;
      for (const auto& d : sent) {
        Packet* r = fx.alloc();
        r->h = d.h;
        r->h.type = PktType::Ack;
        r->h.flags = flag::kResult;
        r->h.bitmap = 0b11;
        r->h.src = 0;
        r->h.dst = 10;
        std::copy(d.v.begin(), d.v.end(), r->values().begin());
        t.on_packet(r, now, fx);
        most = std::max(most, t.cwnd());
      }
      t.pump(now, fx);
    }
    EXPECT_EQ(t.stats().retransmits, 0u);
    EXPECT_EQ(most, want);  // without the stop: 2 + 400 results' growth, far above it
  }
}

// ---------------------------------------------------------------- star runs

ClusterConfig aoi_cluster(std::vector<int> workers, std::vector<std::vector<uint64_t>> ops) {
  ClusterConfig c;
  c.scheme = "p4inc-aoi";
  c.workers_per_job = std::move(workers);
  c.ops = std::move(ops);
  c.aggregators = 256;
  return c;
}

// Each job touched only aggregators of its segment, and no aggregator was shared.
void expect_segments_respected(const Cluster& cl) {
  const auto* slots = dp::aoi_slots(*cl.sw);
  ASSERT_NE(slots, nullptr);
  const auto& segs = cl.star->segments();
  std::vector<size_t> touched(segs.size(), 0);
  for (size_t i = 0; i < slots->size(); ++i) {
    const auto& js = (*slots)[i].jobs;
    EXPECT_LE(js.size(), 1u) << "aggregator " << i << " shared by jobs";
    for (uint16_t job : js) {
      const auto& s = segs.at(job - 1u);
      EXPECT_GE(i, s.mem_id) << "job " << job;
      EXPECT_LT(i, s.mem_id + s.size) << "job " << job;
      ++touched[job - 1u];
    }
  }
  for (size_t j = 0; j < segs.size(); ++j) EXPECT_GT(touched[j], 0u) << "job " << j + 1 << " never aggregated";
}

TEST(AoiStar, ExactUnderOnePercentLossWithFourJobsInDifferentSegments) {
  auto c = aoi_cluster({2, 4, 8, 16}, {{64 * 300, 1000, 64 * 120 + 7}});
  c.segments = {{0, 16}, {16, 48}, {64, 100}, {200, 56}};  // unequal, with gaps
  c.faults.loss = 0.01;
  Cluster cl(c);
  ASSERT_TRUE(cl.run());
  cl.check_all("1% loss");  // exact results, nothing refused or leaked, occupied() == 0
  expect_segments_respected(cl);
  const auto& st = cl.sw->stats();
  EXPECT_EQ(st.out_of_segment, 0u);
  EXPECT_EQ(st.malformed, 0u);
  uint64_t retx = 0;
  for (const auto& job : cl.workers)
    for (const auto* w : job) retx += w->transport().stats().retransmits;
  EXPECT_GT(retx, 0u);              // losses happened and were recovered
  EXPECT_GT(st.resend_served, 0u);  // lost results came from the shadow copy (there is no PS)
}

// Late copies (duplicated or reordered packets) never start a phase: a copy
// of a fragment that completed meets the shadow copy or is stale, so no
// aggregator is left held even then.
TEST(AoiStar, ExactAndNothingHeldUnderDuplicationReorderingAndLoss) {
  auto c = aoi_cluster({3, 5}, {{64 * 200, 64 * 77 + 3}});
  c.faults.loss = 0.01;
  c.faults.dup = 0.01;
  c.faults.reorder = 0.02;
  Cluster cl(c);
  ASSERT_TRUE(cl.run());
  EXPECT_EQ(cl.sw->occupied(), 0u);  // check_all skips this with late copies; this scheme holds none
  EXPECT_GT(cl.sw->stats().stale + cl.sw->stats().resend_served + cl.sw->stats().duplicates, 0u);
  cl.check_all("dup + reorder + loss");
  expect_segments_respected(cl);
}

TEST(AoiStar, EqualSegmentsByDefault) {
  auto c = aoi_cluster({2, 3, 4}, {{64 * 50}});
  c.aggregators = 100;
  Cluster cl(c);
  const auto& segs = cl.star->segments();
  ASSERT_EQ(segs.size(), 3u);
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(segs[j].mem_id, 33u * j);
    EXPECT_EQ(segs[j].size, 33u);
  }
  ASSERT_TRUE(cl.run());
  cl.check_all("equal segments");
  expect_segments_respected(cl);
}

// A 2-worker job of 40 fragments in one segment of 64 aggregators (H = 32),
// its window inside H (no asynchronous errors); host `host` loses the result
// of fragment `psn`.
ClusterConfig lost_result(NodeId host, uint32_t psn) {
  auto c = aoi_cluster({2}, {{64 * 40}});
  c.aggregators = 64;
  c.init_window = 16;
  c.wrap_host = [host, psn](NodeId id, std::unique_ptr<Node> n) -> std::unique_ptr<Node> {
    if (id != host) return n;
    return std::make_unique<DropNth>(std::move(n),
                                     [psn](const Header& h) { return h.type == PktType::Ack && h.psn == psn; });
  };
  return c;
}

// Worker rank 1 of a 2-worker job loses the result of fragment 10 of 40.
TEST(AoiStar, LostResultIsResentFromTheShadowCopy) {
  Cluster cl(lost_result(2, 10));
  ASSERT_TRUE(cl.run());
  cl.check_all("result 10 lost");
  const auto& w1 = cl.workers[0][1]->transport().stats();
  const auto& w0 = cl.workers[0][0]->transport().stats();
  EXPECT_EQ(cl.sw->stats().resend_served, 1u);
  EXPECT_EQ(w1.retransmits, 1u);
  EXPECT_EQ(w1.fast_retransmits, 1u);  // a greater fragment's result showed the gap: no timeout
  EXPECT_EQ(w1.timeouts, 0u);
  EXPECT_EQ(w0.retransmits, 0u);
  EXPECT_EQ(cl.sw->stats().completed, 40u);
  EXPECT_EQ(cl.sw->stats().async_errors, 0u);
}

// The tail: the last result is lost, no later result shows it, the RTO does.
TEST(AoiStar, LostLastResultIsRecoveredByTheTimeout) {
  Cluster cl(lost_result(1, 39));
  ASSERT_TRUE(cl.run());
  cl.check_all("last result lost");
  const auto& w0 = cl.workers[0][0]->transport().stats();
  EXPECT_EQ(cl.sw->stats().resend_served, 1u);
  EXPECT_EQ(w0.timeouts, 1u);
  EXPECT_EQ(w0.fast_retransmits, 0u);
  EXPECT_EQ(cl.sw->stats().async_errors, 0u);
}

// One aggregator and a window of 2: each worker's second fragment reaches the
// aggregator before it has the first one's result.
TEST(AoiStar, WindowBeyondTheSegmentCausesAsynchronousErrorsAndHalving) {
  auto c = aoi_cluster({2}, {{64 * 2}});
  c.segments = {{5, 1}};
  c.aggregators = 8;
  c.init_window = 2;
  Cluster cl(c);
  ASSERT_TRUE(cl.run());
  cl.check_all("segment of one");
  EXPECT_EQ(cl.sw->stats().async_errors, 2u);  // fragment 1 of each worker
  for (const auto* w : cl.workers[0]) {
    const auto& st = w->transport().stats();
    EXPECT_EQ(st.ecn_notices, 1u);
    EXPECT_EQ(st.decreases, 1u);
    EXPECT_EQ(st.retransmits, 1u);  // fragment 1 again, after its refusal
    EXPECT_LT(w->transport().threshold(), 2);  // the threshold fell to the halved window
  }
  EXPECT_EQ(cl.sw->stats().completed, 2u);
  expect_segments_respected(cl);
}

// ---------------------------------------------------------------- entry point and scenarios

TEST(AoiUnit, FourIncJobsOfOneUnitAreExactAtZeroAndOnePercentLoss) {
  std::vector<exp::AoiUnitJob> jobs;
  const int w[] = {2, 4, 8, 16};
  for (int k = 0; k < 4; ++k) jobs.push_back({static_cast<uint32_t>(101 + k), w[k], 0, 0, 256 * 1024});
  for (double loss : {0.0, 0.01}) {
    exp::AoiUnitOptions o;
    o.loss = loss;
    const auto r = exp::run_aoi_unit(jobs, o);
    SCOPED_TRACE(loss);
    EXPECT_TRUE(r.ok) << r.problems;
    ASSERT_EQ(r.jobs.size(), 4u);
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_EQ(r.jobs[k].job, 101 + k);
      EXPECT_EQ(r.jobs[k].mismatches, 0u);
      EXPECT_EQ(r.jobs[k].values_checked, 65536u * w[k]);
      EXPECT_EQ(r.jobs[k].size, 5120u);  // 5 MiB of 256 B aggregators, split in 4
      EXPECT_EQ(r.jobs[k].mem_id, 5120u * k);
      EXPECT_TRUE(std::isfinite(r.jobs[k].completion_ms));
    }
    EXPECT_EQ(r.occupied_after, 0u);
    EXPECT_EQ(r.outside_segment, 0u);
    EXPECT_EQ(r.refused, 0u);
    if (loss == 0) {
      EXPECT_EQ(r.async_errors, 0u);
      EXPECT_EQ(r.shadow_resends, 0u);
    }
  }
}

// One job alone with the whole aggregator array (Size / 2 = 10 240 packets,
// 3 MB, against a 1 MB switch queue): the threshold is the bandwidth-delay
// product (40 Gbps x 10 us, 164 packets), so nothing overflows, nothing is
// resent and the link runs at its rate after headers (256 of 306 B).
TEST(AoiUnit, OneJobWithTheWholeArrayStaysWithinTheQueue) {
  exp::AoiUnitOptions o;
  o.link_gbps = 40;
  const auto r = exp::run_aoi_unit({{1, 2, 0, 0, 4u << 20}}, o);
  ASSERT_TRUE(r.ok) << r.problems;
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].size, 20480u);
  EXPECT_EQ(r.jobs[0].retransmits, 0u);
  EXPECT_EQ(r.jobs[0].timeouts, 0u);
  // 16 384 packets of 306 B at 40 Gbps take 1.0027 ms: within 1 % of that.
  EXPECT_LT(r.jobs[0].completion_ms, 1.0027 * 1.01);
}

TEST(AoiUnit, BadSegmentsAreRefused) {
  std::vector<exp::AoiUnitJob> jobs = {{1, 2, 0, 100, 4096}, {2, 2, 50, 100, 4096}};
  EXPECT_THROW(exp::run_aoi_unit(jobs), std::invalid_argument);  // overlap
  jobs[1].mem_id = 100;
  jobs[1].size = 0;
  EXPECT_THROW(exp::run_aoi_unit(jobs), std::invalid_argument);  // one given, one not
  jobs[1].size = 30000;
  EXPECT_THROW(exp::run_aoi_unit(jobs), std::invalid_argument);  // beyond 20480 aggregators
}

std::string unit_toml(const std::string& extra) {
  return "[topology]\nkind = \"star\"\nhosts = 64\n[workload]\njobs = 4\njob_workers = \"2,4,8,16\"\n"
         "[run]\nschemes = [\"p4inc-aoi\"]\n" + extra;
}

std::string error_of(const std::string& toml) {
  try {
    exp::parse_scenario(toml, "unit.toml");
  } catch (const exp::ScenarioError& e) {
    return e.what();
  }
  return "";
}

TEST(AoiScenario, SegmentErrorsNameFileFieldAndValue) {
  EXPECT_EQ(error_of(unit_toml("[switch]\nsegments = \"0:100,100:100,200:100,300:100\"\n")), "");
  const std::string overlap = error_of(unit_toml("[switch]\nsegments = \"0:100,50:100,200:100,300:100\"\n"));
  EXPECT_NE(overlap.find("unit.toml"), std::string::npos) << overlap;
  EXPECT_NE(overlap.find("'switch.segments'"), std::string::npos) << overlap;
  EXPECT_NE(overlap.find("job 2's segment [50, 150) overlaps job 1's [0, 100)"), std::string::npos) << overlap;
  EXPECT_NE(overlap.find("0:100,50:100,200:100,300:100"), std::string::npos) << overlap;
  const std::string beyond = error_of(unit_toml("[switch]\nsegments = \"0:100,100:100,200:100,20400:100\"\n"));
  EXPECT_NE(beyond.find("job 4's segment [20400, 20500) lies beyond the 20480 aggregators"), std::string::npos) << beyond;
  EXPECT_NE(error_of(unit_toml("[switch]\nsegments = \"0:100,100:100\"\n")).find("gives 2 segments but workload.jobs is 4"),
            std::string::npos);
  EXPECT_NE(error_of(unit_toml("[switch]\nsegments = \"0:100,100:0,200:1,300:1\"\n")).find("is not MemID:Size"),
            std::string::npos);
  const std::string other = error_of(
      "[workload]\njobs = 2\n[switch]\nsegments = \"0:10,10:10\"\n[run]\nschemes = [\"atp\"]\n");
  EXPECT_NE(other.find("'switch.segments': applies to schemes whose jobs get segments"), std::string::npos) << other;
  const std::string count = error_of(
      "[workload]\njobs = 3\njob_workers = \"2,4\"\n[run]\nschemes = [\"p4inc-aoi\"]\n");
  EXPECT_NE(count.find("'workload.job_workers': gives 2 jobs but workload.jobs is 3"), std::string::npos) << count;
}

TEST(AoiScenario, TheUnitScenariosLoadAndRunExactly) {
  for (const char* f : {"unit_dataplane.toml", "unit_dataplane_loss.toml"}) {
    const auto sc = exp::load_scenario_file(std::string(INA_SOURCE_DIR) + "/scenarios/aoi/" + f);
    ASSERT_EQ(sc.schemes, (std::vector<std::string>{"p4inc-aoi"}));
    const auto pts = exp::expand(sc);
    ASSERT_EQ(pts.size(), 1u);
    const auto out = exp::run_point(pts[0].settings, "p4inc-aoi", sc.seeds.at(0));
    EXPECT_TRUE(out.ok) << f << ": " << out.problems;
    EXPECT_EQ(out.metrics.at("verify_errors"), 0) << f;
    EXPECT_EQ(out.metrics.at("leaked_aggregators"), 0) << f;
    EXPECT_EQ(out.metrics.at("out_of_segment"), 0) << f;
    EXPECT_EQ(out.job_jct_ms.size(), 4u);
  }
}

}  // namespace
}  // namespace ina
