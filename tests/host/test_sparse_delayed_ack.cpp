// The receiving side of a PS stream with delayed cumulative
// acknowledgements (host::delayed_ack_due, SparseConfig::ack_every).
#include <gtest/gtest.h>

#include <functional>
#include <queue>
#include <vector>

#include "dataplane/zebra_layout.hpp"
#include "host/sparse.hpp"
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
// One Zebra worker, its PS and a stand-in switch that acknowledges every hot
// packet (echoing ECN when `mark`), every hop 10 us: events in time order.
struct Loop {
  struct Ev {
    Time at;
    uint64_t seq;
    Packet* p;      // nullptr: a timer
    NodeId node;
    bool operator>(const Ev& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  static constexpr NodeId kSw = 1, kPs = 2, kW = 3;
  PacketPool pool{400};
  std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> q;
  uint64_t seq = 0;
  bool mark = false;
  struct Fx final : Effects {
    Loop* l;
    NodeId self;
    Time now = 0;
    Packet* alloc() override { return l->pool.get(); }
    void free(Packet* p) override { l->pool.put(p); }
    void send(Packet* p) override { l->q.push({now + 10 * kUs, l->seq++, p, 0}); }
    void set_timer(Time at, uint64_t) override { l->q.push({at, l->seq++, nullptr, self}); }
  };
  // Runs until nothing is left; returns when the worker's closing packet left it.
  Time run(host::SparseWorker& w, host::SparsePs& ps, Fx& fw, Fx& fp) {
    Time fin = kNever;
    while (!q.empty()) {
      const Ev e = q.top();
      q.pop();
      if (!e.p) {
        Fx& f = e.node == kW ? fw : fp;
        f.now = e.at;
        e.node == kW ? w.on_timer(0, e.at, f) : ps.on_timer(0, e.at, f);
        continue;
      }
      Packet* p = e.p;
      if (p->h.src == kW && p->h.has(flag::kLast) && (p->h.psn & kv::kPsStream) && fin == kNever) fin = e.at;
      if (p->h.dst == kSw) {  // the switch: an ack per hot packet, nothing else
        if (p->h.type != PktType::KvData) {
          pool.put(p);
          continue;
        }
        p->h.type = PktType::KvAck;
        p->h.src = kSw;
        p->h.dst = kW;
        p->h.flags = mark ? flag::kEce : 0;
        p->h.count = 0;
        q.push({e.at + 10 * kUs, seq++, p, 0});
      } else if (p->h.dst == kPs) {
        fp.now = e.at;
        ps.on_packet(p, e.at, fp);
      } else {
        fw.now = e.at;
        w.on_packet(p, e.at, fw);
      }
    }
    return fin;
  }
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
  Loop l;
  l.mark = true;
  host::SparseConfig c;
  c.workers = {Loop::kW};
  c.ps = Loop::kPs;
  c.sw = Loop::kSw;
  c.pairs = 9;
  c.ps_pairs = 120;
  c.ack_every = 2;
  c.init_window = 28;
  c.min_rto = 1 * kMs;
  host::SparseWorker w(c, 0);
  w.set_id(Loop::kW);
  host::SparsePs ps(c);
  ps.set_id(Loop::kPs);
  std::vector<uint64_t> hot, keys;
  std::vector<int32_t> vals;
  for (uint64_t k = 0; k < 900; ++k) hot.push_back(k);
  w.set_table(dp::zebra::heat_table(hot, 0, 1, 16));
  for (uint64_t k = 0; k < 900; ++k) keys.push_back(k);
  for (uint64_t k = 0; k < 240; ++k) keys.push_back(1000000 + k);
  vals.assign(keys.size(), 1);
  Loop::Fx fw, fp;
  fw.l = fp.l = &l;
  fw.self = Loop::kW;
  fp.self = Loop::kPs;
  w.begin(0, keys, vals, 0, fw);
  const Time fin = l.run(w, ps, fw, fp);
  EXPECT_EQ(w.stats().retransmits, 0u);
  EXPECT_EQ(ps.stats().delayed_acks, 1u);
  EXPECT_NE(fin, kNever);  // every cold segment acknowledged: the closing packet went
  EXPECT_EQ(l.pool.in_use(), 0u);
}
