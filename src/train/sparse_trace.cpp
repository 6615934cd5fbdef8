// ina-sparse-trace's command (train.hpp): real sparse gradients for the
// Zebra workloads.
//
// Trains a word-level bag-of-words classifier with libtorch on real text
// (Debian's `fortunes` package: each fortune is a sample, its file — art,
// computers, food, law, ... — the class), data-parallel over N workers,
// and records which embedding parameters get a non-zero gradient at each
// worker in each iteration, as an `ina-sparse-trace 1` file
// (docs/zebra.md) that `ina sim` scenarios replay (workload.sparse_trace).
//
// Model: EmbeddingBag(V, d, mean, sparse gradients) -> Linear(d, C).
// Data-parallel exactly as N workers would run it: every iteration each
// worker takes its own batch, computes its gradient, the N gradients are
// averaged (what an allreduce gives) and one SGD step is applied to the
// shared model. A key is one embedding scalar (row * d + column), so a word
// in a worker's batch contributes d keys; word frequencies are Zipfian,
// like the paper's LSTM on wikitext-2.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "train/fortunes.hpp"
#include "train/train.hpp"
#include "workload/sparse.hpp"

namespace ina::train {
namespace {

class TraceSource final : public ina::workload::SparseSource {
 public:
  std::string name_ = "fortunes";
  uint64_t params = 0;
  unsigned w = 0, it = 0;
  std::vector<std::vector<uint64_t>> batches;
  std::string name() const override { return name_; }
  uint64_t num_params() const override { return params; }
  unsigned workers() const override { return w; }
  unsigned iterations() const override { return it; }
  std::vector<uint64_t> keys(unsigned i, unsigned k) const override { return batches.at(static_cast<size_t>(i) * w + k); }
};

}  // namespace

int sparse_trace_main(int argc, char** argv) {
  CLI::App app{"Record real sparse gradients (embedding keys per worker and iteration) from a libtorch model "
               "trained on Debian's fortunes; writes an ina-sparse-trace 1 file (docs/zebra.md)"};
  std::string data = "/usr/share/games/fortunes", out;
  unsigned workers = 8, iterations = 100, batch = 32, dim = 16;
  double lr = 0.5;
  uint64_t seed = 1;
  app.add_option("--data", data, "directory of fortune files")->capture_default_str();
  app.add_option("--out", out, "the trace file to write")->required();
  app.add_option("--workers", workers, "data-parallel workers")->check(CLI::Range(1u, 256u))->capture_default_str();
  app.add_option("--iterations", iterations, "training iterations recorded")->check(CLI::Range(1u, 100000u))->capture_default_str();
  app.add_option("--batch", batch, "fortunes per worker and iteration")->check(CLI::Range(1u, 4096u))->capture_default_str();
  app.add_option("--dim", dim, "embedding width d (a word is d keys)")->check(CLI::Range(1u, 1024u))->capture_default_str();
  app.add_option("--lr", lr, "SGD learning rate")->capture_default_str();
  app.add_option("--seed", seed, "initialization and shuffling seed")->capture_default_str();
  if (const auto rc = ina::cli::parse_command_line(app, argc, argv)) return *rc;

  try {
    auto corpus = ina::fortunes::load(data);
    auto& samples = corpus.samples;
    const int64_t V = corpus.vocab, classes = corpus.classes;
    torch::manual_seed(seed);
    ina::fortunes::BagOfWords model(V, dim, classes);
    auto& emb = model->emb;
    auto& fc = model->fc;
    std::mt19937_64 rng(seed);
    std::shuffle(samples.begin(), samples.end(), rng);
    size_t next = 0;
    auto take = [&] {
      if (next == samples.size()) {
        std::shuffle(samples.begin(), samples.end(), rng);
        next = 0;
      }
      return &samples[next++];
    };
    TraceSource trace;
    trace.params = static_cast<uint64_t>(V) * dim;
    trace.w = workers;
    trace.it = iterations;
    std::cerr << fmt::format("{} fortunes, {} classes, vocabulary {} words, {} x {} = {} parameters\n",
                             samples.size(), classes, V, V, dim, trace.params);
    for (unsigned i = 0; i < iterations; ++i) {
      torch::Tensor g_emb = torch::zeros({V, static_cast<int64_t>(dim)});
      std::vector<torch::Tensor> g_fc = {torch::zeros_like(fc->weight), torch::zeros_like(fc->bias)};
      double loss_sum = 0;
      for (unsigned k = 0; k < workers; ++k) {
        ina::fortunes::Batch batch_k;
        for (unsigned b = 0; b < batch; ++b) batch_k.add(*take());
        model->zero_grad();
        auto loss = batch_k.loss(model);
        loss.backward();
        loss_sum += loss.item<double>();
        // The non-zero rows of this worker's sparse gradient: its keys.
        const auto nz = ina::fortunes::nonzero_rows(emb->weight.grad());
        std::vector<uint64_t> keys;
        for (int64_t r : nz.rows)
          for (unsigned c = 0; c < dim; ++c) keys.push_back(static_cast<uint64_t>(r) * dim + c);
        trace.batches.push_back(std::move(keys));
        g_emb.index_add_(0, torch::tensor(nz.rows),
                         torch::from_blob(const_cast<float*>(nz.values.data()),
                                          {static_cast<int64_t>(nz.rows.size()), static_cast<int64_t>(dim)},
                                          torch::kFloat32));
        g_fc[0] += fc->weight.grad();
        g_fc[1] += fc->bias.grad();
      }
      // The averaged gradient (what the allreduce returns), one SGD step.
      torch::NoGradGuard ng;
      emb->weight.sub_(g_emb, lr / workers);
      fc->weight.sub_(g_fc[0], lr / workers);
      fc->bias.sub_(g_fc[1], lr / workers);
      if (i % 10 == 0 || i + 1 == iterations)
        std::cerr << fmt::format("iteration {}: mean loss {:.4f}\n", i, loss_sum / workers);
    }
    ina::workload::write_trace(trace, out);
    std::cerr << fmt::format("wrote {} ({} workers x {} iterations)\n", out, workers, iterations);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace ina::train
