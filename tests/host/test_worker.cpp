// The worker transport driven directly: the gradient stream, acks,
// retransmission and back-off, fast retransmit, ECN and delay signals,
// rate sync, grad requests, SwitchML's window cap.
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

// ====================================================================
// Worker transport, driven directly
// ====================================================================

struct WorkerRig {
  explicit WorkerRig(bool fast_retransmit = false) : WorkerRig(config(fast_retransmit)) {}
  explicit WorkerRig(const host::WorkerConfig& c) : tx(c) {
    grad = ramp(100, -500, 7);
    io = std::make_shared<host::VectorTensor>(grad);
  }
  static host::WorkerConfig config(bool fast_retransmit = false) {
    host::WorkerConfig w;
    w.fast_retransmit = fast_retransmit;
    w.job = 1;
    w.rank = 1;
    w.nworkers = 3;
    w.self = kJob1[1];
    w.aggregator = kSw;
    w.ps = kPsId;
    w.payload_values = 64;
    return w;
  }
  Packet* ack(uint32_t psn, const std::vector<int32_t>& v, uint64_t bitmap = 0b111) {
    Packet* a = fx.alloc();
    a->h.type = PktType::Ack;
    a->h.flags = flag::kResult;
    a->h.job = 1;
    a->h.psn = psn;
    a->h.src = kSw;
    a->h.dst = kJob1[1];
    a->h.nworkers = 3;
    a->h.bitmap = bitmap;
    a->h.count = static_cast<uint16_t>(v.size());
    std::copy(v.begin(), v.end(), a->payload());
    return a;
  }
  Packet* grad_request(uint32_t psn) {
    Packet* q = fx.alloc();
    q->h.type = PktType::GradRequest;
    q->h.job = 1;
    q->h.psn = psn;
    q->h.src = kPsId;
    q->h.dst = kJob1[1];
    q->h.rank = 1;
    q->h.nworkers = 3;
    return q;
  }
  FakeEffects fx;
  host::WorkerTransport tx;
  std::vector<int32_t> grad;
  std::shared_ptr<host::VectorTensor> io;
};

TEST(Worker, SendsGradientPacketsOfTheStream) {
  WorkerRig w;
  EXPECT_EQ(w.tx.submit(w.io, 100), 0u);
  w.tx.pump(0, w.fx);
  auto out = w.fx.take();
  ASSERT_EQ(out.size(), 2u);
  for (uint32_t k = 0; k < 2; ++k) {
    EXPECT_EQ(out[k].h.type, PktType::Data);
    EXPECT_EQ(out[k].h.psn, k);
    EXPECT_EQ(out[k].h.dst, kSw);
    EXPECT_EQ(out[k].h.src, kJob1[1]);
    EXPECT_EQ(out[k].h.rank, 1);
    EXPECT_EQ(out[k].h.nworkers, 3);
    EXPECT_EQ(out[k].h.bitmap, 0b010u);
    EXPECT_FALSE(out[k].h.has(flag::kResend));
  }
  EXPECT_EQ(out[0].v, std::vector<int32_t>(w.grad.begin(), w.grad.begin() + 64));
  EXPECT_EQ(out[1].v, std::vector<int32_t>(w.grad.begin() + 64, w.grad.end()));
  EXPECT_EQ(w.tx.next_psn(), 2u);
  EXPECT_TRUE(w.tx.busy());
}

