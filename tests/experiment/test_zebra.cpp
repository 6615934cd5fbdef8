// Zebra: the sparse data path — KV codec, layout and Algorithm 1,
// the switch program, the sparse hosts and the simulator runner.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "dataplane/zebra_layout.hpp"
#include "core/rng.hpp"
#include "experiment/sparse.hpp"
#include "schemes/registry.hpp"
#include "wire/kv.hpp"
#include "fake_effects.hpp"

using namespace ina;
namespace z = ina::dp::zebra;

namespace {

// A small heavy-tailed source: per (iteration, worker), `nnz` draws from a
// Zipf(1.1) over `params` ranks, scrambled to keys; deterministic.
class ZipfSource final : public workload::SparseSource {
 public:
  ZipfSource(uint64_t params, unsigned workers, unsigned iters, unsigned nnz, uint64_t seed = 7)
      : n_(params), w_(workers), it_(iters), nnz_(nnz), seed_(seed) {
    double c = 0;
    cdf_.resize(params);
    for (uint64_t r = 0; r < params; ++r) cdf_[r] = (c += 1.0 / std::pow(double(r + 1), 1.1));
    for (auto& x : cdf_) x /= c;
  }
  std::string name() const override { return "zipf-test"; }
  uint64_t num_params() const override { return n_; }
  unsigned workers() const override { return w_; }
  unsigned iterations() const override { return it_; }
  std::vector<uint64_t> keys(unsigned iteration, unsigned worker) const override {
    Rng rng(seed_ * 1000003 + iteration * 131 + worker);
    std::set<uint64_t> ks;
    for (unsigned i = 0; i < nnz_; ++i) {
      const double u = rng.uniform();
      const uint64_t r = static_cast<uint64_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
      ks.insert(scramble(std::min(r, n_ - 1)));
    }
    return {ks.begin(), ks.end()};
  }
  uint64_t scramble(uint64_t r) const { return (r * 0x9E3779B97F4A7C15ULL) ^ 0x5bd1e995; }

 private:
  uint64_t n_;
  unsigned w_, it_, nnz_;
  uint64_t seed_;
  std::vector<double> cdf_;
};

}  // namespace

namespace {
// tcp_ps: the PS's streams as the Zebra paper's PS-lite over TCP runs them,
// full 1500-byte segments (120 pairs) and an acknowledgement per two.
exp::SparseSettings small(const std::string& scheme, unsigned workers = 4, bool tcp_ps = false) {
  exp::SparseSettings s;
  s.scheme = scheme;
  s.workers = workers;
  s.iterations = 3;
  s.hot_keys = 1000;
  if (tcp_ps) {
    s.ps_pairs = 120;
    s.ack_every = 2;
  }
  return s;
}
}  // namespace

