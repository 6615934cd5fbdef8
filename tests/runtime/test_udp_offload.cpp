// UDP segmentation offload in the runtime's engine: datagrams to
// one destination leave in segmented sends (UDP_SEGMENT) and arrive as
// coalesced batches (UDP_GRO) that the engine splits. Every test asserts the
// exact datagrams delivered and the exact counters.
#include <gtest/gtest.h>

#include <netinet/udp.h>
#include <sys/socket.h>

#include <cstring>
#include <vector>

#include "runtime/net.hpp"
#include "runtime_fixture.hpp"
#include "runtime/udp_engine.hpp"
#include "wire/packet.hpp"

using namespace ina;
using namespace ina::rt;

namespace {

// Values per packet: 836-byte datagrams, 64 of which fit one segmented send (64 KB).
constexpr uint16_t kCount = 200;

// Keeps (psn, payload) of every packet it gets.
class Keep final : public Node {
 public:
  void on_packet(Packet* p, Time, Effects& fx) override {
    psns.push_back(p->h.psn);
    ce.push_back(p->h.has(flag::kEcn));
    values.emplace_back(p->values().begin(), p->values().end());
    fx.free(p);
  }
  void on_timer(uint64_t, Time, Effects&) override {}
  std::vector<uint32_t> psns;
  std::vector<bool> ce;  // CE marked, by arrival
  std::vector<std::vector<int32_t>> values;
};

Header data(uint32_t psn, NodeId src, NodeId dst, uint16_t count) {
  Header h = ina::test::data_header(1, src, dst, count);
  h.psn = psn;
  return h;
}

std::vector<int32_t> payload_of(uint32_t psn, uint16_t count) {
  std::vector<int32_t> v(count);
  for (uint16_t k = 0; k < count; ++k) v[k] = static_cast<int32_t>(psn * 1000 + k) * (k % 2 ? -1 : 1);
  return v;
}

template <typename Pred>
bool pump(std::vector<UdpEngine*> es, Pred pred) {
  const Time end = monotonic_now() + 3 * kSec;
  while (!pred()) {
    if (monotonic_now() > end) return false;
    for (UdpEngine* e : es) e->poll(kMs);
  }
  return true;
}

struct Pair {
  explicit Pair(bool offload, UniqueFd host_sock = {}) {
    EngineConfig rc;
    rc.mode = EngineMode::Router;
    rc.payload_values = kCount;
    rc.offload = offload;
    router = std::make_unique<UdpEngine>(rc);
    sink.set_id(0);
    router->add_node(sink);
    EngineConfig hc;
    hc.payload_values = kCount;
    hc.gateway = router->local();
    hc.offload = offload;
    host = std::make_unique<UdpEngine>(hc, std::move(host_sock));
    src.set_id(5);
    host->add_node(src);
    router->set_route(5, host->local());
    router->start();
    host->start();
  }
  // Sends `n` packets with psn 0..n-1, the last `short_tail` of them with 7 values instead of kCount.
  void send(uint32_t n, uint32_t short_tail = 0) {
    host->invoke(src, [&](Time, Effects& fx) {
      for (uint32_t i = 0; i < n; ++i) {
        const uint16_t count = i + short_tail >= n ? 7 : kCount;
        Packet* p = fx.alloc();
        p->h = data(i, 5, 0, count);
        const auto v = payload_of(i, count);
        std::memcpy(p->payload(), v.data(), 4u * count);
        fx.send(p);
      }
    });
  }
  void expect_exact(uint32_t n, uint32_t short_tail = 0) {
    ASSERT_TRUE(pump({host.get(), router.get()}, [&] { return sink.psns.size() >= n; }))
        << sink.psns.size() << " of " << n << " arrived";
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(sink.psns[i], i) << "in send order";
      EXPECT_EQ(sink.values[i], payload_of(i, i + short_tail >= n ? 7 : kCount)) << "psn " << i;
    }
    EXPECT_EQ(router->stats().rx_malformed, 0u);
    EXPECT_EQ(router->stats().rx_datagrams, n);
  }
  Keep sink, src;
  std::unique_ptr<UdpEngine> router, host;
};

}  // namespace