// A window-paced worker (a DCQCN NIC's rate limiter) spaces its first
// transmissions at 1.2 x cwnd x wire / srtt once it has a round trip, at
// most at nic_gbps. 4-packet window out at t = 0 (no round trip yet); the
// results of psn 0 and 1 at 10 us: srtt 10 us, cwnd 4 + 1/4 = 4.25 when
// psn 4 leaves, so psn 5 waits srtt / (1.2 x 4.25) = 1960.784 ns on the
// pacing timer, where an unpaced worker sends both at once.
TEST(Worker, WindowPacedSpacesFirstTransmissionsAtTheWindowsRate) {
  auto run = [](bool paced, double nic_gbps) {
    host::WorkerConfig c = WorkerRig::config();
    c.init_window = 4;
    c.wire_bytes = 306;
    c.window_paced = paced;
    c.nic_gbps = nic_gbps;
    WorkerRig w(c);
    w.tx.submit(std::make_shared<host::VectorTensor>(ramp(64 * 20, 3)), 64 * 20);
    w.tx.pump(0, w.fx);
    EXPECT_EQ(w.fx.take().size(), 4u);
    w.fx.timers.clear();
    for (uint32_t psn = 0; psn < 2; ++psn) w.tx.on_packet(w.ack(psn, ramp(64, psn)), 10 * kUs, w.fx);
    std::vector<Time> pace_timers;
    for (const auto& [at, token] : w.fx.timers)
      if (token == host::WorkerTransport::kPaceTimer) pace_timers.push_back(at);
    return std::make_pair(w.fx.take().size(), pace_timers);
  };
  const auto [sent, timers] = run(true, 100);
  EXPECT_EQ(sent, 1u);
  EXPECT_EQ(timers, std::vector<Time>{10 * kUs + 1'960'784});
  const auto [sent_nic, timers_nic] = run(true, 1);  // the NIC's 1 Gbps: 2448 ns a packet
  EXPECT_EQ(sent_nic, 1u);
  EXPECT_EQ(timers_nic, std::vector<Time>{10 * kUs + 2'448'000});
  const auto [sent_unpaced, timers_unpaced] = run(false, 100);
  EXPECT_EQ(sent_unpaced, 2u);
  EXPECT_TRUE(timers_unpaced.empty());
}

TEST(Worker, AcksAreValidatedAndAssembled) {
  WorkerRig w;
  w.tx.submit(w.io, 100);
  w.tx.pump(0, w.fx);
  w.fx.take();
  const auto r0 = ramp(64, 7), r1 = ramp(36, -3);
  w.tx.on_packet(w.ack(1, ramp(64, 0)), 10 * kUs, w.fx);  // wrong count for psn 1
  w.tx.on_packet(w.ack(1, r1, 0b011), 10 * kUs, w.fx);    // not a full result
  EXPECT_EQ(w.tx.stats().malformed, 2u);
  EXPECT_EQ(w.io->result, std::vector<int32_t>(100, 0));
  w.tx.on_packet(w.ack(0, r0), 10 * kUs, w.fx);
  w.tx.on_packet(w.ack(0, r0), 11 * kUs, w.fx);  // duplicate result (switch and PS)
  EXPECT_EQ(w.tx.stats().dup_acks, 1u);
  EXPECT_TRUE(w.tx.take_completed().empty());
  w.tx.on_packet(w.ack(1, r1), 12 * kUs, w.fx);
  EXPECT_EQ(w.tx.take_completed(), std::vector<uint64_t>{0});
  EXPECT_FALSE(w.tx.busy());
  std::vector<int32_t> want = r0;
  want.insert(want.end(), r1.begin(), r1.end());
  EXPECT_EQ(w.io->result, want);
  EXPECT_EQ(w.fx.pool.in_use(), 0u);
}

// Catches: the record ring growing (doubling past 64, then 128 records)
// while results beyond a missing one are done, and losing which were done:
// a duplicate of such a result would be taken again, and the RTO would
// resend a packet whose result the host has.
// A transport with a fixed window of `window` packets that has just sent
// the first window of one op of `pkts` packets; result(psn) is psn's result.
struct FixedWindowRig {
  FixedWindowRig(double window, uint32_t pkts) : tx(make(window)) {
    io = std::make_shared<host::VectorTensor>(std::vector<int32_t>(pkts * 64, 1));
    tx.submit(io, pkts * 64);
    tx.pump(0, w.fx);
  }
  static host::WorkerConfig make(double window) {
    host::WorkerConfig c = WorkerRig::config();
    c.init_window = window;
    c.aimd = false;
    return c;
  }
  static std::vector<int32_t> result(uint32_t psn) { return std::vector<int32_t>(64, static_cast<int32_t>(psn)); }
  WorkerRig w;
  host::WorkerTransport tx;
  std::shared_ptr<host::VectorTensor> io;
};

