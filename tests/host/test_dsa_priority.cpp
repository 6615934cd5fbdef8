// DSA's Eq. 1 and its run-time estimates (host/dsa_priority.hpp), the rule
// the simulator's training worker and ina-train share.
#include "host/dsa_priority.hpp"

#include <gtest/gtest.h>

namespace ina::host {
namespace {

// Eq. 1: P_j(l) = (1 / T_j) (L_j / l) (Comm_j / Comp_j), as a field of 2^24 units.
TEST(DsaPriority, EquationOneByHand) {
  EXPECT_DOUBLE_EQ(dsa_priority(100, 2, 1, 2), 0.04);   // 1/100 x 2/1 x 2
  EXPECT_DOUBLE_EQ(dsa_priority(100, 2, 2, 2), 0.02);   // the back layer: half
  EXPECT_DOUBLE_EQ(dsa_priority(-5, 1, 1, 1), 1.0);     // T at least 1 us
  EXPECT_EQ(dsa_priority_field(0.04), 671089u);          // 0.04 x 2^24 = 671088.64
  EXPECT_EQ(dsa_priority_field(0), 1u);                  // never 0: the switch halves it
  EXPECT_EQ(dsa_priority_field(1e9), 2147483647u);
  EXPECT_THROW(dsa_priority(100, 2, 3, 1), std::invalid_argument);
}

// T_j is the last iteration's duration less the time into this one;
// Comm_j / Comp_j the last iteration's ratio; the constructor's values
// until an iteration is measured, and a ratio only from two measured times.
TEST(DsaPriority, EstimatesComeFromTheLastMeasuredIteration) {
  Eq1Estimates e(1000, 0.5);
  EXPECT_EQ(e.field(500, 2, 1), dsa_priority_field(1.0 / 500 * 2 * 0.5));
  e.measured(2000, 1200, 600);  // 2 ms, of it 1.2 ms communicating and 0.6 ms computing
  EXPECT_DOUBLE_EQ(e.iteration_us(), 2000);
  EXPECT_DOUBLE_EQ(e.comm_over_comp(), 2.0);
  EXPECT_EQ(e.field(1500, 2, 1), 134218u);  // 1/500 x 2 x 2 = 0.008; x 2^24 = 134217.7
  EXPECT_EQ(e.field(1500, 2, 2), 67109u);
  // T_j is the rest of the epoch: with 4 more iterations of 2 ms after this
  // one, 8 ms plus this one's remaining 0.5 ms.
  EXPECT_EQ(e.field(1500, 2, 1, 4), dsa_priority_field(1.0 / 8500 * 2 * 2));
  e.measured(3000, 900, 0);  // no compute measured: the ratio stays
  EXPECT_DOUBLE_EQ(e.comm_over_comp(), 2.0);
  EXPECT_DOUBLE_EQ(e.iteration_us(), 3000);
  // A communication-intensive job outranks a computation-intensive one at
  // the same point of the same iteration length (Eq. 1's second heuristic).
  Eq1Estimates comm_heavy(0, 1), comp_heavy(0, 1);
  comm_heavy.measured(4000, 3000, 1000);
  comp_heavy.measured(4000, 1000, 3000);
  EXPECT_EQ(comm_heavy.field(1000, 2, 1), 33554u);  // 1/3000 x 2 x 3 = 0.002 of 2^24
  EXPECT_EQ(comp_heavy.field(1000, 2, 1), 3728u);   // 1/3000 x 2 x 1/3: 9x less
}

}  // namespace
}  // namespace ina::host
