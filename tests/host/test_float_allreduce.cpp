// The float allreduce protocol (host/float_allreduce.hpp): the object alone,
// fed completions by hand, and in the packet simulator through
// host::AllreduceNode over a star (switch, workers, PS).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "float_data.hpp"
#include "resident_set.hpp"
#include "dataplane/switch.hpp"
#include "host/allreduce_node.hpp"
#include "host/float_allreduce.hpp"
#include "host/ps.hpp"
#include "schemes/registry.hpp"
#include "sim/engine.hpp"
#include "cluster/cluster.hpp"

namespace ina {
namespace {

using host::AllreduceQueue;
using host::FloatAllreduce;
using host::FloatAllreduceOptions;
using host::FloatScaleMode;
using host::IntRound;
using host::RoundPlan;
using Status = RoundPlan::Status;

// ---------------------------------------------------------------- helpers

using test::count_differences;
using test::exact_sum;
using test::resident_mb;

// The agreed scale, derived independently of the protocol's code: the
// largest power of two 2^k such that every float below 2^e (e: the global
// maximum's binary exponent, 2^(e-1) <= m < 2^e) times 2^k, rounded, stays
// within INT32_MAX / n.
double expected_scale(const std::vector<std::vector<float>>& xs) {
  double m = 0;
  for (const auto& x : xs)
    for (float v : x) m = std::max(m, std::fabs(static_cast<double>(v)));
  if (m == 0) return 1.0;
  int e = -160;
  while (std::ldexp(1.0, e) <= m) ++e;
  const double bound = std::ldexp(1.0, e) - std::ldexp(1.0, e - 24);  // largest float below 2^e
  const double lim = static_cast<double>(INT32_MAX / static_cast<int64_t>(xs.size()));
  for (int k = 300; k > -300; --k)
    if (bound * std::ldexp(1.0, k) <= lim - 1) return std::ldexp(1.0, k);
  return 0;
}

// ---------------------------------------------------------------- the object alone

// One round of every worker's plan, as a switch would run it: the lanes of all
// workers summed (saturating, like the switch) and written back to each.
// Checks that every worker asked for the same round.
std::vector<Status> exchange(const std::vector<RoundPlan*>& ws) {
  const IntRound& r0 = ws[0]->round();
  std::vector<int64_t> sum(r0.elems, 0);
  std::vector<int32_t> lanes(r0.elems);
  for (auto* w : ws) {
    EXPECT_EQ(w->round().kind, r0.kind);
    EXPECT_EQ(w->round().elems, r0.elems);
    w->round().io->read_gradient(0, lanes);
    for (size_t i = 0; i < lanes.size(); ++i) sum[i] += lanes[i];
  }
  std::vector<int32_t> res(r0.elems);
  for (size_t i = 0; i < res.size(); ++i)
    res[i] = static_cast<int32_t>(std::clamp<int64_t>(sum[i], INT32_MIN, INT32_MAX));
  std::vector<Status> st;
  for (auto* w : ws) {
    w->round().io->write_result(0, res);
    st.push_back(w->on_complete());
  }
  return st;
}

// Runs the workers' plans to the end; returns the kinds of the rounds run.
std::vector<IntRound::Kind> run_all(const std::vector<RoundPlan*>& ws) {
  std::vector<IntRound::Kind> kinds;
  for (auto* w : ws) w->start();
  for (int guard = 0; guard < 10; ++guard) {
    kinds.push_back(ws[0]->round().kind);
    const auto st = exchange(ws);
    for (auto s : st) EXPECT_EQ(s, st[0]) << "workers disagree on the next step";
    if (st[0] != Status::Submit) break;
  }
  return kinds;
}

FloatAllreduceOptions opts(unsigned n, FloatScaleMode mode = FloatScaleMode::Agree, double scale = 0,
                           bool average = false) {
  FloatAllreduceOptions o;
  o.nworkers = n;
  o.job = 7;
  o.mode = mode;
  o.fixed_scale = scale;
  o.average = average;
  return o;
}

using K = IntRound::Kind;

// Catches: a wrong exponent lane (frexp off by one), a scale round that is not
// first or not "more to come", a data round of the wrong size, and an agreed
// scale other than the safe one for the largest exponent.
// By hand: max |x| = 3 -> e = 2; the largest float below 4 is 4 - 2^-22;
// (4 - 2^-22) * 2^28 = 2^30 - 64 <= INT32_MAX / 2 - 1, and * 2^29 is not.
TEST(FloatAllreduceUnit, AgreeRunsAScaleRoundThenAnExactDataRound) {
  std::vector<float> x0 = {3.0f, -1.5f, 0.0f}, x1 = {0.25f, 1.0f, 2.0f};
  FloatAllreduce a(x0, opts(2)), b(x1, opts(2));
  const IntRound& r = a.start();
  b.start();
  EXPECT_EQ(r.kind, K::Scale);
  EXPECT_EQ(r.elems, host::kScaleLanes);
  EXPECT_FALSE(a.last_round());
  std::vector<int32_t> lanes(host::kScaleLanes);
  r.io->read_gradient(0, lanes);
  for (size_t l = 0; l < lanes.size(); ++l)
    EXPECT_EQ(lanes[l], l == static_cast<size_t>(2 - host::kScaleExpMin) ? 1 : 0) << "lane " << l;
  auto st = exchange({&a, &b});
  EXPECT_EQ(st[0], Status::Submit);
  EXPECT_EQ(a.round().kind, K::Data);
  EXPECT_EQ(a.round().elems, 3u);
  EXPECT_TRUE(a.last_round());
  EXPECT_EQ(x0[0], 3.0f) << "the buffer changes only with the result";
  st = exchange({&a, &b});
  EXPECT_EQ(st[0], Status::Done);
  EXPECT_TRUE(a.finished());
  EXPECT_EQ(a.info().scale, std::ldexp(1.0, 28));
  EXPECT_EQ(b.info().scale, a.info().scale);
  EXPECT_FALSE(a.info().retried);
  EXPECT_EQ(x0, (std::vector<float>{3.25f, -0.5f, 2.0f}));
  EXPECT_EQ(x1, x0);
}

// The data round decodes each result packet straight into the caller's
// buffer; int32 sums are kept only for a job whose PS may ask for them.
// By hand (scale 2^28 as above): sums {3.25, -0.5, 2, 0, 1} * 2^28, averages
// half of that. Catches: a result that waits for the op's end (the first
// slice unchanged after its packet), a slice written over before its packet
// (the second slice's gradient must still be the input), an int32 buffer
// allocated without a PS, and a PS answered with the decoded floats (the
// average) instead of the exact int32 sum.
TEST(FloatAllreduceUnit, ResultsLandInTheBufferPacketByPacket) {
  for (const bool keep : {false, true}) {
    SCOPED_TRACE(keep ? "keep_results" : "no PS");
    std::vector<float> x0 = {3.0f, -1.5f, 0.0f, 1.0f, 0.5f}, x1 = {0.25f, 1.0f, 2.0f, -1.0f, 0.5f};
    FloatAllreduceOptions o = opts(2, FloatScaleMode::Agree, 0, true);
    o.keep_results = keep;
    FloatAllreduce a(x0, o), b(x1, o);
    a.start();
    b.start();
    ASSERT_EQ(exchange({&a, &b})[0], Status::Submit);
    ASSERT_EQ(a.round().kind, K::Data);
    const auto iop = a.round().io;  // held as the transport holds it while it retains the op
    auto& io = *iop;
    const auto& store = static_cast<const host::ResultStore&>(io);
    EXPECT_EQ(store.result().size(), keep ? 5u : 0u);
    const std::vector<int32_t> sums = {872415232, -134217728, 536870912, 0, 268435456};
    io.write_result(0, std::span<const int32_t>(sums).first(3));  // the first packet's result
    EXPECT_EQ(x0, (std::vector<float>{1.625f, -0.25f, 1.0f, 1.0f, 0.5f}));
    std::vector<int32_t> grad(2);
    io.read_gradient(3, grad);
    EXPECT_EQ(grad, (std::vector<int32_t>{1 << 28, 1 << 27})) << "the second packet still carries the input";
    io.write_result(3, std::span<const int32_t>(sums).subspan(3));
    EXPECT_EQ(a.on_complete(), Status::Done);
    EXPECT_EQ(x0, (std::vector<float>{1.625f, -0.25f, 1.0f, 0.0f, 0.5f}));
    std::vector<int32_t> back(5);
    if (keep) {
      io.read_result(0, back);
      EXPECT_EQ(back, sums);
    } else {
      EXPECT_THROW(io.read_result(0, back), std::logic_error);
    }
  }
}

// Catches a pool that hands a small request its largest buffer (the next
// large request then allocates and faults in megabytes again) or that, when
// full, drops a large buffer to keep a small one.
TEST(FloatAllreduceUnit, BufferPoolHandsOutTheSmallestBufferThatFits) {
  host::BufferPool pool;
  auto big = pool.get(1 << 20), small = pool.get(279);
  const int32_t* big_at = big.data();
  const int32_t* small_at = small.data();
  pool.put(std::move(small));
  pool.put(std::move(big));
  auto s2 = pool.get(279);
  EXPECT_EQ(s2.data(), small_at);
  auto b2 = pool.get(1 << 20);
  EXPECT_EQ(b2.data(), big_at);
  EXPECT_EQ(b2.size(), 1u << 20);
  pool.put(std::move(b2));
  for (int k = 0; k < 4; ++k) pool.put(host::ResultBuffer(10 + k));  // full: the big one stays
  EXPECT_EQ(pool.get(1 << 20).data(), big_at);
  pool.put(host::ResultBuffer(1 << 20));
  EXPECT_EQ(pool.get(0).capacity(), 0u) << "an empty request takes no pooled buffer";
  EXPECT_EQ(pool.get(1 << 20).capacity(), 1u << 20) << "it was still in the pool";
}

// A data round's result buffer is written before it is read, so a new one
// must not be faulted in when allocated: zero-filling it would stall the
// op's first packet behind every page fault of the round's sums (which the
// PS family keeps).
TEST(FloatAllreduceUnit, ANewResultBufferIsNotFaultedInUpFront) {
  host::BufferPool pool;
  const double before = resident_mb();
  auto buf = pool.get(size_t{16} << 20);  // 64 MB
  const double grown = resident_mb() - before;
  EXPECT_EQ(buf.size(), size_t{16} << 20);
  EXPECT_LT(grown, 8.0) << "MB resident after allocating a 64 MB result buffer";
  buf[buf.size() / 2] = 7;  // one page faulted in on first write
  EXPECT_EQ(buf[buf.size() / 2], 7);
}

// Fixed scale: the verdict lane comes with the last packet, so no result may
// reach the buffer before it. Catches a fixed round that decodes per packet
// (a later retry would then re-encode results as inputs).
TEST(FloatAllreduceUnit, FixedScaleResultsWaitForTheVerdict) {
  std::vector<float> x0 = {0.5f, -0.25f};
  FloatAllreduce a(x0, opts(2, FloatScaleMode::Fixed, 1 << 20));
  a.start();
  const std::vector<int32_t> sums = {3 << 19, 3 << 18, 0};  // {1.5, 0.75}, no saturation
  a.round().io->write_result(0, std::span<const int32_t>(sums).first(2));
  EXPECT_EQ(x0, (std::vector<float>{0.5f, -0.25f})) << "decoded before the verdict";
  a.round().io->write_result(2, std::span<const int32_t>(sums).subspan(2));
  EXPECT_EQ(a.on_complete(), Status::Done);
  EXPECT_EQ(x0, (std::vector<float>{1.5f, 0.75f}));
}

// Catches: a zero input reported in some lane (or a scale of 0), a non-finite
// value not flagged, the largest exponent not winning, and a scale for the
// largest floats that would still saturate.
TEST(FloatAllreduceUnit, ScaleLanesAndAgreedScale) {
  std::vector<int32_t> lanes(host::kScaleLanes);
  std::vector<float> zeros(5, 0.0f);
  host::scale_lanes(zeros, lanes);
  for (int32_t l : lanes) EXPECT_EQ(l, 0);
  EXPECT_EQ(host::agreed_scale(lanes, 4), 1.0);

  std::vector<float> bad = {1.0f, std::numeric_limits<float>::infinity(), 0.5f};
  host::scale_lanes(bad, lanes);
  EXPECT_EQ(lanes[host::kScaleExpLanes], 1);
  EXPECT_EQ(lanes[static_cast<size_t>(1 - host::kScaleExpMin)], 1) << "finite values still report their exponent";

  std::vector<int32_t> sum(host::kScaleLanes, 0);
  for (float m : {FLT_MAX, 1.0f, std::ldexp(1.0f, -149)}) {
    std::vector<float> one = {m};
    host::scale_lanes(one, lanes);
    for (size_t l = 0; l < sum.size(); ++l) sum[l] += lanes[l];
  }
  const double s = host::agreed_scale(sum, 3);
  EXPECT_EQ(s, expected_scale({{FLT_MAX}, {1.0f}, {0.0f}}));
  FixedPointCodec codec(s, 3);
  std::vector<float> big = {FLT_MAX, -FLT_MAX};
  std::vector<int32_t> enc(2);
  EXPECT_EQ(codec.encode(big, enc).overflowed, 0u);
}

// Catches: a fixed-scale op that still runs a scale round, a missing trailer
// lane, or a retry although nothing saturated.
TEST(FloatAllreduceUnit, FixedScaleWithoutSaturationIsOneRound) {
  std::vector<float> x0 = {0.5f, -0.25f}, x1 = {1.0f, 1.0f};
  FloatAllreduce a(x0, opts(2, FloatScaleMode::Fixed, 1 << 20)), b(x1, opts(2, FloatScaleMode::Fixed, 1 << 20));
  const IntRound& r = a.start();
  b.start();
  EXPECT_EQ(r.kind, K::FixedData);
  EXPECT_EQ(r.elems, 3u) << "two values and the trailer lane";
  EXPECT_FALSE(a.last_round()) << "the overflow verdict decides whether more rounds follow";
  std::vector<int32_t> lanes(3);
  r.io->read_gradient(0, lanes);
  EXPECT_EQ(lanes, (std::vector<int32_t>{1 << 19, -(1 << 18), 0}));
  EXPECT_EQ(exchange({&a, &b})[0], Status::Done);
  EXPECT_EQ(a.info().scale, 1 << 20);
  EXPECT_FALSE(a.info().retried);
  EXPECT_EQ(x0, (std::vector<float>{1.5f, 0.75f}));
}

// Catches: a saturated value on one worker that does not make every worker
// redo the op, a retry that keeps the fixed scale, and a trailer that counts
// something other than the saturated values.
TEST(FloatAllreduceUnit, SaturationOnOneWorkerMakesAllRedoWithTheAgreedScale) {
  // Scale 2^20, n = 2: the largest value carried is (2^30 - 1) / 2^20, just below 1024.
  std::vector<std::vector<float>> x = {{1.0f, 2.0f, 3.0f}, {1024.0f, -5000.0f, 0.5f}};
  const auto want = exact_sum(x);
  auto y = x;
  FloatAllreduce a(y[0], opts(2, FloatScaleMode::Fixed, 1 << 20)), b(y[1], opts(2, FloatScaleMode::Fixed, 1 << 20));
  a.start();
  b.start();
  std::vector<int32_t> lanes(4);
  b.round().io->read_gradient(0, lanes);
  EXPECT_EQ(lanes[3], 2) << "worker 1's trailer: two saturated values";
  a.round().io->read_gradient(0, lanes);
  EXPECT_EQ(lanes[3], 0);
  EXPECT_EQ(exchange({&a, &b})[0], Status::Submit);
  EXPECT_EQ(a.round().kind, K::Scale);
  EXPECT_FALSE(a.last_round());
  EXPECT_EQ(exchange({&a, &b})[0], Status::Submit);
  EXPECT_EQ(a.round().kind, K::Data);
  EXPECT_EQ(a.round().elems, 3u) << "no trailer once the scale is agreed";
  EXPECT_EQ(exchange({&a, &b})[0], Status::Done);
  for (auto* w : {&a, &b}) {
    EXPECT_TRUE(w->info().retried);
    EXPECT_EQ(w->info().scale, expected_scale(x));
  }
  EXPECT_EQ(count_differences(y[0], want), 0u);
  EXPECT_EQ(count_differences(y[1], want), 0u);
}

// Catches: non-finite input that is decoded anyway (NaN encodes as 0), an
// error on only the worker that had it, a wrong worker count in the message,
// a touched buffer, or a fixed-scale op that does not detect it after its retry.
TEST(FloatAllreduceUnit, NonFiniteFailsEveryWorkerNamingTheCount) {
  for (auto mode : {FloatScaleMode::Agree, FloatScaleMode::Fixed}) {
    SCOPED_TRACE(mode == FloatScaleMode::Agree ? "agree" : "fixed");
    std::vector<std::vector<float>> x = {{1.0f, 2.0f}, {std::nanf(""), 1.0f}, {3.0f, 4.0f}};
    auto y = x;
    std::vector<std::unique_ptr<FloatAllreduce>> w;
    std::vector<RoundPlan*> ws;
    for (auto& v : y) {
      w.push_back(std::make_unique<FloatAllreduce>(v, opts(3, mode, 1024)));
      ws.push_back(w.back().get());
    }
    const auto kinds = run_all(ws);
    if (mode == FloatScaleMode::Agree) EXPECT_EQ(kinds, (std::vector<K>{K::Scale}));
    else EXPECT_EQ(kinds, (std::vector<K>{K::FixedData, K::Scale}));
    for (size_t r = 0; r < 3; ++r) {
      EXPECT_TRUE(w[r]->finished());
      EXPECT_TRUE(w[r]->last_round());
      EXPECT_EQ(w[r]->info().nonfinite_workers, 1);
      EXPECT_NE(w[r]->error().find("1 worker of job 7 passed NaN or infinite"), std::string::npos)
          << w[r]->error();
      EXPECT_EQ(count_differences(y[r], x[r]), 0u) << "buffer of rank " << r << " changed";
    }
  }
}

// Catches: Average not divided, divided twice, or divided by something other
// than the worker count.
TEST(FloatAllreduceUnit, AverageDividesByTheWorkerCount) {
  std::vector<float> x0 = {1.0f, 2.0f, -3.0f}, x1 = {2.0f, 3.0f, 0.5f};
  FloatAllreduce a(x0, opts(2, FloatScaleMode::Agree, 0, true)), b(x1, opts(2, FloatScaleMode::Agree, 0, true));
  const auto kinds = run_all({&a, &b});
  EXPECT_EQ(kinds, (std::vector<K>{K::Scale, K::Data}));
  EXPECT_EQ(x0, (std::vector<float>{1.5f, 2.5f, -1.25f}));
  EXPECT_EQ(x1, x0);
}

// Catches: a queue that submits a later op before the current op's next round
// is known (workers with different timing would then build different PSN
// streams), or that loses an op.
TEST(FloatAllreduceUnit, QueueSubmitsInIssueOrderAndWaitsForVerdicts) {
  host::WorkerConfig wc;
  wc.self = 1;
  wc.aggregator = 0;
  host::WorkerTransport tx(wc);
  AllreduceQueue q;
  std::vector<float> a(10, 1.0f), c(10, 1.0f);
  std::vector<int32_t> b(10, 1);
  const uint64_t ha = q.add(std::span<float>(a), opts(1));
  const uint64_t hb = q.add(std::span<int32_t>(b));
  const uint64_t hc = q.add(std::span<float>(c), opts(1, FloatScaleMode::Fixed, 4));
  std::vector<float> d(3, 1.0f);
  const uint64_t hd = q.add(std::span<float>(d), opts(1));
  EXPECT_EQ(q.submit_ready(tx), 1u) << "only a's scale round: its data round must come before b";
  EXPECT_EQ(q.rounds_in_flight(), 1u);
  std::vector<AllreduceQueue::Finished> out;
  size_t sent = 0;
  // Transport op ids are given in submit order: 0 = a's scale round. No
  // result is written here: the rounds' fresh buffers read as zero (every
  // value 0, nothing saturated).
  EXPECT_EQ(q.on_completed(tx, std::vector<uint64_t>{0}, out, &sent), 1u);
  EXPECT_EQ(sent, 3u) << "a's data round (1), b (2), c's fixed round (3); d waits for c's verdict";
  EXPECT_TRUE(out.empty());
  sent = 0;
  q.on_completed(tx, std::vector<uint64_t>{3, 99}, out, &sent);  // c done; 99 is not ours
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].handle, hc);
  EXPECT_TRUE(out[0].ok);
  EXPECT_EQ(sent, 1u) << "d's scale round (4)";
  sent = 0;
  q.on_completed(tx, std::vector<uint64_t>{2, 1, 4}, out, &sent);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].handle, hb);
  EXPECT_EQ(out[2].handle, ha);
  EXPECT_EQ(sent, 1u) << "d's data round (5)";
  EXPECT_FALSE(q.idle());
  q.on_completed(tx, std::vector<uint64_t>{5}, out, &sent);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[3].handle, hd);
  EXPECT_TRUE(q.idle());
  EXPECT_EQ(q.rounds_in_flight(), 0u);
}

