// A late Rina member's answers to its agent's pull (dataplane/rina.cpp,
// RingPull | kBusy: it cannot begin the pulled step yet; | kResume: it has
// begun it now). The ToR keeps the job's late members for the step: the
// whole rack (the agent too) hears when the step turns held and whenever no
// member holds it any more; an answer of an earlier step is stale. Above the
// ToR, a level passes answers up and the group's top keeps them. What no
// rack member sent is dropped.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "dataplane/rina_tree.hpp"

namespace ina {
namespace {

using test::FakeEffects;
using test::kLevel;
using test::kTop;
using test::Sent;
using test::Tree;

constexpr NodeId kTor = 300;
constexpr uint16_t kLate = flag::kBusy, kBegun = flag::kBusy | flag::kResume;

Packet* answer(FakeEffects& fx, NodeId src, NodeId dst, uint8_t rank, uint32_t tag, uint16_t flags) {
  Packet* p = fx.alloc();
  p->h = Header{};
  p->h.type = PktType::RingPull;
  p->h.flags = flags;
  p->h.job = 1;
  p->h.src = src;
  p->h.dst = dst;
  p->h.rank = rank;
  p->h.nworkers = 5;
  p->h.priority = tag;
  return p;
}

using test::dsts;

// Job 1, ranks 0..4 on nodes 1..5; the rack is ranks {0, 1, 2} (agent 0).
TEST(RinaPullAnswer, TheToRTellsTheRackWhenAStepTurnsHeldAndWhenNoMemberHoldsIt) {
  dp::SwitchConfig c;
  c.memory_bytes = 4 * 256ULL;
  auto tor = schemes::find("rina").make_switch(c);
  tor->set_id(kTor);
  dp::SwitchJob j;
  j.job = 1;
  j.workers = {1, 2, 3, 4, 5};
  j.region_offset = 0;
  j.region_size = 4;
  j.rina.rack = {0, 1, 2};
  j.rina.upstream = {4};
  tor->add_job(j);
  FakeEffects fx;
  auto in = [&](NodeId src, uint8_t rank, uint32_t tag, uint16_t flags) {
    tor->on_packet(answer(fx, src, kTor, rank, tag, flags), 0, fx);
    return fx.settle("answer");
  };

  const auto held = in(2, 1, 0x104, kLate);
  ASSERT_EQ(dsts(held), (std::vector<NodeId>{1, 2, 3}));  // the whole rack, the agent too
  for (const auto& s : held) {
    EXPECT_EQ(s.h.type, PktType::RingPull);
    EXPECT_EQ(s.h.flags, kLate);
    EXPECT_EQ(s.h.src, kTor);
    EXPECT_EQ(s.h.rank, 0u);
    EXPECT_EQ(s.h.priority, 0x104u);
  }
  EXPECT_TRUE(in(3, 2, 0x104, kLate).empty()) << "held already";
  EXPECT_TRUE(in(2, 1, 0x104, kBegun).empty()) << "rank 2 still holds it";
  const auto free = in(3, 2, 0x104, kBegun);
  ASSERT_EQ(dsts(free), (std::vector<NodeId>{1, 2, 3}));
  EXPECT_EQ(free[0].h.flags, kBegun);
  EXPECT_EQ(free[0].h.priority, 0x104u);
  EXPECT_EQ(dsts(in(3, 2, 0x104, kBegun)), (std::vector<NodeId>{1, 2, 3})) << "again: someone missed the word";
  EXPECT_EQ(dsts(in(2, 1, 0x105, kLate)), (std::vector<NodeId>{1, 2, 3}));  // a later step resets the register
  EXPECT_TRUE(in(3, 2, 0x104, kBegun).empty()) << "a step the rack has left";
  // The agent is never late for its own pull; another rack's rank, or a rank
  // claiming another's number, is no member.
  EXPECT_TRUE(in(1, 0, 0x105, kLate).empty());
  EXPECT_TRUE(in(4, 3, 0x105, kLate).empty());
  EXPECT_TRUE(in(4, 1, 0x105, kBegun).empty());
  EXPECT_EQ(tor->stats().foreign_data, 3u);
  EXPECT_EQ(dsts(in(2, 1, 0x105, kBegun)), (std::vector<NodeId>{1, 2, 3}));
}

// The group {0, 1, 2} above the ToR: rank 0 sends straight to the top,
// ranks 1 and 2 through the level (group bits 1 and 2).
TEST(RinaPullAnswer, ALevelPassesAnswersUpAndTheTopKeepsThem) {
  Tree tree;
  auto& level = tree.level;
  auto& top = tree.top;
  FakeEffects& fx = tree.fx;

  auto via_level = [&](uint16_t flags) {
    level->on_packet(answer(fx, 2, kLevel, 1, 0x102, flags), 0, fx);
    const auto up = fx.settle("to the level");
    EXPECT_EQ(dsts(up), (std::vector<NodeId>{kTop}));
    Packet* p = fx.alloc();
    p->h = up.at(0).h;
    top->on_packet(p, 0, fx);
    return fx.settle("to the top");
  };
  const auto held = via_level(kLate);
  EXPECT_EQ(dsts(held), (std::vector<NodeId>{1, 2, 3}));  // the group, the agent too
  EXPECT_EQ(held.at(0).h.flags, kLate);
  const auto free = via_level(kBegun);
  EXPECT_EQ(dsts(free), (std::vector<NodeId>{1, 2, 3}));
  EXPECT_EQ(free.at(0).h.flags, kBegun);
}

}  // namespace
}  // namespace ina