// 1 % loss, duplication and reordering on every host link, several seeds:
// every worker gets the exact sums of the union (run_sparse checks each key)
// and nothing leaks (packets, registers, CPU/PS copies). Also with the
// Zebra paper's set-up: the PS's streams in 120-pair segments with a
// cumulative acknowledgement per two, the workers on two machines' NICs.
TEST(Zebra, ExactUnderLossDuplicationReordering) {
  ZipfSource src(20000, 6, 3, 1500);
  // What the source pushes, per iteration: pairs, and the union of keys
  // (the sums every worker must receive).
  std::vector<uint64_t> pairs(3, 0), union_keys(3, 0);
  uint64_t all_pairs = 0;
  for (unsigned it = 0; it < 3; ++it) {
    std::set<uint64_t> u;
    for (unsigned w = 0; w < 6; ++w) {
      const auto ks = src.keys(it, w);
      pairs[it] += ks.size();
      u.insert(ks.begin(), ks.end());
    }
    union_keys[it] = u.size();
    all_pairs += pairs[it];
  }
  for (const bool paper : {false, true}) {
    for (const char* scheme : {"zebra", "ps-lite"}) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      SCOPED_TRACE(testing::Message() << scheme << " seed " << seed << (paper ? " paper's set-up" : ""));
      auto s = small(scheme, 6, paper);
      if (paper) s.machines = 2;
      s.seed = seed;
      s.link.loss = s.link.dup = s.link.reorder = 0.01;
      s.cpu_rto = 200 * kUs;
      s.cpu_delay = 20 * kUs;
      exp::SparseRun r;
      // run_sparse throws on the first wrong or missing sum, or on a leak.
      ASSERT_NO_THROW(r = exp::run_sparse(s, src));
      EXPECT_EQ(r.pairs, all_pairs);
      ASSERT_EQ(r.iters.size(), 3u);
      for (unsigned it = 0; it < 3; ++it) {
        EXPECT_EQ(r.iters[it].pairs, pairs[it]) << "iteration " << it;
        EXPECT_EQ(r.iters[it].union_keys, union_keys[it]) << "iteration " << it;
      }
      // The injected faults happened and were recovered from: lost packets
      // were sent again, and duplicates reached someone who recognised them.
      // (With 120-pair segments a worker may lose none of its few cold packets.)
      EXPECT_GT(paper ? r.workers.retransmits + r.ps.retransmits + r.cpu.retransmits : r.workers.retransmits, 0u);
      EXPECT_GT(r.sw.duplicates + r.ps.duplicates + r.workers.dup_results, 0u);
      }
    }
  }
}

// Without faults every hot pair is summed in the switch exactly once and every
// cold pair at the PS exactly once; PS-lite sends every pair to the PS.
TEST(Zebra, HotPairsInTheSwitchColdPairsAtThePs) {
  ZipfSource src(20000, 4, 3, 2000);
  auto z = exp::run_sparse(small("zebra"), src);
  EXPECT_EQ(z.sw.kv_aggregated, z.hot_pairs);
  EXPECT_EQ(z.ps.pairs, z.cold_pairs);
  EXPECT_EQ(z.sw.kv_to_ps, 0u);
  EXPECT_EQ(z.sw.duplicates + z.ps.duplicates + z.workers.retransmits, 0u);
  // The hot set is the top 1000 of the run's own counts: a Zipf(1.1) over 20 K ranks puts most updates there.
  EXPECT_GT(z.hot_share, 0.5);
  auto p = exp::run_sparse(small("ps-lite"), src);
  EXPECT_EQ(p.ps.pairs, p.pairs);
  EXPECT_EQ(p.sw.kv_in, 0u);
  EXPECT_EQ(p.pairs, z.pairs);
}

// A switch result lost on its way to its receiver: the switch CPU, which
// holds a copy until every receiver acknowledged it, resends it to that one
// only. The paper's route: the PS (node 5), which waits for the switch's
// whole stream before it answers and takes the resent result once. The
// multicast variant: a worker (node 3). The sums stay exact either way.
TEST(Zebra, SwitchCpuResendsALostResultToThatReceiverOnly) {
  ZipfSource src(20000, 4, 3, 2000);
  for (const auto route : {kv::HotRoute::ViaPs, kv::HotRoute::Multicast}) {
    SCOPED_TRACE(kv::to_string(route));
    auto s = small("zebra");
    s.hot_results = route;
    s.cpu_delay = 10 * kUs;
    s.cpu_rto = 100 * kUs;
    const NodeId receiver = route == kv::HotRoute::ViaPs ? 5 : 3;
    bool hit = false;
    s.fault = [&](NodeId node, bool out, const Packet& p) {
      if (hit || out || node != receiver || p.h.type != PktType::KvResult || p.h.src != 0 || p.h.priority != 1 ||
          p.h.psn != 5)
        return false;
      return hit = true;
    };
    auto r = exp::run_sparse(s, src);
    EXPECT_EQ(r.faults, 1u);
    EXPECT_EQ(r.cpu.retransmits, 1u);
    EXPECT_EQ(r.workers.retransmits, 0u);
    EXPECT_EQ(r.cpu.copies, r.sw.kv_results);
    EXPECT_EQ(r.ps.hot_results, route == kv::HotRoute::ViaPs ? r.sw.kv_results : 0u);  // the resent one taken once
    EXPECT_EQ(r.ps.duplicates, 0u);
  }
}

