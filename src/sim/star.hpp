#pragma once
// Star topology: one switch (node 0) and one host per worker / PS, each on
// its own link. Node ids are fixed by the plan so nodes can be built knowing
// their peers before they are added to the simulator.
#include <vector>

#include "dataplane/switch.hpp"
#include "sim/engine.hpp"

namespace ina::sim {

struct StarJob {
  uint16_t id = 0;
  std::vector<NodeId> workers;
  NodeId ps = kNoNode;
};

struct StarPlan {
  NodeId sw = 0;
  std::vector<StarJob> jobs;
  size_t nodes = 1;
};

// Switch = 0, then every job's workers in job order, then one PS per job if with_ps.
StarPlan plan_star(const std::vector<int>& workers_per_job, bool with_ps);

// Links every host node of the plan to the switch (host->switch uses `up`,
// switch->host `down`) and builds routes. All plan nodes must be added.
void wire_star(Simulator& sim, const StarPlan& plan, const LinkParams& up, const LinkParams& down);

// Registers the plan's jobs at the switch; for a scheme with isolated regions
// (schemes::Scheme::isolated) the aggregators are split evenly among jobs
// (SwitchML with several jobs). Returns the slots per pool of each job's
// region (isolated), else 0.
uint32_t register_jobs(dp::SwitchProgram& sw, const StarPlan& plan, bool isolated);

}  // namespace ina::sim
