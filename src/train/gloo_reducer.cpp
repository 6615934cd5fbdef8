// The gloo baseline: c10d::ProcessGroupGloo over loopback (or the worker's
// --host address: scripts/netns-cluster --train), rendezvous through a
// c10d::FileStore in the launcher's work directory.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "train/reducer.hpp"

namespace ina::train {

namespace {

class GlooReducer final : public Reducer {
 public:
  explicit GlooReducer(const WorkerConfig& w) : n_(w.train.workers), host_(w.host) {
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(std::min(w.train.timeout_s, 120.0) * 1000));
    auto store = c10::make_intrusive<c10d::FileStore>(w.store_path, static_cast<int>(n_));
    store->setTimeout(timeout);
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(w.host));
    opts->threads = 1;
    pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, static_cast<int>(w.rank), static_cast<int>(n_), opts);
  }
  void average(std::span<float> data) override {
    std::vector<at::Tensor> t{torch::from_blob(data.data(), {static_cast<int64_t>(data.size())}, torch::kFloat32)};
    pg_->allreduce(t)->wait();
    const float n = static_cast<float>(n_);
    for (float& x : data) x /= n;  // the same exact sum on every rank, so the same average
  }
  void close() override {
    if (pg_) pg_->barrier()->wait();
  }
  std::string describe() const override {
    return host_ == "127.0.0.1" ? "gloo (c10d::ProcessGroupGloo, loopback)" : "gloo (c10d::ProcessGroupGloo, " + host_ + ")";
  }

 private:
  unsigned n_;
  std::string host_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

}  // namespace

std::unique_ptr<Reducer> make_gloo_reducer(const WorkerConfig& cfg) { return std::make_unique<GlooReducer>(cfg); }

}  // namespace ina::train