// Where the switch's hot results go. The paper's route (via-ps): to the PS
// only, which sends every key's sum; each worker receives just the PS's
// result packets. The multicast variant: each worker receives the switch's
// and the PS's, and the PS never sees a hot pair. Either way the same sums
// (run_sparse checks each key) from the same pushes.
TEST(Zebra, HotResultsGoThroughThePsOrStraightToTheWorkers) {
  ZipfSource src(20000, 4, 3, 2000);
  auto s = small("zebra");
  const auto via = exp::run_sparse(s, src);
  EXPECT_EQ(via.ps.hot_results, via.sw.kv_results);
  EXPECT_EQ(via.ps.hot_pairs, via.hot_union_keys);  // one sum per hot key of the union, per iteration
  EXPECT_EQ(via.workers.results, 4 * via.ps.results_sent);
  s.hot_results = kv::HotRoute::Multicast;
  const auto mc = exp::run_sparse(s, src);
  EXPECT_EQ(mc.ps.hot_results, 0u);
  EXPECT_EQ(mc.workers.results, 4 * (mc.ps.results_sent + mc.sw.kv_results));
  EXPECT_EQ(mc.sw.kv_aggregated, via.sw.kv_aggregated);
  EXPECT_EQ(mc.hot_union_keys, via.hot_union_keys);
  // The PS's results carry the hot keys too: more of them than without.
  EXPECT_GT(via.ps.results_sent, mc.ps.results_sent);
}

// A worker's hot packet lost before the switch: the worker's RTO resends it,
// the switch adds it once; and the ack of another lost: the resend is a
// duplicate the switch answers without adding.
TEST(Zebra, LostHotPacketAndLostAckAreRecoveredExactly) {
  ZipfSource src(20000, 4, 3, 2000);
  auto s = small("zebra");
  int lost_data = 0, lost_ack = 0;
  s.fault = [&](NodeId node, bool out, const Packet& p) {
    if (node == 2 && out && !lost_data && p.h.type == PktType::KvData && p.h.priority == 0 && p.h.psn == 3)
      return ++lost_data, true;
    if (node == 4 && !out && !lost_ack && p.h.type == PktType::KvAck && p.h.priority == 1 && p.h.psn == 7)
      return ++lost_ack, true;
    return false;
  };
  auto r = exp::run_sparse(s, src);
  EXPECT_EQ(r.faults, 2u);
  EXPECT_EQ(r.workers.retransmits, 2u);
  EXPECT_EQ(r.sw.duplicates, 1u);
  EXPECT_EQ(r.sw.kv_aggregated, r.hot_pairs);
}