// ---------------------------------------------------------------- in the simulator

// A star with one job of n AllreduceNodes, the switch program and (ATP/DSA) a PS.
struct FloatStar {
  FloatStar(const std::string& scheme_name, unsigned n, double loss = 0, uint64_t seed = 1, uint16_t payload = 64)
      : sim(seed, payload) {
    const schemes::Scheme& scheme = schemes::find(scheme_name);
    dp::SwitchConfig swc;
    swc.memory_bytes = 64ULL * 4 * payload;
    swc.payload_values = payload;
    swc.seed = mix(seed, 0x5);
    star = std::make_unique<cluster::StarCluster>(sim, scheme, std::vector<int>{static_cast<int>(n)}, swc);
    sw = &star->sw();
    for (unsigned r = 0; r < n; ++r) {
      host::WorkerConfig w;
      w.payload_values = payload;
      auto node = std::make_unique<host::AllreduceNode>(star->worker(0, r, w), static_cast<Time>(r) * 3 * kUs);
      workers.push_back(node.get());
      star->add_host(star->plan().jobs[0].workers[r], std::move(node));
    }
    host::PsConfig pc;
    pc.payload_values = payload;
    const auto servers = star->add_servers(pc);
    if (!servers.empty()) ps = servers[0];
    sim::LinkParams lp;
    lp.delay = 1 * kUs;
    lp.loss = loss;
    star->wire([&](NodeId) { return std::make_pair(lp, lp); });
  }

