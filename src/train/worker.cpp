// The worker role of ina-train: trains the MLP (or the CNN) on its shard and
// averages the gradients of every step with the configured Reducer.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>
#include <stdexcept>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "host/dsa_priority.hpp"
#include "train/reducer.hpp"
#include "train/worker_util.hpp"
#include "train/train.hpp"

namespace ina::train {

namespace {

struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(unsigned hidden)
      : fc1(register_module("fc1", torch::nn::Linear(784, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, 10))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2->forward(torch::relu(fc1->forward(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Mlp);

// A small LeNet-like CNN: two 5x5 convolutions (16 and 32 channels, each
// with ReLU and 2x2 max pooling) and a linear layer, 18 378 parameters and
// ~1.05 M multiply-adds per image: ~57 per parameter against the MLP's 1,
// the computation-intensive model (DSA Fig. 5(b)'s ResNet50 role).
struct CnnImpl : torch::nn::Module {
  CnnImpl()
      : c1(register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 5)))),
        c2(register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 5)))),
        fc(register_module("fc", torch::nn::Linear(32 * 4 * 4, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(c1->forward(x.view({-1, 1, 28, 28}))), 2);  // 24x24 -> 12x12
    x = torch::max_pool2d(torch::relu(c2->forward(x)), 2);                        // 8x8 -> 4x4
    return fc->forward(x.flatten(1));
  }
  torch::nn::Conv2d c1, c2;
  torch::nn::Linear fc;
};
TORCH_MODULE(Cnn);

// The model a worker trains: its module, its forward pass, and its
// parameters per layer, front to back (a layer: one module's weight and bias).
struct Net {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(torch::Tensor)> forward;
  std::vector<size_t> layer_sizes;
};

Net make_net(const TrainConfig& c) {
  auto sizes = [](const std::shared_ptr<torch::nn::Module>& m) {
    std::vector<size_t> v;
    for (const auto& child : m->children()) {
      size_t n = 0;
      for (const auto& p : child->parameters()) n += static_cast<size_t>(p.numel());
      v.push_back(n);
    }
    return v;
  };
  if (c.model == "cnn") {
    Cnn m;
    return {m.ptr(), [m](torch::Tensor x) mutable { return m->forward(x); }, sizes(m.ptr())};
  }
  Mlp m(c.hidden);
  return {m.ptr(), [m](torch::Tensor x) mutable { return m->forward(x); }, sizes(m.ptr())};
}

Eval evaluate(Net& model, const Dataset& test) {
  torch::NoGradGuard ng;
  int64_t correct = 0;
  double loss = 0;
  constexpr int64_t kChunk = 1000;
  for (int64_t i = 0; i < static_cast<int64_t>(test.n); i += kChunk) {
    const int64_t m = std::min<int64_t>(kChunk, test.n - i);
    auto x = torch::from_blob(const_cast<float*>(test.images.data() + i * 784), {m, 784}, torch::kFloat32);
    auto y = torch::from_blob(const_cast<int64_t*>(test.labels.data() + i), {m}, torch::kInt64);
    auto out = model.forward(x);
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
    Net model = make_net(c);
    std::vector<torch::Tensor> params = model.module->parameters();
    torch::optim::SGD opt(params, torch::optim::SGDOptions(c.lr).momentum(c.momentum));
    size_t total = 0;
    for (const auto& p : params) total += p.numel();
    std::vector<float> flat(total);
    // The allreduces of a step: the model whole, or (eq1) one per layer,
    // the last layer first, as backpropagation yields them (segment k is
    // layer L - k; the flat buffer holds the layers front to back).
    const int layers = static_cast<int>(model.layer_sizes.size());
    if (std::accumulate(model.layer_sizes.begin(), model.layer_sizes.end(), size_t{0}) != total)
      throw std::logic_error("ina-train: the model's layers do not hold all its parameters");
    // Priced only where a switch reads the field (gloo averages the model whole).
    const bool eq1_on = c.priority == "eq1" && c.backend == "ina";
    std::vector<Reducer::Segment> segments;
    if (eq1_on) {
      size_t end = total;
      for (int l = layers; l >= 1; --l) {
        end -= model.layer_sizes[l - 1];
        segments.push_back({end, model.layer_sizes[l - 1], 0});
      }
    } else {
      segments = {{0, total, 0}};
    }
    host::Eq1Estimates eq1(0, 1);  // used from the second step on: the first, unmeasured, goes at the communicator's priority
    bool eq1_measured = false;
    uint64_t eq1_steps = 0;
    std::vector<double> eq1_sum(layers, 0);  // the fields sent, summed by layer (for the report's mean)
    uint32_t eq1_first = 0, eq1_last = 0;    // layer 1's field at the first and the last priced step

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
        const auto t_step = Clock::now();
        opt.zero_grad();
        auto loss = torch::nn::functional::cross_entropy(model.forward(x), y);
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
        if (eq1_on && eq1_measured) {
          const double elapsed_us = std::chrono::duration<double, std::micro>(t_comm - t_step).count();
          // T_j: the rest of this step, and the epoch's steps after it.
          const auto after = static_cast<double>(steps_per_epoch - 1 - s);
          for (int l = 1; l <= layers; ++l) {
            const uint32_t f = eq1.field(elapsed_us, layers, l, after);
            segments[layers - l].priority = f;
            eq1_sum[l - 1] += f;
          }
          if (eq1_steps == 0) eq1_first = segments[layers - 1].priority;
          eq1_last = segments[layers - 1].priority;
          ++eq1_steps;
        }
        reducer->average(std::span<float>(flat), segments);
        const double step_comm = seconds_since(t_comm);
        epoch_comm += step_comm;
        // Eq. 1's inputs for the next step: this one's duration (to its last
        // result), its communication and its compute (forward and backward).
        eq1.measured(seconds_since(t_step) * 1e6, step_comm * 1e6,
                     std::chrono::duration<double, std::micro>(t_comm - t_step).count());
        eq1_measured = true;
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
                          {"priority", c.priority},
                          {"epochs", epochs}};
    if (eq1_on)  // the mean field each layer's packets carried, layer 1's first and last, and the last estimates
      rep["eq1"] = {{"priced_steps", eq1_steps},
                    {"mean_priority", [&] {
                       nlohmann::json m = nlohmann::json::array();
                       for (double v : eq1_sum) m.push_back(eq1_steps ? v / static_cast<double>(eq1_steps) : 0);
                       return m;
                     }()},
                    {"first_priority", eq1_first},
                    {"last_priority", eq1_last},
                    {"last_iteration_ms", eq1.iteration_us() / 1e3},
                    {"last_comm_over_comp", eq1.comm_over_comp()}};
    if (const nlohmann::json st = reducer->stats(); st.is_object() && st.contains("transport"))
      rep["transport"] = st.at("transport");
    reducer.reset();
    write_report(rep, w.report);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("ina-train worker {}: {}\n", w.rank, e.what());
    return 1;
  }
}

}  // namespace ina::train