// Malformed KV packets are counted by reason and dropped; the registers, the
// worker's stream state and the other counters do not change.
TEST(Zebra, MalformedKvPacketsAreCountedByReasonAndChangeNothing) {
  dp::SwitchConfig sc;
  auto sw = schemes::find("zebra").make_switch(sc);
  sw->set_id(0);
  dp::SwitchJob j;
  j.job = 1;
  j.workers = {1, 2};
  j.ps = 3;
  j.zebra.cpu = 4;
  sw->add_job(j);
  auto hot = std::make_shared<const z::HotSet>(z::HotSet::from_ranked({100, 200, 300}, 1));
  auto lay = std::make_shared<const z::Layout>(z::Layout::make(3, 16, z::Placement::Heat, 1));
  sw->set_sparse_table(1, {0, hot, lay});
  test::FakeEffects fx(64);
  auto make = [&](std::vector<std::pair<uint64_t, int32_t>> kvs) {
    Packet* p = fx.alloc();
    p->h = Header{};
    p->h.type = PktType::KvData;
    p->h.job = 1;
    p->h.src = 1;
    p->h.dst = 0;
    p->h.rank = 0;
    p->h.nworkers = 2;
    p->h.flags = 0;
    kv::init(*p, static_cast<unsigned>(kvs.size()), 1);
    for (size_t i = 0; i < kvs.size(); ++i) kv::set(*p, static_cast<unsigned>(i), kvs[i].first, kvs[i].second);
    return p;
  };
  const auto before = sw->stats();
  // Unsorted, duplicate, too many pairs (10 > 9), a count that does not match the pairs, a wrong version.
  sw->on_packet(make({{200, 1}, {100, 2}}), 0, fx);
  sw->on_packet(make({{100, 1}, {100, 2}}), 0, fx);
  std::vector<std::pair<uint64_t, int32_t>> ten;
  for (uint64_t k = 1; k <= 10; ++k) ten.emplace_back(k * 1000, 1);
  sw->on_packet(make(ten), 0, fx);
  Packet* bad_len = make({{100, 1}});
  bad_len->h.count += 1;
  sw->on_packet(bad_len, 0, fx);
  Packet* bad_ver = make({{100, 1}});
  bad_ver->payload()[0] = static_cast<int32_t>(static_cast<uint32_t>(bad_ver->payload()[0]) | 0x7F000000u);
  sw->on_packet(bad_ver, 0, fx);
  const auto& st = sw->stats();
  EXPECT_EQ(st.kv_rejects[static_cast<size_t>(kv::Error::Unsorted)], 2u);
  EXPECT_EQ(st.kv_rejects[static_cast<size_t>(kv::Error::TooManyPairs)], 1u);
  EXPECT_EQ(st.kv_rejects[static_cast<size_t>(kv::Error::Length)], 1u);
  EXPECT_EQ(st.kv_rejects[static_cast<size_t>(kv::Error::BadVersion)], 1u);
  EXPECT_EQ(st.malformed, before.malformed + 5);
  EXPECT_EQ(st.kv_in, 0u);
  EXPECT_EQ(st.kv_aggregated, 0u);
  EXPECT_TRUE(fx.sent.empty());
  EXPECT_EQ(fx.live(), 0u);
  EXPECT_EQ(sw->occupied(), 0u);
  // A good packet afterwards is taken as psn 0 (the bad ones marked nothing): two of its keys are hot.
  Packet* good = make({{100, 5}, {300, 7}, {999, 1}});
  good->h.flags = flag::kLast;
  good->payload()[1] = 1;
  sw->on_packet(good, 0, fx);
  EXPECT_EQ(st.kv_in, 1u);
  EXPECT_EQ(st.kv_aggregated, 2u);
  ASSERT_EQ(fx.sent.size(), 1u);  // the cold key goes on to the PS with the packet
  EXPECT_EQ(fx.sent[0].h.dst, 3);
  EXPECT_EQ(fx.sent[0].h.src, 0);  // from the switch: the PS takes hot-stream pairs only from it
  const auto cold = fx.sent[0].packet();
  EXPECT_EQ(kv::pairs(*cold), 1u);
  EXPECT_EQ(kv::key(*cold, 0), 999u);
  EXPECT_EQ(fx.live(), 0u);
  EXPECT_TRUE(fx.violations().empty()) << fx.violations().front();
}

// One access per register per pass: a packet whose keys share a register
// takes one pass per key of that register, each extra pass counted.
TEST(Zebra, KeysSharingARegisterCostOneRecirculationEach) {
  // 4 registers, heat layout: ranks 0, 4 and 8 share register 0.
  z::Layout L = z::Layout::make(12, 4, z::Placement::Heat, 1);
  const std::vector<uint32_t> same = {0, 4, 8, 1};
  EXPECT_EQ(z::passes(L, same), 3u);
  const std::vector<uint32_t> apart = {0, 1, 2, 3};
  EXPECT_EQ(z::passes(L, apart), 1u);
}

