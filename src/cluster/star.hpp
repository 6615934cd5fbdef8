#pragma once
// Star topology: one switch (node 0) and one host per worker / PS, each on
// its own link. Node ids are fixed by the plan so nodes can be built knowing
// their peers before they are added to the simulator.
#include <vector>

#include "dataplane/switch.hpp"
#include "schemes/admission.hpp"
#include "sim/engine.hpp"

namespace ina::cluster {

using sim::LinkParams;
using sim::Simulator;

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

// Links `hosts` (processes, in order) to switch `sw` as the processes of
// `machines` machines that share one NIC each (contiguous blocks, the first
// n mod machines machines one process more): a machine is a Forwarder node
// (added here) on one `link` to the switch, its processes on links of the
// same rate with no delay, no loss and no ECN marking (the host's own path
// to its NIC); the NIC's queue does not mark either (as set_host_ecn's
// default). machines = 0 or >= hosts: every process on its own `link`.
// Routes are the caller's (build_routes after the last connect).
void wire_machines(Simulator& sim, NodeId sw, const std::vector<NodeId>& hosts, unsigned machines,
                   const LinkParams& link);

// Registers the plan's jobs at the switch through the admission object
// (schemes/admission.hpp); for a scheme with isolated regions
// (schemes::Scheme::isolated) the aggregators are split evenly among jobs
// (SwitchML with several jobs). Returns the slots per pool of each job's
// region (isolated), else 0; std::invalid_argument if the memory cannot
// give each job a region of two pools.
uint32_t register_jobs(dp::SwitchProgram& sw, const StarPlan& plan, bool isolated);

// A job's segment <MemID, Size> of the aggregator array (P4INC-AOI).
using Segment = schemes::Segment;
// The segments of `jobs` jobs over `aggregators` when none are given: the
// array split equally among the jobs in job order (aggregators / jobs each,
// the remainder unused).
std::vector<Segment> equal_segments(size_t aggregators, size_t jobs);
// Registers the plan's jobs with segments: `given` (one per job) or, if
// empty, equal_segments. The switch checks them (std::invalid_argument for a
// segment beyond the array or overlapping another). Returns them by job.
std::vector<Segment> register_segments(dp::SwitchProgram& sw, const StarPlan& plan, const std::vector<Segment>& given);

}  // namespace ina::cluster
