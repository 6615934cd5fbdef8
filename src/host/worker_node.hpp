#pragma once
// A host node running allreduces through a WorkerTransport: ops are queued by
// the caller before or during the run and start at `start`. Used by tests,
// benchmarks and any engine that just wants "these tensors, reduced".
#include <functional>
#include <memory>
#include <vector>

#include "host/worker.hpp"

namespace ina::host {

class WorkerNode final : public Node {
 public:
  explicit WorkerNode(const WorkerConfig& cfg, Time start = 0) : tx_(cfg), start_(start) {}

  uint64_t submit(std::shared_ptr<TensorIO> io, uint64_t elems, uint32_t tag = 0) { return tx_.submit(std::move(io), elems, tag); }

  void on_start(Time now, Effects& fx) override { fx.set_timer(start_, WorkerTransport::kOwnerTimer); }
  void on_packet(Packet* p, Time now, Effects& fx) override { tx_.on_packet(p, now, fx); collect(now, fx); }
  void on_timer(uint64_t token, Time now, Effects& fx) override {
    if (token & WorkerTransport::kOwnerTimer) tx_.pump(now, fx);
    else tx_.on_timer(token, now, fx);
    collect(now, fx);
  }
  // Called after ops complete (e.g. to submit the next one: then pump()).
  void set_on_complete(std::function<void(Time now, Effects& fx)> f) { on_complete_ = std::move(f); }

  WorkerTransport& transport() { return tx_; }
  const WorkerTransport& transport() const { return tx_; }
  size_t completed() const { return done_; }
  Time finish_time() const { return finish_; }

 private:
  void collect(Time now, Effects& fx) {
    if (!tx_.has_completed()) return;
    const auto c = tx_.take_completed();
    done_ += c.size();
    if (!tx_.busy()) finish_ = now;
    if (on_complete_) on_complete_(now, fx);
  }
  WorkerTransport tx_;
  Time start_;
  size_t done_ = 0;
  Time finish_ = -1;
  std::function<void(Time, Effects&)> on_complete_;
};

}  // namespace ina::host
