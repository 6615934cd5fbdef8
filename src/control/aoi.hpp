#pragma once
// P4INC-AOI (Xie et al., ../shared/papers/p4inc-aoi.md): scheduling DML and
// MapReduce jobs on an optical data-centre network (ODCN) whose units are a
// PDP ToR switch (INC memory for a few jobs) and a server pool, joined by an
// all-optical interconnect (AOI) whose port pairings change only at
// time-slot (TS) boundaries.
//
// This header is the one place of the model (§IV-A): the network, the jobs,
// a schedule, and the independent validator every schedule passes through.
// The planners (TW and FCFS, Algorithms 1-3: aoi_tw.cpp; the MILP of §IV-B:
// aoi_milp.hpp) produce a Schedule; check_schedule() recomputes everything
// that is reported (ICTs, CT-BTI, reconfigured connections) from the
// schedule alone. docs/p4inc-aoi.md documents the model and the file format.
//
// Units used throughout: bandwidth in Gbps, data in gigabits (Gb; the paper's
// and the trace's MB are 10^6 bytes = 0.008 Gb), time in seconds. TSs are
// numbered from 1: TS i is [(i-1)·Δt, i·Δt).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ina::control::aoi {

// A stream (a worker's push, an inter-unit flow) is done once it has sent
// (1 - kDataTol) of its data: the planners and the validator use this one rule.
constexpr double kDataTol = 1e-6;

// A bad scenario or option; the message names the file, the field and the value.
class AoiError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One network unit v: a PDP switch and its server pool.
struct Unit {
  double pdp_gbps = 6400;       // B_PDP,v: the switch's capacity, uplink + downlink (Eq. 5)
  unsigned inc_jobs = 4;        // N_INC,v: jobs it can aggregate at once (Eq. 3)
  unsigned optical_ports = 24;  // P_oxc,v: ports to the AOI (Eq. 6)
  unsigned worker_slots = 512;  // GPUs for workers (64 servers x 8 GPUs)
  unsigned ps_slots = 64;       // CPU servers that may host a PS
  unsigned aggregators = 4096;  // the switch's aggregator array, split into inc_jobs segments (§VI-B)
};

struct Odcn {
  std::vector<Unit> units;
  double port_gbps = 40;      // B_port
  double reconfig_s = 0.02;   // ε: a new AOI connection carries nothing for this long (Eq. 10)
  double ts_s = 1.0;          // Δt
  double worker_gbps = 40;    // a worker's NIC: B_j^i <= this (ours; the paper's δB loop stops at it too)
  double delta_gbps = 10;     // δB of Algorithm 2 (and FCFS)
  // §VI-A: INC only for a job whose workers are all in one unit (the data
  // plane's rule). false: Eq. 2's general case, INC in any unit holding workers,
  // which then sends one partial aggregate to the PS.
  bool inc_requires_local = true;
  // A PS's NIC (ours; the testbed's 40 Gbps NICs): what reaches one job's PS
  // (every worker stream or partial aggregate) is at most this, so B_j^i is
  // at most ps_gbps / ps_in_mult, as it is at most worker_gbps (rate_cap).
  // The paper's Eq. 5 has no PS NIC. 0: no limit.
  double ps_gbps = 0;
  unsigned size() const { return static_cast<unsigned>(units.size()); }
};

enum class JobKind : uint8_t { Dml, MapReduce };
const char* to_string(JobKind k);

struct Job {
  unsigned id = 0;          // its index in Instance::jobs
  JobKind kind = JobKind::Dml;
  std::string name;         // "dml 17", "coflow 203" (the trace id)
  double arrival_s = 0;     // it may transfer from the TS containing this instant
  std::vector<std::pair<unsigned, unsigned>> workers;  // (unit, W_v^j), units ascending, W > 0
  unsigned ps_unit = 0;     // PS_v^j
  double gb_per_worker = 0; // d~_j in Gb
  double update_s = 0;      // a_j in seconds: the PS's parameter update (0 with INC at an all-local unit)
  // A training job (§VII-B's testbed; ours): `iterations` of compute_s each,
  // then a push of gb_per_worker / iterations and, without INC at an
  // all-local unit, a PS update of update_s. gb_per_worker is the whole
  // run's push. iterations = 1 and compute_s = 0: the paper's one-iteration
  // model (Eq. 11: a_j once, after the data).
  unsigned iterations = 1;
  double compute_s = 0;
  // queued > 0: the job asks for this many workers and waits in the
  // scheduling queue until the planner places it (workers and ps_unit are
  // then the plan's, JobPlan::workers and ps_unit); 0: placed by the scenario.
  unsigned queued = 0;
  // The PS in a unit of its workers (the one holding most of them) when one
  // has a free PS slot, else as any job's (a variant: the paper places PS'
  // "in either the same unit or different ones").
  bool ps_with_workers = false;

