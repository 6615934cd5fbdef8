#pragma once
// `ina worker`: K allreduces of S bytes of floats through ina::Communicator,
// each verified bit for bit against the exact reference.
//
// Gradients are a seeded deterministic function of (job, rank, iteration), so
// a worker knows every peer's contribution without seeing it:
//   g_r(i) = q_r(i) * 2^-s(k),
// with q_r(i) the integer of host::SyntheticTensor(stream(seed, job, k), r, n)
// (|q| < 2^17, sum over ranks in closed form) and a shift s(k) in [4, 27]
// varying per iteration k, so the agreed fixed-point scale changes from one
// allreduce to the next. Such floats quantize exactly at the agreed scale,
// hence the sum is exactly (sum_r q_r(i)) * 2^-s(k), checked for every value.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/communicator.hpp"

namespace ina::rt {

struct WorkerAppConfig {
  CommConfig comm;
  uint64_t bytes = 1 << 20;  // per allreduce (floats: bytes / 4)
  unsigned iterations = 1;
  uint64_t seed = 1;
  std::string report;        // JSON report file ("" = none)
  bool log = true;
  // <key, value> schemes (zebra, ps-lite): each allreduce is a sparse one
  // (Communicator::allreduce_sparse, int32 values) of bytes / 4 pairs per
  // worker, keys skewed as a sparse model's are (synthetic_sparse_keys).
  bool sparse = false;
  // Zebra's hot set, installed before the first op: the ranked keys of
  // hot_keys_file (one per line, hottest first), or else the hot_set_size
  // keys most frequent over every rank's first hot_iterations batches (§III-C's
  // sampling-based offline profile; every worker replays them alike, so all
  // send the same list). 0 and no file: none.
  uint64_t hot_set_size = 0;
  unsigned hot_iterations = 1;
  std::string hot_keys_file;
};

// The sparse workload: rank `rank`'s keys of iteration `iter`, `pairs` of
// them, ascending, drawn from 16 x pairs keys (offset by 2^32, clear of a
// dense op's keys on a <key, value> scheme) with index floor(U u^3) for u
// uniform: the first 1 % of the keys draw 21.5 % of the picks, a sparse
// model's few hot rows. Its value for `key` is in [-1000, 1000].
std::vector<uint64_t> synthetic_sparse_keys(uint64_t seed, uint16_t job, unsigned iter, unsigned rank, uint64_t pairs);
uint64_t sparse_key_space(uint64_t pairs);  // the keys a batch of `pairs` draws from: max(64, 16 pairs)
int32_t synthetic_sparse_value(uint64_t seed, uint16_t job, unsigned iter, unsigned rank, uint64_t key);
// The `size` keys most frequent over every rank's first `iterations` batches
// (ties: the smaller key first), hottest first.
std::vector<uint64_t> profile_hot_keys(uint64_t seed, uint16_t job, unsigned nworkers, uint64_t pairs,
                                       unsigned iterations, uint64_t size);
// Ranked keys from a file: one unsigned integer per line ('#' comments,
// blank lines skipped); RuntimeError naming the file and line for anything
// else or a key listed twice, or the file if it lists no key.
std::vector<uint64_t> read_hot_keys_file(const std::string& path);

// Fills `out` with worker `rank`'s gradient of iteration `iter`.
void synthetic_gradient(uint64_t seed, uint16_t job, unsigned iter, unsigned rank, unsigned nworkers,
                        uint64_t offset, std::span<float> out);
// The exact allreduce result of iteration `iter`, value `offset + k` into out[k].
void synthetic_sum(uint64_t seed, uint16_t job, unsigned iter, unsigned nworkers, uint64_t offset, std::span<float> out);

// Runs the worker; returns the exit status (0 ok, 3 a result mismatched).
// Throws RuntimeError on communication failures.
int run_worker_app(const WorkerAppConfig& cfg);

}  // namespace ina::rt
