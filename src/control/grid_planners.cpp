// GRID's planners by name: the one table from a scheme name to its planner,
// which the CLI's help, its checks and plan_scheme all read.
#include <fmt/format.h>

#include "control/grid.hpp"

namespace ina::control::grid {

const std::vector<Planner>& planners() {
  static const std::vector<Planner> table = {
      {"grid", "R-GRIA", [](const Instance& inst, const PlanOptions& o) { return plan_grid(inst, o.seed); }},
      {"atp", "", [](const Instance& inst, const PlanOptions&) { return plan_atp(inst); }},
      {"switchml", "", [](const Instance& inst, const PlanOptions&) { return plan_switchml(inst); }},
      {"geryon", "", [](const Instance& inst, const PlanOptions&) { return plan_geryon(inst); }},
      {"grid-exact", "Eq. (1) solved by CBC; small instances",
       [](const Instance& inst, const PlanOptions& o) { return plan_grid_exact(inst, o.exact_max_nodes); }},
      {"grid-published", "the authors' published planner: PS row with x, rounding by x, rates r/x",
       [](const Instance& inst, const PlanOptions& o) { return plan_grid_published(inst, o.seed); }},
  };
  return table;
}

const Planner* find_planner(const std::string& name) {
  for (const Planner& p : planners())
    if (p.name == name) return &p;
  return nullptr;
}

const std::vector<std::string>& scheme_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Planner& p : planners()) n.push_back(p.name);
    return n;
  }();
  return names;
}

std::string planner_help() {
  std::string out;
  const auto& table = planners();
  for (size_t i = 0; i < table.size(); ++i) {
    if (i > 0) out += i + 1 == table.size() ? ", or " : ", ";
    out += table[i].name;
    if (!table[i].description.empty()) out += " (" + table[i].description + ")";
  }
  return out;
}

Plan plan_scheme(const Instance& inst, const std::string& scheme, uint64_t seed, int exact_max_nodes) {
  const Planner* p = find_planner(scheme);
  if (!p) throw PlanError(fmt::format("unknown scheme '{}' (schemes: {})", scheme, fmt::join(scheme_names(), ", ")));
  return p->plan(inst, PlanOptions{seed, exact_max_nodes});
}

}  // namespace ina::control::grid
