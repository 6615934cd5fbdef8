// The congestion window (host/congestion_window.hpp): exact window values
// after a sequence of events, one test per rule and per hold-off guard.
#include <gtest/gtest.h>

#include "host/congestion_window.hpp"

namespace ina::host {
namespace {

using Holdoff = CongestionWindowConfig::Holdoff;

CongestionWindowConfig window(double init, Holdoff h = Holdoff::AtLeastSrtt) {
  CongestionWindowConfig c;
  c.init_window = init;
  c.holdoff = h;
  return c;
}

TEST(CongestionWindow, StartsAtInitWindowAndNeverBelowOnePacket) {
  EXPECT_EQ(CongestionWindow(window(196)).cwnd(), 196);
  EXPECT_EQ(CongestionWindow(window(0.25)).cwnd(), 1);
  CongestionWindow w(window(2));
  EXPECT_TRUE(w.on_loss(0, 0));
  EXPECT_EQ(w.cwnd(), 1);
  EXPECT_TRUE(w.on_loss(kSec, 0));
  EXPECT_EQ(w.cwnd(), 1);  // halving stops at one packet
}

TEST(CongestionWindow, AdditiveIncreaseIsOnePacketPerWindowUpToMaxWindow) {
  auto c = window(4);
  c.max_window = 4.4;
  CongestionWindow w(c);
  w.on_ack();
  EXPECT_DOUBLE_EQ(w.cwnd(), 4.25);
  w.on_ack();
  EXPECT_DOUBLE_EQ(w.cwnd(), 4.4);  // 4.25 + 1/4.25 capped
}

// A paced sender's ceiling (Rina §IV-C, "ceasing window expansion upon
// reaching full speed"): growth stops exactly at it; a window already above
// it stays there (the ceiling never shrinks it), and a decrease still halves.
TEST(CongestionWindow, GrowthStopsAtTheCeilingTheSenderGives) {
  const double full = window_covering(20, 1 * kUs, 306);  // 20 Gbps x 1 us / 2448 bits
  EXPECT_DOUBLE_EQ(full, 20e9 * 1e-6 / 2448);
  CongestionWindow w(window(8));
  w.on_ack(full);
  EXPECT_DOUBLE_EQ(w.cwnd(), 8.125);
  w.on_ack(full);
  EXPECT_EQ(w.cwnd(), full);  // 8.125 + 1/8.125 = 8.248 > 8.170
  w.on_ack(full);
  EXPECT_EQ(w.cwnd(), full);
  w.on_ack();  // no ceiling: additive increase goes on
  EXPECT_GT(w.cwnd(), full);
  CongestionWindow above(window(12));
  above.on_ack(full);
  EXPECT_EQ(above.cwnd(), 12);
  EXPECT_TRUE(above.on_loss(0, 0));
  EXPECT_EQ(above.cwnd(), 6);
}

TEST(CongestionWindow, SlowStartBelowTheThresholdAndTheThresholdIsTheHalvedWindow) {
  auto c = window(6);
  c.ssthresh = 8;
  CongestionWindow w(c);
  w.on_ack();
  w.on_ack();
  EXPECT_EQ(w.cwnd(), 8);  // +1 per packet below 8
  w.on_ack();
  EXPECT_DOUBLE_EQ(w.cwnd(), 8.125);  // +1/cwnd at the threshold
  EXPECT_TRUE(w.on_loss(0, 0));
  EXPECT_DOUBLE_EQ(w.cwnd(), 4.0625);
  EXPECT_DOUBLE_EQ(w.threshold(), 4.0625);
  EXPECT_FALSE(w.in_slow_start());
}

// Guard: AtLeastSrtt (the worker transport) halves again once
// now - last decrease >= max(srtt, floor).
TEST(CongestionWindow, AtLeastSrttHalvesAgainWhenOneSrttHasPassed) {
  CongestionWindow w(window(64));
  EXPECT_TRUE(w.on_loss(1000, 100));
  EXPECT_EQ(w.cwnd(), 32);
  EXPECT_FALSE(w.on_loss(1099, 100));
  EXPECT_FALSE(w.on_ecn(1099, 100, 1050));
  EXPECT_EQ(w.cwnd(), 32);
  EXPECT_TRUE(w.on_loss(1100, 100));  // exactly one srtt later
  EXPECT_EQ(w.cwnd(), 16);
  // Without an RTT sample (srtt 0) the floor (1 ps) still merges signals of one instant.
  EXPECT_FALSE(w.on_loss(1100, 0));
  EXPECT_TRUE(w.on_loss(1101, 0));
  EXPECT_EQ(w.cwnd(), 8);
  EXPECT_EQ(w.last_decrease(), 1101);
}

// Guard: MoreThanSrtt (the ring endpoints, floor 0) needs strictly more than srtt.
TEST(CongestionWindow, MoreThanSrttHalvesAgainOnlyAfterMoreThanOneSrtt) {
  auto c = window(64, Holdoff::MoreThanSrtt);
  c.holdoff_floor = c.timeout_holdoff_floor = 0;
  CongestionWindow w(c);
  EXPECT_TRUE(w.on_timeout(1000, 100));
  EXPECT_FALSE(w.on_loss(1100, 100));  // AtLeastSrtt would halve here
  EXPECT_EQ(w.cwnd(), 32);
  EXPECT_TRUE(w.on_ecn(1101, 100, 0));
  EXPECT_EQ(w.cwnd(), 16);
  EXPECT_TRUE(w.on_loss(1102, 0));  // floor 0: with srtt 0 any later instant
  EXPECT_EQ(w.cwnd(), 8);
}

// Guard: SrttAtDecrease (the sparse path) fixes the hold-off when the decrease
// is made, from the srtt then and the floor of its kind (a timeout's floor).
TEST(CongestionWindow, SrttAtDecreaseKeepsTheHoldOffTheDecreaseStarted) {
  auto c = window(64, Holdoff::SrttAtDecrease);
  c.timeout_holdoff_floor = 1000;
  CongestionWindow w(c);
  EXPECT_TRUE(w.on_ecn(0, 100, 0));  // hold-off max(100, 1) = 100
  EXPECT_EQ(w.cwnd(), 32);
  EXPECT_TRUE(w.on_ecn(100, 5000, 0));  // srtt grew to 5000 since: AtLeastSrtt would wait for it
  EXPECT_EQ(w.cwnd(), 16);
  // hold-off max(5000, 1) from t = 100
  EXPECT_FALSE(w.on_timeout(5099, 10));
  EXPECT_TRUE(w.on_timeout(5100, 10));  // hold-off max(10, 1000) = 1000
  EXPECT_EQ(w.cwnd(), 8);
  EXPECT_FALSE(w.on_ecn(6099, 10, 0));
  EXPECT_TRUE(w.on_ecn(6100, 10, 0));
  EXPECT_EQ(w.cwnd(), 4);
}

TEST(CongestionWindow, EcnPerWindowIgnoresEchoesOfPacketsSentBeforeTheLastDecrease) {
  auto c = window(64);
  c.ecn_per_window = true;
  CongestionWindow w(c);
  EXPECT_TRUE(w.on_ecn(1000, 10, 500));
  EXPECT_FALSE(w.on_ecn(5000, 10, 1000));  // sent at the decrease: answered already
  EXPECT_EQ(w.cwnd(), 32);
  EXPECT_TRUE(w.on_loss(5000, 10));  // other signals are not filtered
  EXPECT_EQ(w.cwnd(), 16);
  EXPECT_TRUE(w.on_ecn(9000, 10, 5001));
  EXPECT_EQ(w.cwnd(), 8);
}

// Guard: a packet fits if inflight + 1 <= window (whole packets), or with
// partial_packet if inflight < window; at least one packet, within `cap`.
TEST(CongestionWindow, AdmissionRoundsAFractionalWindowDownOrWithPartialPacketUp) {
  auto c = window(2);
  CongestionWindow whole(c);
  c.partial_packet = true;
  CongestionWindow partial(c);
  whole.on_ack();    // 2.5
  partial.on_ack();  // 2.5
  ASSERT_DOUBLE_EQ(whole.cwnd(), 2.5);
  EXPECT_TRUE(whole.allows(1));
  EXPECT_FALSE(whole.allows(2));
  EXPECT_TRUE(partial.allows(2));
  EXPECT_FALSE(partial.allows(3));
  EXPECT_TRUE(partial.allows(1, 1.5));
  EXPECT_FALSE(partial.allows(2, 1.5));  // the cap bounds the window
  EXPECT_FALSE(whole.allows(1, 1.5));
  EXPECT_TRUE(whole.allows(0, 0.25));  // one packet always fits
  EXPECT_FALSE(whole.allows(1, 0.25));
}

TEST(CongestionWindow, SlowStartFromOnePacketEndsAtADecreaseOrAtEndSlowStart) {
  CongestionWindow w(window(10));
  w.restart_slow_start();
  EXPECT_EQ(w.cwnd(), 1);
  w.on_ack();
  w.on_ack();
  EXPECT_EQ(w.cwnd(), 3);
  w.end_slow_start();
  EXPECT_EQ(w.cwnd(), 10);  // back to at least init_window
  EXPECT_FALSE(w.in_slow_start());
  w.end_slow_start();
  EXPECT_EQ(w.cwnd(), 10);  // not in one: no change
  w.restart_slow_start();
  for (int i = 0; i < 15; ++i) w.on_ack();
  EXPECT_EQ(w.cwnd(), 16);
  EXPECT_TRUE(w.on_loss(0, 0));
  EXPECT_EQ(w.cwnd(), 8);
  EXPECT_FALSE(w.in_slow_start());
  w.on_ack();
  EXPECT_DOUBLE_EQ(w.cwnd(), 8.125);
  w.end_slow_start();
  EXPECT_DOUBLE_EQ(w.cwnd(), 8.125);  // a decrease ended it, init_window is not restored
}

TEST(CongestionWindow, FixedWindowIgnoresAcksAndSignals) {
  auto c = window(64);
  c.adaptive = false;
  CongestionWindow w(c);
  w.on_ack();
  EXPECT_FALSE(w.on_loss(0, 0));
  EXPECT_FALSE(w.on_ecn(kSec, 0, kSec));
  EXPECT_FALSE(w.on_timeout(2 * kSec, 0));
  EXPECT_EQ(w.cwnd(), 64);
  EXPECT_TRUE(w.allows(63));
  EXPECT_FALSE(w.allows(64));
}

TEST(CongestionWindow, BackedOffTimeoutDoublesUpToTheCeiling) {
  EXPECT_EQ(backed_off_rto(100, 0, 1000), 100);
  EXPECT_EQ(backed_off_rto(100, 3, 1000), 800);
  EXPECT_EQ(backed_off_rto(100, 4, 1000), 1000);
  EXPECT_EQ(backed_off_rto(2 * kSec, 8, 200 * kMs), 200 * kMs);
}

}  // namespace
}  // namespace ina::host
