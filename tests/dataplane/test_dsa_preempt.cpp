// DSA's compare at a held aggregator (dataplane/dsa_preempt.hpp): the
// priority register and the counters after each branch, for every mode.
#include <gtest/gtest.h>

#include "dataplane/dsa_preempt.hpp"

namespace ina {
namespace {

using dp::dsa_compare;
using dp::dsa_wins;
using dp::PreemptMode;
using dp::SwitchStats;

void expect_won(const SwitchStats& st, uint64_t n) {
  EXPECT_EQ(st.preempt_won, n);
  EXPECT_EQ(st.resubmits, n);  // the swap's second pass
}
void expect_lost(const SwitchStats& st, uint64_t n) {
  EXPECT_EQ(st.preempt_lost, n);
  EXPECT_EQ(st.downgrades, n);
}

TEST(DsaPreempt, HigherPriorityTakesTheRegisterAndCarriesTheHeldOneAway) {
  Rng rng(7);
  SwitchStats st;
  uint32_t held = 40;
  const auto c = dsa_compare(PreemptMode::Priority, held, 41, rng, st);
  EXPECT_TRUE(c.won);
  EXPECT_EQ(c.evicted, 40u);  // the evicted partial goes on with what it held the aggregator with
  EXPECT_EQ(held, 41u);
  expect_won(st, 1);
  expect_lost(st, 0);
}

TEST(DsaPreempt, LowerPriorityLosesAndHalvesTheHolder) {
  Rng rng(7);
  SwitchStats st;
  uint32_t held = 41;
  const auto c = dsa_compare(PreemptMode::Priority, held, 3, rng, st);
  EXPECT_FALSE(c.won);
  EXPECT_EQ(c.evicted, 0u);
  EXPECT_EQ(held, 20u);  // 41 >> 1
  expect_won(st, 0);
  expect_lost(st, 1);
}

TEST(DsaPreempt, ATieKeepsTheHolder) {
  Rng rng(7);
  SwitchStats st;
  uint32_t held = 8;
  EXPECT_FALSE(dsa_compare(PreemptMode::Priority, held, 8, rng, st).won);
  EXPECT_EQ(held, 4u);
  expect_lost(st, 1);
}

TEST(DsaPreempt, RepeatedLossesLetAWaitingPacketWinAfterLog2Compares) {
  // Held with 64, a packet of priority 5 loses at 64, 32, 16 and 8 (the
  // register falls to 32, 16, 8, 4) and wins at the fifth compare.
  Rng rng(7);
  SwitchStats st;
  uint32_t held = 64;
  const uint32_t after[] = {32, 16, 8, 4};
  for (uint32_t want : after) {
    EXPECT_FALSE(dsa_compare(PreemptMode::Priority, held, 5, rng, st).won);
    EXPECT_EQ(held, want);
  }
  const auto c = dsa_compare(PreemptMode::Priority, held, 5, rng, st);
  EXPECT_TRUE(c.won);
  EXPECT_EQ(c.evicted, 4u);
  EXPECT_EQ(held, 5u);
  expect_lost(st, 4);
  expect_won(st, 1);
}

TEST(DsaPreempt, DowngradingStopsAtZero) {
  Rng rng(7);
  SwitchStats st;
  uint32_t held = 1;
  EXPECT_FALSE(dsa_compare(PreemptMode::Priority, held, 0, rng, st).won);
  EXPECT_EQ(held, 0u);
  EXPECT_FALSE(dsa_compare(PreemptMode::Priority, held, 0, rng, st).won);  // 0 > 0 is false
  EXPECT_EQ(held, 0u);
  expect_lost(st, 2);
  // Any positive priority then wins.
  EXPECT_TRUE(dsa_compare(PreemptMode::Priority, held, 1, rng, st).won);
  EXPECT_EQ(held, 1u);
}

TEST(DsaPreempt, AlwaysWinsWhateverThePriorities) {
  Rng rng(7);
  SwitchStats st;
  uint32_t held = 1000;
  const auto c = dsa_compare(PreemptMode::Always, held, 0, rng, st);
  EXPECT_TRUE(c.won);
  EXPECT_EQ(c.evicted, 1000u);
  EXPECT_EQ(held, 0u);
  expect_won(st, 1);
  expect_lost(st, 0);
}

TEST(DsaPreempt, CoinFollowsOneDrawPerCompareAndIgnoresThePriorities) {
  Rng rng(11), twin(11);
  SwitchStats st;
  uint64_t wins = 0;
  for (int k = 0; k < 200; ++k) {
    uint32_t held = 6;
    // The packet's priority would lose a strict compare; the coin decides alone.
    const bool expect = twin.bernoulli(0.5);
    const auto c = dsa_compare(PreemptMode::Coin, held, 1, rng, st);
    ASSERT_EQ(c.won, expect) << "compare " << k;
    EXPECT_EQ(held, expect ? 1u : 3u);
    wins += c.won;
  }
  EXPECT_GT(wins, 60u);  // both outcomes, near 1/2
  EXPECT_LT(wins, 140u);
  expect_won(st, wins);
  expect_lost(st, 200 - wins);
}

TEST(DsaPreempt, OnlyTheCoinDrawsFromTheStream) {
  Rng rng(3), twin(3);
  EXPECT_TRUE(dsa_wins(PreemptMode::Priority, 2, 1, rng));
  EXPECT_TRUE(dsa_wins(PreemptMode::Always, 0, 9, rng));
  EXPECT_EQ(rng.next(), twin.next());  // neither consumed a draw
  Rng a(5), b(5);
  const bool first = b.bernoulli(0.5);
  EXPECT_EQ(dsa_wins(PreemptMode::Coin, 0, 0, a), first);
  EXPECT_EQ(a.next(), b.next());  // exactly one draw
}

}  // namespace
}  // namespace ina