  // Every worker adds the same op, each with its own input; returns its handle.
  uint64_t add(const std::vector<std::vector<float>>& per_rank, FloatAllreduceOptions o = {}) {
    uint64_t h = 0;
    for (size_t r = 0; r < workers.size(); ++r) {
      bufs.push_back(per_rank[r]);
      h = workers[r]->add(std::span<float>(bufs.back()), o);
      data.resize(std::max<size_t>(data.size(), h + 1));
      data[h].push_back(&bufs.back());
    }
    return h;
  }
  const std::vector<float>& result(uint64_t h, size_t r) const { return *data[h][r]; }

  void run_and_check() {
    sim.run(10 * kSec);
    EXPECT_TRUE(sim.idle()) << "did not go idle";
    for (auto* w : workers) EXPECT_EQ(w->finished(), w->results().size()) << "worker " << w->id();
    EXPECT_EQ(sim.packets_in_use(), 0u) << "packets leaked";
    EXPECT_EQ(sim.misrouted(), 0u);
    std::vector<const host::WorkerTransport*> transports;
    for (const auto* w : workers) transports.push_back(&w->transport());
    const auto refused = cluster::count_refusals({sw}, ps ? std::vector<const host::ParameterServer*>{ps}
                                                       : std::vector<const host::ParameterServer*>{}, transports);
    EXPECT_EQ(refused.total(), 0u) << refused.text();
    if (ps) {
      EXPECT_EQ(ps->entries(), 0u);
      EXPECT_EQ(sw->occupied(), 0u);
    }
  }

