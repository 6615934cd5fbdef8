#pragma once
// DSA's priority policy (Eq. 1):
//   P_j(l) = (1 / T_j) * (L_j / l) * (Comm_j / Comp_j)
// T_j: remaining time of job j's current epoch; L_j: its layer count; l: the
// layer (1 = front) of the tensor; Comm_j / Comp_j: its communication to
// computation time ratio. T_j, Comm_j and Comp_j are measured at run time.
#include <cstdint>

namespace ina::host {

// T in microseconds (>= 1 is enforced), layers >= 1, 1 <= layer <= layers.
double dsa_priority(double remaining_us, int layers, int layer, double comm_over_comp);

// The header's 32-bit field: P scaled by 2^24, rounded, clamped to [1, 2^31 - 1].
// The switch halves it on every failed preemption (priority downgrading).
uint32_t dsa_priority_field(double p);

}  // namespace ina::host