  unsigned num_workers() const;  // its workers, or the count it asks for while queued
  unsigned workers_in(unsigned v) const;  // W_v^j
  // E_v^j: the unit holding every worker, if any.
  std::optional<unsigned> local_unit() const;
  // The first TS it may use (1-based).
  unsigned first_ts(double ts_s) const;
};

struct Instance {
  std::string origin;  // file or generator, for messages
  Odcn net;
  std::vector<Job> jobs;
  uint64_t seed = 1;   // the scenario's: the planners' placement of queued jobs draws from it
};

// Throws AoiError (naming `origin`, the field and the value) for a net or job
// the model cannot hold: no units, zero ports, TS <= 0, a job larger than the
// cluster's worker slots, a unit index out of range, more workers in a unit
// than its slots, negative sizes, ...
void validate(const Instance& inst);

// ---- generators (§VII-C; docs/p4inc-aoi.md) ----------------------------------

// N identical units with the §VII-C defaults above (64 servers, 24 x 40 Gbps
// optical ports, 4 INC jobs), TS 1 s.
Odcn make_odcn(unsigned units);

struct DmlJobOptions {
  unsigned count = 100;
  double jobs_per_ts = 20;                          // Poisson arrivals (§VII-C: 20 per 1 s TS)
  std::vector<unsigned> worker_choices = {2, 4, 8, 16};  // uniform (§VII-C, after Philly)
  double min_mb = 102, max_mb = 548;                // per-worker push size, uniform
  double ps_update_gbps = 80;                       // a_j = W·d~ / this (a PS summing W gradients)
  unsigned iterations = 1;                          // Job::iterations; the MB above are per iteration
  double compute_ms = 0;                            // Job::compute_s
  bool queued = false;                              // placed by the planner when slots free (Job::queued)
  bool ps_with_workers = false;                     // Job::ps_with_workers (a variant)
};
struct MapReduceJobOptions {
  unsigned count = 100;
  double jobs_per_ts = 20;
  double ps_update_gbps = 80;
};

// Places jobs in arrival order (the placement rule of docs/p4inc-aoi.md): all
// of a job's workers in one unit chosen at random among those with room,
// else spread over the units with the most free slots; the PS in a random
// unit with a free PS slot (Job::ps_with_workers: a unit of its workers
// first). Throws AoiError if the cluster is full.
class Placer {
 public:
  Placer(const Odcn& net, uint64_t seed);
  // Fills job.workers and job.ps_unit for `workers` workers.
  void place(Job& job, unsigned workers);
  // The same rule on the slots free now: false (and nothing taken) if the
  // workers or a PS do not fit.
  bool try_place(Job& job, unsigned workers);
  // Gives a placed job's slots back.
  void release(const Job& job);

 private:
  const Odcn& net_;
  std::vector<unsigned> free_workers_, free_ps_;
  uint64_t total_workers_ = 0;  // the cluster's worker slots
  uint64_t state_;
  uint64_t next();
};

struct WorkloadOptions {
  std::optional<DmlJobOptions> dml;
  std::optional<MapReduceJobOptions> mapreduce;
  std::string trace_path;  // the coflow trace of the MapReduce jobs
};
// The DML jobs (Poisson arrivals, workers from worker_choices, d~ uniform)
// and the MapReduce jobs (one per coflow of the trace in its order, wrapping
// round if `count` exceeds it: workers = mappers, d~ = shuffle MB / mappers;
// their own Poisson arrivals), merged by arrival and placed in that order.
// Job ids follow the merged order. Deterministic for a seed.
std::vector<Job> generate_jobs(const Odcn& net, const WorkloadOptions& w, uint64_t seed);

