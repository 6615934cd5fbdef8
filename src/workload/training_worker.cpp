#include "workload/training_worker.hpp"

#include "host/dsa_priority.hpp"

namespace ina::workload {

using host::WorkerTransport;

TrainingWorker::TrainingWorker(const TrainingConfig& cfg)
    : cfg_(cfg), tx_(cfg.transport), rng_(cfg.seed),
      remaining_(cfg.model.layers(), 0), ready_(cfg.model.layers(), -1), priced_(cfg.model.layers(), {-1, 0}),
      eq1_(first_estimates(cfg)) {
  if (cfg.dsa_priority) tx_.set_priority_fn(this);
}

// Before any iteration is measured: compute plus the gradients at line rate.
host::Eq1Estimates TrainingWorker::first_estimates(const TrainingConfig& cfg) {
  const double comm_us = static_cast<double>(cfg.model.total_bytes()) * 8 / (cfg.link_gbps * 1e3);
  const double comp_us = to_us(cfg.model.total_compute());
  return {comm_us + comp_us, comp_us > 0 ? comm_us / comp_us : 1};
}

uint32_t TrainingWorker::priority(uint32_t layer, Time now) {
  auto& [iter, value] = priced_[layer - 1];
  if (cfg_.eq1_per_tensor && iter == comm_iter_) return value;
  iter = comm_iter_;
  value = eq1_.field(to_us(now - comm_iter_start_), cfg_.model.layers(), static_cast<int>(layer));
  return value;
}

void TrainingWorker::on_start(Time, Effects& fx) { fx.set_timer(cfg_.start, WorkerTransport::kOwnerTimer | kCompute); }

void TrainingWorker::try_compute(Time now, Effects& fx) {
  if (computing_ || compute_iter_ >= cfg_.iterations) return;
  if (compute_iter_ > 0 && ready_[next_layer_] < compute_iter_ - 1) return;  // wait for the layer's results
  if (next_layer_ == 0) iter_start_ = now;
  computing_ = true;
  fx.set_timer(now + cfg_.model.compute[next_layer_], WorkerTransport::kOwnerTimer | kCompute);
}

void TrainingWorker::on_timer(uint64_t token, Time now, Effects& fx) {
  if (!(token & WorkerTransport::kOwnerTimer)) {
    tx_.on_timer(token, now, fx);
    after(now, fx);
    return;
  }
  const uint64_t what = token & ~WorkerTransport::kOwnerTimer;
  if (what == kCompute) {
    if (!computing_) {  // the job starts
      try_compute(now, fx);
      return;
    }
    computing_ = false;
    if (++next_layer_ < cfg_.model.layers()) {
      try_compute(now, fx);
      return;
    }
    next_layer_ = 0;
    ++compute_iter_;
    const Time jitter = static_cast<Time>(rng_.uniform() * static_cast<double>(cfg_.send_jitter));
    fx.set_timer(now + jitter, WorkerTransport::kOwnerTimer | kSend);
    return;
  }
  // kSend: the gradients of iteration compute_iter_ - 1 go out.
  comm_iter_ = compute_iter_ - 1;
  comm_start_ = now;
  comm_iter_start_ = iter_start_;
  if (first_send_ < 0) first_send_ = now;
  const unsigned n = cfg_.transport.nworkers;
  for (const Partition& part : cfg_.model.send_order) {
    auto t = std::make_shared<host::SyntheticTensor>(mix(cfg_.data_seed, ops_submitted_++), cfg_.transport.rank, n);
    const uint64_t id = tx_.submit(t, part.bytes / 4, static_cast<uint32_t>(part.layer));
    tensors_.push_back(std::move(t));
    op_layer_[id] = part.layer - 1;
    ++remaining_[part.layer - 1];
  }
  tx_.pump(now, fx);
  after(now, fx);
}

void TrainingWorker::on_packet(Packet* p, Time now, Effects& fx) {
  tx_.on_packet(p, now, fx);
  after(now, fx);
}

void TrainingWorker::after(Time now, Effects& fx) {
  if (!tx_.has_completed()) return;
  const auto done = tx_.take_completed();
  for (uint64_t id : done) {
    auto it = op_layer_.find(id);
    const int l = it->second;
    op_layer_.erase(it);
    if (--remaining_[l] == 0) ready_[l] = comm_iter_;
  }
  if (!tx_.busy()) {
    // The iteration's communication is over: refresh the Eq. (1) estimates.
    eq1_.measured(to_us(now - comm_iter_start_), to_us(now - comm_start_), to_us(cfg_.model.total_compute()));
    if (comm_iter_ == cfg_.iterations - 1) finish_ = now;
  }
  try_compute(now, fx);
}

uint64_t TrainingWorker::verify_checked() const {
  uint64_t c = 0;
  for (const auto& t : tensors_) c += t->checked();
  return c;
}

uint64_t TrainingWorker::verify_mismatches() const {
  uint64_t c = 0;
  for (const auto& t : tensors_) c += t->mismatches();
  return c;
}

}  // namespace ina::workload
