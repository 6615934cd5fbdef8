#pragma once
// Training workload model (DSA §VII-B). A model is an ordered list of layers
// with a compute time each, and gradient partitions sent in a fixed order
// during back-propagation.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.hpp"

namespace ina::workload {

struct Partition {
  uint64_t bytes = 0;
  int layer = 1;  // 1 = front layer
};

struct ModelSpec {
  std::string name;
  std::vector<Time> compute;           // per layer, front to back (fwd + bwd of that layer)
  std::vector<Partition> send_order;   // gradient partitions in transmission order
  int layers() const { return static_cast<int>(compute.size()); }
  uint64_t total_bytes() const;
  Time total_compute() const;
};

constexpr uint64_t kMiB = 1ULL << 20;

// DSA's two synthetic DNNs: two layers of equal size, each split in two
// partitions, sent as layer-2 part 1, layer-1 part 1, layer-1 part 2, layer-2 part 2.
//   A: communication-intensive, 4 MiB partitions, 0.32 ms compute per layer
//   B: computation-intensive,   2 MiB partitions, 0.64 ms compute per layer
// partition_mb / compute_ms > 0 override the sizes / times.
ModelSpec dsa_model(char which, double partition_mb = 0, double compute_ms = 0);

// The DNNs of the Rina paper's evaluation (§VI-A), for the collectives on
// multi-switch topologies: each iteration allreduces one gradient of
// `parameters` x 4 bytes per worker after `compute_ms` of computation.
// Parameter counts are the published ones (see model.cpp); compute times are
// derived (model.cpp says how) and only move iteration_ms, never the
// synchronization's throughput.
struct DnnModel {
  std::string_view name;
  uint64_t parameters;
  double compute_ms;  // per iteration (forward + backward of one batch)
  int batch;          // samples per worker per iteration (images; BERT: question-answer pairs)
  double gradient_mib() const { return static_cast<double>(parameters) * 4 / static_cast<double>(kMiB); }
};
const std::vector<DnnModel>& dnn_models();
const DnnModel* find_dnn_model(std::string_view name);  // nullptr if unknown

}  // namespace ina::workload
