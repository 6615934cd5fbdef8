#pragma once
// ina-train: data-parallel training of a small MLP (or CNN) on Fashion-MNIST, with
// gradients averaged either by ina::Communicator through `ina switch`
// (a training scheme of schemes/registry.hpp: switchml, atp, dsa) or by gloo (c10d::ProcessGroupGloo), the
// baseline. --model fortunes trains the bag-of-words classifier of
// train/fortunes.hpp instead: its sparse embedding gradient goes through
// Communicator::allreduce_sparse (zebra, ps-lite), the Linear layer's through
// a dense allreduce; with gloo both are one dense allreduce. One executable, two roles:
//  - the launcher (default): starts `ina switch` (+ `ina ps` for atp/dsa) and
//    N copies of itself as workers, supervises them with bounded waits,
//    collects their reports, prints test accuracy per epoch and
//    time-to-accuracy, and checks that every worker ends with bit-identical
//    parameters;
//  - a worker (`--role worker`): trains on its shard and writes a JSON report.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/defaults.hpp"
#include "schemes/registry.hpp"

namespace ina::train {

struct TrainConfig {
  std::string model = "mlp";     // mlp | cnn (Fashion-MNIST) | fortunes (bag of words, sparse embedding gradient)
  std::string backend = "ina";   // ina | gloo
  std::string scheme = std::string(schemes::kDefaultRuntimeScheme);  // ina: a scheme of the registry that runs in training
  unsigned workers = 2;
  unsigned epochs = 3;
  unsigned batch = 64;           // per worker; the global batch is batch x workers
  double lr = 0.05;
  double momentum = 0.9;
  unsigned hidden = 128;         // MLP 784 -> hidden -> 10
  // The mlp's and cnn's packets' DSA priority (the other schemes' switches
  // ignore it): "eq1", DSA's Eq. 1 (host/dsa_priority.hpp) per layer, T_j
  // (the rest of the epoch) and Comm_j / Comp_j measured each step, one
  // allreduce per layer (the last layer's first, as backpropagation yields
  // them); "fixed", one allreduce of the whole model at the communicator's
  // priority.
  std::string priority = "eq1";
  uint64_t seed = 1;
  uint64_t limit_train = 0;      // use the first N training images (0: all 60000)
  uint64_t limit_test = 0;       // evaluate on the first N test images (0: all 10000)
  double target_acc = 0.85;      // time-to-accuracy target (test accuracy, 0..1)
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  // fortunes: embedding width d, and Zebra's hot set: the rows most often
  // in the first hot_iterations iterations' batches of all workers, hot_keys
  // keys at most (d keys a row; 0: no hot set).
  unsigned dim = 16;
  unsigned hot_iterations = 20;
  uint64_t hot_keys = 32768;     // the switch's default table entries
  uint16_t payload = rt::kDefaultPayload;  // ina: int32 values per packet (runtime/defaults.hpp)
  uint64_t memory_bytes = 5'000'000;
  double timeout_s = 600;        // whole run (launcher), and the workers' collective timeout
  std::string json_out;
  std::string ina_binary;        // empty: `ina` next to ina-train
  // ina: communicator settings as NAME=VALUE, NAME a key of docs/runtime.md's
  // [communicator] (or section.key, e.g. faults.loss), given to every worker
  // (the environment's INA_* never reach them).
  std::vector<std::string> comm;
  bool verbose = false;
};

// Worker-only settings, filled by the launcher.
struct WorkerConfig {
  TrainConfig train;
  unsigned rank = 0;
  std::string switch_addr;       // ina
  uint16_t job = 1;              // ina
  std::string store_path;        // gloo: FileStore
  std::string host = "127.0.0.1";  // gloo: this worker's address for its peers
  std::string report;            // JSON report written at the end
};

// One Fashion-MNIST split: images as float [n][784] normalized, labels 0..9.
struct Dataset {
  uint64_t n = 0;
  std::vector<float> images;
  std::vector<int64_t> labels;
};

// Reads `<dir>/<prefix>-images-idx3-ubyte.gz` and the labels (gzip via
// `gzip -dc`); keeps the first `limit` samples (0: all). Throws std::runtime_error.
Dataset load_fashion_mnist(const std::string& dir, const std::string& prefix, uint64_t limit);

// The sample order of an epoch: the same permutation of [0, n) on every
// worker (seeded by seed and epoch); worker r of N takes positions r, r+N, ...
std::vector<uint64_t> epoch_order(uint64_t n, uint64_t seed, unsigned epoch);

// Runs a worker; returns the process exit status.
int run_worker(const WorkerConfig& cfg);
// The fortunes model's worker (fortunes_worker.cpp); run_worker calls it. Throws on failure.
int run_fortunes_worker(const WorkerConfig& cfg);

// Runs the launcher; returns the process exit status (0 ok, 1 failure,
// 2 parameters differ between workers, 130/143 interrupted).
int run_launcher(const TrainConfig& cfg, const std::string& self_exe);

// ina-sparse-trace's command line (sparse_trace.cpp): records which embedding
// keys each worker's gradient touches, per iteration, as an ina-sparse-trace 1 file.
int sparse_trace_main(int argc, char** argv);

}  // namespace ina::train