// Algorithm 1: every index lands in exactly one packet; a packet built by the
// layout-aware loop never holds two indices of one register (only the padding
// packets of G' may); packets hold at most K.
TEST(Zebra, Algorithm1PlacesEveryIndexOnceAndKeepsRegistersApart) {
  Rng rng(3);
  for (uint32_t m : {4u, 9u, 16u, 33u}) {
    for (int trial = 0; trial < 20; ++trial) {
      const size_t n = 30000;
      z::Layout L = z::Layout::make(n, m, trial % 2 ? z::Placement::Random : z::Placement::Heat, trial);
      std::set<uint32_t> pick;
      const size_t want = 1 + rng.below(3000);
      while (pick.size() < want) pick.insert(static_cast<uint32_t>(rng.below(n)));
      std::vector<uint32_t> idx(pick.begin(), pick.end());
      auto pk = z::package(L, idx, 9);
      std::multiset<uint32_t> all;
      for (const auto& p : pk) {
        ASSERT_LE(p.size(), 9u);
        ASSERT_FALSE(p.empty());
        all.insert(p.begin(), p.end());
      }
      EXPECT_EQ(std::vector<uint32_t>(all.begin(), all.end()), idx);
      const size_t est = (idx.size() + 8) / 9;
      // The first packets (at most the estimate) are the layout-aware ones; the rest are G' in packets of 9.
      const size_t aware = std::min(est, pk.size());
      for (size_t i = 0; i < aware; ++i) EXPECT_EQ(z::passes(L, pk[i]), 1u) << m << " " << i;
      for (size_t i = aware; i + 1 < pk.size(); ++i) EXPECT_EQ(pk[i].size(), 9u);
    }
  }
}

// Fig. 10's comparison on a heavy-tailed workload: heat layout + Algorithm 1
// needs far fewer recirculations per packet than a random layout with
// key-order packing.
TEST(Zebra, HeatLayoutAndAlgorithm1NeedFarFewerRecirculations) {
  ZipfSource src(200000, 8, 2, 20000);
  auto s = small("zebra", 8);
  s.iterations = 2;
  s.hot_keys = 30000;
  auto heat = exp::run_sparse(s, src);
  s.placement = z::Placement::Random;
  s.layout_aware = false;
  auto rnd = exp::run_sparse(s, src);
  std::printf("recirculations per packet: heat+alg1 %.4f, random %.4f\n", heat.recirc_per_packet,
              rnd.recirc_per_packet);
  EXPECT_LT(heat.recirc_per_packet * 20, rnd.recirc_per_packet);
  EXPECT_EQ(heat.sw.kv_aggregated, heat.hot_pairs);
  EXPECT_EQ(rnd.sw.kv_aggregated, rnd.hot_pairs);
}

// A hot-set update at iteration 2 (a hot set counted on later iterations),
// taken by workers and switch together: exact, every hot pair summed in the
// switch. Taken by the workers only (the switch's table out of step): the
// pairs of keys the switch does not hold go on to the PS — exactly those —
// and the sums are still exact.
TEST(Zebra, HotSetUpdateMidTrainingLosesNoGradient) {
  ZipfSource src(20000, 4, 6, 2000);
  auto s = small("zebra");
  s.iterations = 4;
  s.hot_keys = 800;
  s.profile_iterations = 1;  // the first hot set from iteration 0 only
  s.updates.push_back({2, 4, 2, true, true});
  auto both = exp::run_sparse(s, src);
  EXPECT_EQ(both.sw.kv_aggregated, both.hot_pairs);
  EXPECT_EQ(both.sw.kv_to_ps, 0u);
  s.updates[0].sw = false;
  auto skew = exp::run_sparse(s, src);
  // Pairs the workers send to the switch for keys only the new set has (iterations 2 and 3).
  auto old_set = exp::top_keys(src, 4, 0, 1, 800), new_set = exp::top_keys(src, 4, 4, 2, 800);
  std::set<uint64_t> olds(old_set.begin(), old_set.end()), news(new_set.begin(), new_set.end());
  uint64_t only_new = 0;
  for (unsigned it = 2; it < 4; ++it)
    for (unsigned w = 0; w < 4; ++w)
      for (uint64_t k : src.keys(it, w)) only_new += news.count(k) && !olds.count(k);
  ASSERT_GT(only_new, 0u);
  EXPECT_EQ(skew.sw.kv_to_ps, only_new);
  EXPECT_EQ(skew.sw.kv_aggregated + skew.sw.kv_to_ps, skew.hot_pairs);
}

