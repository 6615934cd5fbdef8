#pragma once
// Helpers shared by the ina-train workers (worker.cpp: MLP, fortunes_worker.cpp);
// libtorch TUs only.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <iostream>
#include <numeric>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ina::train {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// FNV-1a over the raw bytes of every parameter, in registration order.
inline uint64_t checksum(const std::vector<torch::Tensor>& params) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& p : params) {
    const auto c = p.detach().contiguous();
    const auto* b = static_cast<const uint8_t*>(c.data_ptr());
    for (size_t i = 0; i < static_cast<size_t>(c.numel()) * sizeof(float); ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  return h;
}

struct Eval {
  double accuracy, loss;
};

// Rank 0 at the end of an epoch: the test result into the epoch's record, and the progress line.
inline void record_test(nlohmann::json& epoch_record, unsigned epoch, double train_loss, double train_s, double comm_s,
                        const Eval& ev) {
  epoch_record["test_accuracy"] = ev.accuracy;
  epoch_record["test_loss"] = ev.loss;
  std::cout << fmt::format("ina-train: epoch {}: train loss {:.4f}, test accuracy {:.2f} %, test loss {:.4f}, "
                           "{:.2f} s training so far ({:.2f} s in allreduce)\n",
                           epoch, train_loss, 100 * ev.accuracy, ev.loss, train_s, comm_s)
            << std::flush;
}

// The mean loss of the first and of the last 20 steps (fewer if the run is shorter).
inline std::pair<double, double> first_last_loss(const std::vector<double>& losses) {
  const size_t k = std::min<size_t>(20, losses.size());
  return {std::accumulate(losses.begin(), losses.begin() + k, 0.0) / k, std::accumulate(losses.end() - k, losses.end(), 0.0) / k};
}

// Writes a worker's JSON report; throws std::runtime_error if it cannot.
inline void write_report(const nlohmann::json& report, const std::string& path) {
  std::ofstream f(path);
  f << report.dump(1) << "\n";
  if (!f) throw std::runtime_error(fmt::format("cannot write the report {}", path));
}

}  // namespace ina::train
