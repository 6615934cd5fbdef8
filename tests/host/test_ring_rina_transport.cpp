// Rina §IV-C's transport at one ring endpoint (host::RinaTransport), no
// simulator: rank 1, a member of an INA rack {0, 1} under ToR kRinaTor, in a
// Rina ring of three groups (the rack, then autonomous ranks 2 and 3). The
// test plays the ToR (pulls, acknowledgements, the rack's AllGather copies),
// rank 2's acknowledgements and the timers. The member's steps: ScatterReduce
// 0 and 1 to the ToR, its rack's own shard (step 2), the agent's broadcast
// received (3), AllGather step 0 received (4), AllGather step 1 sent by this
// member to rank 2 (5), its first AllGather send.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "host/congestion_window.hpp"
#include "host/ring.hpp"
#include "host/tensor_io.hpp"
#include "fake_effects.hpp"

namespace ina {
namespace {

constexpr NodeId kRinaR0 = 1, kRinaR1 = 2, kR2 = 3, kR3 = 4, kRinaTor = 10;
constexpr uint64_t kPkts = 64;                // packets per shard
constexpr uint64_t kRinaElems = 3 * 64 * kPkts;  // three shards of 64 packets of 64 values

struct Member {
  explicit Member(host::RinaTransport t, double ina_gbps, Time ack_delay = 1 * kUs, double nic_gbps = 0)
      : delay(ack_delay) {
    host::RingConfig c;
    c.rank = 1;
    c.nodes = {kRinaR0, kRinaR1, kR2, kR3};
    c.stages = host::plan_rina({{0, 1}, {2}, {3}}, {kRinaTor, kNoNode, kNoNode}, kRinaElems)[1];
    c.init_window = 4;
    c.allgather_from_zero = true;  // as both engines set it for Rina (the agent's broadcast)
    c.rina_transport = t;
    c.ina_gbps = ina_gbps;
    c.wire_bytes = 306;
    c.nic_gbps = nic_gbps;
    ep = std::make_unique<host::RingEndpoint>(c);
    ep->set_id(kRinaR1);
    ep->submit(std::make_shared<host::SyntheticTensor>(7, 1, 4), kRinaElems);
    ep->on_start(0, fx);
    fx.advance(0, [&](uint64_t tok, Time at) { ep->on_timer(tok, at, fx); });  // the op's start
  }

  uint32_t tag(uint8_t code) const { return code; }  // epoch 0, op 0

  // The ToR copies the agent's pull of step `code` to this member.
  void pull(uint8_t code) {
    Packet* p = fx.alloc();
    p->h = Header{};
    p->h.type = PktType::RingPull;
    p->h.job = 1;
    p->h.src = kRinaTor;
    p->h.dst = kRinaR1;
    p->h.priority = tag(code);
    ep->on_packet(p, fx.now(), fx);
  }

  // Runs the current send to its end: every data packet is acknowledged by
  // `acker` `delay` after it left (the k-th data packet sent, k from 1, k x
  // `delay_growth` later still: a queue building up); pace timers fire when
  // due. Records each data packet's send time in `sent_at`.
  void run_send(size_t step, NodeId acker) {
    std::vector<std::pair<Time, Header>> acks;  // due time, the data packet's header
    for (;;) {
      for (const auto& s : fx.take())
        if (s.h.type == PktType::RingData) {
          sent_at.push_back(fx.now());
          acks.emplace_back(fx.now() + delay + delay_growth * static_cast<Time>(sent_at.size()), s.h);
        }
      if (ep->step_log()[step].send_done != kNever) return;
      const Time next_ack = acks.empty() ? kNever : acks.front().first;
      if (fx.next_timer() < next_ack) {
        fx.advance(fx.next_timer(), [&](uint64_t tok, Time at) { ep->on_timer(tok, at, fx); });
        continue;
      }
      ASSERT_NE(next_ack, kNever) << "the send stalled";
      fx.advance(next_ack, [&](uint64_t tok, Time at) { ep->on_timer(tok, at, fx); });
      const Header d = acks.front().second;
      acks.erase(acks.begin());
      Packet* a = fx.alloc();
      a->h = d;
      a->h.type = PktType::RingAck;
      a->h.flags = 0;
      a->h.src = acker;
      a->h.dst = kRinaR1;
      a->h.count = 0;
      ep->on_packet(a, fx.now(), fx);
    }
  }

