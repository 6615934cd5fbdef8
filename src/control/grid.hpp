#pragma once
// GRID control plane (Fang et al., "GRID: Gradient Routing with In-network
// Aggregation for Distributed Training", §4): where each worker's gradient is
// aggregated (a programmable switch or the PS) and at what rate.
//
//  * GRIA (Eq. (1)): maximize the minimum worker sending rate lambda subject
//    to one aggregation node per worker, the rate cap T, y_s >= every rate
//    into switch s, switch processing capacities C_s and the PS ingress
//    bandwidth B_alpha. Its LP relaxation is solved with COIN-OR CLP
//    (grid_lp.cpp), then Algorithm 1 (R-GRIA) rounds it: worker n picks node s
//    with probability r~_n^s / sum_s r~_n^s and sends at sum_s r~_n^s.
//    Rounding may overload switches and the PS (Theorems 5-6); every plan
//    reports its load/capacity factors and violations.
//  * grid-published (grid_lp.cpp): the variant in the authors' published
//    planner (routing/algs/GRID.py, commit 36d154a): the PS row counts
//    T * x_n^alpha instead of r_n^alpha, worker n picks s with probability
//    x_n^s and sends at r_n^s / x_n^s, a chosen switch sends
//    max_n r_n^s / sum_n x_n^s to the PS.
//  * grid-exact (grid_lp.cpp): Eq. (1) with x integral, solved by CBC, for
//    small instances: the optimum R-GRIA approximates.
//  * Baselines on the same model (grid_baselines.cpp): Geryon (no INA),
//    ATP (first programmable switch on the default path with spare capacity,
//    the rest further on / to the PS) and SwitchML (ToR aggregation, results
//    to the PS). They allocate max-min fair rates that respect every
//    constraint, so they never violate.
//
// Model extension: the paper assumes links are never the bottleneck (§4.1),
// but its motivating example (Fig. 1) is decided by 3 Gbps links. With
// GridModel::enforce_links (the default) every flow follows the shortest
// path (topo::Routing) and each directed link's capacity bounds the sum of
// the rates crossing it, in the LP as in the baselines; with it off the
// model is exactly Eq. (1).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "topo/graph.hpp"

namespace ina::control::grid {

using topo::ArcId;
using topo::NodeId;

struct PlanError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct GridModel {
  bool enforce_links = true;  // see the header comment
  double max_rate_gbps = 0;   // T; 0 = B_alpha, the PS ingress bandwidth (the paper's choice)
  // Extension (default off; the paper's Eq. (1) counts only gradients): the
  // aggregated results travel back from the PS to every worker at the job's
  // rate lambda along the multicast tree (Instance::multicast_tree), each
  // tree arc carrying lambda once. With it on, every arc of the tree gets
  // lambda added to its planned load (evaluate), the LP's link rows include
  // lambda, and max_min_fill grows the tree's load with the common rate
  // (when a tree arc fills, every worker stops: results cannot come back
  // faster). Link capacities only bind with enforce_links.
  bool multicast_results = false;
};

// A GRIA instance. Aggregation nodes are indexed 0..|S|-1 for the
// programmable switches S (those that can reach the PS, in node order) and
// |S| for the PS alpha.
class Instance {
 public:
  // Throws topo::TopologyError if the job is invalid (see topo::validate_job).
  Instance(const topo::Graph& g, const topo::Job& job, GridModel model = {});

  const topo::Graph& graph() const { return *g_; }
  const topo::Routing& routing() const { return routing_; }
  const GridModel& model() const { return model_; }

  size_t num_workers() const { return workers_.size(); }
  size_t num_switches() const { return switches_.size(); }
  size_t ps_index() const { return switches_.size(); }  // the aggregation node index of alpha
  size_t num_nodes() const { return switches_.size() + 1; }
  NodeId worker(size_t n) const { return workers_.at(n); }
  NodeId ps() const { return ps_; }
  NodeId node(size_t a) const { return a == ps_index() ? ps_ : switches_.at(a); }
  std::string node_name(size_t a) const { return g_->node(node(a)).name; }
  // The aggregation node index of a graph node (nullopt: not an aggregation node).
  std::optional<size_t> index_of(NodeId id) const;
  double capacity(size_t s) const { return g_->node(switches_.at(s)).capacity_gbps; }  // C_s
  double ps_ingress() const { return ps_ingress_; }                                     // B_alpha
  double max_rate() const { return max_rate_; }                                         // T

