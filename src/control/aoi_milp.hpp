#pragma once
// The MILP of P4INC-AOI (§IV-B, Eqs. 1-11, linearized as Appendix A), solved
// with COIN-OR CBC. The model, its deviations from the paper's text and the
// horizon rule are documented at the top of aoi_milp.cpp and in
// docs/p4inc-aoi.md ("The MILP (§IV-B)").
#include "control/aoi.hpp"

namespace ina::control::aoi {

struct MilpOptions {
  double time_limit_s = 60;             // CBC's wall-clock limit
  unsigned horizon_ts = 0;              // T; 0 = derive from the incumbent (or the serial plan)
  bool inc = true;                      // false: the noINC MILP (no k variables)
  const Schedule* incumbent = nullptr;  // a feasible schedule (e.g. TW's): warm start and bound on T
  unsigned threads = 1;                 // CBC threads
};

// What the solve looked like, for reports (rows, columns, the raw objective).
struct MilpReport {
  Schedule schedule;           // algo "milp"; solve_s, bound_s, gap, optimal filled
  double objective_s = 0;      // CBC's t_max (without the reconfiguration tie-break term)
  unsigned horizon_ts = 0;     // T
  int rows = 0, columns = 0, integers = 0;
  bool warm_started = false;   // CBC accepted the incumbent
  bool from_solver = false;    // false: CBC found nothing better, the schedule is the incumbent
};

MilpReport solve_milp(const Instance& inst, const MilpOptions& o);
// solve_milp(...).schedule.
Schedule plan_milp(const Instance& inst, const MilpOptions& o);

// The fallback incumbent: jobs one at a time in arrival order, each at the
// largest per-worker rate its ports, switches and NICs allow, with or without
// INC (whichever ends it sooner), and the AOI set to exactly its connections
// at its first TS. Feasible by construction (it passes check_schedule);
// throws AoiError if some job cannot run even alone.
Schedule plan_serial(const Instance& inst, bool inc);

}  // namespace ina::control::aoi