  sim::Simulator sim;
  std::unique_ptr<cluster::StarCluster> star;
  dp::SwitchProgram* sw = nullptr;
  host::ParameterServer* ps = nullptr;
  std::vector<host::AllreduceNode*> workers;
  std::deque<std::vector<float>> bufs;             // stable addresses
  std::vector<std::vector<std::vector<float>*>> data;  // [op][rank]
};

std::vector<std::vector<float>> inputs(uint64_t seed, unsigned n, size_t elems, int grain = 12) {
  std::vector<std::vector<float>> x;
  for (unsigned r = 0; r < n; ++r) x.push_back(test::dyadic_floats(seed * 101 + r, elems, grain));
  return x;
}

class FloatSim : public ::testing::TestWithParam<std::tuple<std::string, double>> {};

// Catches: anything that makes the simulated protocol inexact or makes
// workers disagree: a wrong agreed scale (too large saturates, too small
// rounds away the 2^-12 grain), rounds of different sizes on different
// workers, an int op overtaking a float op's data round, lost results.
TEST_P(FloatSim, AgreedScaleIsExactAndIdenticalOnEveryWorker) {
  const auto [policy, loss] = GetParam();
  const unsigned n = 3;
  FloatStar s(policy, n, loss, 11);
  const std::vector<size_t> sizes = {1, 64, 1000, 3000};
  std::vector<std::vector<std::vector<float>>> xs;
  std::vector<uint64_t> hs;
  std::vector<std::vector<int32_t>> ints(n, std::vector<int32_t>(500));
  for (size_t k = 0; k < sizes.size(); ++k) {
    xs.push_back(inputs(k + 1, n, sizes[k]));
    hs.push_back(s.add(xs.back()));
    if (k == 1)
      for (unsigned r = 0; r < n; ++r) {
        for (size_t i = 0; i < ints[r].size(); ++i) ints[r][i] = static_cast<int32_t>(i * (r + 1)) - 300;
        s.workers[r]->add(std::span<int32_t>(ints[r]));
      }
  }
  s.run_and_check();
  for (size_t k = 0; k < sizes.size(); ++k) {
    const auto want = exact_sum(xs[k]);
    for (unsigned r = 0; r < n; ++r) {
      const auto& res = s.workers[r]->results()[hs[k]];
      ASSERT_TRUE(res.done.ok) << res.done.error;
      EXPECT_EQ(res.done.info.scale, expected_scale(xs[k])) << "op " << k;
      EXPECT_FALSE(res.done.info.retried);
      EXPECT_EQ(count_differences(s.result(hs[k], r), want), 0u) << "op " << k << " rank " << r;
    }
  }
  uint64_t retransmits = 0;
  uint64_t results_to_ps = 0;
  for (auto* w : s.workers) {
    retransmits += w->transport().stats().retransmits;
    results_to_ps += w->transport().stats().results_to_ps;
  }
  if (loss > 0) {
    EXPECT_GT(retransmits, 0u) << "the lossy run lost nothing";
    // With a PS, some worker answered a request for a result it already had:
    // from the int32 sums it keeps (keep_results), since its buffer then
    // holds floats.
    if (s.ps) {
      EXPECT_GT(results_to_ps, 0u) << "no PS asked a worker for a result it had";
    }
  }
  for (unsigned r = 0; r < n; ++r) {
    EXPECT_EQ(s.workers[r]->rounds(), 2 * sizes.size() + 1);
    for (size_t i = 0; i < ints[r].size(); i += 37) EXPECT_EQ(ints[r][i], static_cast<int32_t>(6 * i) - 900);
  }
}