TEST(Worker, ResultsDoneBeforeTheRecordRingGrowsStayDone) {
  constexpr uint32_t kPkts = 200;
  FixedWindowRig r(100, kPkts);
  auto& [w, tx, io] = r;
  const auto result = FixedWindowRig::result;
  ASSERT_EQ(w.fx.take().size(), 100u);  // psn 0..99: the ring grew to 128 with nothing done
  // Results 1..99, psn 0 still out; each lets one more packet go (100..198). The send of 128
  // needs 129 records from psn 0: the ring grows to 256 when results 1..29 are done.
  for (uint32_t psn = 1; psn < 100; ++psn) tx.on_packet(w.ack(psn, result(psn)), 10 * kUs, w.fx);
  ASSERT_EQ(w.fx.take().size(), 99u);
  tx.on_packet(w.ack(0, result(0)), 11 * kUs, w.fx);
  tx.on_packet(w.ack(5, result(5)), 11 * kUs, w.fx);  // a duplicate of a result done before the growth
  EXPECT_EQ(tx.stats().dup_acks, 1u);
  EXPECT_EQ(tx.stats().malformed, 0u);
  ASSERT_EQ(w.fx.take().size(), 1u);  // psn 199, the last
  for (uint32_t psn = 100; psn < kPkts; ++psn) tx.on_packet(w.ack(psn, result(psn)), 12 * kUs, w.fx);
  EXPECT_EQ(tx.take_completed(), std::vector<uint64_t>{0});
  EXPECT_EQ(tx.stats().acks, kPkts);
  for (uint32_t psn = 0; psn < kPkts; ++psn)
    ASSERT_EQ(io->result[psn * 64 + 63], static_cast<int32_t>(psn)) << "psn " << psn;
  tx.on_timer(0, 1 * kSec, w.fx);
  EXPECT_TRUE(w.fx.take().empty()) << "nothing is resent: every result is in";
  EXPECT_EQ(tx.stats().retransmits, 0u);
}

// One packet out while a small window streams hundreds past it
// (host/record_ring.hpp: its record leaves the ring as a straggler):
// its timeout still resends it, once, and its result still completes the op.
TEST(Worker, APacketLeftBehindTheRecordRingKeepsItsRecord) {
  constexpr uint32_t kPkts = 300;
  FixedWindowRig r(4, kPkts);
  auto& [w, tx, io] = r;
  const auto result = FixedWindowRig::result;
  ASSERT_EQ(w.fx.take().size(), 4u);
  for (uint32_t psn = 1; psn < kPkts; ++psn) tx.on_packet(w.ack(psn, result(psn)), (10 + psn) * kNs, w.fx);
  ASSERT_EQ(w.fx.take().size(), kPkts - 4);
  tx.on_timer(0, 1 * kSec, w.fx);  // psn 0's timeout (and nothing else's)
  const auto resent = w.fx.take();
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].h.psn, 0u);
  EXPECT_TRUE(resent[0].h.has(flag::kResend));
  tx.on_packet(w.ack(0, result(0)), 1 * kSec + 10 * kUs, w.fx);
  EXPECT_EQ(tx.take_completed(), std::vector<uint64_t>{0});
  EXPECT_EQ(tx.stats().acks, kPkts);
  EXPECT_EQ(tx.stats().dup_acks + tx.stats().malformed, 0u);
  for (uint32_t psn = 0; psn < kPkts; ++psn)
    ASSERT_EQ(io->result[psn * 64 + 63], static_cast<int32_t>(psn)) << "psn " << psn;
}

TEST(Worker, GradRequestAnsweredWithGradientOrResult) {
  WorkerRig w;
  w.tx.submit(w.io, 100);
  w.tx.submit(std::make_shared<host::VectorTensor>(ramp(10, 1)), 10);  // psn 2
  w.tx.pump(0, w.fx);
  w.fx.take();
  w.tx.on_packet(w.grad_request(9), 0, w.fx);  // unknown psn: ignored
  EXPECT_TRUE(w.fx.sent.empty());
  w.tx.on_packet(w.grad_request(1), 0, w.fx);
  auto out = w.fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.dst, kPsId);
  EXPECT_TRUE(out[0].h.has(flag::kToPs));
  EXPECT_FALSE(out[0].h.has(flag::kResult));
  EXPECT_EQ(out[0].h.bitmap, 0b010u);
  EXPECT_EQ(out[0].h.psn, 1u);
  EXPECT_EQ(out[0].v, std::vector<int32_t>(w.grad.begin() + 64, w.grad.end()));
  const auto r0 = ramp(64, 7);
  w.tx.on_packet(w.ack(0, r0), 10 * kUs, w.fx);
  w.tx.on_packet(w.grad_request(0), 11 * kUs, w.fx);
  out = w.fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].h.has(flag::kResult));
  EXPECT_EQ(out[0].h.bitmap, 0b111u);
  EXPECT_EQ(out[0].v, r0);
  EXPECT_EQ(w.fx.pool.in_use(), 0u);
}

