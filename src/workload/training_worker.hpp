#pragma once
// A data-parallel training worker in the simulator (DSA §VII-B):
//  - iteration i computes layer 1, then layer 2 (one compute time per layer);
//    layer l of iteration i > 0 starts only when all of layer l's partitions
//    of iteration i - 1 are aggregated (compute/communication overlap: the
//    next iteration's layer 1 starts as soon as layer 1 is back);
//  - after the last layer, the gradients are sent after a per-worker jitter
//    ~ U(0, send_jitter), partitions in the model's send order;
//  - under DSA every packet carries the priority of Eq. (1), with T_j the
//    remaining time of the current iteration estimated from the previous one
//    (the first from compute + line-rate communication) and Comm/Comp measured;
//    with eq1_per_tensor one per tensor (a layer's gradient in one
//    iteration: its partitions and their retransmissions share the value its
//    first packet took), else one per packet sent.
#include <map>
#include <memory>
#include <vector>

#include "core/rng.hpp"
#include "host/dsa_priority.hpp"
#include "host/worker.hpp"
#include "host/tensor_io.hpp"
#include "workload/model.hpp"

namespace ina::workload {

struct TrainingConfig {
  host::WorkerConfig transport;
  ModelSpec model;
  int iterations = 1;
  Time start = 0;
  Time send_jitter = 0;        // max of U(0, x), drawn per iteration
  uint64_t seed = 1;           // this worker's jitter stream
  uint64_t data_seed = 1;      // shared by the job's workers: tensor contents
  bool dsa_priority = false;
  bool eq1_per_tensor = true;  // DSA §V: "a tensor's priority"; false: per packet sent
  double link_gbps = 100;
};

class TrainingWorker final : public Node, public host::PriorityFn {
 public:
  explicit TrainingWorker(const TrainingConfig& cfg);

  void on_start(Time now, Effects& fx) override;
  void on_packet(Packet* p, Time now, Effects& fx) override;
  void on_timer(uint64_t token, Time now, Effects& fx) override;
  uint32_t priority(uint32_t layer, Time now) override;

  bool finished() const { return finish_ >= 0; }
  Time start_time() const { return cfg_.start; }
  Time finish_time() const { return finish_; }
  Time first_send() const { return first_send_; }
  uint64_t verify_checked() const;
  uint64_t verify_mismatches() const;
  const host::WorkerTransport& transport() const { return tx_; }

 private:
  enum : uint64_t { kCompute = 1, kSend = 2 };
  void try_compute(Time now, Effects& fx);
  void after(Time now, Effects& fx);
  static host::Eq1Estimates first_estimates(const TrainingConfig& cfg);

  TrainingConfig cfg_;
  host::WorkerTransport tx_;
  Rng rng_;
  int compute_iter_ = 0, next_layer_ = 0;
  bool computing_ = false;
  int comm_iter_ = -1;                  // iteration whose gradients are in flight
  std::vector<int> remaining_;          // partitions in flight per layer
  std::vector<int> ready_;              // last iteration whose layer results are all in
  std::map<uint64_t, int> op_layer_;
  std::vector<std::pair<int, uint32_t>> priced_;  // per tensor: by layer, (comm_iter_, its Eq. 1 priority)
  std::vector<std::shared_ptr<host::SyntheticTensor>> tensors_;
  uint64_t ops_submitted_ = 0;
  Time iter_start_ = 0, comm_start_ = 0, comm_iter_start_ = 0;
  host::Eq1Estimates eq1_;  // T_j and Comm_j / Comp_j (host/dsa_priority.hpp)
  Time first_send_ = -1, finish_ = -1;
};

}  // namespace ina::workload
