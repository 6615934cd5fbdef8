// The PS / fallback server driven directly: bitmaps, targeted results,
// reminders and timeouts, retired PSNs, Karn's rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cluster_fixture.hpp"
#include "schemes/registry.hpp"
#include "switch_rig.hpp"

namespace ina::test {
namespace {

// ====================================================================
// PS, driven directly
// ====================================================================


struct PsRig {
  explicit PsRig(bool targeted = false, bool remember = false) {
    host::PsConfig c;
    c.targeted_known_results = targeted;
    c.remember_completed = remember;
    c.job = 1;
    c.workers = kJob1;
    c.sw = kSw;
    c.payload_values = 64;
    c.min_timeout = 1 * kMs;
    ps = std::make_unique<host::ParameterServer>(c);
    ps->set_id(kPsId);
  }
  // A packet to the PS: Data with `bitmap` and values (kPartial if >1 bit).
  void data(uint32_t psn, uint64_t bitmap, const std::vector<int32_t>& v, Time now = 0, uint16_t flags = 0) {
    Packet* p = make_data(fx, 1, psn, static_cast<uint8_t>(std::countr_zero(bitmap)), 3, kSw, v, 0, flags, kPsId);
    p->h.bitmap = bitmap;
    ps->on_packet(p, now, fx);
  }
  FakeEffects fx;
  std::unique_ptr<host::ParameterServer> ps;
};

void expect_ps_ack(const std::vector<Sent>& out, uint32_t psn, const std::vector<int32_t>& sum,
                   NodeId dst = kMulticast) {
  ASSERT_EQ(out.size(), 1u) << "exactly one Ack";
  EXPECT_EQ(out[0].h.type, PktType::Ack);
  EXPECT_EQ(out[0].h.dst, dst);
  EXPECT_EQ(out[0].h.src, kPsId);
  EXPECT_EQ(out[0].h.job, 1);
  EXPECT_EQ(out[0].h.psn, psn);
  EXPECT_EQ(out[0].h.nworkers, 3);
  EXPECT_EQ(out[0].h.bitmap, 0b111u);
  EXPECT_TRUE(out[0].h.has(flag::kResult));
  EXPECT_EQ(out[0].v, sum);
}

// The reminder's packets: one Fetch to the switch and one GradRequest per missing rank.
void expect_reminder(const std::vector<Sent>& out, uint32_t psn, const std::set<uint8_t>& missing_ranks) {
  size_t fetches = 0;
  std::set<uint8_t> ranks;
  for (const auto& s : out) {
    EXPECT_EQ(s.h.job, 1);
    EXPECT_EQ(s.h.psn, psn);
    if (s.h.type == PktType::Fetch) {
      ++fetches;
      EXPECT_EQ(s.h.dst, kSw);
    } else {
      ASSERT_EQ(s.h.type, PktType::GradRequest);
      ASSERT_LT(s.h.rank, 3);
      EXPECT_EQ(s.h.dst, kJob1[s.h.rank]);
      EXPECT_TRUE(ranks.insert(s.h.rank).second) << "rank asked twice";
    }
  }
  EXPECT_EQ(fetches, 1u);
  EXPECT_EQ(ranks, missing_ranks);
  EXPECT_EQ(out.size(), 1 + missing_ranks.size());
}

TEST(Ps, DisjointBitmapsAdd) {
  PsRig r;
  const auto a = ramp(64, 1), b = ramp(64, -30, 2), c = ramp(64, 500, -7);
  r.data(4, 0b001, a);
  EXPECT_EQ(r.ps->entries(), 1u);
  r.data(4, 0b100, c);
  EXPECT_TRUE(r.fx.sent.empty());
  r.data(4, 0b010, b);
  expect_ps_ack(r.fx.take(), 4, add(add(a, b), c));
  EXPECT_EQ(r.ps->entries(), 0u);
  EXPECT_EQ(r.ps->stats().completions, 1u);
  EXPECT_EQ(r.fx.pool.in_use(), 0u);
}

// PsConfig::remember_completed: a gradient that comes after its task's
// result (a late copy) opens an entry the PS tells from one that never
// completed; without the option it tells none.
TEST(Ps, AnEntryOpenedAgainForACompletedTaskIsALateCopy) {
  for (const bool remember : {true, false}) {
    SCOPED_TRACE(remember);
    PsRig r(false, remember);
    const auto v = ramp(64, 1);
    r.data(4, 0b111, v);  // task 4 completes at once
    r.fx.take();
    r.data(4, 0b010, v);  // a late copy of rank 1's gradient
    r.data(5, 0b001, v);  // task 5, never completed
    EXPECT_EQ(r.ps->entries(), 2u);
    EXPECT_EQ(r.ps->late_entries(), remember ? 1u : 0u);
  }
}

TEST(Ps, SubsetIsIgnored) {
  PsRig r;
  const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3);
  r.data(4, 0b011, add(a, b));
  r.data(4, 0b001, a);   // already counted
  r.data(4, 0b011, add(a, b));
  EXPECT_TRUE(r.fx.sent.empty());
  EXPECT_EQ(r.ps->stats().duplicates, 2u);
  r.data(4, 0b100, c);
  expect_ps_ack(r.fx.take(), 4, add(add(a, b), c));
}

TEST(Ps, SupersetReplaces) {
  PsRig r;
  const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3);
  r.data(4, 0b001, a);
  r.data(4, 0b011, add(a, b));
  EXPECT_TRUE(r.fx.sent.empty());
  EXPECT_EQ(r.ps->stats().superseded, 1u);
  r.data(4, 0b100, c);
  expect_ps_ack(r.fx.take(), 4, add(add(a, b), c));
  // A full-bitmap result (a worker answering with its result) completes at once.
  r.data(5, 0b010, b);
  r.data(5, 0b111, c, 0, flag::kToPs | flag::kResult);
  expect_ps_ack(r.fx.take(), 5, c);
  EXPECT_EQ(r.ps->entries(), 0u);
  EXPECT_EQ(r.ps->stats().known_results, 1u);
}