// The switch's table comes from its admission's agreement on the workers'
// hot-set lists: a worker whose list lacks a key, or ranks two keys the other
// way, makes the run fail with the admission's reason; a worker submitting
// the control plane's list unchanged runs exactly as without the hook.
TEST(Zebra, SwitchInstallsOnlyAHotSetEveryWorkerAgreesOn) {
  ZipfSource src(20000, 4, 2, 1000);
  auto s = small("zebra");
  s.iterations = 2;
  s.hot_keys = 500;
  const auto plain = exp::run_sparse(s, src);
  s.hot_list = [](unsigned, std::vector<uint64_t>&) {};
  const auto same = exp::run_sparse(s, src);
  EXPECT_EQ(same.sw.kv_aggregated, plain.sw.kv_aggregated);
  EXPECT_EQ(same.sw.kv_aggregated, plain.hot_pairs);
  EXPECT_EQ(same.events, plain.events);
  auto refused = [&](const std::function<void(unsigned, std::vector<uint64_t>&)>& change) -> std::string {
    s.hot_list = change;
    try {
      exp::run_sparse(s, src);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(not refused)";
  };
  EXPECT_EQ(refused([](unsigned r, std::vector<uint64_t>& k) { if (r == 2) k.pop_back(); }),
            "sparse run zebra: the hot-set lists differ: worker rank 2 sent 499 keys from iteration 0, rank 0 500 keys "
            "from iteration 0");
  EXPECT_EQ(refused([](unsigned r, std::vector<uint64_t>& k) { if (r == 3) std::swap(k[0], k[1]); }),
            "sparse run zebra: the hot-set lists differ: worker rank 3 sent 500 keys from iteration 0, rank 0 500 keys "
            "from iteration 0");
}

// Measured iterations that start later in training (after profiling ones):
// the PS starts at the first measured iteration; exact, hot pairs in the switch.
TEST(Zebra, RunsStartingAtALaterIterationAreExact) {
  ZipfSource src(20000, 4, 5, 2000);
  auto s = small("zebra");
  s.first_iteration = 3;
  s.iterations = 2;
  s.profile_iterations = 3;  // the hot set from iterations 0..2
  const auto r = exp::run_sparse(s, src);
  EXPECT_EQ(r.sw.kv_aggregated, r.hot_pairs);
  EXPECT_EQ(r.ps.malformed, 0u);
  EXPECT_EQ(r.ps.stale, 0u);
  s.scheme = "ps-lite";
  const auto p = exp::run_sparse(s, src);
  EXPECT_EQ(p.ps.pairs, p.pairs);
}

// A worker with no hot gradient sends one empty packet (§III-F) and the
// iteration still completes; with an empty hot set every worker does.
TEST(Zebra, EmptyHotStreamsStillComplete) {
  ZipfSource src(20000, 4, 2, 300);
  auto s = small("zebra");
  s.iterations = 2;
  s.hot_keys = 0;
  auto r = exp::run_sparse(s, src);
  EXPECT_EQ(r.sw.kv_in, 4u * 2);  // one empty packet per worker and iteration
  EXPECT_EQ(r.sw.kv_aggregated, 0u);
  EXPECT_EQ(r.ps.pairs, r.pairs);
}

// Beyond the paper: the sparse job in ATP's or DSA's pool
// beside a dense job on the same switch, 1 % loss, duplication and reordering:
// both jobs exact (run_sparse checks every key and every dense value), nothing
// left but the table's pinned aggregators, which leaving frees. Without
// faults the sparse job aggregates exactly what it does in Zebra's own
// registers, its hot set pins ceil(1000 / 64) = 16 aggregators, and the dense
// job's packets that map to them went to its PS.
TEST(Zebra, SparseAndDenseJobsShareAPoolExactly) {
  ZipfSource src(20000, 4, 3, 1500);
  const auto own = exp::run_sparse(small("zebra"), src);
  for (const char* pool : {"atp", "dsa"}) {
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      auto s = small("zebra");
      s.seed = seed;
      s.pool = pool;
      s.dense_workers = 3;
      s.dense_values = 20000;
      s.dense_iterations = 2;
      s.link.loss = s.link.dup = s.link.reorder = 0.01;
      s.cpu_rto = 200 * kUs;
      s.cpu_delay = 20 * kUs;
      exp::SparseRun r;
      ASSERT_NO_THROW(r = exp::run_sparse(s, src)) << pool << " seed " << seed;
      EXPECT_EQ(r.dense.verified, 3u * 20000u * 2u);
    }
    auto s = small("zebra");
    s.pool = pool;
    s.dense_workers = 3;
    s.dense_values = 20000;
    const auto r = exp::run_sparse(s, src);
    EXPECT_EQ(r.sw.kv_aggregated, own.sw.kv_aggregated) << pool;
    EXPECT_EQ(r.hot_pairs, own.hot_pairs) << pool;
    EXPECT_EQ(r.pinned, 16u) << pool;
    EXPECT_EQ(r.sw.preempt_won, 0u) << pool;
    EXPECT_EQ(r.sw.malformed + r.sw.foreign(), 0u) << pool;
    // Some dense task maps to a pinned aggregator here (the run would show
    // nothing otherwise). Under DSA every such task goes whole to the PS, one
    // packet per worker, and nothing else collides in this run.
    ASSERT_GT(r.sw.pinned_hits, 0u) << pool;
    if (std::string(pool) == "dsa") {
      EXPECT_EQ(r.sw.collisions, r.sw.pinned_hits);
      EXPECT_EQ(r.dense.ps_completions * 3, r.sw.pinned_hits);
    }
  }
  auto bad = small("ps-lite");
  bad.pool = "atp";
  EXPECT_THROW(exp::run_sparse(bad, src), std::invalid_argument);
  bad = small("zebra");
  bad.pool = "switchml";
  EXPECT_THROW(exp::run_sparse(bad, src), std::invalid_argument);
  bad.pool = "";
  bad.dense_workers = 2;
  bad.dense_values = 10;
  EXPECT_THROW(exp::run_sparse(bad, src), std::invalid_argument);
  bad = small("switchml");  // its own program streams the model: no pool, no dense job beside it
  bad.pool = "atp";
  EXPECT_THROW(exp::run_sparse(bad, src), std::invalid_argument);
}

