#pragma once
// What the `ina plan` subcommands grid, grid-sweep and rina share (plan.cpp
// registers them): the user error and its guard, `--workers N`, the topology
// (a generator spec or a JSON file), and the output's rate rounding.
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"
#include "topo/graph.hpp"

namespace ina::cli::plancmd {

// A user error in a plan command: reported as "error: ..." with exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs a plan command: user errors (bad options, topologies, plans, sweep
// files, BOM inputs) print "error: ..." and exit 2.
int guarded(const std::function<int()>& body);

// `--workers N` given as one whole number: that count (at least `min`); -1
// when the flag names hosts instead.
int worker_count(const std::vector<std::string>& workers, int min);

struct TopologyChoice {
  topo::Graph graph;
  bool generated = false;
  std::optional<topo::JobSpec> job;  // a file's default job
};

// A generator spec, deployed with programmable switches per `d` drawn from
// `seed`, or a JSON topology file (whose switches set "ina" and
// "capacity_gbps" themselves). `what` names the option or field in errors.
TopologyChoice load_topology(const std::string& spec, const topo::InaDeployment& d, uint64_t seed,
                             const std::string& what);

// (Not fmt::join: with strings it trips a GCC 12 false -Wstringop-overflow in fmt 9.)
std::string join(const std::vector<std::string>& parts, std::string_view sep);

// Rates are reported to 1 bps (1e-9 Gbps): the LP solver's ~1e-11 noise
// would otherwise show as 2.999999999991 for 3.
double gbps(double v);

// The subcommands (plan_grid.cpp, plan_grid_sweep.cpp, plan_rina.cpp); each
// runner returns -1 when its subcommand was not chosen.
Runner register_plan_grid(CLI::App& plan);
Runner register_plan_grid_sweep(CLI::App& plan);
Runner register_plan_rina(CLI::App& plan);

}  // namespace ina::cli::plancmd
