// The sparse PS on the Zebra paper's route for hot results (§III-E,
// kv::HotRoute::ViaPs): it waits for the switch's result stream when a
// worker says its hot stream went to the switch, maps the rank indices back
// with the hot set of the version they carry, acknowledges each result to
// the switch, and sends every key's sum to the workers.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "dataplane/zebra_layout.hpp"
#include "host/sparse.hpp"
#include "wire/kv.hpp"
#include "fake_effects.hpp"

using namespace ina;

namespace {

constexpr NodeId kSwNode = 0, kPsNode = 3;

host::SparseConfig config() {
  host::SparseConfig c;
  c.workers = {1, 2};
  c.ps = kPsNode;
  c.sw = kSwNode;
  return c;
}

// Worker `rank`'s cold stream of iteration 0: one packet of `pairs`, then
// (as packet 1) its closing packet, flagged kHot if `hot`.
Packet* cold(test::FakeEffects& fx, uint8_t rank, uint32_t psn, std::vector<std::pair<uint64_t, int32_t>> pairs,
             bool last, bool hot) {
  Packet* p = fx.alloc();
  p->h = Header{};
  p->h.type = PktType::KvData;
  p->h.job = 1;
  p->h.src = static_cast<NodeId>(1 + rank);
  p->h.dst = kPsNode;
  p->h.rank = rank;
  p->h.nworkers = 2;
  p->h.bitmap = RankBits::bit(rank);
  p->h.psn = kv::kPsStream | psn;
  p->h.flags = static_cast<uint16_t>((last ? flag::kLast : 0) | (hot ? flag::kHot : 0));
  kv::init(*p, static_cast<unsigned>(pairs.size()), 0, last ? psn + 1 : 0);
  for (unsigned i = 0; i < pairs.size(); ++i) kv::set(*p, i, pairs[i].first, pairs[i].second);
  return p;
}

// The switch's only result packet of iteration 0 under hot-set `version`:
// (rank index, sum) pairs.
Packet* result(test::FakeEffects& fx, uint16_t version, std::vector<std::pair<uint64_t, int32_t>> pairs) {
  Packet* p = fx.alloc();
  p->h = Header{};
  p->h.type = PktType::KvResult;
  p->h.job = 1;
  p->h.src = kSwNode;
  p->h.dst = kPsNode;
  p->h.nworkers = 2;
  p->h.flags = flag::kLast;
  kv::init(*p, static_cast<unsigned>(pairs.size()), version, 1);
  for (unsigned i = 0; i < pairs.size(); ++i) kv::set(*p, i, pairs[i].first, pairs[i].second);
  return p;
}

std::map<uint64_t, int32_t> sums_of(const std::vector<test::Sent>& sent) {
  std::map<uint64_t, int32_t> m;
  for (const auto& s : sent)
    if (s.h.type == PktType::KvResult) {
      EXPECT_EQ(s.h.dst, kMulticast);
      const auto q = s.packet();
      for (unsigned i = 0; i < kv::pairs(*q); ++i) m[kv::key(*q, i)] += kv::value(*q, i);
    }
  return m;
}

}  // namespace

