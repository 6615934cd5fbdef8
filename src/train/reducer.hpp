#pragma once
// Gradient averaging across the workers of one training job. Two backends:
// ina::Communicator through `ina switch` (ina_reducer.cpp) and gloo
// (gloo_reducer.cpp). Both leave bit-identical results on every worker.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/communicator.hpp"
#include "train/train.hpp"

namespace ina::train {

class Reducer {
 public:
  virtual ~Reducer() = default;
  // In place: the average over all workers. Blocking, bounded by the
  // backend's timeout; throws on failure.
  virtual void average(std::span<float> data) = 0;
  // A part of the data averaged as one allreduce, with its DSA priority
  // (0: the communicator's).
  struct Segment {
    size_t offset = 0, size = 0;
    uint32_t priority = 0;
  };
  // In place, the average of `data` as one allreduce per segment (issued in
  // the order given, all outstanding at once); the segments cover `data`.
  // A backend without priorities (gloo) averages `data` whole.
  virtual void average(std::span<float> data, std::span<const Segment> segments) {
    (void)segments;
    average(data);
  }
  // Leaves the job (a barrier with the other workers); bounded.
  virtual void close() = 0;
  virtual std::string describe() const = 0;
  // The transport's counters after the last allreduce (Communicator::stats():
  // sent, retransmits, timeouts, packets to the PS, ...); null for a backend
  // without them (gloo).
  virtual nlohmann::json stats() const { return nullptr; }
};

std::unique_ptr<Reducer> make_ina_reducer(const WorkerConfig& cfg);
// The Communicator settings of an ina worker (switch, job, rank, timeouts).
CommConfig ina_comm_config(const WorkerConfig& cfg);
// The communicator settings of --comm alone (throws rt::InputError naming a bad one).
CommConfig ina_comm_settings(const TrainConfig& cfg);
std::unique_ptr<Reducer> make_gloo_reducer(const WorkerConfig& cfg);

}  // namespace ina::train