INSTANTIATE_TEST_SUITE_P(Sim, FloatSim,
                         ::testing::Combine(::testing::Values(std::string("dsa"), std::string("atp"),
                                                              std::string("switchml")),
                                            ::testing::Values(0.0, 0.01)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + (std::get<1>(info.param) > 0 ? "_lossy" : "_clean");
                         });

// Fixed scale 2^20 with n = 4: each value is carried up to INT32_MAX / 4 =
// 2^29 - 1 units, i.e. just below 512; the int32 range of the sum is +-2048.
// Catches: a fallback that does not happen when the sum of the inputs exceeds
// the fixed scale's range, one that happens when the values fit (an
// off-by-one at the saturation limit), a retry on only some workers, a
// fallback scale other than the agreed one, and an Average not redone.
TEST(FloatSimOverflow, FixedScaleFallsBackExactlyWhenValuesSaturate) {
  const unsigned n = 4;
  FloatStar s("dsa", n, 0, 5);
  auto o = opts(n, FloatScaleMode::Fixed, 1 << 20);
  // Values below 256 in multiples of 2^-15: exact at 2^20 and at the fallback 2^19.
  // op 0: the largest float below 512 on every worker: sum 2048 - 2^-13 fits.
  auto fits = inputs(21, n, 700, 15);
  for (auto& x : fits) x[3] = 512.0f - std::ldexp(1.0f, -15);
  // op 1: 600 on every worker: the sum (2400) exceeds the range at scale 2^20.
  auto over = inputs(22, n, 700, 15);
  for (auto& x : over) x[9] = 600.0f;
  // op 2: exactly 512 on one worker only: the first value beyond the limit.
  auto edge = inputs(23, n, 700, 15);
  edge[2][100] = 512.0f;
  const uint64_t h0 = s.add(fits, o), h1 = s.add(over, o), h2 = s.add(edge, o);
  auto oa = o;
  oa.average = true;
  const uint64_t h3 = s.add(over, oa);
  s.run_and_check();
  struct Want {
    uint64_t h;
    bool retried;
    double scale;
    std::vector<float> values;
  };
  const std::vector<Want> wants = {{h0, false, 1 << 20, exact_sum(fits)},
                                   {h1, true, expected_scale(over), exact_sum(over)},
                                   {h2, true, expected_scale(edge), exact_sum(edge)},
                                   {h3, true, expected_scale(over), exact_sum(over, n)}};
  EXPECT_EQ(expected_scale(over), std::ldexp(1.0, 19));
  for (const auto& w : wants)
    for (unsigned r = 0; r < n; ++r) {
      SCOPED_TRACE("op " + std::to_string(w.h) + " rank " + std::to_string(r));
      const auto& res = s.workers[r]->results()[w.h].done;
      ASSERT_TRUE(res.ok) << res.error;
      EXPECT_EQ(res.info.retried, w.retried);
      EXPECT_EQ(res.info.scale, w.scale);
      EXPECT_EQ(count_differences(s.result(w.h, r), w.values), 0u);
    }
  for (unsigned r = 0; r < n; ++r) EXPECT_EQ(s.workers[r]->rounds(), 1u + 3 + 3 + 3) << "rank " << r;
}

