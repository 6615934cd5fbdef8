#pragma once
// Sparse training workloads (Zebra): which parameters (keys) get a
// non-zero gradient at each worker in each iteration. Two kinds of source:
//   - synthetic: heavy-tailed key frequencies fitted to the Zebra paper's
//     Fig. 4 points (OA-, SE-, DeepLight-, NCF- and LSTM-like), sampled per
//     (iteration, worker), seeded and deterministic;
//   - a recorded trace (a real model's embedding rows with non-zero
//     gradients per worker and iteration; format in docs/zebra.md).
// Values are not part of a workload: the simulator and tests derive exact
// values from (seed, iteration, worker, key) with sparse_value().
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ina::workload {

class SparseSource {
 public:
  virtual ~SparseSource() = default;
  virtual std::string name() const = 0;
  virtual uint64_t num_params() const = 0;  // model size n: every key is < n
  virtual unsigned workers() const = 0;     // the worker count the source was made for
  virtual unsigned iterations() const = 0;  // iterations available (synthetic: as asked)
  // Keys with a non-zero gradient at `worker` in `iteration`, strictly ascending.
  virtual std::vector<uint64_t> keys(unsigned iteration, unsigned worker) const = 0;
};

// A synthetic workload's parameters (see sparse.cpp and docs/zebra.md for
// the fit to Fig. 4). Per (iteration, worker) batch: the `head` hottest
// ranks, and the distinct ranks of `draws` draws from P(r) ~ (r - head + q)^-s
// over the other ranks; ranks map to keys by a fixed bijection of [0, params).
struct SparseModelSpec {
  std::string name;            // "oa", "se", "deeplight", "ncf", "lstm"
  uint64_t params = 0;         // n
  uint64_t head = 0;           // always-activated hottest ranks per batch
  uint64_t draws = 0;          // draws per batch (feature activations)
  double s = 1, q = 1;         // Zipf-Mandelbrot exponent and shift
  // The paper's Fig. 4 points the fit matches: (k, T_k / T_n).
  std::vector<std::pair<uint64_t, double>> paper;
};
const std::vector<SparseModelSpec>& sparse_models();
const SparseModelSpec* find_sparse_model(std::string_view name);  // nullptr if unknown

// A seeded synthetic source for `workers` workers and `iterations` iterations.
// `scale` in (0, 1] shrinks params and nnz_per_worker together (simulation size).
std::unique_ptr<SparseSource> make_synthetic(const SparseModelSpec& m, unsigned workers,
                                             unsigned iterations, uint64_t seed, double scale = 1.0);

// The expected T_k / T_n of the full-size workload: the share of all
// updates (batches a key appears in) that the k hottest keys take.
double expected_top_share(const SparseModelSpec& m, uint64_t k);

// Each key of `src` as a row of `width` values: key k becomes the keys
// k * width + j, j < width (an embedding row of `width` scalars; the
// model has num_params() x width scalars). width 1: `src` as it is.
std::unique_ptr<SparseSource> with_row_width(std::unique_ptr<SparseSource> src, unsigned width);

// A recorded trace (file format in docs/zebra.md); throws std::runtime_error
// naming the file, line and field on bad input.
std::unique_ptr<SparseSource> load_trace(const std::string& path);
void write_trace(const SparseSource& s, const std::string& path);

// The exact test value of key `key` at (iteration, worker): a small non-zero
// integer, deterministic in all arguments, so any sum over workers is exact in int32.
int32_t sparse_value(uint64_t seed, unsigned iteration, unsigned worker, uint64_t key);
// A float gradient for the float16 value arithmetic (KvArith::Float16Table),
// deterministic in all arguments: normal with a heavy tail, N(0, sigma^2)
// with probability 0.95 and N(0, (16 sigma)^2) with probability 0.05.
float sparse_gradient(uint64_t seed, unsigned iteration, unsigned worker, uint64_t key, double sigma = 0.01);

}  // namespace ina::workload