// Catches: a backoff that does not double per retransmission, or one without
// the x8 cap (shift limited to 3), or reminders at the wrong retransmissions.
TEST(Worker, RetransmitsWithBackoffAndRemindsThePs) {
  WorkerRig w;
  w.tx.submit(std::make_shared<host::VectorTensor>(ramp(10, 1)), 10);
  w.tx.pump(0, w.fx);
  w.fx.take();
  // No RTT sample yet: the RTO is the 1 ms floor, doubled per retransmission
  // of the packet up to x8 (then flat, below max_rto = 200 ms).
  const std::vector<Time> gaps = {1 * kMs, 2 * kMs, 4 * kMs, 8 * kMs, 8 * kMs, 8 * kMs};
  Time last = 0;
  int retx = 0;
  for (int round = 0; round < 6; ++round) {
    ASSERT_FALSE(w.fx.timers.empty());
    const Time at = std::max_element(w.fx.timers.begin(), w.fx.timers.end())->first;
    EXPECT_EQ(at - last, gaps[static_cast<size_t>(round)]) << "round " << round;
    // Firing just before the deadline does nothing.
    w.tx.on_timer(0, at - 1, w.fx);
    EXPECT_TRUE(w.fx.sent.empty()) << "round " << round;
    last = at;
    w.tx.on_timer(0, at, w.fx);
    auto out = w.fx.take();
    size_t data = 0, reminders = 0;
    for (const auto& s : out) {
      if (s.h.type == PktType::Data) {
        ++data;
        EXPECT_TRUE(s.h.has(flag::kResend));
        EXPECT_EQ(s.v, ramp(10, 1));
      } else if (s.h.type == PktType::Reminder) {
        ++reminders;
        EXPECT_EQ(s.h.dst, kPsId);
        EXPECT_EQ(s.h.psn, 0u);
      }
    }
    ++retx;
    EXPECT_EQ(data, 1u) << "round " << round;
    EXPECT_EQ(reminders, retx % 3 == 0 ? 1u : 0u) << "a reminder after every 3 retransmissions";
  }
  EXPECT_EQ(last, 31 * kMs) << "1 + 2 + 4 + 8 + 8 + 8";
  EXPECT_EQ(w.tx.rto(), 1 * kMs) << "backoff is per packet: the estimator is untouched";
  EXPECT_EQ(w.tx.stats().retransmits, 6u);
  EXPECT_EQ(w.tx.stats().reminders, 2u);
}

// Time-based fast retransmit (RACK): a result for a packet sent later than
// another by more than srtt/4 presumes the earlier one lost and resends it at
// once; a packet overtaken within srtt/4 (reordering) is left alone, and so is
// everything when the option is off (the papers' workers only time out).
TEST(Worker, FastRetransmitResendsAnOvertakenPacket) {
  for (bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast retransmit on" : "off");
    WorkerRig w(fast);
    const auto v = ramp(10, 1);
    auto send_op = [&](Time at) {  // one single-packet op sent at `at`
      w.tx.submit(std::make_shared<host::VectorTensor>(v), 10);
      w.tx.pump(at, w.fx);
    };
    send_op(0);                   // psn 0
    send_op(1 * kMs);             // psn 1
    send_op(1 * kMs + 10 * kUs);  // psn 2
    send_op(2 * kMs);             // psn 3
    w.fx.take();
    w.tx.on_packet(w.ack(0, v), 100 * kUs, w.fx);  // srtt 100 us: tolerance 25 us
    const double cwnd = w.tx.cwnd();
    w.tx.on_packet(w.ack(2, v), 1100 * kUs, w.fx);  // psn 1 overtaken by 10 us only
    EXPECT_TRUE(w.fx.take().empty()) << "reordering within srtt/4 is tolerated";
    w.tx.on_packet(w.ack(3, v), 2100 * kUs, w.fx);  // psn 1 overtaken by 1 ms: lost
    auto out = w.fx.take();
    EXPECT_EQ(w.tx.stats().timeouts, 0u);
    if (!fast) {
      EXPECT_TRUE(out.empty());
      EXPECT_EQ(w.tx.stats().fast_retransmits, 0u);
      continue;
    }
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].h.type, PktType::Data);
    EXPECT_EQ(out[0].h.psn, 1u);
    EXPECT_TRUE(out[0].h.has(flag::kResend));
    EXPECT_EQ(out[0].v, v);
    EXPECT_EQ(w.tx.stats().fast_retransmits, 1u);
    EXPECT_LT(w.tx.cwnd(), cwnd) << "a loss halves the window";
    // The retransmission is recent now: further results of earlier-sent
    // packets do not resend it again; its own result completes the op.
    w.tx.on_packet(w.ack(3, v), 2200 * kUs, w.fx);
    EXPECT_TRUE(w.fx.take().empty());
    w.tx.on_packet(w.ack(1, v), 2300 * kUs, w.fx);
    EXPECT_FALSE(w.tx.busy());
    EXPECT_EQ(w.fx.pool.in_use(), 0u);
  }
}

