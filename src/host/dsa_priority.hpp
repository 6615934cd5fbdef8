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

// Eq. 1's run-time inputs as a DSA worker measures them ("T_j, Comm_j and
// Comp_j are measured with the model training"), one rule for the
// simulator's training worker and the runtime's (ina-train):
//  - T_j, the remaining time of the current epoch: the previous
//    iteration's duration (from its compute's start to its last result)
//    times the iterations left in the epoch after this one, plus the
//    previous duration less the time since this iteration's compute
//    started. The simulator's training worker takes an iteration as the
//    epoch (no iteration after it: its job is one iteration, §VII-B's
//    JCT); ina-train passes the steps left in its real epoch;
//  - Comm_j / Comp_j: the previous iteration's communication time over its
//    compute time.
// Until an iteration is measured, the estimates given at construction.
class Eq1Estimates {
 public:
  Eq1Estimates(double iteration_us, double comm_over_comp)
      : iteration_us_(iteration_us), comm_over_comp_(comm_over_comp) {}
  // An iteration's communication ended: its duration, its communication and
  // its compute time (a ratio is taken only when both are measured, > 0).
  void measured(double iteration_us, double comm_us, double comp_us) {
    iteration_us_ = iteration_us;
    if (comp_us > 0 && comm_us > 0) comm_over_comp_ = comm_us / comp_us;
  }
  // The header field of a tensor of layer `layer` (1 = front) of `layers`,
  // `elapsed_us` after its iteration's compute started, with `after`
  // iterations of the epoch still to come.
  uint32_t field(double elapsed_us, int layers, int layer, double after = 0) const {
    return dsa_priority_field(dsa_priority(iteration_us_ * after + (iteration_us_ - elapsed_us), layers, layer, comm_over_comp_));
  }
  double iteration_us() const { return iteration_us_; }
  double comm_over_comp() const { return comm_over_comp_; }

 private:
  double iteration_us_, comm_over_comp_;
};

}  // namespace ina::host
