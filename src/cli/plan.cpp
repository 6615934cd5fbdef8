// `ina plan`: control-plane planners, one file per subcommand.
//
//   ina plan grid        GRID / ATP / SwitchML / Geryon plan for one job (plan_grid.cpp)
//   ina plan grid-sweep  the GRID paper's large-scale experiments, a TOML file (plan_grid_sweep.cpp)
//   ina plan rina        Rina's BOM: PS-based INA vs Rina throughput, deployment order (plan_rina.cpp)
//   ina plan zebra       Zebra's hot-parameter identification (plan_zebra.cpp)
//   ina plan aoi         P4INC-AOI's schedulers, and aoi-sweep (plan_aoi.cpp)
#include "cli/commands.hpp"
#include "cli/plan_common.hpp"

namespace ina::cli {

Runner register_plan(CLI::App& app) {
  auto* plan = app.add_subcommand("plan", "Control-plane planners (routing, placement, schedules)");
  plan->require_subcommand(1);
  // In this order in `ina plan --help`.
  const Runner runners[] = {plancmd::register_plan_grid(*plan), plancmd::register_plan_grid_sweep(*plan),
                            plancmd::register_plan_rina(*plan), register_plan_zebra(*plan), register_plan_aoi(*plan)};
  return [runners] {
    for (const Runner& run : runners)
      if (const int status = run(); status >= 0) return status;
    return 0;
  };
}

}  // namespace ina::cli
