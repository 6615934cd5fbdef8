// The memory estimate of PS-family runs on multi-switch topologies
// (experiment/estimate.hpp): the run's INA switches only, and the hosts'
// worker transports and PS deadlines.
#include <gtest/gtest.h>

#include <string>

#include "experiment/estimate.hpp"

namespace ina {
namespace {

uint64_t part(const exp::Estimate& e, const std::string& what) {
  for (const auto& p : e.parts)
    if (p.what == what) return p.bytes;
  return 0;
}

// The testbed (2 racks x 4 workers, 100 Gbps links), one job of 8, a 1 MiB
// gradient (262144 values), 256 B payloads + 50 B headers (306 B).
exp::Settings testbed(const std::string& extra) {
  return exp::parse_scenario("[topology]\nkind = \"testbed\"\n[switch]\nmemory_mb = 5\n" + extra +
                                 "[workload]\njobs = 1\ngradient_mb = 1\n[run]\nschemes = [\"ps\"]\n",
                             "e.toml")
      .base;
}

// Plain PS: no switch runs a program, so no aggregators at all (the
// estimate counted 5 MiB of aggregators on each of the testbed's switches).
TEST(EstimateNetwork, PsCountsNoSwitchAggregators) {
  const exp::Estimate e = exp::estimate_run(testbed(""), "ps");
  EXPECT_EQ(part(e, "switch aggregators"), 0u);
  // Each PS's reminder deadlines (16 B per merged packet): its shard is
  // 262144 / 8 = 32768 values = 512 packets from each of 8 workers, 4096
  // merges per op, fewer than its link brings in 1 ms (100 Gbps / 306 B,
  // half of it gradients: 20424); 8 PSes.
  EXPECT_EQ(part(e, "PS reminder deadlines"), 8u * 4096 * 16);
  // 8 hosts x 8 transports, each starting at 1/8 of the 60 KB window
  // (24.5 packets) and growing by AIMD over its 512 results to
  // sqrt(24.5^2 + 2 * 512) = 40.3: a ring of 128 records (40 B and a done
  // bit) and 161 deadlines of 16 B.
  EXPECT_EQ(part(e, "worker transport records"), 64u * (128 * 321 / 8 + 161 * 16));
}

// ATP with one INA switch (the planner's first, a ToR): that switch's
// aggregators only, 5 MiB / 256 B = 20480 of them with 109 B of state each
// (Agg 32, the slot index 4, ATP's registers 73: completion 1, the last
// result's task 8, the ranks that went around 16, two bypass-record
// tables of 24), and values for the tasks its 4 hosts have live: two 60 KB
// windows of 306 B packets each (196 x 2), 1568 slots of 256 B, 98 pages.
TEST(EstimateNetwork, PsInaCountsTheRunsInaSwitchesOnly) {
  const exp::Estimate e = exp::estimate_run(testbed("ina_count = 1\n"), "atp");
  EXPECT_EQ(part(e, "switch aggregators"), 20480u * 109 + 98 * 4096);
}

// Rina: each rack's ToR aggregates its rack's shards (2 groups of 4). Per
// ToR, 20480 aggregators' state (36 B) and Rina's registers (11 B); the
// AllGather rows, one for the agent and one per rank of the other rack,
// 5 x 20480 x 32 B; and the values of its live tasks, at most the slots
// its sends write: every step numbers its packets from 0 and takes slot
// psn mod region, so at most the largest send (half the gradient, 2048
// packets of 256 B: 128 pages, one more for a region that starts
// mid-page). With the 60 KB window the live tasks are fewer: its 4 hosts'
// two windows of 196 packets, 1568 slots, 98 pages; with 240 KB (784
// packets a window) the sends' 129 pages are. (Counting every ToR's 5 MiB
// of values whole puts rina/diagnose/ecn_threshold.toml's estimate at 2.4x
// its measured peak; leaving out the rows puts rina_small.toml's at 0.73x.)
TEST(EstimateNetwork, RinaCountsTheSlotsItsSendsWrite) {
  const uint64_t fixed = 20480 * (36 + 11) + 5 * 20480 * 32;
  const exp::Estimate e = exp::estimate_run(testbed("ina_count = 2\n"), "rina");
  EXPECT_EQ(part(e, "switch aggregators"), 2u * (fixed + 98 * 4096));
  const exp::Estimate wide = exp::estimate_run(testbed("ina_count = 2\n[transport]\ninit_window_kb = 240\n"), "rina");
  EXPECT_EQ(part(wide, "switch aggregators"), 2u * (fixed + 129 * 4096));
}

}  // namespace
}  // namespace ina