// Catches: a non-finite input that fails only the worker that had it (the
// others would wait for rounds that never come, or decode garbage), a wrong
// count in the error, a touched buffer, and a job that falls out of step
// after the failure.
TEST(FloatSimNonFinite, FailsEveryWorkerNamingTheCountAndKeepsTheJobInStep) {
  const unsigned n = 3;
  FloatStar s("dsa", n, 0, 9);
  auto bad = inputs(31, n, 500);
  bad[0][7] = std::nanf("");
  bad[2][499] = -std::numeric_limits<float>::infinity();
  const uint64_t h0 = s.add(bad);
  auto good = inputs(32, n, 500);
  const uint64_t h1 = s.add(good);
  auto bad_fixed = inputs(33, n, 200);
  bad_fixed[1][0] = std::numeric_limits<float>::infinity();
  const uint64_t h2 = s.add(bad_fixed, opts(n, FloatScaleMode::Fixed, 1 << 12));
  const uint64_t h3 = s.add(good);
  s.run_and_check();
  for (unsigned r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto& r0 = s.workers[r]->results()[h0].done;
    EXPECT_FALSE(r0.ok);
    EXPECT_TRUE(r0.nonfinite);
    EXPECT_NE(r0.error.find("2 workers of job 1 passed NaN or infinite"), std::string::npos) << r0.error;
    EXPECT_EQ(count_differences(s.result(h0, r), bad[r]), 0u) << "buffer changed";
    const auto& r2 = s.workers[r]->results()[h2].done;
    EXPECT_TRUE(r2.nonfinite);
    EXPECT_TRUE(r2.info.retried);
    EXPECT_NE(r2.error.find("1 worker of job 1"), std::string::npos) << r2.error;
    EXPECT_EQ(count_differences(s.result(h2, r), bad_fixed[r]), 0u) << "buffer changed";
    for (uint64_t h : {h1, h3}) {
      const auto& ok = s.workers[r]->results()[h].done;
      ASSERT_TRUE(ok.ok) << ok.error;
      EXPECT_EQ(count_differences(s.result(h, r), exact_sum(good)), 0u);
    }
    EXPECT_EQ(s.workers[r]->rounds(), 1u + 2 + 2 + 2);
  }
}

// Catches: Average not divided, divided by the wrong count, or divided
// before the sum (which would round each worker's share away).
TEST(FloatSimAverage, AverageDividesExactly) {
  for (unsigned n : {2u, 4u}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    FloatStar s("atp", n, 0, 13);
    auto x = inputs(41 + n, n, 2000);
    auto o = opts(n);
    o.average = true;
    const uint64_t ha = s.add(x, o);
    const uint64_t hs = s.add(x);
    s.run_and_check();
    const auto avg = exact_sum(x, n), sum = exact_sum(x);
    for (unsigned r = 0; r < n; ++r) {
      ASSERT_TRUE(s.workers[r]->results()[ha].done.ok);
      EXPECT_EQ(count_differences(s.result(ha, r), avg), 0u) << "rank " << r;
      EXPECT_EQ(count_differences(s.result(hs, r), sum), 0u) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace ina