// The delay signal: an Ack whose round trip exceeds the smallest one by more
// than delay_target halves the window like an ECN echo (once per RTT); with
// the target off (the simulator's default) the same Acks grow the window.
TEST(Worker, DelaySignalHalvesTheWindowOnlyWhenEnabled) {
  for (Time target : {Time{0}, 1 * kMs}) {
    SCOPED_TRACE(target ? "delay target 1 ms" : "off");
    host::WorkerConfig c = WorkerRig::config();
    c.delay_target = target;
    c.init_window = 8;
    WorkerRig w;
    host::WorkerTransport tx(c);
    const auto v = ramp(10, 1);
    for (int k = 0; k < 3; ++k) tx.submit(std::make_shared<host::VectorTensor>(v), 10);
    tx.pump(0, w.fx);
    ASSERT_EQ(w.fx.take().size(), 3u);
    tx.on_packet(w.ack(0, v), 100 * kUs, w.fx);  // the smallest round trip: 100 us
    const double before = tx.cwnd();
    tx.on_packet(w.ack(1, v), 900 * kUs, w.fx);  // 800 us above it: within 1 ms
    EXPECT_GT(tx.cwnd(), before);
    const double grown = tx.cwnd();
    tx.on_packet(w.ack(2, v), 5 * kMs, w.fx);  // 4.9 ms above it
    if (target) {
      EXPECT_EQ(tx.stats().delayed_acks, 1u);
      EXPECT_EQ(tx.stats().decreases, 1u);
      EXPECT_DOUBLE_EQ(tx.cwnd(), grown / 2);
    } else {
      EXPECT_EQ(tx.stats().delayed_acks, 0u);
      EXPECT_EQ(tx.stats().decreases, 0u);
      EXPECT_GT(tx.cwnd(), grown);
    }
    EXPECT_FALSE(tx.busy());
    EXPECT_EQ(w.fx.pool.in_use(), 0u);
  }
}

// ====================================================================
// Worker transport: congestion control, RTO estimation, PS interplay
// ====================================================================

// Acks, one per single-packet op, each op sent `rtt` before its Ack, so every
// round trip (and srtt) is exactly `rtt`.
struct OneRttRig {
  explicit OneRttRig(host::WorkerConfig c) : tx(c) {}
  void send_op(Time at) {
    tx.submit(std::make_shared<host::VectorTensor>(v), 10);
    tx.pump(at, w.fx);
  }
  Packet* ack(uint32_t psn, bool ece) {
    Packet* a = w.ack(psn, v);
    if (ece) a->h.flags |= flag::kEce;
    return a;
  }
  WorkerRig w;
  host::WorkerTransport tx;
  std::vector<int32_t> v = ramp(10, 1);
};

// Catches: halving on every ECN-echo Ack (a burst of marks would collapse the
// window to 1), never halving, or growing the window on an ECE Ack.
TEST(Worker, EcnEchoHalvesTheWindowAtMostOncePerRtt) {
  host::WorkerConfig c = WorkerRig::config();
  c.init_window = 10;
  OneRttRig r(c);
  const Time rtt = 100 * kUs;
  for (int k = 0; k < 4; ++k) r.send_op(k * 10 * kUs);  // psn k sent at 10k us
  ASSERT_EQ(r.w.fx.take().size(), 4u);
  r.tx.on_packet(r.ack(0, false), rtt, r.w.fx);  // srtt = 100 us; +1/cwnd
  EXPECT_DOUBLE_EQ(r.tx.cwnd(), 10.1);
  r.send_op(110 * kUs);  // psn 4
  r.tx.on_packet(r.ack(1, true), 10 * kUs + rtt, r.w.fx);  // first echo: halve
  EXPECT_DOUBLE_EQ(r.tx.cwnd(), 5.05);
  r.send_op(120 * kUs);  // psn 5
  r.tx.on_packet(r.ack(2, true), 20 * kUs + rtt, r.w.fx);  // 10 us later: same RTT, unchanged
  r.tx.on_packet(r.ack(3, true), 30 * kUs + rtt, r.w.fx);  // 20 us later: unchanged
  EXPECT_DOUBLE_EQ(r.tx.cwnd(), 5.05) << "an echo within one RTT of the last decrease neither halves nor grows";
  EXPECT_EQ(r.tx.stats().decreases, 1u);
  ASSERT_EQ(r.w.fx.take().size(), 2u);
  r.tx.on_packet(r.ack(4, true), 110 * kUs + rtt, r.w.fx);  // one srtt after the decrease: halve again
  EXPECT_DOUBLE_EQ(r.tx.cwnd(), 2.525);
  r.tx.on_packet(r.ack(5, false), 120 * kUs + rtt, r.w.fx);  // unmarked: additive increase
  EXPECT_DOUBLE_EQ(r.tx.cwnd(), 2.525 + 1 / 2.525);
  EXPECT_EQ(r.tx.stats().ece_acks, 4u);
  EXPECT_EQ(r.tx.stats().decreases, 2u);
  EXPECT_EQ(r.w.fx.pool.in_use(), 0u);
}

