// The worker role of ina-train --model fortunes: the bag-of-words classifier
// of train/fortunes.hpp, data-parallel. Every step each worker computes the
// gradient of its own batch; then
//  - ina: the embedding's sparse gradient (the rows its batch touched) is
//    averaged with Communicator::allreduce_sparse and the Linear layer's
//    with a dense allreduce, both ReduceOp::Average;
//  - gloo: the embedding gradient, densified (V x d, zeros included), and the
//    Linear layer's gradient form one flat buffer, averaged by gloo;
// and every worker applies the same plain SGD step w -= lr * g (only the
// averaged entries: a row no worker touched has g = 0 and stays as it is).
//
// Keys: one embedding scalar is one key, kEmbeddingKeys + row * d + column,
// one float value each; a touched row is d keys. The offset 2^32 keeps the
// embedding's keys apart from the keys 0..n-1 that a dense allreduce uses on
// a <key, value> job and from the scale round's lanes (0..278), so Zebra's
// hot set only ever catches embedding pairs and its share is measured on
// them alone.
//
// Zebra's hot set (§III-C, sampling-based offline): before training, every
// worker replays the batches of the first --hot-iterations iterations of
// epoch 1 of *all* workers (the epoch order is a function of the seed, so
// every worker computes the same batches), counts in how many batches each
// word occurs (control::zebra::count_updates), and ranks the words by that
// count (ties: smaller row first). The hottest floor(--hot-keys / d) rows,
// d keys each, hottest first, go to Communicator::set_hot_keys; the list is
// the same on every worker by construction.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <numeric>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "control/zebra_hot.hpp"
#include "train/fortunes.hpp"
#include "train/reducer.hpp"
#include "train/worker_util.hpp"
#include "train/train.hpp"

namespace ina::train {

namespace {

using fortunes::Sample;

constexpr uint64_t kEmbeddingKeys = uint64_t{1} << 32;

// Every worker's batch of one step: worker r takes positions r, r+N, ... of the epoch order.
fortunes::Batch batch_of(const std::vector<const Sample*>& train, const std::vector<uint64_t>& order, uint64_t step,
                         unsigned batch, unsigned workers, unsigned rank) {
  fortunes::Batch b;
  for (unsigned i = 0; i < batch; ++i) b.add(*train[order[(step * batch + i) * workers + rank]]);
  return b;
}

// The rows (words) of every worker's batches in the first iterations of
// epoch 1, as the sparse source the hot-set ranking counts over.
class ProfileSource final : public workload::SparseSource {
 public:
  ProfileSource(const std::vector<const Sample*>& train, const TrainConfig& c, uint64_t vocab, unsigned iterations)
      : vocab_(vocab), workers_(c.workers), iterations_(iterations) {
    const auto order = epoch_order(train.size(), c.seed, 1);
    for (unsigned s = 0; s < iterations; ++s)
      for (unsigned r = 0; r < c.workers; ++r) {
        const auto b = batch_of(train, order, s, c.batch, c.workers, r);
        std::vector<uint64_t> rows(b.flat.begin(), b.flat.end());
        std::sort(rows.begin(), rows.end());
        rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
        rows_.push_back(std::move(rows));
      }
  }
  std::string name() const override { return "fortunes-rows"; }
  uint64_t num_params() const override { return vocab_; }
  unsigned workers() const override { return workers_; }
  unsigned iterations() const override { return iterations_; }
  std::vector<uint64_t> keys(unsigned i, unsigned w) const override { return rows_.at(static_cast<size_t>(i) * workers_ + w); }

