#include "runtime/worker_app.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "core/rng.hpp"
#include "host/tensor_io.hpp"

namespace ina::rt {

namespace {

uint64_t stream_of(uint64_t seed, uint16_t job, unsigned iter) {
  return mix(seed, (static_cast<uint64_t>(job) << 32) | iter);
}

int shift_of(uint64_t seed, uint16_t job, unsigned iter) {
  return 4 + static_cast<int>(mix(stream_of(seed, job, iter), 0x5417) % 24);
}

constexpr size_t kChunk = 1 << 16;

}  // namespace

void synthetic_gradient(uint64_t seed, uint16_t job, unsigned iter, unsigned rank, unsigned nworkers,
                        uint64_t offset, std::span<float> out) {
  host::SyntheticTensor t(stream_of(seed, job, iter), rank, nworkers);
  const float unit = std::ldexp(1.0f, -shift_of(seed, job, iter));  // a power of two: q * unit is exact
  std::vector<int32_t> q(std::min(out.size(), kChunk));
  for (size_t at = 0; at < out.size(); at += kChunk) {
    const size_t n = std::min(kChunk, out.size() - at);
    t.read_gradient(offset + at, std::span<int32_t>(q.data(), n));
    for (size_t k = 0; k < n; ++k) out[at + k] = static_cast<float>(q[k]) * unit;
  }
}

void synthetic_sum(uint64_t seed, uint16_t job, unsigned iter, unsigned nworkers, uint64_t offset,
                   std::span<float> out) {
  host::SyntheticTensor t(stream_of(seed, job, iter), 0, nworkers);
  const float unit = std::ldexp(1.0f, -shift_of(seed, job, iter));
  for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<float>(t.expected(offset + k)) * unit;
}

int run_worker_app(const WorkerAppConfig& cfg) {
  if (cfg.bytes < 4) throw RuntimeError("worker: --size must be at least 4 bytes (one float)");
  const size_t n = cfg.bytes / 4;
  const auto& c = cfg.comm;
  const std::string who = fmt::format("ina worker job {} rank {}", c.job, c.rank);
  std::vector<float> grad(n), expect(std::min(n, kChunk));
  Communicator comm(c);
  nlohmann::json iters = nlohmann::json::array();
  uint64_t mismatches = 0, verified = 0;
  nlohmann::json first_bad;
  double total_s = 0, cpu_s = 0;  // inside allreduce: wall, and this process's CPU (all threads)
  for (unsigned k = 0; k < cfg.iterations; ++k) {
    synthetic_gradient(cfg.seed, c.job, k, c.rank, c.nworkers, 0, grad);
    // A barrier (a one-value allreduce) before the clock starts, as the gloo
    // and MPI baselines do: otherwise a peer still verifying the previous
    // result would count in this worker's time.
    if (c.nworkers > 1) {
      float token = 1;
      comm.allreduce(std::span<float>(&token, 1));
    }
    const Time t0 = monotonic_now();
    const double c0 = process_cpu_seconds();
    const AllreduceInfo info = comm.allreduce(std::span<float>(grad));
    const double secs = to_ms(monotonic_now() - t0) / 1000;
    total_s += secs;
    cpu_s += process_cpu_seconds() - c0;
    uint64_t bad = 0;
    for (size_t at = 0; at < n; at += kChunk) {
      const size_t m = std::min(kChunk, n - at);
      synthetic_sum(cfg.seed, c.job, k, c.nworkers, at, std::span<float>(expect.data(), m));
      for (size_t i = 0; i < m; ++i)
        if (std::memcmp(&grad[at + i], &expect[i], sizeof(float)) != 0) {
          if (bad++ == 0 && first_bad.is_null())
            first_bad = {{"iteration", k}, {"index", at + i}, {"got", grad[at + i]}, {"expected", expect[i]}};
        }
    }
    mismatches += bad;
    verified += n - bad;
    iters.push_back({{"seconds", secs}, {"scale", info.scale}, {"mismatches", bad}});
    if (bad && cfg.log)
      std::fprintf(stderr, "%s: allreduce %u: %llu of %zu values differ from the exact sum\n", who.c_str(), k,
                   static_cast<unsigned long long>(bad), n);
  }
  comm.close();
  const nlohmann::json report = {
      {"job", c.job}, {"rank", c.rank}, {"workers", c.nworkers}, {"iterations", cfg.iterations},
      {"bytes", cfg.bytes}, {"elements", n}, {"verified", verified}, {"mismatches", mismatches},
      {"first_mismatch", first_bad}, {"allreduce_seconds", total_s}, {"allreduce_cpu_seconds", cpu_s},
      {"per_iteration", iters},
      {"policy", comm.policy()}, {"payload", comm.payload_values()}, {"stats", comm.stats()},
      {"config", c.to_json()}};
  if (!cfg.report.empty()) {
    std::ofstream out(cfg.report);
    out << report.dump(1) << "\n";
    if (!out) throw RuntimeError(fmt::format("{}: cannot write the report '{}'", who, cfg.report));
  }
  if (cfg.log)
    std::fprintf(stderr, "%s: %u allreduces of %zu floats, %s, %.3f s in allreduce\n", who.c_str(), cfg.iterations,
                 n, mismatches ? "RESULTS DIFFER" : "all exact", total_s);
  return mismatches ? 3 : 0;
}

}  // namespace ina::rt
