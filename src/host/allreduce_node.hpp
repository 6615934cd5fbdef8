#pragma once
// A host node running float and int32 allreduces through the same protocol
// objects as ina::Communicator (host/float_allreduce.hpp: scale agreement,
// overflow fallback, non-finite check, averaging) over a WorkerTransport.
// Ops are added before the run, in issue order (every worker of a job adds
// the same ops); the first round starts at `start`. The simulator's
// counterpart of the runtime's Communicator, without threads.
#include <memory>
#include <span>
#include <vector>

#include "host/float_allreduce.hpp"
#include "host/worker.hpp"

namespace ina::host {

class AllreduceNode final : public Node {
 public:
  struct Result {
    AllreduceQueue::Finished done;
    Time at = -1;  // completion time
  };

  explicit AllreduceNode(const WorkerConfig& cfg, Time start = 0)
      : tx_(cfg), queue_(std::make_shared<BufferPool>(), cfg.ps != kNoNode), start_(start) {}

  // The op's worker count and job are this worker's (o.nworkers and o.job
  // are overwritten). `data` must outlive the run. Returns the op's handle
  // (0, 1, ... in add order; results() is indexed by it).
  uint64_t add(std::span<float> data, FloatAllreduceOptions o = {}, uint32_t tag = 0) {
    o.nworkers = tx_.config().nworkers;
    o.job = tx_.config().job;
    results_.emplace_back();
    return queue_.add(data, o, tag);
  }
  uint64_t add(std::span<int32_t> data, uint32_t tag = 0) {
    results_.emplace_back();
    return queue_.add(data, tag);
  }

  void on_start(Time now, Effects& fx) override { fx.set_timer(start_, WorkerTransport::kOwnerTimer); }
  void on_packet(Packet* p, Time now, Effects& fx) override {
    tx_.on_packet(p, now, fx);
    collect(now, fx);
  }
  void on_timer(uint64_t token, Time now, Effects& fx) override {
    if (token & WorkerTransport::kOwnerTimer) {
      if (queue_.submit_ready(tx_)) tx_.pump(now, fx);
    } else {
      tx_.on_timer(token, now, fx);
    }
    collect(now, fx);
  }

  WorkerTransport& transport() { return tx_; }
  const WorkerTransport& transport() const { return tx_; }
  // Per op, in add order; `at` < 0 while the op has not finished.
  const std::vector<Result>& results() const { return results_; }
  size_t finished() const { return finished_; }
  // Integer rounds (transport ops) completed: 1 per int op, 2 per agreed
  // float op, 1 per fixed-scale float op (+2 if it fell back).
  size_t rounds() const { return rounds_; }

 private:
  void collect(Time now, Effects& fx) {
    if (!tx_.has_completed()) return;
    const auto ids = tx_.take_completed();
    rounds_ += ids.size();
    std::vector<AllreduceQueue::Finished> fin;
    size_t sent = 0;
    queue_.on_completed(tx_, ids, fin, &sent);
    if (sent) tx_.pump(now, fx);
    for (auto& f : fin) {
      results_[f.handle] = Result{std::move(f), now};
      ++finished_;
    }
  }

  WorkerTransport tx_;
  AllreduceQueue queue_;
  Time start_;
  std::vector<Result> results_;
  size_t finished_ = 0;
  size_t rounds_ = 0;
};

}  // namespace ina::host
