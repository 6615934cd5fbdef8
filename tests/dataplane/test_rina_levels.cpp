// Rina's levels above the ToR (dataplane/rina.cpp, "Levels above the ToR"):
// a level aggregates its ranks' ScatterReduce shards and sends one partial
// to its parent; the top takes it as one sender, and acknowledgements and
// AllGather copies go back down the same tree. Two switch programs driven
// by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "dataplane/rina_tree.hpp"

namespace ina {
namespace {

using test::dsts;
using test::FakeEffects;
using test::kLevel;
using test::kTop;
using test::Sent;
using test::Tree;

// ScatterReduce: ranks 1 and 2 (values 10.. and 100..) -> the level -> one
// partial (bits 0b110) up to the top; with rank 0's (1000..) the top sends
// the group's sum (bits 0b111) to node 4. The onward acknowledgement frees
// the top's slot and goes to rank 0 and the level, which frees its slot and
// copies it to ranks 1 and 2. A partial claiming other bits is refused.
TEST(RinaLevelSwitch, LevelSumsItsRanksAndTheTopTakesItAsOneSender) {
  Tree t;
  const uint16_t data = flag::kPartial;
  EXPECT_TRUE(t.to(*t.level, Tree::make(t.fx, PktType::RingData, 2, kLevel, 1, 0b010, {10, 11}, data)).empty());
  const auto up = t.to(*t.level, Tree::make(t.fx, PktType::RingData, 3, kLevel, 2, 0b100, {100, 101}, data));
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].h.src, kLevel);
  EXPECT_EQ(up[0].h.dst, kTop);
  EXPECT_EQ(up[0].h.bitmap, RankBits(0b110));
  EXPECT_EQ(up[0].h.agg_index, 4u);
  EXPECT_EQ(up[0].v, (std::vector<int32_t>{110, 112}));
  EXPECT_EQ(t.level->occupied(), 1u);

  // A forged partial from the level with a bit it does not own: dropped.
  Sent forged = up[0];
  forged.h.bitmap = RankBits(0b111);
  EXPECT_TRUE(t.to(*t.top, forged).empty());
  EXPECT_EQ(t.top->stats().foreign_data, 1u);

  EXPECT_TRUE(t.to(*t.top, up[0]).empty());
  const auto on = t.to(*t.top, Tree::make(t.fx, PktType::RingData, 1, kTop, 0, 0b001, {1000, 1000}, data));
  ASSERT_EQ(on.size(), 1u);
  EXPECT_EQ(on[0].h.dst, 4u);
  EXPECT_EQ(on[0].h.src, kTop);
  EXPECT_EQ(on[0].h.bitmap, RankBits(0b111));
  EXPECT_EQ(on[0].v, (std::vector<int32_t>{1110, 1112}));

  const auto down = t.to(*t.top, Tree::make(t.fx, PktType::RingAck, 4, kTop, 3, 0, {}, 0));
  EXPECT_EQ(dsts(down), (std::vector<NodeId>{1, kLevel}));
  EXPECT_EQ(t.top->occupied(), 0u);
  const auto members = t.to(*t.level, down[1]);
  EXPECT_EQ(dsts(members), (std::vector<NodeId>{2, 3}));
  EXPECT_EQ(t.level->occupied(), 0u);
}

// AllGather: the previous group's shard (rank 4, node 5) reaches the top,
// which copies it to rank 0 and the level; the level copies it to ranks 1
// and 2 (src: the level, agg_index: the sender). The level acknowledges up
// once both have; the top acknowledges to node 5 once rank 0 and the level have.
TEST(RinaLevelSwitch, AllGatherGoesDownTheTreeAndIsAcknowledgedOnce) {
  Tree t;
  const uint16_t result = flag::kResult;
  auto shard = Tree::make(t.fx, PktType::RingData, 5, kTop, 4, 0, {7, 8}, result);
  const auto first = t.to(*t.top, shard);
  EXPECT_EQ(dsts(first), (std::vector<NodeId>{1, kLevel}));
  const auto second = t.to(*t.level, first[1]);
  ASSERT_EQ(dsts(second), (std::vector<NodeId>{2, 3}));
  for (const auto& s : second) {
    EXPECT_EQ(s.h.src, kLevel);
    EXPECT_EQ(s.h.agg_index, 5u);
    EXPECT_EQ(s.v, (std::vector<int32_t>{7, 8}));
  }
  auto ack = [&](NodeId from, uint8_t rank, NodeId at) {
    Packet* a = Tree::make(t.fx, PktType::RingAck, from, at, rank, 0, {}, result);
    a->h.agg_index = 5;
    return a;
  };
  EXPECT_TRUE(t.to(*t.level, ack(2, 1, kLevel)).empty());
  const auto level_ack = t.to(*t.level, ack(3, 2, kLevel));
  ASSERT_EQ(dsts(level_ack), (std::vector<NodeId>{kTop}));
  EXPECT_TRUE(t.to(*t.top, level_ack[0]).empty());
  const auto done = t.to(*t.top, ack(1, 0, kTop));
  ASSERT_EQ(dsts(done), (std::vector<NodeId>{5}));
  EXPECT_TRUE(done[0].h.has(flag::kResult));
}

