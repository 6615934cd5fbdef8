// The worker role of ina-train: trains the MLP on its shard and averages the
// gradients of every step with the configured Reducer.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "train/reducer.hpp"
#include "train/worker_util.hpp"
#include "train/train.hpp"

namespace ina::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(unsigned hidden)
      : fc1(register_module("fc1", torch::nn::Linear(784, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, 10))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2->forward(torch::relu(fc1->forward(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Mlp);

Eval evaluate(Mlp& model, const Dataset& test) {
  torch::NoGradGuard ng;
  int64_t correct = 0;
  double loss = 0;
  constexpr int64_t kChunk = 1000;
  for (int64_t i = 0; i < static_cast<int64_t>(test.n); i += kChunk) {
    const int64_t m = std::min<int64_t>(kChunk, test.n - i);
    auto x = torch::from_blob(const_cast<float*>(test.images.data() + i * 784), {m, 784}, torch::kFloat32);
    auto y = torch::from_blob(const_cast<int64_t*>(test.labels.data() + i), {m}, torch::kInt64);
    auto out = model->forward(x);
    loss += torch::nn::functional::cross_entropy(out, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)).item<double>();
    correct += out.argmax(1).eq(y).sum().item<int64_t>();
  }
  return {static_cast<double>(correct) / test.n, loss / test.n};
}

}  // namespace

int run_worker(const WorkerConfig& w) {
  const TrainConfig& c = w.train;
  const auto t_start = Clock::now();
  try {
    if (c.model == "fortunes") return run_fortunes_worker(w);
    // One intra-op thread: deterministic kernels, and N workers share the cores.
    torch::set_num_threads(1);
    const Dataset train = load_fashion_mnist(c.data_dir, "train", c.limit_train);
    const Dataset test = w.rank == 0 ? load_fashion_mnist(c.data_dir, "t10k", c.limit_test) : Dataset{};
    const uint64_t per_worker = train.n / c.workers;
    const uint64_t steps_per_epoch = per_worker / c.batch;
    if (steps_per_epoch == 0)
      throw std::runtime_error(fmt::format("{} training samples give no full batch of {} on each of {} workers",
                                           train.n, c.batch, c.workers));

    // Identical initialization everywhere: the same seed, no broadcast.
    torch::manual_seed(c.seed);
    Mlp model(c.hidden);
    std::vector<torch::Tensor> params = model->parameters();
    torch::optim::SGD opt(params, torch::optim::SGDOptions(c.lr).momentum(c.momentum));
    size_t total = 0;
    for (const auto& p : params) total += p.numel();
    std::vector<float> flat(total);

    const auto t_join = Clock::now();
    std::unique_ptr<Reducer> reducer = c.backend == "gloo" ? make_gloo_reducer(w) : make_ina_reducer(w);
    const double join_s = seconds_since(t_join);
    if (w.rank == 0 && c.verbose)
      std::cerr << fmt::format("ina-train worker 0: {} joined in {:.2f} s; {} parameters, {} steps per epoch\n",
                               reducer->describe(), join_s, total, steps_per_epoch);

    nlohmann::json epochs = nlohmann::json::array();
    std::vector<double> losses;
    losses.reserve(steps_per_epoch * c.epochs);
    double train_s = 0, comm_s = 0;
    std::vector<float> xb(static_cast<size_t>(c.batch) * 784);
    std::vector<int64_t> yb(c.batch);
    for (unsigned e = 1; e <= c.epochs; ++e) {
      const auto t_epoch = Clock::now();
      const std::vector<uint64_t> order = epoch_order(train.n, c.seed, e);
      double epoch_loss = 0;
      double epoch_comm = 0;
      for (uint64_t s = 0; s < steps_per_epoch; ++s) {
        for (unsigned b = 0; b < c.batch; ++b) {
          const uint64_t idx = order[(s * c.batch + b) * c.workers + w.rank];
          std::memcpy(xb.data() + static_cast<size_t>(b) * 784, train.images.data() + idx * 784, 784 * sizeof(float));
          yb[b] = train.labels[idx];
        }
        auto x = torch::from_blob(xb.data(), {static_cast<int64_t>(c.batch), 784}, torch::kFloat32);
        auto y = torch::from_blob(yb.data(), {static_cast<int64_t>(c.batch)}, torch::kInt64);
        opt.zero_grad();
        auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
        loss.backward();
        const double l = loss.item<double>();
        losses.push_back(l);
        epoch_loss += l;
        size_t off = 0;
        for (auto& p : params) {
          auto g = p.grad().contiguous();
          std::memcpy(flat.data() + off, g.data_ptr<float>(), g.numel() * sizeof(float));
          off += g.numel();
        }
        const auto t_comm = Clock::now();
        reducer->average(std::span<float>(flat));
        epoch_comm += seconds_since(t_comm);
        off = 0;
        for (auto& p : params) {
          auto g = p.mutable_grad();
          std::memcpy(g.data_ptr<float>(), flat.data() + off, g.numel() * sizeof(float));
          off += g.numel();
        }
        opt.step();
      }
      train_s += seconds_since(t_epoch);
      comm_s += epoch_comm;
      nlohmann::json ej = {{"epoch", e},
                           {"train_loss", epoch_loss / steps_per_epoch},
                           {"train_seconds", train_s},
                           {"comm_seconds", comm_s}};
      if (w.rank == 0) {
        record_test(ej, e, epoch_loss / steps_per_epoch, train_s, comm_s, evaluate(model, test));
      }
      epochs.push_back(std::move(ej));
    }
    reducer->close();
    const auto [first, last] = first_last_loss(losses);
    nlohmann::json rep = {{"rank", w.rank},
                          {"backend", c.backend},
                          {"scheme", c.backend == "ina" ? c.scheme : ""},
                          {"reducer", reducer->describe()},
                          {"parameters", total},
                          {"steps", losses.size()},
                          {"steps_per_epoch", steps_per_epoch},
                          {"train_samples", train.n},
                          {"join_seconds", join_s},
                          {"train_seconds", train_s},
                          {"comm_seconds", comm_s},
                          {"total_seconds", seconds_since(t_start)},
                          {"first_loss", first},
                          {"last_loss", last},
                          {"checksum", fmt::format("{:016x}", checksum(params))},
                          {"epochs", epochs}};
    reducer.reset();
    write_report(rep, w.report);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("ina-train worker {}: {}\n", w.rank, e.what());
    return 1;
  }
}

}  // namespace ina::train