// The PS's phases (SparseIteration::ps_*, docs/results/zebra.md Fig. 6):
// without faults, each result packet the PS multicasts comes back as one
// 64 B ack (50 B of headers, padded to the minimum frame) from each worker,
// every byte of it on the PS's inbound link; the closing packets come in
// after the last pairs, and the results after that.
TEST(Zebra, PsPhasesCountEveryWorkersResultAckOnThePsLink) {
  ZipfSource src(20000, 4, 3, 1500);
  for (const char* scheme : {"zebra", "ps-lite"}) {
    const auto r = exp::run_sparse(small(scheme), src);
    uint64_t acks = 0;
    for (const auto& it : r.iters) {
      acks += it.ps_in_ack_bytes;
      EXPECT_LT(it.start, it.ps_last_data) << scheme;
      EXPECT_LT(it.ps_last_data, it.ps_all_in) << scheme;
      EXPECT_LT(it.ps_all_in, it.end) << scheme;
    }
    EXPECT_EQ(r.ps.retransmits, 0u) << scheme;
    EXPECT_EQ(acks, 4u * r.ps.results_sent * 64u) << scheme;
  }
}

// Without faults the PS acknowledges a worker's cold stream of c data
// packets (120 pairs each) once per two, once more for an odd last one
// (sent with kAckNow), and once for the closing packet: ceil(c / 2) + 1.
TEST(Zebra, PsStreamsAcknowledgeEverySecondFullSegment) {
  ZipfSource src(20000, 4, 3, 2000);
  for (const char* scheme : {"ps-lite", "zebra"}) {
    SCOPED_TRACE(scheme);
    auto s = small(scheme, 4, true);
    std::set<uint64_t> hot;  // the hot set every worker submits
    s.hot_list = [&](unsigned rank, std::vector<uint64_t>& keys) {
      if (rank == 0) hot = {keys.begin(), keys.end()};
    };
    auto r = exp::run_sparse(s, src);
    // The cold packets each worker sent, from the counts run_sparse reports.
    const uint64_t cold_packets = r.workers.cold_packets;
    uint64_t expected = 0, data_packets = 0;
    const bool zebra = std::string(scheme) == "zebra";
    for (unsigned it = 0; it < 3; ++it)
      for (unsigned w = 0; w < 4; ++w) {
        uint64_t cold = 0;
        for (uint64_t k : src.keys(it, w)) cold += zebra && hot.count(k) ? 0 : 1;
        const uint64_t c = (cold + 119) / 120;
        data_packets += c + 1;
        expected += (c + 1) / 2 + 1;
      }
    EXPECT_EQ(cold_packets, data_packets);
    // Zebra's PS also acknowledges each packet of pairs the switch passes on
    // (none here) and each of the switch's result packets, once.
    EXPECT_EQ(r.sw.kv_to_ps, 0u);
    EXPECT_EQ(r.ps.hot_results, r.sw.kv_results);
    EXPECT_EQ(r.ps.acks_sent, expected + r.sw.kv_results);
    EXPECT_EQ(r.workers.retransmits, 0u);
  }
}

