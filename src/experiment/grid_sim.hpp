#pragma once
// Runs a gradient-routing plan (GRID or a baseline, from control/grid.hpp) in
// the packet-level simulator: every graph node becomes a simulator node,
// every programmable switch runs GRID's data plane (dataplane/grid.cpp), each
// worker addresses its fragments to its planned aggregation node and paces at
// its planned rate, the PS completes the aggregation. Reports achieved rates
// beside planned ones, communication time and aggregation rates.
#include <cstdint>
#include <string>
#include <vector>

#include "control/grid.hpp"
#include "topo/graph.hpp"

namespace ina::sim {
struct TraceRecord;
}

namespace ina::exp {

struct GridSimSettings {
  uint64_t seed = 1;
  double gradient_mb = 4;        // per worker, MiB (one allreduce)
  uint16_t payload_values = 64;  // 256 B of values per packet
  uint32_t header_bytes = 50;    // 306 B packets
  double link_delay_us = 1;      // propagation per link
  double memory_mb = 1;          // aggregator memory per programmable switch, MiB
  double init_window_kb = 60;
  bool pace = true;              // workers pace at the planned rate
  double loss = 0;               // on every link
  double max_sim_ms = 10000;
  std::vector<sim::TraceRecord>* trace = nullptr;  // if set: every delivery and timer (Simulator::set_trace)
};

struct GridSimResult {
  bool ok = true;
  std::string problems;             // unfinished workers, wrong results, leaks
  double planned_lambda_gbps = 0;   // the plan's minimum rate
  double achieved_min_gbps = 0;     // slowest worker: gradient wire bytes / its communication time
  double achieved_avg_gbps = 0;
  double comm_time_ms = 0;          // first send to the last worker's last result
  double switch_agg_gbps = 0;       // gradient bytes aggregated in switches / communication time
  double ps_ingress_gbps = 0;       // bytes into the PS / communication time
  uint64_t rate_syncs = 0, evictions = 0, retransmits = 0, verify_errors = 0;
  std::vector<double> worker_gbps;  // per worker, in plan order
};

GridSimResult simulate_plan(const topo::Graph& g, const topo::Job& job, const control::grid::Plan& plan,
                            const GridSimSettings& s);

}  // namespace ina::exp
