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
};

// Fills `out` with worker `rank`'s gradient of iteration `iter`.
void synthetic_gradient(uint64_t seed, uint16_t job, unsigned iter, unsigned rank, unsigned nworkers,
                        uint64_t offset, std::span<float> out);
// The exact allreduce result of iteration `iter`, value `offset + k` into out[k].
void synthetic_sum(uint64_t seed, uint16_t job, unsigned iter, unsigned nworkers, uint64_t offset, std::span<float> out);

// Runs the worker; returns the exit status (0 ok, 3 a result mismatched).
// Throws RuntimeError on communication failures.
int run_worker_app(const WorkerAppConfig& cfg);

}  // namespace ina::rt