 private:
  uint64_t vocab_;
  unsigned workers_, iterations_;
  std::vector<std::vector<uint64_t>> rows_;
};

Eval evaluate(fortunes::BagOfWords& model, const std::vector<const Sample*>& test) {
  torch::NoGradGuard ng;
  int64_t correct = 0;
  double loss = 0;
  constexpr size_t kChunk = 1024;
  for (size_t i = 0; i < test.size(); i += kChunk) {
    fortunes::Batch b;
    for (size_t j = i; j < std::min(test.size(), i + kChunk); ++j) b.add(*test[j]);
    const auto y = torch::tensor(b.labels);
    const auto out = model->forward(torch::tensor(b.flat), torch::tensor(b.offsets));
    loss += torch::nn::functional::cross_entropy(out, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                .item<double>();
    correct += out.argmax(1).eq(y).sum().item<int64_t>();
  }
  return {static_cast<double>(correct) / static_cast<double>(test.size()), loss / static_cast<double>(test.size())};
}

// The one SGD update both backends apply, element by element.
inline void sgd(float& w, float g, float lr) { w -= lr * g; }

}  // namespace

int run_fortunes_worker(const WorkerConfig& w) {
  const TrainConfig& c = w.train;
  const auto t_start = Clock::now();
  torch::set_num_threads(1);
  const fortunes::Corpus corpus = fortunes::load(c.data_dir);
  // Held out: every 10th fortune (in file order, so every class); the rest
  // trains. Each split in a fixed shuffled order (independent of --seed),
  // so that --limit-train / --limit-test keep a sample of every class.
  std::vector<const Sample*> train, test;
  for (size_t i = 0; i < corpus.samples.size(); ++i) (i % 10 == 9 ? test : train).push_back(&corpus.samples[i]);
  for (auto* split : {&train, &test}) {
    std::vector<const Sample*> shuffled;
    for (uint64_t i : epoch_order(split->size(), 0, 0)) shuffled.push_back((*split)[i]);
    *split = std::move(shuffled);
  }
  if (c.limit_train && c.limit_train < train.size()) train.resize(c.limit_train);
  if (c.limit_test && c.limit_test < test.size()) test.resize(c.limit_test);
  const uint64_t per_worker = train.size() / c.workers;
  const uint64_t steps_per_epoch = per_worker / c.batch;
  if (steps_per_epoch == 0)
    throw std::runtime_error(fmt::format("{} training fortunes give no full batch of {} on each of {} workers",
                                         train.size(), c.batch, c.workers));
  const int64_t V = corpus.vocab, C = corpus.classes, d = c.dim;
  const uint64_t emb_size = static_cast<uint64_t>(V) * c.dim, fc_size = static_cast<uint64_t>(C * d + C);

  torch::manual_seed(c.seed);
  fortunes::BagOfWords model(V, d, C);
  const std::vector<torch::Tensor> params = model->parameters();  // emb.weight, fc.weight, fc.bias
  float* emb_w = model->emb->weight.data_ptr<float>();
  float* fc_w = model->fc->weight.data_ptr<float>();
  float* fc_b = model->fc->bias.data_ptr<float>();
  const float lr = static_cast<float>(c.lr);

  const bool ina = c.backend == "ina";
  const auto t_join = Clock::now();
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Reducer> gloo;
  if (ina) comm = std::make_unique<Communicator>(ina_comm_config(w));
  else gloo = make_gloo_reducer(w);
  const double join_s = seconds_since(t_join);

  // Zebra's hot set.
  std::vector<uint64_t> ranked;
  uint32_t hot_version = 0;
  double hot_profile_share = 0;
  std::unordered_set<uint64_t> hot;
  if (ina && c.hot_iterations > 0 && c.hot_keys >= c.dim) {
    const unsigned iters = static_cast<unsigned>(std::min<uint64_t>(c.hot_iterations, steps_per_epoch));
    const ProfileSource src(train, c, static_cast<uint64_t>(V), iters);
    const auto rk = control::zebra::count_updates(src, 0, iters);
    const size_t rows = std::min<size_t>(rk.keys.size(), c.hot_keys / c.dim);
    uint64_t covered = 0;
    for (size_t i = 0; i < rows; ++i) {
      covered += rk.freq[i];
      for (unsigned col = 0; col < c.dim; ++col) ranked.push_back(kEmbeddingKeys + rk.keys[i] * c.dim + col);
    }
    hot_profile_share = rk.total ? static_cast<double>(covered) / static_cast<double>(rk.total) : 0;
    hot_version = comm->set_hot_keys(ranked);
    if (hot_version) hot.insert(ranked.begin(), ranked.end());
    else ranked.clear();  // no hot-set table on this scheme
  }
  const std::string reducer_desc =
      ina ? fmt::format("ina {} (allreduce_sparse + dense allreduce, {} values per packet{})", comm->scheme(),
                        comm->payload_values(), hot_version ? fmt::format(", hot set of {} keys", ranked.size()) : "")
          : "gloo (c10d::ProcessGroupGloo, loopback; densified embedding gradient)";
  if (w.rank == 0 && c.verbose)
    std::cerr << fmt::format("ina-train worker 0: {} joined in {:.2f} s; V {} d {} C {}, {} steps per epoch\n", reducer_desc,
                             join_s, V, d, C, steps_per_epoch);

  std::vector<float> fc_g(fc_size);
  std::vector<float> dense(ina ? 0 : emb_size + fc_size);
  std::vector<uint64_t> keys;
  std::vector<double> losses;
  uint64_t emb_pairs = 0, hot_pairs = 0, union_keys = 0;
  double train_s = 0, comm_s = 0, sparse_s = 0, grad_max = 0, grad_l1_max = 0;
  nlohmann::json epochs = nlohmann::json::array();
  SparseOptions so;
  so.op = ReduceOp::Average;
  AllreduceOptions ao;
  ao.op = ReduceOp::Average;
  for (unsigned e = 1; e <= c.epochs; ++e) {
    const auto t_epoch = Clock::now();
    const auto order = epoch_order(train.size(), c.seed, e);
    double epoch_loss = 0;
    int64_t epoch_correct = 0;
    for (uint64_t s = 0; s < steps_per_epoch; ++s) {
      const auto b = batch_of(train, order, s, c.batch, c.workers, w.rank);
      model->zero_grad();
      const auto y = torch::tensor(b.labels);
      const auto out = model->forward(torch::tensor(b.flat), torch::tensor(b.offsets));
      auto loss = torch::nn::functional::cross_entropy(out, y);
      loss.backward();
      const double l = loss.item<double>();
      losses.push_back(l);
      epoch_loss += l;
      epoch_correct += out.argmax(1).eq(y).sum().item<int64_t>();
      const auto nz = fortunes::nonzero_rows(model->emb->weight.grad());
      {
        const auto gw = model->fc->weight.grad().contiguous();
        const auto gb = model->fc->bias.grad().contiguous();
        std::copy_n(gw.data_ptr<float>(), C * d, fc_g.begin());
        std::copy_n(gb.data_ptr<float>(), C, fc_g.begin() + C * d);
      }
      // Magnitudes for the loss-curve tolerance (docs/results/train.md): the
      // largest |g| and the largest L1 norm of this worker's gradient.
      {
        float gmax = 0;
        double l1 = 0;
        for (float v : nz.values) gmax = std::max(gmax, std::abs(v)), l1 += std::abs(v);
        for (float v : fc_g) gmax = std::max(gmax, std::abs(v)), l1 += std::abs(v);
        grad_max = std::max<double>(grad_max, gmax);
        grad_l1_max = std::max(grad_l1_max, l1);
      }
      const auto t_comm = Clock::now();
      if (ina) {
        keys.clear();
        for (int64_t r : nz.rows)
          for (int64_t col = 0; col < d; ++col) {
            const uint64_t k = kEmbeddingKeys + static_cast<uint64_t>(r * d + col);
            keys.push_back(k);
            hot_pairs += hot.count(k);
          }
        emb_pairs += keys.size();
        const auto res = comm->allreduce_sparse(keys, nz.values, so);
        sparse_s += seconds_since(t_comm);
        comm->allreduce(std::span<float>(fc_g), ao);
        comm_s += seconds_since(t_comm);
        union_keys += res.keys.size();
        for (size_t i = 0; i < res.keys.size(); ++i) {
          const uint64_t k = res.keys[i] - kEmbeddingKeys;
          if (res.keys[i] < kEmbeddingKeys || k >= emb_size)
            throw std::runtime_error(fmt::format("allreduce_sparse returned key {}, not an embedding key", res.keys[i]));
          sgd(emb_w[k], res.values[i], lr);
        }
      } else {
        std::fill(dense.begin(), dense.end(), 0.0f);
        for (size_t q = 0; q < nz.rows.size(); ++q)
          std::copy_n(nz.values.begin() + static_cast<ptrdiff_t>(q * d), d, dense.begin() + nz.rows[q] * d);
        std::copy(fc_g.begin(), fc_g.end(), dense.begin() + static_cast<ptrdiff_t>(emb_size));
        gloo->average(std::span<float>(dense));
        comm_s += seconds_since(t_comm);
        for (uint64_t k = 0; k < emb_size; ++k) sgd(emb_w[k], dense[k], lr);
        std::copy(dense.begin() + static_cast<ptrdiff_t>(emb_size), dense.end(), fc_g.begin());
      }
      for (int64_t i = 0; i < C * d; ++i) sgd(fc_w[i], fc_g[i], lr);
      for (int64_t i = 0; i < C; ++i) sgd(fc_b[i], fc_g[C * d + i], lr);
    }
    train_s += seconds_since(t_epoch);
    nlohmann::json ej = {{"epoch", e},
                         {"train_loss", epoch_loss / steps_per_epoch},
                         {"train_accuracy", static_cast<double>(epoch_correct) / (steps_per_epoch * c.batch)},
                         {"train_seconds", train_s},
                         {"comm_seconds", comm_s}};
    if (w.rank == 0) {
      record_test(ej, e, epoch_loss / steps_per_epoch, train_s, comm_s, evaluate(model, test));
    }
    epochs.push_back(std::move(ej));
  }
  // The transport's own count of pairs it sent to the switch, before leaving.
  const nlohmann::json stats = ina ? comm->stats() : nlohmann::json::object();
  if (ina) comm->close();
  else gloo->close();
  const auto [first, last] = first_last_loss(losses);
  nlohmann::json rep = {{"rank", w.rank},
                        {"model", "fortunes"},
                        {"backend", c.backend},
                        {"scheme", ina ? c.scheme : ""},
                        {"reducer", reducer_desc},
                        {"parameters", emb_size + fc_size},
                        {"vocabulary", V},
                        {"classes", C},
                        {"dim", d},
                        {"steps", losses.size()},
                        {"steps_per_epoch", steps_per_epoch},
                        {"train_samples", train.size()},
                        {"test_samples", test.size()},
                        {"join_seconds", join_s},
                        {"train_seconds", train_s},
                        {"comm_seconds", comm_s},
                        {"sparse_seconds", sparse_s},
                        {"total_seconds", seconds_since(t_start)},
                        {"first_loss", first},
                        {"last_loss", last},
                        {"step_losses", losses},
                        {"grad_max_abs", grad_max},
                        {"grad_l1_max", grad_l1_max},
                        {"checksum", fmt::format("{:016x}", checksum(params))},
                        {"epochs", epochs}};
  if (ina) {
    rep["sparse"] = {{"hot_set_version", hot_version},
                     {"hot_set_keys", ranked.size()},
                     {"hot_profile_share", hot_profile_share},
                     {"embedding_pairs", emb_pairs},
                     {"hot_pairs_expected", hot_pairs},
                     {"union_keys", union_keys},
                     {"transport", stats.at("transport")}};
  }
  comm.reset();
  gloo.reset();
  write_report(rep, w.report);
  return 0;
}

}  // namespace ina::train