// Both workers' streams are in, one says kHot: the PS waits for the switch.
// A result under hot-set version 7, which the PS does not hold yet, is left
// unacknowledged (the switch CPU sends it again); once the table is set the
// resend is taken, acknowledged to the switch as receiver 0, and every key's
// sum goes to the workers: hot indices 0 and 2 as keys 100 and 300, key 300
// also summed with a cold pair (a key both sides had), cold key 5. A later
// duplicate of the result is acknowledged again and adds nothing.
TEST(SparsePsHotResults, WaitsForTheSwitchMapsItsIndicesAndAcknowledgesEachResult) {
  test::FakeEffects fx(kv::words(9), true);
  host::SparsePs ps(config());
  ps.set_id(kPsNode);
  ps.on_packet(cold(fx, 0, 0, {{5, 1}, {300, 4}}, false, false), 0, fx);
  ps.on_packet(cold(fx, 0, 1, {}, true, true), 0, fx);
  ps.on_packet(cold(fx, 1, 0, {{5, 2}}, false, false), 0, fx);
  ps.on_packet(cold(fx, 1, 1, {}, true, false), 0, fx);
  auto sent = fx.take();
  EXPECT_EQ(sent.size(), 4u);  // the four acknowledgements
  EXPECT_TRUE(sums_of(sent).empty());
  EXPECT_EQ(ps.iteration(), 0u);

  ps.on_packet(result(fx, 7, {{0, 10}, {2, -3}}), 0, fx);
  EXPECT_TRUE(fx.take().empty());
  EXPECT_EQ(ps.stats().unknown_version, 1u);
  EXPECT_EQ(ps.iteration(), 0u);

  ps.set_table(dp::zebra::heat_table({100, 200, 300}, 0, 7, 4));
  ps.on_packet(result(fx, 7, {{0, 10}, {2, -3}}), 0, fx);
  sent = fx.take();
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(sent[0].h.type, PktType::KvAck);
  EXPECT_EQ(sent[0].h.dst, kSwNode);
  EXPECT_EQ(sent[0].h.rank, 0);
  EXPECT_TRUE(sent[0].h.has(flag::kResult));
  EXPECT_EQ(sums_of(sent), (std::map<uint64_t, int32_t>{{5, 3}, {100, 10}, {300, 1}}));
  EXPECT_EQ(ps.iteration(), 1u);
  EXPECT_EQ(ps.stats().hot_results, 1u);
  EXPECT_EQ(ps.stats().hot_pairs, 2u);

  ps.on_packet(result(fx, 7, {{0, 10}, {2, -3}}), 0, fx);
  sent = fx.take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].h.type, PktType::KvAck);
  EXPECT_EQ(ps.stats().duplicates, 1u);
  EXPECT_EQ(ps.stats().hot_pairs, 2u);
}

// No worker says kHot (no table applied to the iteration): the PS answers
// on the cold streams alone, and a result from anyone but the switch, or
// under the multicast variant, is foreign.
TEST(SparsePsHotResults, WithoutKHotThePsAnswersAtOnceAndRefusesStrayResults) {
  test::FakeEffects fx(kv::words(9), true);
  host::SparsePs ps(config());
  ps.set_id(kPsNode);
  ps.on_packet(cold(fx, 0, 0, {}, true, false), 0, fx);
  ps.on_packet(cold(fx, 1, 0, {}, true, false), 0, fx);
  EXPECT_EQ(ps.iteration(), 1u);
  fx.take();
  Packet* stray = result(fx, 7, {{0, 1}});
  stray->h.src = 2;  // a worker
  ps.on_packet(stray, 0, fx);
  EXPECT_EQ(ps.stats().foreign, 1u);
  auto c = config();
  c.hot_results = kv::HotRoute::Multicast;
  host::SparsePs mc(c);
  mc.set_id(kPsNode);
  mc.on_packet(result(fx, 7, {{0, 1}}), 0, fx);
  EXPECT_EQ(mc.stats().foreign, 1u);
  EXPECT_TRUE(fx.take().empty());
  EXPECT_EQ(fx.live(), 0u);
}

// Malformed results of the switch are counted and dropped, unacknowledged,
// and change nothing: a rank index outside the hot set, a later iteration,
// a last packet that counts no packets. The well-formed result that follows
// completes the iteration with exactly its own sums.
TEST(SparsePsHotResults, MalformedResultsAreDroppedAndChangeNothing) {
  test::FakeEffects fx(kv::words(9), true);
  host::SparsePs ps(config());
  ps.set_id(kPsNode);
  ps.set_table(dp::zebra::heat_table({100, 200, 300}, 0, 7, 4));
  ps.on_packet(cold(fx, 0, 0, {}, true, true), 0, fx);
  ps.on_packet(cold(fx, 1, 0, {}, true, true), 0, fx);
  fx.take();
  ps.on_packet(result(fx, 7, {{1, 4}, {3, 9}}), 0, fx);  // index 3 of a 3-key hot set
  Packet* later = result(fx, 7, {{0, 1}});
  later->h.priority = 1;
  ps.on_packet(later, 0, fx);
  Packet* no_total = result(fx, 7, {{0, 1}});
  no_total->payload()[1] = 0;
  ps.on_packet(no_total, 0, fx);
  EXPECT_EQ(ps.stats().malformed, 3u);
  EXPECT_EQ(ps.stats().hot_results, 0u);
  EXPECT_TRUE(fx.take().empty());
  EXPECT_EQ(ps.iteration(), 0u);
  ps.on_packet(result(fx, 7, {{1, 4}}), 0, fx);
  EXPECT_EQ(sums_of(fx.take()), (std::map<uint64_t, int32_t>{{200, 4}}));
  EXPECT_EQ(ps.iteration(), 1u);
  EXPECT_EQ(fx.live(), 0u);
}
