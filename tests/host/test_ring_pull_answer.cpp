// Late Rina members (host/ring.hpp, ring.cpp, ring_transfer.cpp): a member
// that gets its agent's pull before it can begin the step answers "late"
// (RingPull | kBusy) and "begun" (| kResume) when it begins; a punctual
// member sends nothing. The ToR tells the rack when the step turns held and
// when no member holds it any more. While held, a sender's packets of that
// step wait in the ToR's slots for the late member's, so their RTO is no
// loss: nothing is retransmitted, the window keeps, the agent pulls again.
// Once released, the RTO detects losses as before. No simulator: one
// endpoint, the test plays the ToR. The rack is ranks {0, 1, 2} (agent 0)
// under kTor, in a ring with autonomous ranks 3 and 4.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "host/ring.hpp"
#include "host/tensor_io.hpp"
#include "fake_effects.hpp"

namespace ina {
namespace {

constexpr NodeId kTor = 10;
constexpr uint64_t kElems = 3 * 64 * 16;  // three shards of 16 packets of 64 values
constexpr uint16_t kLate = flag::kBusy, kBegun = flag::kBusy | flag::kResume;

struct Rank {
  explicit Rank(uint16_t rank, std::vector<Time> step_delays = {}, Time delay_target = 0) {
    host::RingConfig c;
    c.delay_target = delay_target;
    c.rank = rank;
    c.nodes = {1, 2, 3, 4, 5};
    c.stages = host::plan_rina({{0, 1, 2}, {3}, {4}}, {kTor, kNoNode, kNoNode}, kElems)[rank];
    c.init_window = 4;
    c.step_delays = std::move(step_delays);
    ep = std::make_unique<host::RingEndpoint>(c);
    ep->set_id(c.nodes[rank]);
    ep->submit(std::make_shared<host::SyntheticTensor>(7, rank, 5), kElems);
    ep->on_start(0, fx);
    run_until(0);  // the op's start
  }
  void run_until(Time t) {
    fx.advance(t, [&](uint64_t tok, Time at) { ep->on_timer(tok, at, fx); });
  }
  // From the ToR: the agent's pull of step `code` (op 0), or (flags) its word on the step.
  void pull(uint8_t code, uint16_t flags = 0) {
    Packet* p = fx.alloc();
    p->h = Header{};
    p->h.type = PktType::RingPull;
    p->h.flags = flags;
    p->h.job = 1;
    p->h.src = kTor;
    p->h.dst = ep->id();
    p->h.priority = code;
    ep->on_packet(p, fx.now(), fx);
  }
  // The next group's acknowledgement of data packet `psn` of the current step, through the ToR.
  void ack(uint32_t psn, NodeId acker) {
    Packet* a = fx.alloc();
    a->h = Header{};
    a->h.type = PktType::RingAck;
    a->h.job = 1;
    a->h.src = acker;
    a->h.dst = ep->id();
    a->h.psn = psn;
    ep->on_packet(a, fx.now(), fx);
  }
  size_t count(PktType t, uint16_t flags) {
    size_t n = 0;
    for (const auto& s : fx.sent) n += s.h.type == t && s.h.flags == flags;
    return n;
  }
  test::FakeEffects fx{256};
  std::unique_ptr<host::RingEndpoint> ep;
};

// The agent's step 0: its pull and a window of packets to the ToR. The
// ToR says a member is late: for 20 ms (100 floors of 200 us) no timeout,
// no resend of a data packet, the window keeps; the pull goes again. Then
// the ToR says no member holds the step: the packets are timed from then,
// and with no acknowledgement they time out (no earlier than the RTO floor
// after it), and go again.
TEST(RingPullAnswer, AgentDoesNotTimeOutWhileALateMemberHoldsTheStep) {
  Rank a(0);
  EXPECT_EQ(a.count(PktType::RingPull, 0), 1u);
  EXPECT_EQ(a.count(PktType::RingData, flag::kPartial), 4u);
  a.fx.take();
  a.pull(0, kLate);
  a.run_until(20 * kMs);
  EXPECT_EQ(a.ep->stats().timeouts, 0u);
  EXPECT_EQ(a.ep->stats().retransmits, 0u);
  EXPECT_GT(a.ep->stats().held_rtos, 0u);
  EXPECT_EQ(a.count(PktType::RingData, flag::kPartial | flag::kResend), 0u);
  EXPECT_GE(a.count(PktType::RingPull, 0), 5u) << "the pull goes again while the step is held";
  EXPECT_EQ(a.ep->cwnd(), 4.0);

  a.pull(0, kBegun);
  EXPECT_EQ(a.ep->stats().rack_words, 2u);
  a.fx.take();
  a.run_until(20 * kMs + 150 * kUs);  // within the RTO floor (200 us) of the word
  EXPECT_EQ(a.ep->stats().timeouts, 0u);
  a.run_until(40 * kMs);
  EXPECT_GE(a.ep->stats().timeouts, 4u) << "once released, silence is a loss";
  EXPECT_EQ(a.count(PktType::RingData, flag::kPartial | flag::kResend), a.ep->stats().retransmits);
  EXPECT_GE(a.ep->stats().retransmits, 4u);
}

// A packet's round trip while a late member held the step includes the
// wait for that member: no RTT sample, no delay signal. Packet 0 comes back
// in 50 us; 1-3 wait 20 ms for the late member and come back 100 us after
// the word that it has begun. The RTO stays at its 200 us floor, so the
// packets the acknowledgements let out go again within a millisecond when
// nothing answers them, and the window keeps. Were the held round trips
// samples, the RTO would be over 20 ms and the delay signal (4 ms over the
// least round trip) would halve the window.
TEST(RingPullAnswer, AHeldRoundTripIsNoRttSample) {
  Rank a(0, {}, 4 * kMs);
  ASSERT_EQ(a.count(PktType::RingData, flag::kPartial), 4u);
  const NodeId acker = kTor;  // relays the next group's acknowledgements
  a.fx.take();
  a.run_until(50 * kUs);
  a.ack(0, acker);
  ASSERT_EQ(a.ep->stats().acks, 1u);
  a.pull(0, kLate);
  a.run_until(20 * kMs);
  a.pull(0, kBegun);
  a.run_until(20 * kMs + 100 * kUs);
  a.fx.take();
  for (uint32_t psn = 1; psn < 4; ++psn) a.ack(psn, acker);
  EXPECT_EQ(a.ep->stats().delayed, 0u);
  EXPECT_GE(a.ep->cwnd(), 4.0);
  std::vector<uint32_t> fresh;  // first sent on the acknowledgements
  for (const auto& s : a.fx.take())
    if (s.h.type == PktType::RingData) fresh.push_back(s.h.psn);
  ASSERT_FALSE(fresh.empty());
  a.run_until(21 * kMs);
  for (const uint32_t psn : fresh) {
    size_t resent = 0;
    for (const auto& s : a.fx.sent) resent += s.h.type == PktType::RingData && s.h.psn == psn;
    EXPECT_GE(resent, 1u) << "psn " << psn << ": the RTO followed the held round trips";
  }
}

// Without the ToR's word the agent's RTO is a loss, as before.
TEST(RingPullAnswer, AgentTimesOutWhenNoMemberIsLate) {
  Rank a(0);
  a.run_until(20 * kMs);
  EXPECT_GE(a.ep->stats().timeouts, 4u);
  EXPECT_EQ(a.ep->stats().held_rtos, 0u);
}

// A member still in its straggler delay (5 ms before its step 0) when the
// pull comes answers late, and begun when it begins; a repeated pull of the
// begun step is answered begun again. A punctual member (rank 2) sends no
// answer. A member holding the step as a sender (the ToR's word came before
// it began) does not time out until released.
TEST(RingPullAnswer, ALateMemberSaysSoAndAPunctualOneSaysNothing) {
  Rank m(1, {5 * kMs});
  m.pull(0);
  ASSERT_EQ(m.count(PktType::RingPull, kLate), 1u);
  EXPECT_EQ(m.fx.sent[0].h.dst, kTor);
  EXPECT_EQ(m.fx.sent[0].h.priority, 0u);
  EXPECT_EQ(m.fx.sent[0].h.rank, 1u);
  EXPECT_EQ(m.count(PktType::RingData, flag::kPartial), 0u);
  m.fx.take();
  m.pull(0, kLate);  // the ToR's word on this member's own lateness
  m.run_until(5 * kMs);
  EXPECT_EQ(m.count(PktType::RingPull, kBegun), 1u);
  EXPECT_EQ(m.count(PktType::RingData, flag::kPartial), 4u);
  m.fx.take();
  m.pull(0);
  EXPECT_EQ(m.count(PktType::RingPull, kBegun), 1u) << "a repeated pull is answered again";
  EXPECT_EQ(m.ep->stats().answers_sent, 3u);
  m.run_until(20 * kMs);
  EXPECT_EQ(m.ep->stats().timeouts, 0u) << "held by the word that came before it began";
  m.pull(0, kBegun);
  m.run_until(40 * kMs);
  EXPECT_GE(m.ep->stats().timeouts, 4u);

  Rank p(2);
  p.pull(0);
  EXPECT_EQ(p.count(PktType::RingPull, kLate) + p.count(PktType::RingPull, kBegun), 0u);
  EXPECT_EQ(p.count(PktType::RingData, flag::kPartial), 4u);
  EXPECT_EQ(p.ep->stats().answers_sent, 0u);
}

}  // namespace
}  // namespace ina