// A task completed once (its result multicast) and asked for again by two
// workers whose result copies were lost. The paper's PS (default) multicasts
// the result a third worker holds, and again for a late second copy of it.
// With targeted_known_results (the runtime) it goes to those two only, and the
// late copy finds no entry, completes a fresh one no worker waits for, and is
// dropped.
TEST(Ps, KnownResultGoesOnlyToTheWaitingWorkersWhenTargeted) {
  for (bool targeted : {false, true}) {
    SCOPED_TRACE(targeted ? "targeted" : "multicast (paper)");
    PsRig r(targeted);
    const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3), sum = add(add(a, b), c);
    r.data(7, 0b001, a, 0, flag::kResend | flag::kCollision);
    r.data(7, 0b010, b, kUs, flag::kResend | flag::kCollision);
    EXPECT_TRUE(r.fx.sent.empty());
    r.data(7, 0b111, sum, 2 * kUs, flag::kToPs | flag::kResult);  // rank 2 answers with the result
    auto out = r.fx.take();
    if (!targeted) {
      expect_ps_ack(out, 7, sum);
      r.data(7, 0b111, sum, 3 * kUs, flag::kToPs | flag::kResult);  // the late second answer
      expect_ps_ack(r.fx.take(), 7, sum);
      EXPECT_EQ(r.ps->stats().known_results, 2u);
      EXPECT_EQ(r.ps->stats().unicast_results, 0u);
      continue;
    }
    ASSERT_EQ(out.size(), 2u);
    std::set<NodeId> to;
    for (const auto& s : out) {
      EXPECT_EQ(s.h.type, PktType::Ack);
      EXPECT_EQ(s.h.psn, 7u);
      EXPECT_EQ(s.h.bitmap, 0b111u);
      EXPECT_TRUE(s.h.has(flag::kResult));
      EXPECT_EQ(s.v, sum);
      to.insert(s.h.dst);
    }
    EXPECT_EQ(to, (std::set<NodeId>{kJob1[0], kJob1[1]}));
    EXPECT_EQ(r.ps->entries(), 0u);
    r.data(7, 0b111, sum, 3 * kUs, flag::kToPs | flag::kResult);  // the late second answer
    EXPECT_TRUE(r.fx.take().empty());
    EXPECT_EQ(r.ps->entries(), 0u);
    EXPECT_EQ(r.ps->stats().known_results, 2u);
    EXPECT_EQ(r.ps->stats().unicast_results, 2u);
    EXPECT_EQ(r.ps->stats().unneeded_results, 1u);
    EXPECT_EQ(r.fx.pool.in_use(), 0u);
    // Gradients alone (no worker held the result) still complete with one multicast.
    r.data(8, 0b011, add(a, b), 4 * kUs, flag::kPartial);
    r.data(8, 0b100, c, 5 * kUs, flag::kCollision);
    expect_ps_ack(r.fx.take(), 8, sum);
  }
}

TEST(Ps, PartialOverlapIsAConflictAndRunsTheReminder) {
  PsRig r;
  const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3);
  r.data(4, 0b011, add(a, b), 100 * kNs);
  r.data(4, 0b110, add(b, c), 200 * kNs);  // overlaps on rank 1 only
  EXPECT_EQ(r.ps->stats().conflicts, 1u);
  expect_reminder(r.fx.take(), 4, {2});
  EXPECT_EQ(r.ps->entries(), 1u);
  // The conflicting packet was dropped: rank 2's gradient completes the sum exactly.
  r.data(4, 0b100, c, 300 * kNs, flag::kToPs);
  expect_ps_ack(r.fx.take(), 4, add(add(a, b), c));
}

