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
  Rank0() {
    host::RingConfig c;
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
  void ack(uint32_t psn, Time now) {
    const auto it = std::find_if(fx.sent.begin(), fx.sent.end(),
                                 [&](const test::Sent& s) { return s.h.type == PktType::RingData && s.h.psn == psn; });
    ASSERT_NE(it, fx.sent.end()) << "psn " << psn << " was never sent";
    Packet* a = fx.alloc();
    a->h = it->h;
    a->h.type = PktType::RingAck;
    a->h.flags = 0;
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

}  // namespace
}  // namespace ina