// 100 datagrams of one length to one destination: the engine flushes at
// every `batch` (64) queued, so they leave in exactly two segmented sends
// (64 + 36), arrive as coalesced batches, and are split back into the same
// 100 packets in order. Catches: segments cut at the wrong length, a batch
// split at the wrong size, a lost last segment.
TEST(UdpOffload, SegmentedSendsArriveAsTheSameDatagramsInOrder) {
  Pair p(true);
  p.send(100);
  p.expect_exact(100);
  EXPECT_EQ(p.host->stats().tx_datagrams, 100u);
  EXPECT_EQ(p.host->stats().tx_messages, 2u);
  EXPECT_EQ(p.host->stats().tx_gso_refused, 0u);
  // Loopback hands a segmented send to a UDP_GRO socket whole: one batch each.
  EXPECT_EQ(p.router->stats().rx_gro_batches, 2u);
  EXPECT_EQ(p.router->stats().rx_bytes, 100u * (kHeaderBytes + 4 * kCount));
}

// A run's last datagram may be shorter (UDP_SEGMENT allows it), a longer one
// starts a new send. 64 queued = 61 long + 3 short: the long ones and the
// first short one go in one send, the two other short ones in one more.
TEST(UdpOffload, AShorterDatagramEndsASegmentedRun) {
  Pair p(true);
  p.send(64, 3);
  p.expect_exact(64, 3);
  EXPECT_EQ(p.host->stats().tx_messages, 2u);
}

// Offload off: one message per datagram, the same packets.
TEST(UdpOffload, WithoutOffloadEveryDatagramIsItsOwnMessage) {
  Pair p(false);
  p.send(100);
  p.expect_exact(100);
  EXPECT_EQ(p.host->stats().tx_messages, 100u);
  EXPECT_EQ(p.router->stats().rx_gro_batches, 0u);
}

// A kernel that refuses segmented sends (here: a socket with UDP checksums
// off, SO_NO_CHECK, for which Linux refuses UDP_SEGMENT with EINVAL, as it
// does for a segment longer than the path MTU): the refused datagrams are
// sent one by one, none lost, and the refusal is counted once.
TEST(UdpOffload, ARefusedSegmentedSendFallsBackToSingleDatagrams) {
  UniqueFd s = bind_udp(Endpoint::parse("127.0.0.1:0"), 1 << 20);
  const int on = 1;
  ASSERT_EQ(setsockopt(s.get(), SOL_SOCKET, SO_NO_CHECK, &on, sizeof on), 0);
  Pair p(true, std::move(s));
  p.send(100);
  p.expect_exact(100);
  EXPECT_EQ(p.host->stats().tx_gso_refused, 1u);
  EXPECT_EQ(p.host->stats().tx_messages, 100u);
  EXPECT_EQ(p.host->stats().tx_errors, 0u);
}