TEST(Ps, TimeoutFetchesFromSwitchAndAsksOnlyMissingRanks) {
  PsRig r;
  const auto b = ramp(64, 2);
  const Time t0 = 5 * kUs;
  r.data(7, 0b010, b, t0);
  ASSERT_FALSE(r.fx.timers.empty());
  const auto [at, token] = r.fx.timers.back();
  EXPECT_EQ(at, t0 + 1 * kMs) << "the first timeout is the floor";
  // An early firing does nothing.
  r.ps->on_timer(token, at - 1, r.fx);
  EXPECT_TRUE(r.fx.sent.empty());
  r.ps->on_timer(token, at, r.fx);
  expect_reminder(r.fx.take(), 7, {0, 2});
  EXPECT_EQ(r.ps->stats().timeout_reminders, 1u);
  // The answers: the switch's partial (rank 0) and rank 2's gradient.
  const auto a = ramp(64, 1), c = ramp(64, 3);
  Packet* fr = make_data(r.fx, 1, 7, 0, 3, kSw, a, 0, flag::kPartial, kPsId);
  fr->h.type = PktType::FetchReply;
  fr->h.bitmap = 0b001;
  r.ps->on_packet(fr, at + kUs, r.fx);
  EXPECT_TRUE(r.fx.sent.empty());
  r.data(7, 0b100, c, at + 2 * kUs, flag::kToPs);
  expect_ps_ack(r.fx.take(), 7, add(add(a, b), c));
  EXPECT_EQ(r.ps->entries(), 0u);
  // Later timers for the closed entry are stale.
  const auto timers = r.fx.timers;
  for (const auto& [t, tok] : timers) r.ps->on_timer(tok, t + 10 * kMs, r.fx);
  EXPECT_TRUE(r.fx.sent.empty());
  EXPECT_EQ(r.fx.pool.in_use(), 0u);
}

TEST(Ps, RepeatedTimeoutsKeepReminding) {
  PsRig r;
  r.data(7, 0b010, ramp(64, 2), 0);
  for (int k = 1; k <= 3; ++k) {
    ASSERT_FALSE(r.fx.timers.empty());
    const Time at = std::max_element(r.fx.timers.begin(), r.fx.timers.end())->first;
    r.ps->on_timer(0, at, r.fx);
    expect_reminder(r.fx.take(), 7, {0, 2});
    EXPECT_EQ(r.ps->stats().timeout_reminders, static_cast<uint64_t>(k));
  }
}

Packet* reminder(FakeEffects& fx, uint32_t psn, uint8_t rank) {
  Packet* m = fx.alloc();
  m->h.type = PktType::Reminder;
  m->h.job = 1;
  m->h.src = kJob1[rank];
  m->h.dst = kPsId;
  m->h.rank = rank;
  m->h.nworkers = 3;
  m->h.psn = psn;
  m->h.bitmap = 1ULL << rank;
  return m;
}

TEST(Ps, WorkerReminderRunsTheReminderImmediately) {
  PsRig r;
  const Time now = 5 * kMs;
  r.ps->on_packet(reminder(r.fx, 21, 1), now, r.fx);
  expect_reminder(r.fx.take(), 21, {0, 1, 2});  // nothing known yet: everyone is asked
  EXPECT_EQ(r.ps->stats().worker_reminders, 1u);
  // Workers that already have the result answer with it: that completes the task.
  const auto sum = ramp(64, 42);
  r.data(21, 0b111, sum, now + kUs, flag::kToPs | flag::kResult);
  expect_ps_ack(r.fx.take(), 21, sum);
  EXPECT_EQ(r.ps->entries(), 0u);

  // With an entry already holding rank 0, long before any timeout: only ranks 1 and 2 are asked.
  r.data(22, 0b001, ramp(64, 1), now);
  EXPECT_TRUE(r.fx.sent.empty());
  r.ps->on_packet(reminder(r.fx, 22, 2), now + 2 * kUs, r.fx);
  expect_reminder(r.fx.take(), 22, {1, 2});
  EXPECT_EQ(r.ps->stats().timeout_reminders, 0u);
  EXPECT_EQ(r.fx.pool.in_use(), 0u);
}

