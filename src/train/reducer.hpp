#pragma once
// Gradient averaging across the workers of one training job. Two backends:
// ina::Communicator through `ina switch` (ina_reducer.cpp) and gloo
// (gloo_reducer.cpp). Both leave bit-identical results on every worker.
#include <memory>
#include <span>
#include <string>

#include "runtime/communicator.hpp"
#include "train/train.hpp"

namespace ina::train {

class Reducer {
 public:
  virtual ~Reducer() = default;
  // In place: the average over all workers. Blocking, bounded by the
  // backend's timeout; throws on failure.
  virtual void average(std::span<float> data) = 0;
  // Leaves the job (a barrier with the other workers); bounded.
  virtual void close() = 0;
  virtual std::string describe() const = 0;
};

std::unique_ptr<Reducer> make_ina_reducer(const WorkerConfig& cfg);
// The Communicator settings of an ina worker (switch, job, rank, timeouts).
CommConfig ina_comm_config(const WorkerConfig& cfg);
std::unique_ptr<Reducer> make_gloo_reducer(const WorkerConfig& cfg);

}  // namespace ina::train
