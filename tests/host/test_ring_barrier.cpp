// The ring's step barrier (host::RingConfig::step_barrier, Rina §III-A's
// per-round barrier behind Eq. 1): a lost release recovered exactly, and the
// iteration time of a deterministic straggler pattern with and without the
// barrier against the two models (sum of per-step maxima; longest path
// through the (worker, step) grid). Exact results of RAR, H-AR and Rina with
// the barrier under loss, duplication and reordering: test_ring.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "host/ring.hpp"
#include "host/tensor_io.hpp"
#include "sim/engine.hpp"

namespace ina {
namespace {

// A star of N hosts around one switch that forwards everything, except that
// it drops the packets `drop` picks (a targeted fault).
class Hub final : public Node {
 public:
  std::function<bool(const Header&)> drop;
  uint64_t dropped = 0;
  void on_packet(Packet* p, Time, Effects& fx) override {
    if (drop && drop(p->h)) {
      ++dropped;
      fx.free(p);
      return;
    }
    fx.send(p);
  }
  void on_timer(uint64_t, Time, Effects&) override {}
};

struct Star {
  // N RAR ranks, shards of one packet; per-rank schedules of step delays.
  Star(size_t n, bool barrier, const std::vector<std::vector<Time>>& delays, std::function<bool(const Header&)> drop = {})
      : sim(7, 64, 50) {
    const uint64_t elems = 64 * n;
    const auto plan = host::plan_rar(n, elems);
    std::vector<NodeId> nodes;
    for (size_t r = 0; r < n; ++r) nodes.push_back(static_cast<NodeId>(r));
    for (size_t r = 0; r < n; ++r) {
      host::RingConfig c;
      c.rank = static_cast<uint16_t>(r);
      c.nodes = nodes;
      c.stages = plan[r];
      c.step_barrier = barrier;
      if (r < delays.size()) c.step_delays = delays[r];
      auto ep = std::make_unique<host::RingEndpoint>(c);
      tensors.push_back(std::make_shared<host::SyntheticTensor>(3, static_cast<unsigned>(r), static_cast<unsigned>(n)));
      ep->submit(tensors.back(), elems);
      eps.push_back(ep.get());
      sim.add_node(std::move(ep), false);
    }
    auto h = std::make_unique<Hub>();
    h->drop = std::move(drop);
    hub = h.get();
    const NodeId sw = sim.add_node(std::move(h), true);
    sim::LinkParams lp;
    lp.delay = 100 * kNs;  // negligible beside the delays below
    for (size_t r = 0; r < n; ++r) sim.connect(static_cast<NodeId>(r), sw, lp, lp);
    sim.build_routes();
    sim.run(10 * kSec);
  }
  // Every rank done, every result exact, nothing left in flight.
  void expect_exact() {
    for (size_t r = 0; r < eps.size(); ++r) {
      EXPECT_TRUE(eps[r]->done()) << "rank " << r << ": " << eps[r]->describe();
      EXPECT_EQ(tensors[r]->checked(), 64 * eps.size()) << "rank " << r;
      EXPECT_EQ(tensors[r]->mismatches(), 0u) << "rank " << r;
    }
    EXPECT_TRUE(sim.idle());
  }
  // The op's time: first start to last end.
  Time op_time() const {
    Time a = kNever, b = 0;
    for (const auto* e : eps) {
      a = std::min(a, e->op_start().at(0));
      b = std::max(b, e->op_end().at(0));
    }
    return b - a;
  }
  sim::Simulator sim;
  std::vector<host::RingEndpoint*> eps;
  std::vector<std::shared_ptr<host::SyntheticTensor>> tensors;
  Hub* hub = nullptr;
};

// RAR over N = 4: step codes 0-2 (ScatterReduce), 3 (the local finish, no
// send), 4-6 (AllGather). Rank w is slow (D) in its i-th send iff
// (w + i) mod N = 0: every step has exactly one slow rank, a different one
// each time, rotating against the ring's direction.
constexpr size_t kN = 4;
constexpr Time kD = 1 * kMs;
std::vector<std::vector<Time>> rotating_straggler() {
  const uint8_t send_codes[] = {0, 1, 2, 4, 5, 6};
  std::vector<std::vector<Time>> d(kN, std::vector<Time>(7, 0));
  for (size_t w = 0; w < kN; ++w)
    for (size_t i = 0; i < 6; ++i)
      if ((w + i) % kN == 0) d[w][send_codes[i]] = kD;
  return d;
}

// With the barrier every step lasts its slowest rank's delay: Eq. 1's sum of
// per-step maxima, 2(N-1) * D = 6 ms over the same run without delays.
// Without it, the longest path through the grid F[w][i] = max(F[w][i-1] +
// d(w,i), F[w-1][i-1] + d(w-1,i)) (a step ends when the own send and the
// predecessor's shard are done) picks up the rotating straggler only every
// other step: 3 D. Link and protocol time (< 1 us a step here) is what the
// tolerance allows.
TEST(RingBarrier, IterationIsTheSumOfPerStepMaxima) {
  Star base_barrier(kN, true, {});
  Star base_chain(kN, false, {});
  Star barrier(kN, true, rotating_straggler());
  Star chain(kN, false, rotating_straggler());
  for (Star* s : {&base_barrier, &base_chain, &barrier, &chain}) s->expect_exact();
  const Time tol = 6 * kUs;
  EXPECT_NEAR(static_cast<double>(barrier.op_time() - base_barrier.op_time()), static_cast<double>(6 * kD),
              static_cast<double>(tol));
  EXPECT_NEAR(static_cast<double>(chain.op_time() - base_chain.op_time()), static_cast<double>(3 * kD),
              static_cast<double>(tol));
  // The barrier ran: 5 barriers (codes 0, 1, 2, 4, 5: every step that sends
  // but the op's last), each reported by every rank and released once to
  // each other rank. (Reports waiting 1 ms for a slow rank are resent on
  // the 200 us RTO, doubling: those resends are answered by nothing.)
  for (const auto* e : barrier.eps) EXPECT_EQ(e->stats().reports, 5u);
  for (size_t r = 1; r < kN; ++r) EXPECT_EQ(barrier.eps[r]->stats().releases, 5u);
  EXPECT_EQ(barrier.eps[0]->stats().releases_sent, 5u * (kN - 1));
  for (const auto* e : chain.eps) EXPECT_EQ(e->stats().reports, 0u);
}

// Drop the first release of the second barrier to rank 2: rank 2 resends its
// report on its RTO, the coordinator answers with the release again, and the
// op finishes exactly, one report resend and one extra release later.
TEST(RingBarrier, ALostReleaseIsRecoveredByTheReportsResend) {
  bool gone = false;
  Star s(kN, true, {}, [&](const Header& h) {
    if (gone || h.type != PktType::RingBarrier || h.psn != 1 || h.dst != 2 || (h.priority & 0xFF) != 1) return false;
    return gone = true;
  });
  s.expect_exact();
  EXPECT_EQ(s.hub->dropped, 1u);
  EXPECT_EQ(s.eps[2]->stats().report_resends, 1u);
  // Every barrier applied exactly once at every rank (a release sent again
  // for a resent report is dropped as a duplicate where it was not lost).
  for (size_t r = 1; r < kN; ++r) EXPECT_EQ(s.eps[r]->stats().releases, 5u) << "rank " << r;
  // The op waited one report timeout (the ring's 200 us RTO floor; the
  // measured RTT is ~1 us) for it, less the report-to-release time it saved.
  Star clean(kN, true, {});
  EXPECT_NEAR(static_cast<double>(s.op_time() - clean.op_time()), static_cast<double>(200 * kUs),
              static_cast<double>(5 * kUs));
}


// Barrier packets that do not fit are counted and dropped, never applied:
// injected into a finished 4-rank RAR (barrier codes 0, 1, 2, 4, 5).
TEST(RingBarrier, BadBarrierPacketsAreCountedAndDropped) {
  Star s(kN, true, {});
  s.expect_exact();
  const auto before1 = s.eps[1]->stats();
  const auto before0 = s.eps[0]->stats();
  // A barrier packet from rank `from` to rank `to`.
  auto inject = [&](uint16_t from, uint16_t to, uint32_t psn, uint32_t tag) {
    const Time at = s.sim.now() + kUs;
    s.sim.run(at);
    s.sim.call(to, at, [&](Effects& fx) {
      Packet* p = fx.alloc();
      p->h = Header{};
      p->h.type = PktType::RingBarrier;
      p->h.job = 1;
      p->h.src = from;
      p->h.dst = to;
      p->h.rank = static_cast<uint8_t>(from);
      p->h.nworkers = kN;
      p->h.psn = psn;
      p->h.priority = tag;
      s.eps[to]->on_packet(p, at, fx);
    });
    s.sim.run();
  };
  inject(0, 1, 2, 0);             // psn 2: neither report nor release
  inject(0, 1, 1, 6);             // code 6: the op's last step has no barrier
  inject(0, 1, 1, 1u << 8);       // op 1: never submitted
  inject(2, 1, 1, 0);             // a release not from the coordinator
  inject(2, 1, 0, 0);             // a report to a rank that is not the coordinator
  inject(0, 1, 1, (1u << 24) | 0);  // another epoch
  inject(0, 1, 1, 4);             // a copy of a release applied long ago
  inject(3, 0, 0, 5);             // a report of a released barrier: answered with its release
  const auto& a = s.eps[1]->stats();
  EXPECT_EQ(a.malformed - before1.malformed, 3u);
  EXPECT_EQ(a.foreign - before1.foreign, 2u);
  EXPECT_EQ(a.stale_epoch - before1.stale_epoch, 1u);
  EXPECT_EQ(a.barrier_dups - before1.barrier_dups, 1u);
  EXPECT_EQ(a.releases, before1.releases);
  EXPECT_EQ(s.eps[0]->stats().releases_sent - before0.releases_sent, 1u);
  EXPECT_EQ(s.eps[0]->stats().barrier_dups - before0.barrier_dups, 1u);
  EXPECT_EQ(s.eps[3]->stats().barrier_dups, 1u);  // that release, dropped at rank 3
  EXPECT_EQ(s.eps[3]->stats().releases, 5u);
  s.expect_exact();
}

}  // namespace
}  // namespace ina