// transport.ecn_per_window (RFC 3168's CWR rule): an echo for a packet sent
// before the last decrease does not halve the window again, however late it
// comes (a slow PS path delivers such echoes more than one smoothed RTT
// after the decrease); the default rule halves on it. An echo for a packet
// sent after the decrease halves under both.
TEST(Worker, EcnPerWindowIgnoresEchoesOfPacketsSentBeforeTheDecrease) {
  for (const bool per_window : {false, true}) {
    SCOPED_TRACE(per_window);
    host::WorkerConfig c = WorkerRig::config();
    c.init_window = 10;
    c.ecn_per_window = per_window;
    OneRttRig r(c);
    const Time rtt = 100 * kUs;
    for (int k = 0; k < 4; ++k) r.send_op(k * 10 * kUs);     // psn k sent at 10k us
    r.tx.on_packet(r.ack(0, false), rtt, r.w.fx);           // srtt = 100 us
    r.tx.on_packet(r.ack(1, true), 10 * kUs + rtt, r.w.fx);  // t = 110 us: halve
    EXPECT_DOUBLE_EQ(r.tx.cwnd(), 10.1 / 2);
    r.send_op(120 * kUs);                                    // psn 4, after the decrease
    r.tx.on_packet(r.ack(2, true), 230 * kUs, r.w.fx);       // psn 2 (sent at 20 us), 120 us after the decrease
    EXPECT_DOUBLE_EQ(r.tx.cwnd(), per_window ? 10.1 / 2 : 10.1 / 4);
    r.tx.on_packet(r.ack(4, true), 400 * kUs, r.w.fx);       // psn 4: sent after the first decrease
    EXPECT_DOUBLE_EQ(r.tx.cwnd(), per_window ? 10.1 / 4 : 10.1 / 8);
    EXPECT_EQ(r.tx.stats().ece_acks, 3u);
    EXPECT_EQ(r.tx.stats().decreases, per_window ? 2u : 3u);
    r.w.fx.take();
    EXPECT_EQ(r.w.fx.pool.in_use(), 0u);
  }
}