// Reads a scenario file (TOML; format in docs/p4inc-aoi.md): [net] with
// generator fields or explicit [[unit]]s, then [[job]]s and/or [dml] /
// [mapreduce] generator tables. Errors name the file, field and value.
Instance load_scenario(const std::string& path);
// `overrides` are "table.key=value" strings applied before validation (--set).
Instance load_scenario(const std::string& path, const std::vector<std::string>& overrides);

// ---- schedules -----------------------------------------------------------------

// An aggregator segment <MemID, Size> of a unit's switch (§VI-B).
struct Segment {
  unsigned mem_id = 0;
  unsigned size = 0;
};

struct JobPlan {
  unsigned job = 0;
  std::optional<unsigned> inc_unit;  // k_v^j = 1 for this v
  std::optional<Segment> segment;    // its aggregators in inc_unit's switch
  unsigned first_ts = 1;             // the first TS it transfers in
  std::vector<double> rate_gbps;     // B_j^i per worker for TS first_ts, first_ts+1, ... (all > 0)
  // A queued job's placement by the planner: its workers (unit, count) and
  // PS, held from TS `admitted` (its slots are free again after its last TS).
  std::vector<std::pair<unsigned, unsigned>> workers;
  unsigned ps_unit = 0;
  unsigned admitted = 0;
  unsigned last_ts() const { return first_ts + static_cast<unsigned>(rate_gbps.size()) - 1; }
};

// A connection change through the AOI: `count` port pairs between units u
// and v are set up (count > 0) or torn down (< 0) at time at_s, which must
// be a TS boundary; it holds from the TS starting there.
struct AoiChange {
  double at_s = 0;
  unsigned u = 0, v = 0;
  int count = 0;
};

struct Connection {
  unsigned u = 0, v = 0;
  unsigned count = 0;
};

struct Schedule {
  std::string algo;                      // "milp", "tw", "fcfs", "tw-norecon", ...
  bool inc = true;                       // INC allowed
  bool no_recon = false;                 // the AOI must never change
  std::vector<Connection> preconfigured; // the AOI before TS 1 (not counted as reconfigured)
  std::vector<AoiChange> changes;        // in time order
  std::vector<JobPlan> jobs;             // one per job of the instance, any order
  double solve_s = 0;                    // the planner's wall time
  // MILP only: the solver's bound on CT-BTI and gap (0 otherwise).
  double bound_s = 0, gap = 0;
  bool optimal = false;
};

// Gives every INC job of `s` an aggregator segment of its unit's switch: the
// array is split into inc_jobs equal segments <k·A/N, A/N>, and a job takes
// the lowest segment free over its TSs (at most inc_jobs INC jobs are active
// at once on a unit, so one is free when Eq. 3 holds). Throws AoiError if none is.
void assign_segments(const Instance& inst, Schedule& s);

// The validator's findings, all recomputed from the instance and the schedule.
struct CheckedJob {
  unsigned job = 0;
  double ict_s = 0;     // Eq. 11: end of the TS its data completes in, plus a_j unless INC at an all-local unit
  unsigned first_ts = 0, last_ts = 0;
  bool inc = false;
  double aoi_gb = 0;    // its data through the AOI (what its flows carried, not spare rate)
  double jct_s = 0;     // ict_s - arrival: its waiting and its run
  double wait_s = 0;    // from its arrival to the start of its first TS of transfer
};
struct Check {
  bool ok = true;
  std::vector<std::string> errors;  // one line each: what, which job/unit/TS, the numbers
  std::vector<CheckedJob> jobs;     // by job id
  double ct_bti_s = 0;              // max ICT (Definition 1)
  unsigned reconfigured = 0;        // connections set up over the run (port pairs, Σ max(0, ΔP))
  unsigned reconfig_ts = 0;         // TSs in which at least one connection was set up
  unsigned last_ts = 0;
  double aoi_gb = 0;                // data through the AOI over the run
  double avg_jct_s = 0, total_jct_s = 0, avg_wait_s = 0;
};

// Checks every constraint of §IV-B on `s` (Eqs. 2-11: INC placement and
// capacity, unit bandwidth, ports and port pairs, contiguity, arrival, data
// completion with the ε loss of Eq. 10, segments disjoint, changes only at
// TS boundaries, none under no_recon) and recomputes the metrics. A
// violation is an error line; `ok` is false if there is any.
Check check_schedule(const Instance& inst, const Schedule& s);

