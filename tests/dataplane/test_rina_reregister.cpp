// A Rina ToR's region slots when the control plane registers a job again
// (a failure's new epoch, dataplane/rina.cpp "Membership") or removes
// another: a region slot's key names the step and the packet, not the job,
// so the job whose region holds the slot is its holder. Removing job 2 frees
// none of job 1's slots (not even one whose step tag reads 2), and job 1
// registered again starts from clean slots: a slot whose sum was complete
// when the failure came does not make the new epoch's packets duplicates.
#include <gtest/gtest.h>

#include <vector>

#include "dataplane/rina.hpp"
#include "dataplane/rina_tree.hpp"

// (A namespace of its own: the unity build puts test files together.)
namespace ina::rina_reregister {
namespace {

using test::FakeEffects;
using test::Sent;

constexpr NodeId kTor = 300;

// Job `job`'s RingData from rack rank `rank` (node `src`, rack-local bit
// `rank`), step tag `tag`, packet `psn` of 4 values, on to node `onward`.
Packet* data(FakeEffects& fx, uint16_t job, NodeId src, uint8_t rank, uint32_t tag, uint32_t psn, NodeId onward) {
  Packet* p = fx.alloc();
  p->h = Header{};
  p->h.type = PktType::RingData;
  p->h.flags = flag::kPartial;
  p->h.job = job;
  p->h.src = src;
  p->h.dst = kTor;
  p->h.rank = rank;
  p->h.nworkers = 3;
  p->h.priority = tag;
  p->h.psn = psn;
  p->h.bitmap = RankBits::bit(rank);
  p->h.agg_index = onward;
  p->h.count = 4;
  for (int i = 0; i < 4; ++i) p->payload()[i] = 10 * (rank + 1) + i;
  return p;
}

dp::SwitchJob rack_job(uint16_t id, NodeId first, uint32_t offset) {
  dp::SwitchJob j;
  j.job = id;
  j.workers = {first, static_cast<NodeId>(first + 1), static_cast<NodeId>(first + 2)};  // ranks 0, 1: the rack
  j.region_offset = offset;
  j.region_size = 4;
  j.rina.rack = {0, 1};
  j.rina.upstream = {2};
  return j;
}

TEST(RinaReregister, ARegionSlotIsItsJobsAndANewEpochStartsFromCleanSlots) {
  dp::SwitchConfig c;
  c.memory_bytes = 8 * 4 * 64ULL;  // 8 aggregators: two regions of 4
  auto tor = schemes::find("rina").make_switch(c);
  tor->set_id(kTor);
  tor->add_job(rack_job(1, 1, 0));
  tor->add_job(rack_job(2, 11, 4));
  FakeEffects fx;
  auto in = [&](Packet* p) {
    tor->on_packet(p, 0, fx);
    return fx.settle("data");
  };

  // Job 1, step tag 2 (op 0, epoch 0), packet 0: both members in, the sum goes on to rank 2 (node 3).
  EXPECT_TRUE(in(data(fx, 1, 1, 0, 2, 0, 3)).empty());
  const std::vector<Sent> sum = in(data(fx, 1, 2, 1, 2, 0, 3));
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_EQ(sum[0].h.dst, 3u);
  EXPECT_EQ(sum[0].h.bitmap, RankBits(3));
  EXPECT_EQ(tor->occupied_by(1), 1u) << "held until node 3 acknowledges it";
  EXPECT_EQ(tor->occupied_by(2), 0u) << "the step tag is not a job";

  tor->remove_job(2);
  EXPECT_EQ(tor->occupied_by(1), 1u) << "removing job 2 freed job 1's slot";

  // A failure: job 1 again at epoch 1 (the same rack), before node 3 acknowledged the sum.
  dp::SwitchJob again = dp::ring_job_at_epoch(*tor->job(1), {1, 2, 3}, 1, {0, 1}, {2});
  EXPECT_EQ(tor->replace_job(again), 1u);
  EXPECT_EQ(tor->occupied(), 0u);
  const uint32_t tag = 1u << 24 | 2;  // the same step at epoch 1
  EXPECT_TRUE(in(data(fx, 1, 1, 0, tag, 0, 3)).empty());
  const std::vector<Sent> fresh = in(data(fx, 1, 2, 1, tag, 0, 3));
  ASSERT_EQ(fresh.size(), 1u) << "the second member's packet was taken for a duplicate";
  EXPECT_EQ(fresh[0].h.bitmap, RankBits(3));
  EXPECT_EQ(fresh[0].v, (std::vector<int32_t>{30, 32, 34, 36}));
  EXPECT_EQ(tor->stats().duplicates, 0u);
}

}  // namespace
}  // namespace ina::rina_reregister
