// The ring transport of host::RingEndpoint alone (no simulator): rank 0 of a
// two-rank RAR, driven by hand. Its first step streams its shard to rank 1;
// the test plays rank 1's acknowledgements and the timers.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "host/ring.hpp"
#include "host/tensor_io.hpp"
#include "fake_effects.hpp"

namespace ina {
namespace {

constexpr NodeId kR0 = 1, kR1 = 2;

struct Rank0 {
  explicit Rank0(Time delay_target = 0) {
    host::RingConfig c;
    c.delay_target = delay_target;
    c.rank = 0;
    c.nodes = {kR0, kR1};
    c.stages = host::plan_rar(2, 2 * 64 * 16)[0];  // shards of 16 packets of 64 values
    c.init_window = 4;
    c.min_rto = 200 * kUs;
    ep = std::make_unique<host::RingEndpoint>(c);
    ep->set_id(kR0);
    ep->submit(std::make_shared<host::SyntheticTensor>(7, 0, 2), 2 * 64 * 16);
    ep->on_start(0, fx);
    ep->on_timer(fx.timers.at(0).second, 0, fx);  // the op's start (no compute time)
  }
  // Rank 1's acknowledgement of data packet `psn` of the first step.
  void ack(uint32_t psn, Time now) { answer(psn, 0, now); }
  // Rank 1's refusal (kBusy) of data packet `psn`, with `extra` flags (kResume).
  void busy(uint32_t psn, uint16_t extra, Time now) { answer(psn, static_cast<uint16_t>(flag::kBusy | extra), now); }
  // A RingAck from rank 1 for data packet `psn` (its header as first sent) with `flags`.
  void answer(uint32_t psn, uint16_t flags, Time now) {
    const auto it = std::find_if(fx.sent.begin(), fx.sent.end(),
                                 [&](const test::Sent& s) { return s.h.type == PktType::RingData && s.h.psn == psn; });
    ASSERT_NE(it, fx.sent.end()) << "psn " << psn << " was never sent";
    Packet* a = fx.alloc();
    a->h = it->h;
    a->h.type = PktType::RingAck;
    a->h.flags = flags;
    a->h.src = kR1;
    a->h.dst = kR0;
    a->h.rank = 1;
    a->h.count = 0;
    ep->on_packet(a, now, fx);
  }
  std::vector<uint32_t> data_psns(size_t from = 0) const {
    std::vector<uint32_t> v;
    for (size_t i = from; i < fx.sent.size(); ++i)
      if (fx.sent[i].h.type == PktType::RingData) v.push_back(fx.sent[i].h.psn);
    return v;
  }
  test::FakeEffects fx{64};
  std::unique_ptr<host::RingEndpoint> ep;
};

// Packet 0 is lost; 1, 2 and 3 are acknowledged. At the third later
// acknowledgement packet 0 goes again at once (not after its RTO), once, and
// the window halves: only one new packet follows the four acknowledgements.
TEST(RingTransport, ThreeLaterAcknowledgementsResendALostPacketAtOnce) {
  Rank0 r;
  ASSERT_EQ(r.data_psns(), (std::vector<uint32_t>{0, 1, 2, 3}));
  const size_t mark = r.fx.sent.size();
  const Time t = 50 * kUs;  // well before the 200 us RTO
  r.ack(1, t);
  r.ack(2, t);
  EXPECT_EQ(r.ep->stats().fast_retransmits, 0u);
  r.ack(3, t);
  EXPECT_EQ(r.ep->stats().fast_retransmits, 1u);
  EXPECT_EQ(r.ep->stats().timeouts, 0u);
  EXPECT_EQ(r.ep->stats().decreases, 1u);
  // Window 4, growing by 1/cwnd per acknowledgement: 4 and 5 after the
  // first, 6 after the second; then 0 again, and nothing new: the window,
  // halved to ~2.7, is below the 3 still in flight.
  EXPECT_EQ(r.data_psns(mark), (std::vector<uint32_t>{4, 5, 6, 0}));
  r.ack(4, t);  // a fourth later acknowledgement: packet 0 is not sent a third time
  EXPECT_EQ(r.ep->stats().fast_retransmits, 1u);
  EXPECT_EQ(r.ep->stats().retransmits, 1u);
}

// The delay signal (host/delay_signal.hpp; the runtime's, over links that
// mark no ECN): packets 0-3 leave at 0; acknowledgements after 10 and 20 us
// set the smallest round trip (10 us), one after 200 us is 190 us above it,
// past the 100 us target: the window halves as for an ECN echo, once (the
// next, 205 us, falls in the hold-off). Off (target 0) the same sequence
// halves nothing.
TEST(RingTransport, ARoundTripFarAboveTheSmallestHalvesTheWindow) {
  for (const Time target : {Time{0}, 100 * kUs}) {
    Rank0 r(target);
    ASSERT_EQ(r.data_psns(), (std::vector<uint32_t>{0, 1, 2, 3}));
    r.ack(0, 10 * kUs);
    r.ack(1, 20 * kUs);
    EXPECT_EQ(r.ep->stats().delayed, 0u);
    r.ack(2, 200 * kUs);
    r.ack(3, 205 * kUs);
    EXPECT_EQ(r.ep->stats().delayed, target ? 2u : 0u) << target;
    EXPECT_EQ(r.ep->stats().decreases, target ? 1u : 0u) << target;
    EXPECT_EQ(r.ep->stats().ece, 0u);
    EXPECT_EQ(r.ep->stats().retransmits, 0u);
  }
}

// RFC 6298 5.3: an RTO runs from the transfer's last progress, not from
// each packet's send. Packets 0-3 leave at 0 under the 200 us floor; their
// acknowledgements come 150 us apart (a queue building, or a ToR slot
// waiting for a slower rack member's copy). The first sets the RTO to
// 450 us; at 200 us packets 1-3 are past their deadline but the transfer
// moved at 150 us, so none times out, and none does while the
// acknowledgements keep coming. When they stop, the packets still open time
// out one RTO after the last (600 us): srtt 253.417968 us + 4 x rttvar
// 204.492187 us (samples 150, 300, 450, 600 us) = 1071.386716 us, and go
// again.
TEST(RingTransport, AnRtoRunsFromTheTransfersLastProgress) {
  Rank0 r;
  ASSERT_EQ(r.data_psns(), (std::vector<uint32_t>{0, 1, 2, 3}));
  r.ack(0, 150 * kUs);
  r.ep->on_timer(0, 200 * kUs, r.fx);
  EXPECT_EQ(r.ep->stats().timeouts, 0u);
  r.ack(1, 300 * kUs);
  r.ack(2, 450 * kUs);
  r.ep->on_timer(0, 600 * kUs, r.fx);
  r.ack(3, 600 * kUs);
  EXPECT_EQ(r.ep->stats().timeouts, 0u);
  EXPECT_EQ(r.ep->stats().retransmits, 0u);
  const auto open = r.data_psns();
  const Time due = 600 * kUs + 1071386716;
  r.ep->on_timer(0, due - 1, r.fx);
  EXPECT_EQ(r.ep->stats().timeouts, 0u);
  r.ep->on_timer(0, due, r.fx);
  EXPECT_EQ(r.ep->stats().timeouts, open.size() - 4) << "a silent transfer still times out";
  EXPECT_EQ(r.ep->stats().retransmits, open.size() - 4);
}

// RFC 6298 5.5 with Karn's rule: when the floor (200 us) is below the path's
// RTT, every first RTO fires and resent packets give no sample. The timeouts
// must back the RTO off for the packets sent next too, or the estimator
// would never see a sample and every packet would be sent twice.
TEST(RingTransport, TimeoutsBackOffTheNextPacketsUntilAValidSample) {
  Rank0 r;
  const Time floor = 200 * kUs;
  r.ep->on_timer(0, floor, r.fx);  // the RTO timer: packets 0-3 time out and go again
  EXPECT_EQ(r.ep->stats().timeouts, 4u);
  // Their acknowledgements arrive at 300 us (no sample: resent); new packets
  // follow at 300 us, each backed off to twice the floor: due at 700 us.
  const size_t mark = r.fx.sent.size();
  for (uint32_t k = 0; k < 4; ++k) r.ack(k, 300 * kUs);
  const auto fresh = r.data_psns(mark);
  ASSERT_EQ(fresh, (std::vector<uint32_t>{4, 5, 6, 7}));  // the window, halved to 2, regrew to ~3.6
  r.ep->on_timer(0, 700 * kUs - 1, r.fx);
  EXPECT_EQ(r.ep->stats().timeouts, 4u) << "a packet sent after a timeout used the un-backed-off RTO";
  // Valid samples (first transmissions, 250 us each) end the backoff: the
  // next packets' RTO is the estimator's: srtt 250 us + 4 x rttvar
  // (125 -> 93.75 -> 70.3125 -> 52.734375 us) = 460.9375 us.
  const size_t mark2 = r.fx.sent.size();
  for (uint32_t k = 4; k < 8; ++k) r.ack(k, 550 * kUs);
  ASSERT_FALSE(r.data_psns(mark2).empty());
  const Time due = 550 * kUs + 460937500;
  r.ep->on_timer(0, due - 1, r.fx);
  EXPECT_EQ(r.ep->stats().timeouts, 4u);
  r.ep->on_timer(0, due, r.fx);
  // Only the packet sent after the fourth sample has exactly this RTO (those
  // sent between the acknowledgements got the estimate of their moment).
  EXPECT_EQ(r.ep->stats().timeouts, 5u);
}

// Receiver flow control, the sender's side: rank 1 refuses packets 0-3
// (kBusy: its buffers still hold earlier steps). They are parked, not lost:
// no RTO fires for them, the window keeps its size and nothing new goes out
// until rank 1 has room. The persist timer sends one probe; the resume
// sends the rest again and the transfer goes on.
TEST(RingTransport, ARefusedTransferHoldsWithoutTimeoutsAndResumes) {
  Rank0 r;
  ASSERT_EQ(r.data_psns(), (std::vector<uint32_t>{0, 1, 2, 3}));
  const size_t mark = r.fx.sent.size();
  for (uint32_t k = 0; k < 4; ++k) r.busy(k, 0, 20 * kUs);
  EXPECT_EQ(r.ep->stats().busy, 4u);
  // The RTO (200 us) and the persist timer (the same interval from the
  // first refusal, 220 us) fire: no timeout, one probe (packet 0).
  r.fx.advance(400 * kUs, [&](uint64_t tok, Time at) { r.ep->on_timer(tok, at, r.fx); });
  EXPECT_EQ(r.ep->stats().timeouts, 0u);
  EXPECT_EQ(r.ep->stats().decreases, 0u);
  EXPECT_EQ(r.ep->stats().probes, 1u);
  EXPECT_EQ(r.data_psns(mark), (std::vector<uint32_t>{0}));
  // The probe is refused too; then rank 1 has room: its resume sends
  // 1, 2 and 3 again (0 is parked again and goes too), nothing else yet.
  r.busy(0, 0, 410 * kUs);
  const size_t mark2 = r.fx.sent.size();
  r.busy(0, flag::kResume, 420 * kUs);
  EXPECT_EQ(r.data_psns(mark2), (std::vector<uint32_t>{0, 1, 2, 3}));
  for (uint32_t k = 0; k < 4; ++k) r.ack(k, 430 * kUs);
  // Four acknowledgements: the window of 4 grew
  // to 5, so five new packets follow; no timeout, no decrease ever.
  EXPECT_EQ(r.data_psns(mark2), (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  r.fx.advance(600 * kUs, [&](uint64_t tok, Time at) { r.ep->on_timer(tok, at, r.fx); });
  EXPECT_EQ(r.ep->stats().timeouts, 0u);
  EXPECT_EQ(r.ep->stats().decreases, 0u);
  EXPECT_EQ(r.ep->stats().probes, 1u) << "a probe after the resume";
}

// A refusal is not a loss for fast retransmission either. Rank 1 refuses
// packet 0 (no room yet), then has room and takes 1, 2 and 3: three later
// packets complete while 0 is not acknowledged. Rank 1's acknowledgement
// of 1 ends the hold, so 0 goes again at once, as a refused packet (not a
// retransmission), before 4 and on; the acknowledgements of 2 and 3, sent
// before that copy, must not make it a fast retransmission nor halve the
// window. Then every packet is acknowledged in the order sent: no
// retransmission and no decrease at all.
TEST(RingTransport, APacketRefusedWhileLaterOnesCompleteIsNotFastRetransmitted) {
  Rank0 r;
  ASSERT_EQ(r.data_psns(), (std::vector<uint32_t>{0, 1, 2, 3}));
  r.busy(0, 0, 20 * kUs);
  ASSERT_EQ(r.ep->stats().busy, 1u);
  const size_t mark = r.fx.sent.size();
  for (uint32_t k = 1; k < 4; ++k) r.ack(k, 30 * kUs);
  EXPECT_EQ(r.ep->stats().fast_retransmits, 0u);
  EXPECT_EQ(r.ep->stats().decreases, 0u);
  EXPECT_EQ(r.ep->stats().resent_refused, 1u);
  const auto sent = r.data_psns(mark);
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(sent.front(), 0u) << "the refused packet goes again first";
  EXPECT_EQ(std::count(sent.begin(), sent.end(), 0u), 1) << "and once";
  for (size_t i = 0; i < sent.size(); ++i) r.ack(sent[i], 40 * kUs);
  EXPECT_EQ(r.ep->stats().fast_retransmits, 0u);
  EXPECT_EQ(r.ep->stats().retransmits, 0u);
  EXPECT_EQ(r.ep->stats().decreases, 0u);
  EXPECT_EQ(r.ep->stats().timeouts, 0u);
}

// A refused packet's acknowledgement may also come after those of packets
// sent after its copy: a Rina ToR acknowledges a shard copy when every
// member has, so a packet only one member refused completes on that
// member's acknowledgement while one both refused waits for both, and the
// ToR's acknowledgements leave out of send order (traced on the dragonfly,
// docs/results/rina.md). Rank 1 refuses 0 and 1, then takes 2 and 3; 0 and
// 1 go again, then 4, 5 and 6, whose acknowledgements come first. Neither
// 0 nor 1 is a fast retransmission.
TEST(RingTransport, ARefusedPacketAcknowledgedAfterLaterCopiesIsNotFastRetransmitted) {
  Rank0 r;
  ASSERT_EQ(r.data_psns(), (std::vector<uint32_t>{0, 1, 2, 3}));
  for (uint32_t k = 0; k < 2; ++k) r.busy(k, 0, 20 * kUs);
  const size_t mark = r.fx.sent.size();
  r.ack(2, 30 * kUs);
  r.ack(3, 30 * kUs);
  const auto sent = r.data_psns(mark);
  ASSERT_GE(sent.size(), 5u);
  ASSERT_EQ(std::vector<uint32_t>(sent.begin(), sent.begin() + 5), (std::vector<uint32_t>{0, 1, 4, 5, 6}));
  for (uint32_t k = 4; k < 7; ++k) r.ack(k, 40 * kUs);
  EXPECT_EQ(r.ep->stats().fast_retransmits, 0u);
  EXPECT_EQ(r.ep->stats().decreases, 0u);
  r.ack(0, 41 * kUs);
  r.ack(1, 41 * kUs);
  EXPECT_EQ(r.ep->stats().retransmits, 0u);
}

// What skipping refused packets costs: a refused packet whose copy sent
// on the resume is lost is recovered by its RTO, never by a fast
// retransmission, however many later packets complete. Rank 1 refuses 0,
// takes every other packet of the 16-packet shard; 0's second copy never
// arrives. It goes a third time on its RTO, once, and then completes.
TEST(RingTransport, ALostRefusedPacketIsRecoveredByItsRto) {
  Rank0 r;
  r.busy(0, 0, 20 * kUs);
  r.ack(1, 30 * kUs);  // room again: 0 goes again, then new packets
  ASSERT_EQ(r.ep->stats().resent_refused, 1u);
  for (uint32_t k = 2; k < 16; ++k) r.ack(k, 40 * kUs);
  ASSERT_EQ(r.data_psns().size(), 17u) << "the shard's 16 packets and 0's second copy";
  EXPECT_EQ(r.ep->stats().fast_retransmits, 0u);
  EXPECT_EQ(r.ep->stats().retransmits, 0u);
  const size_t mark = r.fx.sent.size();
  auto timers = [&](uint64_t tok, Time at) { r.ep->on_timer(tok, at, r.fx); };
  Time t = 40 * kUs;
  while (r.ep->stats().timeouts == 0 && t < 2 * kMs) r.fx.advance(t += kUs, timers);
  EXPECT_EQ(r.ep->stats().timeouts, 1u);
  EXPECT_GE(t, 240 * kUs) << "the 200 us floor from the transfer's last progress (40 us)";
  EXPECT_EQ(r.data_psns(mark), (std::vector<uint32_t>{0})) << "0 once more, on its RTO";
  r.ack(0, t + 30 * kUs);
  r.fx.advance(2 * kMs, timers);
  EXPECT_EQ(r.ep->stats().timeouts, 1u);
  EXPECT_EQ(r.ep->stats().retransmits, 1u);
  EXPECT_EQ(r.ep->stats().fast_retransmits, 0u);
}

// Receiver flow control, the receiver's side: rank 1 gets a packet of op 3
// while it is at op 0. A two-rank ring op receives twice (ScatterReduce
// step code 0, AllGather step code 2), so op 3's AllGather shard is receive
// ordinal 7, and rank 1's buffers hold ordinals up to 6. It answers kBusy,
// keeps nothing, and sends kBusy | kResume for it as soon as the packet
// fits: when its first receive is done (ordinal 1 current, room up to 7).
// Rank 0 runs for real; the two exchange packets directly.
TEST(RingTransport, AReceiverRefusesAPacketTooFarAheadAndResumesItsSender) {
  auto make = [](uint16_t rank) {
    host::RingConfig c;
    c.rank = rank;
    c.nodes = {kR0, kR1};
    c.stages = host::plan_rar(2, 2 * 64 * 4)[rank];
    c.min_rto = 200 * kUs;
    auto ep = std::make_unique<host::RingEndpoint>(c);
    ep->set_id(rank ? kR1 : kR0);
    for (int op = 0; op < 5; ++op) ep->submit(std::make_shared<host::SyntheticTensor>(7, rank, 2), 2 * 64 * 4);
    return ep;
  };
  auto e0 = make(0), e1 = make(1);
  test::FakeEffects f0{64}, f1{64};
  e1->on_start(0, f1);
  f1.advance(0, [&](uint64_t tok, Time at) { e1->on_timer(tok, at, f1); });
  // Rank 0's AllGather packet 0 of op 3 (a copy of rank 1's first packet's header, changed).
  const auto first = f1.take();
  ASSERT_FALSE(first.empty());
  constexpr uint32_t kOp3AllGather = (3u << 8) | 2;
  Packet* early = f1.alloc();
  early->h = first[0].h;
  early->h.flags = flag::kResult;
  early->h.src = kR0;
  early->h.dst = kR1;
  early->h.rank = 0;
  early->h.priority = kOp3AllGather;
  std::fill_n(early->payload(), early->h.count, 1);
  e1->on_packet(early, 1 * kUs, f1);
  const auto reply = f1.take();
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(reply[0].h.type, PktType::RingAck);
  EXPECT_EQ(reply[0].h.flags, flag::kBusy | flag::kResult);
  EXPECT_EQ(reply[0].h.dst, kR0);
  EXPECT_EQ(reply[0].h.priority, kOp3AllGather);
  EXPECT_EQ(e1->stats().early, 1u);
  EXPECT_EQ(e1->stats().received, 0u);
  // Rank 0 starts and gets rank 1's first packets.
  e0->on_start(0, f0);
  for (const auto& s : first) {
    Packet* p = f0.alloc();
    p->h = s.h;
    std::copy(s.v.begin(), s.v.end(), p->payload());
    e0->on_packet(p, 1 * kUs, f0);
  }
  std::vector<test::Sent> resumes;
  Time now = 1 * kUs;
  for (int round = 0; round < 10000 && !(e0->done() && e1->done()); ++round) {
    now += 1 * kUs;
    f0.advance(now, [&](uint64_t tok, Time at) { e0->on_timer(tok, at, f0); });
    f1.advance(now, [&](uint64_t tok, Time at) { e1->on_timer(tok, at, f1); });
    for (const auto& s : f1.take()) {
      if (s.h.type == PktType::RingAck && (s.h.flags & flag::kResume)) {
        resumes.push_back(s);
        EXPECT_EQ(e1->op(), 0u);
        EXPECT_EQ(e1->step_log()[0].recv_pkts, 4u) << "sent before the first receive was done";
        EXPECT_EQ(e1->step_log()[2].done, kNever) << "sent after the AllGather receive, not when the first fit";
      }
      Packet* p = f0.alloc();
      p->h = s.h;
      std::copy(s.v.begin(), s.v.end(), p->payload());
      e0->on_packet(p, now, f0);
    }
    for (const auto& s : f0.take()) {
      Packet* p = f1.alloc();
      p->h = s.h;
      std::copy(s.v.begin(), s.v.end(), p->payload());
      e1->on_packet(p, now, f1);
    }
  }
  ASSERT_TRUE(e0->done() && e1->done()) << e0->describe() << " / " << e1->describe();
  ASSERT_EQ(resumes.size(), 1u);
  EXPECT_EQ(resumes[0].h.flags, flag::kBusy | flag::kResume | flag::kResult);
  EXPECT_EQ(resumes[0].h.priority, reply[0].h.priority);
  EXPECT_EQ(resumes[0].h.psn, reply[0].h.psn);
  EXPECT_EQ(e1->stats().resumes_sent, 1u);
  EXPECT_EQ(e0->stats().timeouts + e1->stats().timeouts, 0u);
}

}  // namespace
}  // namespace ina
