// Job admission to a switch (schemes/admission.hpp): regions, segments, node
// ids, window caps, joins and their refusals, the hot-set agreement; the
// daemon's admission without sockets.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "schemes/admission.hpp"
#include "schemes/registry.hpp"

namespace ina {
namespace {

using schemes::Admission;
using schemes::Memory;

Admission::Config regions(size_t aggregators, unsigned regions, unsigned shards = 1) {
  Admission::Config c = Admission::config_of(schemes::find("switchml"), aggregators, regions, shards);
  c.payload = 64;
  c.reserved = {0};
  return c;
}

template <typename T, typename V>
const T& as(const V& v) {
  EXPECT_TRUE(std::holds_alternative<T>(v));
  return std::get<T>(v);
}

std::string refusal(const Admission::JoinAnswer& a) {
  if (const auto* r = std::get_if<Admission::Refusal>(&a)) return r->reason;
  if (const auto* r = std::get_if<Admission::JobRefused>(&a)) return "job: " + r->reason;
  return "(admitted or waiting)";
}

TEST(Admission, MemoryRuleFollowsTheRegistryFlags) {
  EXPECT_EQ(schemes::memory_of(schemes::find("switchml")), Memory::Regions);
  EXPECT_EQ(schemes::memory_of(schemes::find("p4inc-aoi")), Memory::Segments);
  EXPECT_EQ(schemes::memory_of(schemes::find("atp")), Memory::Pool);
  EXPECT_EQ(schemes::memory_of(schemes::find("zebra")), Memory::Pool);
  // The ShareLimits' shared pool: ATP and DSA only among the runtime's schemes.
  std::string shared;
  for (const std::string& n : schemes::names(schemes::Engine::Runtime))
    if (schemes::shares_pool(schemes::find(n))) shared += n + " ";
  EXPECT_EQ(shared, "atp dsa ");
  const Admission::Config c = regions(100, 4);
  EXPECT_EQ(c.pools, 2u);
  EXPECT_FALSE(c.has_ps);
  EXPECT_EQ(c.policy, "isolated");
  EXPECT_TRUE(Admission::config_of(schemes::find("zebra"), 100, 1).hot_sets);
  EXPECT_TRUE(Admission::config_of(schemes::find("atp"), 100, 1).has_ps);
}

TEST(Admission, IsolatedRegionsAreEvenAndCapTheWindowAtHalf) {
  Admission a(regions(103, 4));  // 103 / 4 = 25, rounded down to two pools of 12
  EXPECT_EQ(a.region_size(), 24u);
  EXPECT_EQ(a.window_cap(), 12u);
  EXPECT_EQ(a.memory_error(), "");
  const auto g1 = as<Admission::Grant>(a.admit({7, {1, 2}, kNoNode, std::nullopt}));
  const auto g2 = as<Admission::Grant>(a.admit({9, {3}, kNoNode, std::nullopt}));
  EXPECT_EQ(g1.region, 0);
  EXPECT_EQ(g1.region_offset, 0u);
  EXPECT_EQ(g2.region, 1);
  EXPECT_EQ(g2.region_offset, 24u);
  EXPECT_EQ(g2.region_size, 24u);
  EXPECT_EQ(g2.window_cap, 12u);
  const dp::SwitchJob sj = g1.switch_job();
  EXPECT_EQ(sj.job, 7);
  EXPECT_EQ(sj.workers, (std::vector<NodeId>{1, 2}));
  EXPECT_EQ(sj.ps, kNoNode);
  EXPECT_EQ(sj.region_size, 24u);
  // A freed region is the first one given again.
  a.release(7);
  EXPECT_EQ(as<Admission::Grant>(a.admit({11, {4}, kNoNode, std::nullopt})).region, 0);
}

TEST(Admission, MemoryTooSmallForTheRegionsIsRefusedWithItsReason) {
  Admission one(regions(7, 4));  // 7 / 4 = 1 < two pools
  EXPECT_EQ(one.region_size(), 0u);
  EXPECT_EQ(one.memory_error(), "7 aggregators cannot be split into 4 isolated regions");
  EXPECT_EQ(as<Admission::Refusal>(one.admit({1, {1}, kNoNode, std::nullopt})).reason,
            "7 aggregators cannot be split into 4 isolated regions");
  EXPECT_EQ(Admission(regions(16, 16, 4)).memory_error(),
            "16 aggregators per switch thread cannot be split into 16 isolated regions");
  Admission::Config seg = Admission::config_of(schemes::find("p4inc-aoi"), 3, 4);
  EXPECT_EQ(Admission(seg).memory_error(), "3 aggregators cannot give each of 4 jobs a segment");
  // A ring's share (one window slot per aggregator): no rounding.
  Admission::Config ring;
  ring.memory = Memory::Regions;
  ring.aggregators = 7;
  ring.regions = 2;
  ring.pools = 1;
  EXPECT_EQ(Admission(ring).region_size(), 3u);
  EXPECT_EQ(Admission(ring).window_cap(), 3u);
}

TEST(Admission, SegmentsAreGivenOrTheEqualSplitAndHaveNoWindowCap) {
  Admission a(Admission::config_of(schemes::find("p4inc-aoi"), 100, 3));
  EXPECT_EQ(a.region_size(), 33u);
  const auto g1 = as<Admission::Grant>(a.admit({1, {1}, kNoNode, std::nullopt}));
  const auto g2 = as<Admission::Grant>(a.admit({2, {2}, kNoNode, schemes::Segment{90, 10}}));
  const auto g3 = as<Admission::Grant>(a.admit({3, {3}, kNoNode, std::nullopt}));
  EXPECT_EQ(g1.region_offset, 0u);
  EXPECT_EQ(g2.region_offset, 90u);
  EXPECT_EQ(g2.region_size, 10u);
  EXPECT_EQ(g3.region_offset, 66u);  // the third job's part of the equal split
  EXPECT_EQ(g3.window_cap, 0u);
  EXPECT_EQ(g1.region, -1);
  Admission pool(Admission::config_of(schemes::find("atp"), 100, 1));
  EXPECT_EQ(as<Admission::Refusal>(pool.admit({1, {1}, 2, schemes::Segment{0, 5}})).reason,
            "job 1: the shared-fcfs policy gives its jobs no segments");
  const auto p = as<Admission::Grant>(pool.admit({1, {1}, 2, std::nullopt}));
  EXPECT_EQ(p.region_size, 0u);
  EXPECT_EQ(p.window_cap, 0u);
  EXPECT_EQ(p.ps, 2);
  EXPECT_EQ(as<Admission::Refusal>(pool.admit({1, {3}, 4, std::nullopt})).reason, "job 1 is already admitted");
}

TEST(Admission, AJobStartsOnceEveryMemberJoinedWithIdsByRankThenThePs) {
  Admission::Config c = Admission::config_of(schemes::find("dsa"), 1000, 1);
  c.payload = 64;
  c.reserved = {0, 2};
  Admission a(c);
  const auto w1 = as<Admission::Waiting>(a.join({5, false, 1, 2, 0, 3}, 0));
  EXPECT_EQ(w1.workers_joined, 1u);
  EXPECT_EQ(w1.nworkers, 2u);
  EXPECT_FALSE(w1.ps_joined);
  EXPECT_TRUE(w1.ps_needed);
  as<Admission::Waiting>(a.join({5, true, 0, 2, 64, 0}, 0));
  EXPECT_FALSE(a.job(5)->live);
  const auto g = as<Admission::Grant>(a.join({5, false, 0, 2, 64, 3}, 2 * kSec));
  EXPECT_EQ(g.workers, (std::vector<NodeId>{1, 3}));  // 0 and 2 are reserved
  EXPECT_EQ(g.ps, 4);
  EXPECT_EQ(g.window_cap, 0u);
  EXPECT_TRUE(a.job(5)->live);
  EXPECT_EQ(a.job(5)->since, 2 * kSec);
  // Ids go round: the next job's start after the last one given, freed ids later.
  a.release(5);
  EXPECT_EQ(a.job(5), nullptr);
  as<Admission::Waiting>(a.join({6, false, 0, 1, 0, 0}, 0));
  const auto g2 = as<Admission::Grant>(a.join({6, true, 0, 1, 0, 0}, 0));
  EXPECT_EQ(g2.workers, (std::vector<NodeId>{5}));
  EXPECT_EQ(g2.ps, 6);
}

TEST(Admission, JoinRefusalsCarryTheReasonTheMemberIsTold) {
  Admission::Config c = Admission::config_of(schemes::find("atp"), 1000, 1);
  c.payload = 64;
  Admission a(c);
  EXPECT_EQ(refusal(a.join({1, false, 0, 2, 32, 0}, 0)),
            "payload mismatch: this switch carries 64 values per packet, the member asked for 32");
  as<Admission::Waiting>(a.join({1, false, 0, 2, 0, 8}, 0));
  EXPECT_EQ(refusal(a.join({1, false, 1, 3, 0, 8}, 0)), "wrong worker count: job 1 has 2 workers, this member says 3");
  EXPECT_EQ(refusal(a.join({1, false, 0, 2, 0, 8}, 0)), "rank 0 of job 1 has already joined");
  EXPECT_EQ(refusal(a.join({1, false, 1, 2, 0, 9}, 0)), "job 1: retain_ops 9 differs from the other workers' 8");
  as<Admission::Waiting>(a.join({1, true, 0, 2, 0, 0}, 0));
  EXPECT_EQ(refusal(a.join({1, true, 0, 2, 0, 0}, 0)), "job 1 already has a PS");
  as<Admission::Grant>(a.join({1, false, 1, 2, 0, 8}, kSec));
  EXPECT_EQ(refusal(a.join({1, false, 0, 2, 0, 0}, kSec + 1500 * kMs)),
            "job 1 is already running on this switch (2 workers, for 1.5 s); a second job must use another job id");
  Admission sml(regions(100, 1));
  EXPECT_EQ(refusal(sml.join({1, true, 0, 2, 0, 0}, 0)),
            "job 1: this switch runs the isolated policy, whose jobs have no PS");
}

TEST(Admission, AJobBeyondTheFreeRegionsIsRefusedWholeAndForgotten) {
  Admission a(regions(100, 1));
  as<Admission::Grant>(a.join({1, false, 0, 1, 0, 0}, 0));
  as<Admission::Waiting>(a.join({2, false, 0, 2, 0, 0}, 0));
  EXPECT_EQ(refusal(a.join({2, false, 1, 2, 0, 0}, 0)),
            "job: job 2: no free aggregator region (the isolated policy serves at most 1 jobs at once on this switch)");
  EXPECT_EQ(a.job(2), nullptr);
  Admission t(regions(100, 1, 4));
  as<Admission::Grant>(t.join({6, false, 0, 1, 0, 0}, 0));
  as<Admission::Grant>(t.join({1, false, 0, 1, 0, 0}, 0));  // another thread's region
  EXPECT_EQ(refusal(t.join({10, false, 0, 1, 0, 0}, 0)),
            "job: job 10: no free aggregator region (the isolated policy serves at most 1 jobs at once on each switch "
            "thread; job 10 is served by thread 2 of 4, with the jobs whose id is 2 mod 4)");
}

TEST(Admission, LeavingAndRevokingGiveEverythingBack) {
  Admission a(regions(100, 1));
  as<Admission::Waiting>(a.join({3, false, 1, 2, 0, 0}, 0));
  a.leave(3, false, 1);
  EXPECT_EQ(a.job(3), nullptr);  // its last member left
  as<Admission::Waiting>(a.join({3, false, 0, 2, 0, 0}, 0));
  const auto g = as<Admission::Grant>(a.join({3, false, 1, 2, 0, 0}, 0));
  // The switch refused the entry: the job waits again with its members, its ids and region free.
  a.revoke(3);
  EXPECT_FALSE(a.job(3)->live);
  EXPECT_EQ(a.job(3)->workers_joined(), 2u);
  a.leave(3, false, 1);
  const auto again = as<Admission::Grant>(a.join({3, false, 1, 2, 0, 0}, 0));
  EXPECT_EQ(again.region, g.region);
  EXPECT_EQ(again.workers, (std::vector<NodeId>{3, 4}));  // round robin after 1, 2
  a.release(3);
  EXPECT_EQ(as<Admission::Grant>(a.join({4, false, 0, 1, 0, 0}, 0)).region, 0);
}

TEST(Admission, HotSetListsMustAgreeBeforeATableIsInstalled) {
  Admission a(Admission::config_of(schemes::find("zebra"), 100, 1));
  as<Admission::Grant>(a.admit({1, {1, 2}, 3, std::nullopt}));
  EXPECT_TRUE(std::holds_alternative<Admission::HotPending>(a.hot_set(1, 0, {4, 3, 0, {10, 11}})));
  EXPECT_EQ(as<Admission::Refusal>(a.hot_set(1, 0, {4, 3, 0, {10}})).reason,
            "hot_set: worker rank 0 began a new list before the switch answered its previous one");
  EXPECT_EQ(as<Admission::Refusal>(a.hot_set(1, 0, {4, 3, 1, {12}})).reason,
            "hot_set: chunk at offset 1 of worker rank 0 does not continue its list");
  EXPECT_TRUE(std::holds_alternative<Admission::HotPending>(a.hot_set(1, 0, {4, 3, 2, {12}})));
  EXPECT_EQ(as<Admission::HotAgreed>(a.hot_set(1, 1, {4, 3, 0, {10, 11, 12}})).keys,
            (std::vector<uint64_t>{10, 11, 12}));
  Admission b(Admission::config_of(schemes::find("zebra"), 100, 1));
  as<Admission::Grant>(b.admit({1, {1, 2}, 3, std::nullopt}));
  b.hot_set(1, 0, {4, 2, 0, {10, 11}});
  const auto agreed = as<Admission::HotAgreed>(b.hot_set(1, 1, {4, 2, 0, {10, 11}}));
  EXPECT_EQ(agreed.from, 4u);
  EXPECT_EQ(agreed.version, 1u);
  EXPECT_EQ(agreed.keys, (std::vector<uint64_t>{10, 11}));
  b.installed(1, agreed.version);
  b.hot_set(1, 0, {9, 2, 0, {10, 11}});
  const auto differ = as<Admission::HotDisagreed>(b.hot_set(1, 1, {9, 1, 0, {12}}));
  EXPECT_EQ(differ.reason,
            "the hot-set lists differ: worker rank 1 sent 1 keys from iteration 9, rank 0 2 keys from iteration 9");
  EXPECT_EQ(differ.keys, 2u);
  // The lists were cleared: the next round starts afresh, its version after the installed one.
  b.hot_set(1, 0, {12, 1, 0, {5}});
  EXPECT_EQ(as<Admission::HotAgreed>(b.hot_set(1, 1, {12, 1, 0, {5}})).version, 2u);
  Admission c(Admission::config_of(schemes::find("atp"), 100, 1));
  as<Admission::Grant>(c.admit({1, {1}, 2, std::nullopt}));
  EXPECT_EQ(as<Admission::Refusal>(c.hot_set(1, 0, {1, 1, 0, {1}})).reason,
            "hot_set: this switch runs atp, which has no hot-set table");
  EXPECT_EQ(as<Admission::Refusal>(c.hot_set(2, 0, {1, 1, 0, {1}})).reason,
            "'hot_set' from a connection that is not a worker of a live job");
}

}  // namespace
}  // namespace ina