TEST(Ps, MalformedIsCountedAndDropped) {
  PsRig r;
  Packet* p = make_data(r.fx, 2, 1, 0, 3, 1, ramp(8, 1), 0, 0, kPsId);  // other job
  r.ps->on_packet(p, 0, r.fx);
  p = make_data(r.fx, 1, 1, 0, 2, 1, ramp(8, 1), 0, 0, kPsId);  // wrong worker count
  r.ps->on_packet(p, 0, r.fx);
  p = make_data(r.fx, 1, 1, 0, 3, 1, ramp(8, 1), 0, 0, kPsId);
  p->h.bitmap = 0b1000;  // beyond the workers
  r.ps->on_packet(p, 0, r.fx);
  p = make_data(r.fx, 1, 1, 0, 3, 1, ramp(65, 1), 0, 0, kPsId);  // larger than the payload
  r.ps->on_packet(p, 0, r.fx);
  EXPECT_EQ(r.ps->stats().malformed, 4u);
  EXPECT_EQ(r.ps->entries(), 0u);
  EXPECT_TRUE(r.fx.sent.empty());
  EXPECT_EQ(r.fx.pool.in_use(), 0u);
}

TEST(Ps, RetiredAnswerDropsTheStaleEntryAndOpensNone) {
  PsRig r;
  r.data(6, 0b001, ramp(64, 1), 0, flag::kResend | flag::kCollision);  // a late copy of a finished task
  ASSERT_EQ(r.ps->entries(), 1u);
  Packet* p = make_data(r.fx, 1, 6, 1, 3, kJob1[1], {}, 0, flag::kToPs | flag::kRetired, kPsId);
  p->h.bitmap = 0;
  r.ps->on_packet(p, 10 * kUs, r.fx);
  EXPECT_EQ(r.ps->entries(), 0u);
  EXPECT_TRUE(r.fx.sent.empty()) << "a retired task is not completed again";
  EXPECT_EQ(r.ps->stats().retired, 1u);
  // Retired for a PSN the PS does not hold: nothing is opened.
  p = make_data(r.fx, 1, 7, 1, 3, kJob1[1], {}, 0, flag::kToPs | flag::kRetired, kPsId);
  p->h.bitmap = 0;
  r.ps->on_packet(p, 11 * kUs, r.fx);
  EXPECT_EQ(r.ps->entries(), 0u);
  EXPECT_EQ(r.ps->stats().retired, 1u);
  EXPECT_EQ(r.fx.pool.in_use(), 0u);
}

// Catches: a request for a not-yet-sent packet being dropped (the PS would
// wait for a switch aggregate that never forms) or answered with an unsent
// slice; and the remembered packet still going to the switch.

TEST(Ps, KarnsRuleACompletionAfterAReminderIsNotATimeoutSample) {
  PsRig r;
  const auto a = ramp(64, 1), b = ramp(64, 2), c = ramp(64, 3), sum = add(add(a, b), c);
  EXPECT_EQ(r.ps->timeout(), 1 * kMs);
  // Unreminded: created at 0, complete at 5 ms: srtt 5, rttvar 2.5: 15 ms.
  r.data(1, 0b001, a, 0);
  r.data(1, 0b110, add(b, c), 5 * kMs);
  expect_ps_ack(r.fx.take(), 1, sum);
  EXPECT_EQ(r.ps->timeout(), 15 * kMs);
  // A worker's Reminder, then completion 100 ms after creation: not a sample.
  r.data(2, 0b001, a, 10 * kMs);
  r.ps->on_packet(reminder(r.fx, 2, 1), 20 * kMs, r.fx);
  expect_reminder(r.fx.take(), 2, {1, 2});
  r.data(2, 0b110, add(b, c), 110 * kMs);
  expect_ps_ack(r.fx.take(), 2, sum);
  EXPECT_EQ(r.ps->timeout(), 15 * kMs);
  // Nor after the PS's own timeout reminder.
  r.data(3, 0b001, a, 200 * kMs);
  r.ps->on_timer(0, 215 * kMs, r.fx);
  expect_reminder(r.fx.take(), 3, {1, 2});
  r.data(3, 0b110, add(b, c), 290 * kMs);
  expect_ps_ack(r.fx.take(), 3, sum);
  EXPECT_EQ(r.ps->timeout(), 15 * kMs);
  // A clean one is: 1 ms: rttvar (7.5 + 4) / 4 = 2.875, srtt (35 + 1) / 8 = 4.5: 16 ms.
  r.data(4, 0b011, add(a, b), 300 * kMs);
  r.data(4, 0b100, c, 301 * kMs);
  expect_ps_ack(r.fx.take(), 4, sum);
  EXPECT_EQ(r.ps->timeout(), 16 * kMs);
  EXPECT_EQ(r.fx.pool.in_use(), 0u);
}

}  // namespace
}  // namespace ina::test