// ---- the planners (aoi_tw.cpp) -----------------------------------------------

struct PlanOptions {
  bool inc = true;          // false: the noINC variants
  bool no_recon = false;    // TW-NoRecon: uniform pre-configured AOI, never changed
  unsigned max_ts = 100000; // give up (AoiError) if jobs are still running after this TS
  // A job's bandwidth grows by δB steps "until no more bandwidth can be
  // allocated" (Algorithm 2; FCFS "greedily"), up to the worker's NIC.
  // stop_at_need (ours, a named variant): the steps stop at the rate that
  // completes the job within the TS, since Eq. 11's ICT is TS-granular and
  // more cannot shorten it.
  bool stop_at_need = false;
  // FCFS only, a named variant (ours): strictly in arrival order. A job that
  // has not started and gets no bandwidth in a TS holds back every later
  // job in that TS (head-of-line), where plain FCFS goes on to later jobs
  // that fit. §VII-A's "provisions DML jobs one by one in the sequence of
  // their arrivals" reads either way.
  bool fcfs_strict = false;
  // Called after each TS with (TS, jobs finished, jobs total) for progress; may be empty.
  void (*progress)(unsigned ts, size_t done, size_t total, void* ctx) = nullptr;
  void* progress_ctx = nullptr;
};

// Algorithms 1-3 (time-window scheduling).
Schedule plan_tw(const Instance& inst, const PlanOptions& o);
// First come, first served (§VII-A).
Schedule plan_fcfs(const Instance& inst, const PlanOptions& o);
// Algorithm 2's weighted bipartite matching: a maximum-weight assignment of
// rows (units) to columns (jobs), each used at most once; w[r][c] <= 0 means
// no edge. The Hungarian algorithm (Kuhn-Munkres with potentials, O(r^2 c)).
// Returns each row's column, or -1.
std::vector<int> max_weight_assignment(const std::vector<std::vector<double>>& w);
// The uniform AOI of TW-NoRecon: each unit's ports spread round-robin over
// offsets ±1, ±2, ... (a circulant), as evenly as the port count allows.
std::vector<Connection> uniform_aoi(const Odcn& net);

// The per-worker rate a plan may give a job, and which flows it sends where:
// (from unit, to unit, multiplier of B_j^i) for the job's inter-unit flows
// under Eq. 4, given its INC unit.
struct Flow {
  unsigned from = 0, to = 0;
  double mult = 0;  // flow rate = mult · B_j^i, volume = mult · d~_j
};
std::vector<Flow> inter_unit_flows(const Job& j, std::optional<unsigned> inc_unit);
// Eq. 5's load of job j on unit v per Gbps of B_j^i.
double unit_load_mult(const Job& j, std::optional<unsigned> inc_unit, unsigned v);
// Whether job j may use INC at unit v (Eq. 2, and §VI-A when inc_requires_local).
bool inc_allowed(const Odcn& net, const Job& j, unsigned v);
// a_j if the job's parameter update runs at a PS (Eq. 11's bracket), else 0.
double update_time(const Job& j, std::optional<unsigned> inc_unit);
// What a job waits after its last TS: a_j for a one-iteration job (Eq. 11),
// 0 for a training job (each iteration's update is in data_gbps).
double final_update(const Job& j, std::optional<unsigned> inc_unit);
// The rate at which a worker's push progresses when its job holds B Gbps
// per worker (B <= rate_cap). The paper's one-iteration job progresses at
// B; a training job at the iteration's push over its whole iteration,
// d/(c + d/B + a) with d the push of one iteration, c its compute and a its
// update (the job holds B while it computes). Planners and validator count
// data with this one rule.
double data_gbps(const Job& j, std::optional<unsigned> inc_unit, double b);
// The B at which data_gbps reaches `x` (infinity if no B does).
double rate_for_data_gbps(const Job& j, std::optional<unsigned> inc_unit, double x);
// The rate into j's PS per Gbps of B_j (0 with INC at an all-local unit).
double ps_in_mult(const Job& j, std::optional<unsigned> inc_unit);
// The most B_j^i may be: the worker's NIC, and its share of its PS's NIC.
double rate_cap(const Odcn& net, const Job& j, std::optional<unsigned> inc_unit);

}  // namespace ina::control::aoi
