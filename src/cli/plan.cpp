// `ina plan`: control-plane planners. Subcommands are added per planner.
#include "cli/commands.hpp"

namespace ina::cli {

Runner register_plan(CLI::App& app) {
  auto* plan = app.add_subcommand("plan", "Control-plane planners (routing, placement, schedules)");
  plan->require_subcommand(1);
  return [] { return 0; };
}

}  // namespace ina::cli