  // The ToR's copy of packet `psn` of AllGather step `step_tag`, first sent by `orig`.
  Packet* copy(uint32_t step_tag, NodeId orig, uint32_t psn) {
    Packet* p = fx.alloc();
    p->h = Header{};
    p->h.type = PktType::RingData;
    p->h.flags = flag::kResult;
    p->h.job = 1;
    p->h.src = kRinaTor;
    p->h.dst = kRinaR1;
    p->h.psn = psn;
    p->h.priority = step_tag;
    p->h.agg_index = orig;
    p->h.count = 64;
    return p;
  }

  // The ToR's copy of shard [off, off + len) of AllGather step `code`, first sent by `orig`.
  void deliver(uint8_t code, NodeId orig, uint64_t off) {
    for (uint32_t psn = 0; psn < kPkts; ++psn) {
      Packet* p = copy(tag(code), orig, psn);
      for (uint16_t i = 0; i < 64; ++i) p->payload()[i] = static_cast<int32_t>(off + psn * 64 + i);
      ep->on_packet(p, fx.now(), fx);
    }
    for (auto& s : fx.take())  // drop this member's acknowledgements, keep what it sends
      if (s.h.type != PktType::RingAck) fx.sent.push_back(std::move(s));
  }

  Time delay;
  Time delay_growth = 0;
  test::FakeEffects fx{256};
  std::unique_ptr<host::RingEndpoint> ep;
  std::vector<Time> sent_at;
};

// The ScatterReduce window is the endpoint's: step 1 starts with the window
// step 0 ended with, under both transports (neither restarts it per step),
// and it did grow in step 0 (4 packets -> more), so the equality is not the
// initial window's.
TEST(RinaTransport, ScatterReduceWindowCarriesOverToTheNextStep) {
  for (const auto t : {host::RinaTransport::Paper, host::RinaTransport::Aimd}) {
    Member m(t, 1000);  // paced far above what 1 us of RTT needs: the ceiling stays out of the way
    m.pull(0);
    m.run_send(0, kRinaTor);
    const double end0 = m.ep->cwnd();
    EXPECT_GT(end0, 4.5);
    m.pull(1);
    ASSERT_NE(m.ep->step_log()[1].send_begin, kNever);
    EXPECT_EQ(m.ep->step_log()[1].cwnd, end0);
    EXPECT_EQ(m.ep->step_log()[0].cwnd, 4.0);
  }
}

// Paper: the window stops growing where it covers the paced rate over the
// smoothed RTT (every acknowledgement 1 us after its packet: srtt = 1 us):
// 20 Gbps x 1 us / 306 B = 8.17 packets. The plain AIMD grows past it
// (from 4, 64 acknowledgements at 1/cwnd each: ~11.9).
TEST(RinaTransport, PaperStopsWindowGrowthAtFullSpeed) {
  const double full = host::window_covering(20, 1 * kUs, 306);
  EXPECT_NEAR(full, 8.1699, 1e-4);
  Member paper(host::RinaTransport::Paper, 20);
  paper.pull(0);
  paper.run_send(0, kRinaTor);
  EXPECT_EQ(paper.ep->cwnd(), full);
  Member aimd(host::RinaTransport::Aimd, 20);
  aimd.pull(0);
  aimd.run_send(0, kRinaTor);
  EXPECT_GT(aimd.ep->cwnd(), 11.5);
}

// Paper's ceiling follows the least RTT sampled on the send, not the
// smoothed one: here each acknowledgement comes 20 ns later than the one
// before (the window's own queue), so srtt rises from 1.02 us towards
// 2.3 us. The window stops where it covers 20 Gbps over the first, least
// RTT: 20 Gbps x 1.02 us / 306 B = 8.33 packets. Over srtt it would grow to
// ~11.9, as far as 64 acknowledgements take it, and keep a queue of its own.
TEST(RinaTransport, PaperCeilingFollowsTheLeastRttNotTheQueue) {
  Member paper(host::RinaTransport::Paper, 20);
  paper.delay_growth = 20000;  // ps
  paper.pull(0);
  paper.run_send(0, kRinaTor);
  EXPECT_EQ(paper.ep->cwnd(), host::window_covering(20, 1 * kUs + 20000, 306));
}

// "Full speed" (footnote 1: 20 Gbps) is the pacing rate when none is set
// under Paper; the ScatterReduce packets then leave exactly 8 x 306 B /
// 20 Gbps = 122.4 ns apart (the first window's 4; the next wait for an
// acknowledgement). Under Aimd an unset rate does not pace: the window's 4
// packets leave at once.
TEST(RinaTransport, PaperPacesScatterReduceAtTwentyGbpsByDefault) {
  EXPECT_EQ(host::rina_pace_gbps(0, host::RinaTransport::Paper), 20.0);
  EXPECT_EQ(host::rina_pace_gbps(0, host::RinaTransport::Aimd), 0.0);
  EXPECT_EQ(host::rina_pace_gbps(35, host::RinaTransport::Paper), 35.0);
  Member paper(host::RinaTransport::Paper, host::rina_pace_gbps(0, host::RinaTransport::Paper));
  paper.pull(0);
  paper.run_send(0, kRinaTor);
  ASSERT_EQ(paper.sent_at.size(), kPkts);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(paper.sent_at[i] - paper.sent_at[i - 1], 122400) << "packet " << i;  // ps
  Member aimd(host::RinaTransport::Aimd, host::rina_pace_gbps(0, host::RinaTransport::Aimd));
  aimd.pull(0);
  aimd.run_send(0, kRinaTor);
  ASSERT_EQ(aimd.sent_at.size(), kPkts);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(aimd.sent_at[i], aimd.sent_at[0]);
}

// Once an acknowledgement has given an RTT sample, Paper paces at the
// window's rate over it (host::window_pace_gbps: 1.2 windows per round trip
// outside slow start), below the 1000 Gbps INA rate: the first window's 4
// packets leave 8 x 306 B / 1000 Gbps = 2.448 ns apart; packet 4 goes with
// packet 0's acknowledgement (srtt 1 us, cwnd 4 + 1/4) and packet 5 a pace
// of 1 us / (1.2 x 4.25) = 196.078 ns after it. Aimd paces at the INA rate only.
TEST(RinaTransport, PaperPacesAtTheWindowsRateOnceTheRttIsKnown) {
  EXPECT_DOUBLE_EQ(host::window_pace_gbps(4.25, 1e-6, 306, false), 1.2 * 4.25 * 8 * 306 / 1e-6 / 1e9);
  EXPECT_DOUBLE_EQ(host::window_pace_gbps(4.25, 1e-6, 306, true), 2 * 4.25 * 8 * 306 / 1e-6 / 1e9);
  for (const auto t : {host::RinaTransport::Paper, host::RinaTransport::Aimd}) {
    Member m(t, 1000);
    m.pull(0);
    m.run_send(0, kRinaTor);
    ASSERT_EQ(m.sent_at.size(), kPkts);
    for (size_t i = 1; i < 4; ++i) EXPECT_EQ(m.sent_at[i] - m.sent_at[i - 1], 2448) << "packet " << i;  // ps
    EXPECT_EQ(m.sent_at[4], 1 * kUs);
    EXPECT_EQ(m.sent_at[5] - m.sent_at[4], t == host::RinaTransport::Paper ? 196078 : 2448);
  }
}

// A pace timer that fires late (the runtime's clock; never the
// simulator's) keeps the pace's schedule: at 20 Gbps with every timer
// 300 ns late, packets 1-3 of the first window are all due by the time the
// first timer fires (122.4, 244.8, 367.2 ns) and leave then, 422.4 ns after
// packet 0. Restarting the pace from the late clock gave 3 x 422.4 ns: on
// the emulated cluster (8 KB packets at 100 Mbit/s) RAR reached 49 % of
// the link instead of 54 %.
TEST(RinaTransport, ALatePaceTimerKeepsThePacesSchedule) {
  Member m(host::RinaTransport::Paper, 20);
  m.pull(0);
  const Time late = 300 * kNs;
  std::vector<Time> at;
  auto take = [&] {
    for (const auto& s : m.fx.take())
      if (s.h.type == PktType::RingData) at.push_back(m.fx.now());
  };
  take();
  ASSERT_EQ(at.size(), 1u);
  while (at.size() < 4) {
    ASSERT_NE(m.fx.next_timer(), kNever) << "the send stalled";
    const Time fire_at = m.fx.next_timer() + late;
    m.fx.advance(fire_at, [&](uint64_t tok, Time) { m.ep->on_timer(tok, fire_at, m.fx); });
    take();
  }
  ASSERT_EQ(at.size(), 4u);
  EXPECT_EQ(at[3] - at[0], 422400);  // ps
  EXPECT_EQ(at[1], at[3]);
}

// An INA rack worker paced at its NIC's rate (20 Gbps here, below the
// 1000 Gbps INA rate) that acknowledges a packet meanwhile sends its next
// data packet the acknowledgement's 64 B later: 306 B + 64 B at 20 Gbps =
// 148 ns after the previous one, not 122.4 ns, so data and acknowledgements
// together stay within the link. The packets after it keep 122.4 ns.
TEST(RinaTransport, PacedAtTheNicRateAnAcknowledgementTakesItsShareOfTheLink) {
  Member m(host::RinaTransport::Paper, 1000, 1 * kUs, 20);
  m.ep->submit(std::make_shared<host::SyntheticTensor>(8, 1, 4), kRinaElems);
  m.pull(0);
  // The first packet of the next op's broadcast from the agent, early (a
  // receive this member's buffers take): the member acknowledges it at once.
  m.ep->on_packet(m.copy((1u << 8) | 3, kRinaR0, 0), m.fx.now(), m.fx);  // op 1, step 3
  m.run_send(0, kRinaTor);
  ASSERT_EQ(m.sent_at.size(), kPkts);
  EXPECT_EQ(m.sent_at[1] - m.sent_at[0], 148000);  // ps
  EXPECT_EQ(m.sent_at[2] - m.sent_at[1], 122400);
  EXPECT_EQ(m.sent_at[3] - m.sent_at[2], 122400);
  EXPECT_EQ(m.ep->stats().received, 1u);
}

// AllGather "starts from zero": under Paper this member's first AllGather
// send (step 5, to rank 2) starts from one packet in slow start; under Aimd
// (allgather_from_zero covers the agent's broadcast only) it inherits the
// ScatterReduce window.
TEST(RinaTransport, PaperAllGatherStartsFromOnePacket) {
  for (const auto t : {host::RinaTransport::Paper, host::RinaTransport::Aimd}) {
    Member m(t, 1000);
    for (uint8_t code = 0; code < 3; ++code) {
      m.pull(code);
      m.run_send(code, kRinaTor);
    }
    const double sr_end = m.ep->cwnd();
    ASSERT_GT(sr_end, 4.0);
    // The agent's broadcast of the rack's shard (1), then AllGather step 0 from rank 3 (shard 0).
    m.deliver(3, kRinaR0, 1 * 64 * kPkts);
    m.deliver(3, kR3, 0);
    ASSERT_NE(m.ep->step_log()[5].send_begin, kNever);
    const auto data = m.ep->step_log()[5];
    if (t == host::RinaTransport::Paper) {
      EXPECT_EQ(data.cwnd, 1.0);
    } else {
      EXPECT_EQ(data.cwnd, sr_end);
    }
    m.run_send(5, kR2);
    EXPECT_EQ(m.ep->stats().timeouts, 0u);
    if (t == host::RinaTransport::Paper) {
      EXPECT_EQ(m.ep->cwnd(), 1.0 + kPkts);  // slow start: +1 per acknowledgement
    }
  }
}

}  // namespace
}  // namespace ina