// A coalesced batch whose tail does not fit the receive buffer: the whole
// datagrams before the cut are delivered, the cut one is counted as
// malformed (truncated) and never decoded, and the message is counted as
// truncated. 5 datagrams of L bytes into a buffer of 2.5 L.
TEST(UdpOffload, ABatchCutShortByTheBufferLosesOnlyItsTailCounted) {
  const uint16_t count = 100;
  const size_t L = kHeaderBytes + 4u * count;
  EngineConfig rc;
  rc.mode = EngineMode::Router;
  rc.payload_values = count;
  rc.gro_buffer_bytes = 2 * L + L / 2;
  UdpEngine router(rc);
  Keep sink;
  sink.set_id(0);
  router.add_node(sink);
  UniqueFd tx = bind_udp(Endpoint::parse("127.0.0.1:0"), 1 << 20);
  router.set_route(5, local_endpoint(tx.get()));
  router.start();

  std::vector<std::byte> buf(5 * L);
  for (uint32_t i = 0; i < 5; ++i)
    encode(data(i, 5, 0, count), payload_of(i, count), std::span<std::byte>(buf.data() + i * L, L));
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char ctl[kUdpCmsgBytes];
  msghdr m{};
  m.msg_name = const_cast<sockaddr_in*>(&router.local().sa);
  m.msg_namelen = sizeof(sockaddr_in);
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  set_udp_segment(m, ctl, static_cast<uint16_t>(L));
  ASSERT_EQ(sendmsg(tx.get(), &m, 0), static_cast<ssize_t>(buf.size()));

  ASSERT_TRUE(pump({&router}, [&] { return router.stats().rx_datagrams == 3; }));
  EXPECT_EQ(sink.psns, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(sink.values[1], payload_of(1, count));
  const EngineStats& s = router.stats();
  EXPECT_EQ(s.rx_gro_batches, 1u);
  EXPECT_EQ(s.rx_truncated, 1u);
  EXPECT_EQ(s.rx_malformed, 1u);
  EXPECT_EQ(s.decode_errors[static_cast<size_t>(DecodeError::Truncated)], 1u);
  EXPECT_EQ(router.packets_in_use(), 0u);
}

// A router sends one result copy to each of 3 hosts, round by round (as a
// switch does): the copies are grouped by destination, so each host gets
// its 40 in order in two segmented sends, one per flush.
TEST(UdpOffload, CopiesToSeveralHostsAreGroupedByDestination) {
  EngineConfig rc;
  rc.mode = EngineMode::Router;
  rc.payload_values = kCount;
  UdpEngine router(rc);
  Keep sw;
  sw.set_id(0);
  router.add_node(sw);
  std::vector<std::unique_ptr<UdpEngine>> hosts;
  std::vector<Keep> nodes(3);
  for (unsigned h = 0; h < 3; ++h) {
    EngineConfig hc;
    hc.payload_values = kCount;
    hc.gateway = router.local();
    hosts.push_back(std::make_unique<UdpEngine>(hc));
    nodes[h].set_id(static_cast<NodeId>(10 + h));
    hosts[h]->add_node(nodes[h]);
    router.set_route(static_cast<NodeId>(10 + h), hosts[h]->local());
  }
  router.invoke(sw, [&](Time, Effects& fx) {
    for (uint32_t i = 0; i < 40; ++i)
      for (unsigned h = 0; h < 3; ++h) {
        Packet* p = fx.alloc();
        p->h = data(i, 0, static_cast<NodeId>(10 + h), kCount);
        const auto v = payload_of(i + h, kCount);
        std::memcpy(p->payload(), v.data(), 4u * kCount);
        fx.send(p);
      }
  });
  std::vector<UdpEngine*> all;
  for (auto& h : hosts) all.push_back(h.get());
  ASSERT_TRUE(pump(all, [&] { return nodes[0].psns.size() + nodes[1].psns.size() + nodes[2].psns.size() == 120; }));
  for (unsigned h = 0; h < 3; ++h) {
    ASSERT_EQ(nodes[h].psns.size(), 40u);
    for (uint32_t i = 0; i < 40; ++i) {
      EXPECT_EQ(nodes[h].psns[i], i);
      EXPECT_EQ(nodes[h].values[i], payload_of(i + h, kCount));
    }
    EXPECT_EQ(hosts[h]->stats().rx_gro_batches, 2u);
  }
  // 120 copies, 64 flushed at once and 56 after: one send per host each time.
  EXPECT_EQ(router.stats().tx_messages, 6u);
}

// ---------------------------------------------------------------- multicast

namespace {

// A router hosting a node that multicasts, and three hosts (ranks 0..2 of job 1).
struct Group {
  explicit Group(FaultConfig faults = {}, size_t max_tx_queue = 1 << 16) {
    EngineConfig rc;
    rc.mode = EngineMode::Router;
    rc.payload_values = kCount;
    rc.faults = faults;
    rc.max_tx_queue = max_tx_queue;
    router = std::make_unique<UdpEngine>(rc);
    sw.set_id(0);
    router->add_node(sw);
    nodes.resize(3);
    for (unsigned h = 0; h < 3; ++h) {
      EngineConfig hc;
      hc.payload_values = kCount;
      hc.gateway = router->local();
      hosts.push_back(std::make_unique<UdpEngine>(hc));
      nodes[h].set_id(static_cast<NodeId>(10 + h));
      hosts[h]->add_node(nodes[h]);
      router->set_route(static_cast<NodeId>(10 + h), hosts[h]->local());
    }
  }
  // Multicasts results 0..n-1 (payload_of(i)) to `mask` (empty: all); returns how many the engine took.
  unsigned send(uint32_t n, RankBits mask = {}) {
    unsigned taken = 0;
    router->invoke(sw, [&](Time, Effects& fx) {
      for (uint32_t i = 0; i < n; ++i) {
        Packet* p = fx.alloc();
        p->h = data(i, 0, kMulticast, kCount);
        p->h.type = PktType::Ack;
        p->h.flags = flag::kResult;
        const auto v = payload_of(i, kCount);
        std::memcpy(p->payload(), v.data(), 4u * kCount);
        p->mcast = mask;
        if (fx.multicast(p)) ++taken;
        else fx.free(p);
      }
    });
    return taken;
  }
  bool pump_all(size_t want) {
    std::vector<UdpEngine*> all;
    for (auto& h : hosts) all.push_back(h.get());
    return pump(all, [&] { return nodes[0].psns.size() + nodes[1].psns.size() + nodes[2].psns.size() >= want; });
  }
  Keep sw;
  std::vector<Keep> nodes;
  std::unique_ptr<UdpEngine> router;
  std::vector<std::unique_ptr<UdpEngine>> hosts;
};

}  // namespace

// One encoding per result, its payload shared by the other members' copies
// (a header each, with its own destination): every host gets every result,
// exact, in order, addressed to it (a host engine drops a datagram for a
// node it does not have: rx_unknown_dst). Catches: a copy with the first
// member's destination, a payload from another result's slot, a copy lost
// when the queue flushes between results.
TEST(UdpMulticast, OneEncodingServesEveryMemberExactly) {
  Group g;
  g.router->set_group(1, {10, 11, 12});
  EXPECT_EQ(g.send(100), 100u);
  ASSERT_TRUE(g.pump_all(300));
  for (unsigned h = 0; h < 3; ++h) {
    ASSERT_EQ(g.nodes[h].psns.size(), 100u) << "host " << h;
    for (uint32_t i = 0; i < 100; ++i) {
      EXPECT_EQ(g.nodes[h].psns[i], i);
      EXPECT_EQ(g.nodes[h].values[i], payload_of(i, kCount)) << "host " << h << " psn " << i;
    }
    EXPECT_EQ(g.hosts[h]->stats().rx_unknown_dst, 0u);
    EXPECT_EQ(g.hosts[h]->stats().rx_malformed, 0u);
  }
  EXPECT_EQ(g.router->stats().tx_datagrams, 300u);
  EXPECT_EQ(g.router->stats().tx_shared_copies, 200u);
  EXPECT_EQ(g.router->packets_in_use(), 0u);
}

// p->mcast restricts the copies to those ranks; a member without a route is
// counted as unroutable and the others still get theirs.
TEST(UdpMulticast, RanksOfTheMaskOnlyAndUnroutableMembersCounted) {
  Group g;
  g.router->set_group(1, {10, 11, 12, 99});  // rank 3: no route
  EXPECT_EQ(g.send(5, RankBits::bit(0) | RankBits::bit(2) | RankBits::bit(3)), 5u);
  ASSERT_TRUE(g.pump_all(10));
  EXPECT_EQ(g.nodes[0].psns, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(g.nodes[1].psns.empty());
  EXPECT_EQ(g.nodes[2].psns, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(g.router->stats().tx_unroutable, 5u);
  EXPECT_EQ(g.router->stats().tx_shared_copies, 5u);
}

// No group for the job, a cleared group, or fault injection on (each copy
// must meet its own faults): the engine declines and the node keeps p.
TEST(UdpMulticast, DeclinedWithoutAGroupOrWithFaults) {
  Group g;
  EXPECT_EQ(g.send(3), 0u);
  g.router->set_group(1, {10, 11, 12});
  g.router->clear_group(1);
  EXPECT_EQ(g.send(3), 0u);
  FaultConfig f;
  f.loss = 0.5;
  Group lossy(f);
  lossy.router->set_group(1, {10, 11, 12});
  EXPECT_EQ(lossy.send(3), 0u);
  EXPECT_EQ(g.router->stats().tx_datagrams + lossy.router->stats().tx_datagrams, 0u);
}

// A send queue without room: the first copy of a multicast is dropped, and so
// is every other copy, each counted (nothing is sent half-encoded). With room
// for two, a multicast to three sends two and counts one.
TEST(UdpMulticast, CopiesThatFindTheQueueFullAreEachCounted) {
  Group g({}, 2);
  g.router->set_group(1, {10, 11, 12});
  g.router->invoke(g.sw, [&](Time, Effects& fx) {
    for (uint32_t i = 0; i < 2; ++i) {  // fill the queue (no flush below `batch`)
      Packet* p = fx.alloc();
      p->h = data(100 + i, 0, 10, kCount);
      fx.send(p);
    }
    Packet* p = fx.alloc();
    p->h = data(0, 0, kMulticast, kCount);
    EXPECT_TRUE(fx.multicast(p));
  });
  EXPECT_EQ(g.router->stats().tx_overflow, 3u);
  EXPECT_EQ(g.router->stats().tx_shared_copies, 0u);
  Group h({}, 2);
  h.router->set_group(1, {10, 11, 12});
  EXPECT_EQ(h.send(1), 1u);
  EXPECT_EQ(h.router->stats().tx_overflow, 1u);
  EXPECT_EQ(h.router->stats().tx_shared_copies, 1u);
  ASSERT_TRUE(h.pump_all(2));
  EXPECT_EQ(h.nodes[0].psns, std::vector<uint32_t>{0});
  EXPECT_EQ(h.nodes[1].psns, std::vector<uint32_t>{0});
  EXPECT_TRUE(h.nodes[2].psns.empty());
  EXPECT_EQ(g.router->packets_in_use() + h.router->packets_in_use(), 0u);
}

// ------------------------------------------------- emulated egress ECN

// A ToR's emulated egress queues (UdpEngine::set_egress_port): each port's
// backlog counts what was sent to it (836-byte datagrams, 878 bytes on the
// link) and drains at the port's rate, here so slow that nothing drains
// during the test; a datagram that finds more than 2000 bytes there leaves
// marked CE. Hosts 10 and 11 have a port each, host 12 the default port at
// rate 0 (no marking). Multicast copies share one encoding: each copy gets
// its own port's mark, not the first copy's. So at 10 and 11 results 0-2
// find 0, 878 and 1756 bytes and leave unmarked, 3 and 4 find 2634 and 3512
// and leave marked; 12 gets none marked. Catches: a mark by the total
// instead of the port, the first copy's mark copied to the others, a
// marking default port.
TEST(UdpEgressEcn, EachPortMarksAboveItsOwnBacklog) {
  Group g;
  g.router->set_group(1, {10, 11, 12});
  g.router->set_egress_port(10, 1e-12);
  g.router->set_egress_port(11, 1e-12);
  g.router->set_egress_ecn(2000);
  EXPECT_EQ(g.send(5), 5u);
  ASSERT_TRUE(g.pump_all(15));
  const std::vector<bool> want{false, false, false, true, true};
  EXPECT_EQ(g.nodes[0].ce, want);
  EXPECT_EQ(g.nodes[1].ce, want);
  EXPECT_EQ(g.nodes[2].ce, std::vector<bool>(5, false));
  EXPECT_EQ(g.router->stats().ecn_marked, 4u);
  for (unsigned h = 0; h < 3; ++h)
    for (uint32_t i = 0; i < 5; ++i) EXPECT_EQ(g.nodes[h].values[i], payload_of(i, kCount)) << "host " << h;
}

// Without a threshold (the default) nothing is marked, and a packet that
// came in marked keeps its mark on every copy.
TEST(UdpEgressEcn, OffByDefaultAndAnArrivingMarkIsKept) {
  Group g;
  g.router->set_group(1, {10, 11, 12});
  g.router->set_egress_port(10, 1e-12);
  EXPECT_EQ(g.send(5), 5u);
  ASSERT_TRUE(g.pump_all(15));
  for (unsigned h = 0; h < 3; ++h) EXPECT_EQ(g.nodes[h].ce, std::vector<bool>(5, false)) << "host " << h;
  Group m;
  m.router->set_group(1, {10, 11, 12});
  m.router->set_egress_port(10, 1e-12);
  m.router->set_egress_ecn(1 << 20);
  m.router->invoke(m.sw, [&](Time, Effects& fx) {
    Packet* p = fx.alloc();
    p->h = data(0, 0, kMulticast, kCount);
    p->h.type = PktType::Ack;
    p->h.flags = flag::kResult | flag::kEcn;
    EXPECT_TRUE(fx.multicast(p));
  });
  ASSERT_TRUE(m.pump_all(3));
  for (unsigned h = 0; h < 3; ++h) EXPECT_EQ(m.nodes[h].ce, std::vector<bool>{true}) << "host " << h;
  // A marked copy still joins its port's backlog: with a 1000-byte
  // threshold, host 11's next result (after one 878-byte copy) is unmarked,
  // the one after that (1756 bytes queued) marked.
  m.router->set_egress_port(11, 1e-12);
  m.router->set_egress_ecn(1000);
  m.router->invoke(m.sw, [&](Time, Effects& fx) {
    for (uint32_t i = 1; i <= 3; ++i) {
      Packet* p = fx.alloc();
      p->h = data(i, 0, kMulticast, kCount);
      p->h.type = PktType::Ack;
      p->h.flags = flag::kResult | (i == 1 ? flag::kEcn : 0);
      EXPECT_TRUE(fx.multicast(p));
    }
  });
  ASSERT_TRUE(m.pump_all(12));
  EXPECT_EQ(m.nodes[1].ce, (std::vector<bool>{true, true, false, true}));
}