// Receiver flow control (host/ring_transfer.cpp): node 4 refuses the
// group's sum (kBusy). The refusal goes down the tree as an
// acknowledgement would, but frees nothing: both slots still hold their
// sums, so rank 0's resend after the resume is served from the top, and
// the real acknowledgement frees both. A refusal from a node that is not
// the onward one (or, at the level, not from its parent) is dropped.
// AllGather: rank 1's refusal of a shard copy goes up to the top and on to
// the sender (node 5), and the other acknowledgements still collect into one.
TEST(RinaLevelSwitch, ARefusalGoesTheAcknowledgementsWayAndFreesNothing) {
  Tree t;
  const uint16_t data = flag::kPartial;
  EXPECT_TRUE(t.to(*t.level, Tree::make(t.fx, PktType::RingData, 2, kLevel, 1, 0b010, {10, 11}, data)).empty());
  const auto up = t.to(*t.level, Tree::make(t.fx, PktType::RingData, 3, kLevel, 2, 0b100, {100, 101}, data));
  ASSERT_EQ(up.size(), 1u);
  EXPECT_TRUE(t.to(*t.top, up[0]).empty());
  const auto on = t.to(*t.top, Tree::make(t.fx, PktType::RingData, 1, kTop, 0, 0b001, {1000, 1000}, data));
  ASSERT_EQ(dsts(on), (std::vector<NodeId>{4}));

  EXPECT_TRUE(t.to(*t.top, Tree::make(t.fx, PktType::RingAck, 5, kTop, 4, 0, {}, flag::kBusy)).empty());
  EXPECT_EQ(t.top->stats().foreign_ack, 1u) << "node 5 is not where the sum went";
  const auto busy = t.to(*t.top, Tree::make(t.fx, PktType::RingAck, 4, kTop, 3, 0, {}, flag::kBusy));
  ASSERT_EQ(dsts(busy), (std::vector<NodeId>{1, kLevel}));
  EXPECT_EQ(busy[0].h.flags, flag::kBusy);
  EXPECT_EQ(busy[0].h.src, kTop);
  EXPECT_EQ(t.top->occupied(), 1u);
  const auto busy_members = t.to(*t.level, busy[1]);
  EXPECT_EQ(dsts(busy_members), (std::vector<NodeId>{2, 3}));
  EXPECT_EQ(t.level->occupied(), 1u);
  Sent forged = busy[1];
  forged.h.src = 4;
  EXPECT_TRUE(t.to(*t.level, forged).empty());
  EXPECT_EQ(t.level->stats().foreign_ack, 1u);

  const auto resume = t.to(*t.top, Tree::make(t.fx, PktType::RingAck, 4, kTop, 3, 0, {}, flag::kBusy | flag::kResume));
  ASSERT_EQ(dsts(resume), (std::vector<NodeId>{1, kLevel}));
  EXPECT_EQ(resume[0].h.flags, flag::kBusy | flag::kResume);
  const auto served =
      t.to(*t.top, Tree::make(t.fx, PktType::RingData, 1, kTop, 0, 0b001, {1000, 1000}, data | flag::kResend));
  ASSERT_EQ(dsts(served), (std::vector<NodeId>{4}));
  EXPECT_EQ(served[0].v, (std::vector<int32_t>{1110, 1112}));
  const auto down = t.to(*t.top, Tree::make(t.fx, PktType::RingAck, 4, kTop, 3, 0, {}, 0));
  EXPECT_EQ(dsts(down), (std::vector<NodeId>{1, kLevel}));
  EXPECT_EQ(t.top->occupied(), 0u);
  EXPECT_EQ(dsts(t.to(*t.level, down[1])), (std::vector<NodeId>{2, 3}));
  EXPECT_EQ(t.level->occupied(), 0u);

  const uint16_t result = flag::kResult;
  const auto first = t.to(*t.top, Tree::make(t.fx, PktType::RingData, 5, kTop, 4, 0, {7, 8}, result));
  ASSERT_EQ(dsts(first), (std::vector<NodeId>{1, kLevel}));
  ASSERT_EQ(dsts(t.to(*t.level, first[1])), (std::vector<NodeId>{2, 3}));
  auto ack = [&](NodeId from, uint8_t rank, NodeId at, uint16_t flags) {
    Packet* a = Tree::make(t.fx, PktType::RingAck, from, at, rank, 0, {}, static_cast<uint16_t>(result | flags));
    a->h.agg_index = 5;
    return a;
  };
  const auto refused = t.to(*t.level, ack(2, 1, kLevel, flag::kBusy));
  ASSERT_EQ(dsts(refused), (std::vector<NodeId>{kTop}));
  const auto to_sender = t.to(*t.top, refused[0]);
  ASSERT_EQ(dsts(to_sender), (std::vector<NodeId>{5}));
  EXPECT_EQ(to_sender[0].h.flags, result | flag::kBusy);
  EXPECT_EQ(to_sender[0].h.src, kTop);
  EXPECT_TRUE(t.to(*t.level, ack(2, 1, kLevel, 0)).empty());
  const auto level_ack = t.to(*t.level, ack(3, 2, kLevel, 0));
  ASSERT_EQ(dsts(level_ack), (std::vector<NodeId>{kTop}));
  EXPECT_TRUE(t.to(*t.top, level_ack[0]).empty());
  ASSERT_EQ(dsts(t.to(*t.top, ack(1, 0, kTop, 0))), (std::vector<NodeId>{5}));
}

}  // namespace
}  // namespace ina
