// The receiving side of a PS stream with delayed cumulative
// acknowledgements (host::delayed_ack_due, SparseConfig::ack_every).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "dataplane/zebra_layout.hpp"
#include "host/sparse.hpp"
#include "sim/engine.hpp"
#include "wire/kv.hpp"

using namespace ina;

namespace {
struct Rx {
  std::vector<bool> got;
  uint32_t cum = 0, pending = 0;
  // Packet `psn` arrives; returns whether it is acknowledged now.
  bool arrive(uint32_t psn, bool ack_now = false, unsigned every = 2) {
    if (psn >= got.size()) got.resize(psn + 1, false);
    const bool fresh = !got[psn];
    got[psn] = true;
    return host::delayed_ack_due(got, psn, fresh, ack_now, every, cum, pending);
  }
};
}  // namespace

// TCP's delayed acknowledgement: every second packet in order; at once for
// one out of order, one that fills a gap, a repeat, or one the sender asks
// for; each acknowledgement counts every packet that arrived in order.
TEST(SparseDelayedAck, EverySecondInOrderAndAtOnceOtherwise) {
  Rx r;
  EXPECT_FALSE(r.arrive(0));
  EXPECT_EQ(r.cum, 1u);
  EXPECT_TRUE(r.arrive(1));
  EXPECT_EQ(r.cum, 2u);
  EXPECT_FALSE(r.arrive(2));
  EXPECT_TRUE(r.arrive(4));  // 3 is missing: at once, still counting to 3
  EXPECT_EQ(r.cum, 3u);
  EXPECT_TRUE(r.arrive(3));  // fills the gap
  EXPECT_EQ(r.cum, 5u);
  EXPECT_FALSE(r.arrive(5));
  EXPECT_TRUE(r.arrive(5));  // a repeat: its acknowledgement was lost
  EXPECT_EQ(r.cum, 6u);
  EXPECT_TRUE(r.arrive(6, true));  // the sender can send nothing more
  EXPECT_EQ(r.pending, 0u);
  EXPECT_FALSE(r.arrive(7));
  EXPECT_TRUE(r.arrive(8));  // the pending count restarted after the forced one
  EXPECT_EQ(r.cum, 9u);
}

TEST(SparseDelayedAck, EveryPacketWhenAckEveryIsOne) {
  Rx r;
  for (uint32_t i = 0; i < 5; ++i) EXPECT_TRUE(r.arrive(i, false, 1)) << i;
  EXPECT_EQ(r.cum, 5u);
}

namespace {
// A stand-in for Zebra's switch: acknowledges every hot packet addressed to
// it, echoing a congestion mark; on the worker's last hot packet it sends
// the PS one empty result (the PS waits for the switch's results, §III-E);
// it forwards everything else (the PS's results to the job's multicast group).
class MarkingAcker final : public Node {
 public:
  MarkingAcker(NodeId ps, uint16_t version) : ps_(ps), version_(version) {}
  void on_packet(Packet* p, Time, Effects& fx) override {
    if (p->h.dst == kMulticast) {
      if (!fx.multicast(p)) fx.free(p);
      return;
    }
    if (p->h.dst != id()) return fx.send(p);
    if (p->h.type != PktType::KvData) return fx.free(p);
    if (p->h.has(flag::kLast)) {
      Packet* r = fx.alloc();
      r->h = Header{};
      r->h.type = PktType::KvResult;
      r->h.job = p->h.job;
      r->h.src = id();
      r->h.dst = ps_;
      r->h.nworkers = p->h.nworkers;
      r->h.priority = p->h.priority;
      r->h.flags = flag::kLast;
      kv::init(*r, 0, version_, 1);
      fx.send(r);
    }
    const NodeId w = p->h.src;
    p->h.type = PktType::KvAck;
    p->h.src = id();
    p->h.dst = w;
    p->h.flags = flag::kEce;
    p->h.count = 0;
    fx.send(p);
  }
  void on_timer(uint64_t, Time, Effects&) override {}

 private:
  NodeId ps_;
  uint16_t version_;
};
}  // namespace

// The PS holds the acknowledgement of the worker's first cold segment (one
// in order, no kAckNow: the worker's window then had room for more). ECN
// echoes on the hot acknowledgements halve the worker's window below what
// that segment weighs, so the worker sends nothing more, hot or cold, and
// nothing else would release it: the PS's delayed-acknowledgement timer
// (min_rto / 5) acknowledges it, and the worker never times out (without
// the timer: one retransmission, at the worker's RTO).
TEST(SparseDelayedAck, AHeldSegmentIsAcknowledgedWhenTheSenderStalls) {
  constexpr NodeId kSw = 0, kW = 1, kPs = 2;
  host::SparseConfig c;
  c.workers = {kW};
  c.ps = kPs;
  c.sw = kSw;
  c.pairs = 9;
  c.ps_pairs = 120;
  c.ack_every = 2;
  c.init_window = 28;
  c.min_rto = 1 * kMs;
  sim::Simulator sim(1, static_cast<uint16_t>(kv::words(120)));
  sim.add_node(std::make_unique<MarkingAcker>(kPs, 1), true);
  auto wp = std::make_unique<host::SparseWorker>(c, 0);
  auto pp = std::make_unique<host::SparsePs>(c);
  host::SparseWorker& w = *wp;
  host::SparsePs& ps = *pp;
  sim.add_node(std::move(wp), false);
  sim.add_node(std::move(pp), false);
  sim::LinkParams link;
  link.delay = 5 * kUs;
  link.ecn_bytes = 0;
  for (const NodeId h : {kW, kPs}) sim.connect(h, kSw, link, link);
  sim.build_routes();
  sim.set_multicast_group(c.job, {kW});
  std::vector<uint64_t> hot, keys;
  for (uint64_t k = 0; k < 900; ++k) hot.push_back(k);
  w.set_table(dp::zebra::heat_table(hot, 0, 1, 16));
  ps.set_table(dp::zebra::heat_table(hot, 0, 1, 16));
  keys = hot;
  for (uint64_t k = 0; k < 240; ++k) keys.push_back(1000000 + k);
  const std::vector<int32_t> vals(keys.size(), 1);
  sim.call(kW, 0, [&](Effects& fx) { w.begin(0, keys, vals, 0, fx); });
  sim.run(50 * kMs);
  EXPECT_EQ(w.stats().retransmits, 0u);
  EXPECT_EQ(ps.stats().delayed_acks, 1u);
  EXPECT_EQ(ps.iteration(), 1u);  // every cold segment, the closing packet and the switch's result arrived
  EXPECT_EQ(ps.stats().pairs, 240u);
  EXPECT_EQ(ps.stats().hot_results, 1u);
  EXPECT_FALSE(w.busy());  // the worker has every sum: the PS's results carry them all
}