// Catches: an RTT sample taken from the Ack of a retransmitted packet (Karn's
// rule): here it would put the RTO at 2.5 + 4 * 1.25 = 7.5 ms instead of the floor.
TEST(Worker, KarnsRuleAcksOfRetransmittedPacketsAreNotSamples) {
  OneRttRig r(WorkerRig::config());
  r.send_op(0);  // psn 0
  r.w.fx.take();
  r.tx.on_timer(0, 1 * kMs, r.w.fx);  // RTO (floor): retransmitted, next deadline 3 ms
  ASSERT_EQ(r.w.fx.take().size(), 1u);
  r.tx.on_packet(r.ack(0, false), 2500 * kUs, r.w.fx);
  EXPECT_EQ(r.tx.rto(), 1 * kMs) << "ambiguous round trip used as a sample";
  r.tx.on_timer(0, 3 * kMs, r.w.fx);  // stale: psn 0 is done
  EXPECT_TRUE(r.w.fx.sent.empty());
  // An unambiguous one is: 0.8 ms gives srtt 0.8, rttvar 0.4, RTO 2.4 ms.
  r.w.fx.timers.clear();
  r.send_op(40 * kMs);  // psn 1
  ASSERT_EQ(r.w.fx.timers.size(), 1u);
  EXPECT_EQ(r.w.fx.timers[0].first, 41 * kMs) << "first timeout: the floor";
  r.tx.on_packet(r.ack(1, false), 40'800 * kUs, r.w.fx);
  EXPECT_EQ(r.tx.rto(), 2'400 * kUs);
  r.tx.on_timer(0, 41 * kMs, r.w.fx);  // stale
  // The next packet's first timeout is that RTO, exactly.
  r.w.fx.timers.clear();
  r.send_op(50 * kMs);  // psn 2
  ASSERT_EQ(r.w.fx.timers.size(), 1u);
  EXPECT_EQ(r.w.fx.timers[0].first, 52'400 * kUs);
  EXPECT_EQ(r.w.fx.take().size(), 2u);  // psn 1 and psn 2, first transmissions only
  EXPECT_EQ(r.tx.stats().retransmits, 1u);
}

// Catches: a RateSync (GRID §5.2) that does not halve the window or does not
// resend the dropped fragment at once, or that resends fragments already
// done or never sent.
TEST(Worker, RateSyncHalvesTheWindowAndResendsThatFragmentAtOnce) {
  host::WorkerConfig c = WorkerRig::config();
  c.init_window = 8;
  WorkerRig w;
  host::WorkerTransport tx(c);
  tx.submit(std::make_shared<host::VectorTensor>(ramp(64 * 10, 1)), 64 * 10);  // psn 0..9
  tx.pump(0, w.fx);
  ASSERT_EQ(w.fx.take().size(), 8u);
  tx.on_packet(w.ack(0, ramp(64, 0)), 50 * kUs, w.fx);  // srtt 50 us; cwnd 8.125: psn 8 goes
  ASSERT_EQ(w.fx.take().size(), 1u);
  auto sync = [&](uint32_t psn) {
    Packet* p = w.fx.alloc();
    p->h.type = PktType::RateSync;
    p->h.flags = flag::kEce;
    p->h.job = 1;
    p->h.psn = psn;
    p->h.src = kSw;
    p->h.dst = kJob1[1];
    p->h.nworkers = 3;
    return p;
  };
  tx.on_packet(sync(3), 60 * kUs, w.fx);
  auto out = w.fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.psn, 3u);
  EXPECT_EQ(out[0].h.dst, kSw);
  EXPECT_TRUE(out[0].h.has(flag::kResend));
  EXPECT_EQ(out[0].v, ramp(64, 1 + 3 * 64));
  EXPECT_DOUBLE_EQ(tx.cwnd(), 8.125 / 2);
  tx.on_packet(sync(0), 61 * kUs, w.fx);  // already done
  tx.on_packet(sync(9), 62 * kUs, w.fx);  // never sent
  EXPECT_TRUE(w.fx.take().empty());
  EXPECT_EQ(tx.stats().rate_syncs, 3u);
  EXPECT_EQ(tx.stats().retransmits, 1u);
  EXPECT_EQ(tx.stats().decreases, 1u);
  EXPECT_EQ(w.fx.pool.in_use(), 0u);
}

// Catches: a worker that answers a GradRequest for a retired PSN with
// whatever its buffer now holds, or not at all (the PS would remind forever).
TEST(Worker, GradRequestForARetiredPsnIsAnsweredRetired) {
  host::WorkerConfig c = WorkerRig::config();
  c.retain_ops = 1;  // keep only the last completed op
  OneRttRig r(c);
  for (int k = 0; k < 3; ++k) r.send_op(0);  // psn 0, 1, 2
  r.w.fx.take();
  for (uint32_t k = 0; k < 3; ++k) r.tx.on_packet(r.ack(k, false), 10 * kUs, r.w.fx);  // each sends the next
  ASSERT_FALSE(r.tx.busy());
  r.w.fx.take();
  r.tx.on_packet(r.w.grad_request(0), 20 * kUs, r.w.fx);  // retired (ops 0, 1 dropped)
  r.tx.on_packet(r.w.grad_request(2), 20 * kUs, r.w.fx);  // still retained: the result
  auto out = r.w.fx.take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.dst, kPsId);
  EXPECT_EQ(out[0].h.src, kJob1[1]);
  EXPECT_EQ(out[0].h.psn, 0u);
  EXPECT_EQ(out[0].h.flags, flag::kToPs | flag::kRetired);
  EXPECT_EQ(out[0].h.bitmap, 0u);
  EXPECT_EQ(out[0].h.count, 0u);
  EXPECT_EQ(out[1].h.psn, 2u);
  EXPECT_EQ(out[1].h.flags, flag::kToPs | flag::kResult);
  EXPECT_EQ(out[1].h.bitmap, 0b111u);
  EXPECT_EQ(out[1].v, r.v);
  EXPECT_EQ(r.tx.stats().retired_to_ps, 1u);
  EXPECT_EQ(r.tx.stats().results_to_ps, 1u);
  EXPECT_EQ(r.w.fx.pool.in_use(), 0u);
}

// Catches: a PS that keeps (or re-opens) an entry a worker reported retired,
// or that completes it with a zero "result".

TEST(Worker, GradRequestForAnUnsentPacketSendsItToThePsWhenItsTurnComes) {
  host::WorkerConfig c = WorkerRig::config();
  c.init_window = 1;
  c.aimd = false;
  WorkerRig w;
  host::WorkerTransport tx(c);
  tx.submit(w.io, 100);  // psn 0, 1
  const auto v2 = ramp(20, 900, -3);
  tx.submit(std::make_shared<host::VectorTensor>(v2), 20);  // psn 2
  tx.pump(0, w.fx);
  ASSERT_EQ(w.fx.take().size(), 1u);  // psn 0 only (window 1)
  tx.on_packet(w.grad_request(2), 5 * kUs, w.fx);
  EXPECT_TRUE(w.fx.sent.empty()) << "not sent yet: nothing to answer with now";
  tx.on_packet(w.ack(0, ramp(64, 0)), 10 * kUs, w.fx);
  auto out = w.fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.psn, 1u);
  EXPECT_EQ(out[0].h.dst, kSw) << "only the requested packet is redirected";
  EXPECT_FALSE(out[0].h.has(flag::kToPs));
  tx.on_packet(w.ack(1, ramp(36, 0)), 20 * kUs, w.fx);
  out = w.fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.psn, 2u);
  EXPECT_EQ(out[0].h.dst, kPsId);
  EXPECT_EQ(out[0].h.flags, flag::kToPs);
  EXPECT_EQ(out[0].h.bitmap, 0b010u);
  EXPECT_EQ(out[0].v, v2);
  EXPECT_EQ(tx.stats().redirected, 1u);
  EXPECT_EQ(tx.stats().grads_to_ps, 0u) << "not an answer: a first transmission";
}

