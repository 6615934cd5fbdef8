#pragma once
// The MILP of P4INC-AOI (§IV-B, Eqs. 1-11, linearized as Appendix A), solved
// with COIN-OR CBC. The model, its deviations from the paper's text and the
// horizon rule are documented at the top of aoi_milp.cpp and in
// docs/p4inc-aoi.md ("The MILP (§IV-B)").
#include "control/aoi.hpp"

namespace ina::control::aoi {

struct MilpOptions {
  double time_limit_s = 60;             // CBC's wall-clock limit
  unsigned horizon_ts = 0;              // T; 0 = derive from the incumbent (see own_incumbents)
  bool inc = true;                      // false: the noINC MILP (no k variables)
  const Schedule* incumbent = nullptr;  // a feasible schedule (e.g. TW's): warm start and bound on T
  // With o.incumbent, also try plan_list and plan_serial: the least CT-BTI of
  // the three is the incumbent (its CT-BTI bounds T: the better, the smaller
  // the model). Without o.incumbent the two plans are always tried.
  bool own_incumbents = true;
  // The valid inequality families of aoi_milp.cpp ("Strengthening rows"),
  // each on by default; off only to compare bounds.
  bool run_length_rows = true;    // a run covers at least the job's fewest TSs
  bool makespan_rows = true;      // t >= Δt·Σ u, u^i = [some run ends at or after TS i]
  bool incumbent_cutoff = true;   // no INC choice that cannot end by the incumbent's CT-BTI
  unsigned threads = 1;                 // CBC threads
};

// What the solve looked like, for reports (rows, columns, the raw objective).
struct MilpReport {
  Schedule schedule;           // algo "milp"; solve_s, bound_s, gap, optimal filled
  double objective_s = 0;      // CBC's t_max (phase 1's objective, Eq. 1)
  unsigned horizon_ts = 0;     // T
  int rows = 0, columns = 0, integers = 0;
  bool warm_started = false;   // CBC accepted the incumbent
  bool from_solver = false;    // false: CBC found nothing better, the schedule is the incumbent
  double root_lp_s = 0;        // phase 1: the LP relaxation's t (before cuts)
  double root_cuts_s = 0;      // phase 1: the root node's bound on t after CBC's cuts
  bool t_optimal = false;                 // phase 1 proved t (CT-BTI) optimal
  bool reconfigurations_minimal = false;  // phase 2 proved Σ reconfigured minimal at phase 1's t
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

// A better incumbent: a list schedule. Jobs in arrival order, each placed at
// the start TS (its arrival TS or up to 3 later, the best of those) and INC
// choice that end it soonest, at the largest constant per-worker rate that
// fits next to the jobs already placed (switch load, INC capacity, ports:
// connections added as needed); the AOI per TS is what the placed flows
// need. Feasible by construction (it passes check_schedule).
Schedule plan_list(const Instance& inst, bool inc);

}  // namespace ina::control::aoi