// The PS's cumulative acknowledgement of cold packets 0 and 1 is lost on its
// way to rank 0 (node 1): the next one (of 2 and 3) counts them too, so nothing is
// sent again; the sums are exact.
TEST(Zebra, ALostCumulativeAckIsCoveredByTheNext) {
  ZipfSource src(20000, 4, 3, 2000);
  auto s = small("ps-lite", 4, true);
  int lost = 0;
  s.fault = [&](NodeId node, bool out, const Packet& p) {
    if (node != 1 || out || lost || p.h.type != PktType::KvAck || p.h.priority != 0 ||
        p.h.psn != (kv::kPsStream | 1u))
      return false;
    return ++lost, true;
  };
  auto r = exp::run_sparse(s, src);
  EXPECT_EQ(r.faults, 1u);
  EXPECT_EQ(r.workers.retransmits, 0u);
}

// SwitchML streaming the model through one machine's NIC: with a queue of
// 4 KB (13 packets of 306 B) the workers' first windows overflow it, every
// packet dropped there is sent again (one retransmission at least per drop,
// the answer being exact either way), and the run counts the drops; with
// the default 1 MB queue nothing is dropped or retransmitted.
TEST(Zebra, DenseRunCountsTheQueueDropsItRecoversFrom) {
  ZipfSource src(20000, 4, 2, 1500);
  auto s = small("switchml", 4);
  s.iterations = 2;
  s.machines = 1;
  exp::SparseRun r;
  ASSERT_NO_THROW(r = exp::run_sparse(s, src));
  EXPECT_EQ(r.queue_drops, 0u);
  EXPECT_EQ(r.workers.retransmits, 0u);
  s.link.queue_bytes = 4096;
  ASSERT_NO_THROW(r = exp::run_sparse(s, src));
  EXPECT_GT(r.queue_drops, 0u);
  EXPECT_GE(r.workers.retransmits, r.queue_drops);
}