// Catches: the SwitchML cap computed from the highest acked PSN (or the
// window) instead of the lowest unacknowledged one: a PSN S past it would
// overwrite a slot whose result some worker may still need.
TEST(Worker, SwitchMLCapNoPsnAPoolPastTheLowestUnacked) {
  host::WorkerConfig c = WorkerRig::config();
  c.window_cap = 4;
  WorkerRig w;
  host::WorkerTransport tx(c);
  tx.submit(std::make_shared<host::VectorTensor>(ramp(64 * 12, 1)), 64 * 12);  // psn 0..11
  auto psns = [&] {
    std::vector<uint32_t> v;
    for (const auto& s : w.fx.take()) v.push_back(s.h.psn);
    return v;
  };
  tx.pump(0, w.fx);
  EXPECT_EQ(psns(), (std::vector<uint32_t>{0, 1, 2, 3}));
  for (uint32_t k : {3u, 2u, 1u}) tx.on_packet(w.ack(k, ramp(64, 0)), 10 * kUs, w.fx);
  EXPECT_TRUE(psns().empty()) << "psn 0 is still unacknowledged: psn 4 would reuse its slot phase";
  EXPECT_EQ(tx.lowest_unacked(), 0u);
  tx.on_packet(w.ack(0, ramp(64, 0)), 11 * kUs, w.fx);
  EXPECT_EQ(psns(), (std::vector<uint32_t>{4, 5, 6, 7}));
  tx.on_packet(w.ack(5, ramp(64, 0)), 12 * kUs, w.fx);
  EXPECT_TRUE(psns().empty());
  tx.on_packet(w.ack(4, ramp(64, 0)), 13 * kUs, w.fx);  // lowest unacked 6: up to 9
  EXPECT_EQ(psns(), (std::vector<uint32_t>{8, 9}));
}

// Catches: the PS's entry timeout sampling a completion the reminder helped
// (Karn's rule): the 100 ms one here would put it at 119.375 ms.

}  // namespace
}  // namespace ina::test
