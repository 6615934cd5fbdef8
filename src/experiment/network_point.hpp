#pragma once
// Scenario points on multi-switch topologies (topology.kind other than
// "star"): the graph the settings name, which of its switches aggregate for
// a scheme (switch.ina), and the exp::CollectiveSettings of one run of
// exp::run_collective. Every problem is a ScenarioError naming the origin
// (file and series/sweep point), the field and the value.
//
// switch.ina selects the INA switches:
//   "topology"   the topology's own (a JSON file's "ina" flags; generated
//                topologies have none)
//   "none", "all", "tors" (every switch with a host attached)
//   "planner:N"  the first N switches of Rina's deployment order
//                (control/rina_bom.hpp, deployment_order) for the job
//   "percent:P"  0 <= P <= 100. P = 100: every switch. P < 100: the first
//                floor(P * D / 100) switches of the deployment order, where D
//                is the number of switches that can help the scheme:
//                 - ring-INA collectives (Rina): the ToRs with >= 2 of the
//                   job's workers (the planner's first phase; Rina aggregates
//                   at the ToR only, §IV-B);
//                 - every other scheme (ATP): the shortest prefix of the
//                   order with which the BOM's PS-INA throughput
//                   (ps_ina_throughput) reaches its all-INA value.
//                The paper's "50 %" (§VI-B) is then 6 switches for ATP and 4
//                for Rina on the k = 4 fat-tree (D = 13 and 8) and 18 for
//                both on the dragonfly 4,9,2 (D = 36).
//   "a,b,..."    switches by name
// switch.ina_count = N and switch.ina_percent = P (numbers, so a sweep can
// vary them) mean "planner:N" and "percent:P".
// INA switches get capacity switch.ina_gbps (or the link rate if 0).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "experiment/collective.hpp"
#include "experiment/scenario.hpp"
#include "schemes/registry.hpp"
#include "topo/graph.hpp"

namespace ina::exp {

bool is_network(const Settings& s);  // topology.kind != "star"

// The settings only the multi-switch collectives read that `s` sets, as
// (key, value): the star and the sparse engine refuse them rather than
// ignore them.
std::vector<std::pair<std::string, std::string>> collective_settings_set(const Settings& s);

// The graph of topology.kind and its parameters, every switch non-INA unless
// the kind is "file" (the file's flags).
topo::Graph build_topology(const Settings& s, const std::string& origin);

// The job's workers (rack-packed, workload.workers; 0 = every host).
std::vector<topo::NodeId> job_workers(const Settings& s, const topo::Graph& g, const std::string& origin);

// The switches switch.ina selects on g for `scheme` (graph node ids).
std::vector<topo::NodeId> select_ina(const Settings& s, const topo::Graph& g, const std::vector<topo::NodeId>& workers,
                                     const schemes::Scheme& scheme, const std::string& origin);

// The gradient of one worker and iteration (MiB, after workload.gradient_scale)
// and the compute time per iteration (ms).
double gradient_mb(const Settings& s);
double compute_ms(const Settings& s);

struct NetworkRun {
  topo::Graph graph;  // with the selected INA switches
  CollectiveSettings settings;
  std::vector<topo::NodeId> ina;
};
NetworkRun network_run(const Settings& s, const schemes::Scheme& scheme, uint64_t seed, const std::string& origin);

// Every check of a network point for the given schemes (each must have a
// collective), before anything runs.
void validate_network(const Settings& s, const std::vector<std::string>& schemes, const std::string& origin);

}  // namespace ina::exp