  // Shortest path of worker n's gradient to aggregation node a; nullptr if
  // a is unreachable from n (the PS is always reachable).
  const std::vector<ArcId>* route(size_t n, size_t a) const;
  // Shortest path from switch s to the PS (carries y_s).
  const std::vector<ArcId>& uplink(size_t s) const { return uplinks_.at(s); }
  // The result multicast tree: the union of the shortest paths from the PS to
  // every worker, each arc once, in arc order (GridModel::multicast_results).
  const std::vector<ArcId>& multicast_tree() const { return tree_; }

 private:
  const topo::Graph* g_;
  topo::Routing routing_;
  GridModel model_;
  NodeId ps_;
  std::vector<NodeId> workers_;
  std::vector<NodeId> switches_;
  std::vector<size_t> index_;  // by NodeId; SIZE_MAX if not an aggregation node
  double ps_ingress_ = 0;
  double max_rate_ = 0;
  std::vector<std::vector<std::optional<std::vector<ArcId>>>> routes_;  // [worker][node]
  std::vector<std::vector<ArcId>> uplinks_;
  std::vector<ArcId> tree_;
};

// ---- Plans (the result of every scheme) --------------------------------

struct Share {
  NodeId node;  // aggregation node (switch or PS)
  double gbps;
};

struct WorkerPlan {
  NodeId worker;
  NodeId node;         // aggregation node (the one receiving the largest share)
  double rate_gbps;    // total sending rate
  std::vector<Share> shares;  // per aggregation node; several only when ATP overflows
};

struct SwitchLoad {
  NodeId sw;
  double capacity_gbps;  // C_s
  double load_gbps;      // sum of the rates aggregated here (delta_s)
  double y_gbps;         // sending rate to the PS
  double factor;         // load / capacity
};

struct Violation {
  enum class Kind { Switch, Ps, Link };
  Kind kind;
  std::string name;  // switch name, "PS <name>" or "A->B"
  double load_gbps;
  double capacity_gbps;
  double factor;  // load / capacity (> 1)
};
const char* kind_name(Violation::Kind k);

struct Plan {
  std::string scheme;
  std::vector<WorkerPlan> workers;    // in the instance's worker order
  std::vector<SwitchLoad> switches;   // every programmable switch of the instance
  double lambda_gbps = 0;             // minimum worker rate
  double avg_rate_gbps = 0;
  double switch_agg_gbps = 0;         // aggregation rate of the switches: sum of their loads
  double ps_load_gbps = 0;            // aggregation rate of the PS: sum r_n^alpha + sum y_s
  double ps_capacity_gbps = 0;        // B_alpha
  double max_switch_factor = 0;       // max load/capacity over switches (Theorem 5)
  double ps_factor = 0;               // PS load / B_alpha (Theorem 6)
  double max_link_factor = 0;         // max load/capacity over directed links
  std::vector<Violation> violations;  // resources above capacity (links only if enforced)
  std::vector<double> arc_load_gbps;  // planned load per directed link (ArcId), results included if multicast_results
  std::optional<double> lp_lambda_gbps;     // grid: the LP optimum lambda~
  std::optional<double> lambda_bound_gbps;  // grid-exact: CBC's upper bound (= lambda when proven optimal)
  // A randomized rounding (grid, grid-published): it may overload resources,
  // so feasible_rates tells what a deployment would get.
  bool rounded = false;
};

// One stream of gradient traffic: `gbps` from a worker to an aggregation
// node along `path`.
struct Flow {
  size_t worker;  // index in the instance
  size_t node;    // aggregation node index
  double gbps;
  std::vector<ArcId> path;
};
struct Allocation {
  std::vector<Flow> flows;
  std::vector<double> y;  // per switch index: rate to the PS (y_s)
};

// Loads, factors and violations of an allocation (every scheme ends here).
Plan evaluate(const Instance& inst, const std::string& scheme, const Allocation& alloc);

// Max-min fair rates by progressive filling. Every worker's rate rises at
// the same pace; each increment goes to the worker's first target that still
// has room (the switch's capacity, every link on the path, and, when the
// increment raises y_s, the PS ingress and the switch's uplink); a worker
// with no such target (or at rate T) stops. y_s = max of the rates into s.
struct Target {
  size_t node;
  std::vector<ArcId> path;
};
Allocation max_min_fill(const Instance& inst, const std::vector<std::vector<Target>>& targets);

// ---- GRIA / R-GRIA -----------------------------------------------------

struct LpOptions {
  // If set, worker n is pinned to aggregation node fixed[n] (x_n^s fixed to
  // 0/1): the LP then gives the best rates for that integral assignment.
  std::optional<std::vector<size_t>> fixed;
  // Build Eq. (1) verbatim with x columns and the (1b) rows instead of the
  // equivalent projected form (see grid_lp.cpp); same optimum, slower.
  bool literal = false;
  // The authors' published LP (GRID.py, commit 36d154a): Eq. (1) verbatim
  // (x columns, r_n^s <= T, y_s <= T as its normalised bounds [0, 1]) except
  // that the PS row (1f) counts T * sum_n x_n^alpha + sum_s y_s <= B_alpha
  // (x, not r). Solved with CLP's default strategy (what CBC, PuLP's default
  // solver, runs on a problem without integers). Throws PlanError when that
  // row makes it infeasible (e.g. more than B_alpha / T workers and no
  // programmable switch).
  bool published = false;
};

struct LpSolution {
  double lambda = 0;                   // lambda~
  std::vector<std::vector<double>> x;  // x~[n][a] (projected form: r~/T, the rest on alpha)
  std::vector<std::vector<double>> r;  // r~[n][a]
  std::vector<double> y;               // y~[s]
  int rows = 0, columns = 0, iterations = 0;
};

// Solves the LP relaxation of Eq. (1) (x in [0, 1]) with CLP. Throws
// PlanError if CLP does not prove optimality.
LpSolution solve_gria_lp(const Instance& inst, const LpOptions& opt = {});
// Algorithm 1, step 2: randomized rounding of an LP solution (deterministic
// for a seed).
Plan round_gria(const Instance& inst, const LpSolution& lp, uint64_t seed);
// Algorithm 1 (R-GRIA): LP relaxation + rounding.
Plan plan_grid(const Instance& inst, uint64_t seed);
// The published rounding (GRID.py, commit 36d154a) of a published LP
// solution: worker n picks node a with probability x~_n^a and sends at
// r~_n^a / x~_n^a; every chosen switch s sends
// y^_s = max_n r~_n^s / sum_n x~_n^s (max and sum over all workers) to the
// PS. The published second loop reads the last worker's choice for every
// worker (a reused loop variable); we use each worker's own choice.
Plan round_gria_published(const Instance& inst, const LpSolution& lp, uint64_t seed);
// Scheme "grid-published": the published LP + the published rounding.
Plan plan_grid_published(const Instance& inst, uint64_t seed);
// Max-min fair rates with worker n pinned to aggregation node index node[n]
// (no violation by construction).
Plan pinned_rates(const Instance& inst, const std::string& scheme, const std::vector<size_t>& node);
// pinned_rates for a plan's aggregation nodes: what a deployment of a
// rounded plan that overloads a resource would actually get.
Plan feasible_rates(const Instance& inst, const Plan& plan);

// GRIA itself (Eq. (1), x in {0, 1}) solved by CBC branch and bound, up to
// max_nodes branch-and-bound nodes (a node limit rather than a time limit
// keeps the result deterministic), starting from the best of the SwitchML,
// ATP and R-GRIA assignments. The integral optimum for small instances
// (Fig. 1: 0.1 s); with tens of workers on the paper's topologies the limit
// stops it with the best assignment found and an upper bound.
struct ExactSolution {
  std::vector<size_t> node;  // aggregation node index per worker
  double lambda = 0;         // the best integral lambda found
  double bound = 0;          // CBC's upper bound on the optimum
  bool optimal = false;      // proven optimal within the node limit
};
ExactSolution solve_gria_exact(const Instance& inst, int max_nodes);
// Scheme "grid-exact": solve_gria_exact, then pinned_rates.
Plan plan_grid_exact(const Instance& inst, int max_nodes);

// ---- Baselines ---------------------------------------------------------

Plan plan_geryon(const Instance& inst);
Plan plan_atp(const Instance& inst);
Plan plan_switchml(const Instance& inst);

// ---- Planners by name ----------------------------------------------------

// What a planner may use besides the instance: seed by "grid" and
// "grid-published" (their rounding), exact_max_nodes by "grid-exact".
struct PlanOptions {
  uint64_t seed = 1;
  int exact_max_nodes = 2000;
};
// One named planner: the paper's schemes "grid", "atp", "switchml", "geryon",
// then "grid-exact" and "grid-published" (grid_planners.cpp, the only place
// that maps a name to a planner). description: what the name means beyond
// itself, empty if nothing (planner_help).
struct Planner {
  std::string name;
  std::string description;
  Plan (*plan)(const Instance& inst, const PlanOptions& opts);
};
const std::vector<Planner>& planners();
// The planner of that name, or nullptr.
const Planner* find_planner(const std::string& name);
// The planners' names, in planners() order.
const std::vector<std::string>& scheme_names();
// "grid (R-GRIA), atp, ..., or grid-published (...)": every name with its
// description, for a command's help.
std::string planner_help();
// Runs a planner by name. Throws PlanError for an unknown name, listing the known ones.
Plan plan_scheme(const Instance& inst, const std::string& scheme, uint64_t seed, int exact_max_nodes = 2000);

}  // namespace ina::control::grid
