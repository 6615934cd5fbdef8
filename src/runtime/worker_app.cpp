#include "runtime/worker_app.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "core/counted.hpp"
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

namespace {

constexpr uint64_t kSparseKeyBase = uint64_t{1} << 32;

uint64_t sparse_stream(uint64_t seed, uint16_t job, unsigned iter, unsigned rank) {
  return mix(mix(stream_of(seed, job, iter), 0x5ba75e), rank);
}

}  // namespace

uint64_t sparse_key_space(uint64_t pairs) { return std::max<uint64_t>(64, 16 * pairs); }

std::vector<uint64_t> synthetic_sparse_keys(uint64_t seed, uint16_t job, unsigned iter, unsigned rank, uint64_t pairs) {
  const uint64_t space = sparse_key_space(pairs);
  Rng rng(sparse_stream(seed, job, iter, rank));
  std::vector<bool> picked(space, false);  // 2 bytes per pair
  uint64_t n = 0;
  auto pick = [&](uint64_t k) {
    if (!picked[k]) {
      picked[k] = true;
      ++n;
    }
  };
  // Skewed picks; the head saturates, so past 8 picks per key the rest are uniform.
  for (uint64_t tries = 0; n < pairs && tries < 8 * pairs; ++tries) {
    const double u = rng.uniform();
    pick(std::min(space - 1, static_cast<uint64_t>(static_cast<double>(space) * u * u * u)));
  }
  while (n < pairs) pick(rng.next() % space);
  std::vector<uint64_t> keys;
  keys.reserve(pairs);
  for (uint64_t k = 0; k < space; ++k)
    if (picked[k]) keys.push_back(kSparseKeyBase + k);
  return keys;
}

int32_t synthetic_sparse_value(uint64_t seed, uint16_t job, unsigned iter, unsigned rank, uint64_t key) {
  return static_cast<int32_t>(mix(sparse_stream(seed, job, iter, rank), key) % 2001) - 1000;
}

std::vector<uint64_t> profile_hot_keys(uint64_t seed, uint16_t job, unsigned nworkers, uint64_t pairs,
                                       unsigned iterations, uint64_t size) {
  std::vector<uint32_t> count(sparse_key_space(pairs), 0);  // by key - 2^32
  for (unsigned k = 0; k < iterations; ++k)
    for (unsigned r = 0; r < nworkers; ++r)
      for (const uint64_t key : synthetic_sparse_keys(seed, job, k, r, pairs)) ++count[key - kSparseKeyBase];
  std::vector<uint64_t> keys;  // the keys seen, by count (descending) then key
  for (uint64_t i = 0; i < count.size(); ++i)
    if (count[i]) keys.push_back(i);
  std::stable_sort(keys.begin(), keys.end(), [&](uint64_t a, uint64_t b) { return count[a] > count[b]; });
  if (keys.size() > size) keys.resize(size);
  for (uint64_t& k : keys) k += kSparseKeyBase;
  return keys;
}

std::vector<uint64_t> read_hot_keys_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("cannot read the hot keys file '{}'", path));
  std::vector<uint64_t> keys;
  std::unordered_map<uint64_t, size_t> line_of;
  std::string line;
  for (size_t no = 1; std::getline(in, line); ++no) {
    const size_t at = line.find_first_not_of(" \t\r");
    if (at == std::string::npos || line[at] == '#') continue;
    const size_t end = line.find_last_not_of(" \t\r");
    const std::string word = line.substr(at, end - at + 1);
    uint64_t key = 0;
    const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), key);
    if (ec != std::errc{} || ptr != word.data() + word.size() || key == UINT64_MAX)
      throw InputError(fmt::format("{}:{}: '{}' is not a key (an unsigned integer below 2^64 - 1)", path, no, word));
    if (const auto [it, added] = line_of.emplace(key, no); !added)
      throw InputError(fmt::format("{}:{}: key {} is listed twice (first at line {})", path, no, key, it->second));
    keys.push_back(key);
  }
  if (keys.empty()) throw InputError(fmt::format("the hot keys file '{}' lists no key", path));
  return keys;
}

namespace {

// Closes the communicator and writes cfg.report (if any): the run's fields
// and the job's, the communicator's statistics and configuration.
void write_report(const WorkerAppConfig& cfg, Communicator& comm, const std::string& who, nlohmann::json report) {
  comm.close();
  const auto& c = cfg.comm;
  report.update({{"job", c.job}, {"rank", c.rank}, {"workers", c.nworkers}, {"iterations", cfg.iterations},
                 {"bytes", cfg.bytes}, {"policy", comm.policy()}, {"payload", comm.payload_values()},
                 {"stats", comm.stats()}, {"config", c.to_json()}});
  if (cfg.report.empty()) return;
  std::ofstream out(cfg.report);
  out << report.dump(1) << "\n";
  if (!out) throw RuntimeError(fmt::format("{}: cannot write the report '{}'", who, cfg.report));
}

// The sparse ops of run_worker_app: the hot set first (Zebra), then
// cfg.iterations verified allreduce_sparse calls.
// `file_keys`: the hot keys file's, read before the job was joined (else empty).
int run_sparse(const WorkerAppConfig& cfg, Communicator& comm, const std::string& who, std::vector<uint64_t> file_keys) {
  const auto& c = cfg.comm;
  const uint64_t pairs = cfg.bytes / 4;
  nlohmann::json hot = nullptr;
  std::unordered_set<uint64_t> hot_keys;  // at most the switch's table
  if (!cfg.hot_keys_file.empty() || cfg.hot_set_size > 0) {
    const std::vector<uint64_t> ranked =
        !cfg.hot_keys_file.empty() ? std::move(file_keys)
                                   : profile_hot_keys(cfg.seed, c.job, c.nworkers, pairs, cfg.hot_iterations, cfg.hot_set_size);
    const uint32_t version = comm.set_hot_keys(ranked);
    if (version) hot_keys.insert(ranked.begin(), ranked.end());
    hot = {{"keys", ranked.size()}, {"version", version},
           {"source", cfg.hot_keys_file.empty() ? "profile of " + counted(cfg.hot_iterations, "iteration")
                                                : cfg.hot_keys_file}};
  }
  if (hot.is_null() && comm.policy() == "sparse-hot" && cfg.log)
    std::fprintf(stderr, "%s: WARNING: a zebra job without a hot set: the switch aggregates nothing, every pair goes "
                         "to the PS (give --hot-set-size or --hot-keys)\n", who.c_str());
  nlohmann::json iters = nlohmann::json::array();
  uint64_t mismatches = 0, verified = 0, sent_pairs = 0, hot_pairs = 0;
  std::vector<int32_t> want(sparse_key_space(pairs));  // by key - 2^32
  std::vector<bool> in_union(want.size());
  nlohmann::json first_bad;
  double total_s = 0, cpu_s = 0;
  for (unsigned k = 0; k < cfg.iterations; ++k) {
    const std::vector<uint64_t> keys = synthetic_sparse_keys(cfg.seed, c.job, k, c.rank, pairs);
    std::vector<int32_t> vals(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      vals[i] = synthetic_sparse_value(cfg.seed, c.job, k, c.rank, keys[i]);
      hot_pairs += hot_keys.count(keys[i]);
    }
    sent_pairs += keys.size();
    if (c.nworkers > 1) {  // a barrier before the clock starts (see the dense loop)
      float token = 1;
      comm.allreduce(std::span<float>(&token, 1));
    }
    const Time t0 = monotonic_now();
    const double c0 = process_cpu_seconds();
    const SparseResult<int32_t> got = comm.allreduce_sparse(keys, vals);
    const double secs = to_ms(monotonic_now() - t0) / 1000;
    total_s += secs;
    cpu_s += process_cpu_seconds() - c0;
    // The exact result: every rank's pairs, summed per key (|sum| <= 1000 x 64
    // workers: int32), over the bounded key space.
    std::fill(want.begin(), want.end(), 0);
    std::fill(in_union.begin(), in_union.end(), false);
    uint64_t union_size = 0;
    for (unsigned r = 0; r < c.nworkers; ++r)
      for (const uint64_t key : synthetic_sparse_keys(cfg.seed, c.job, k, r, pairs)) {
        const uint64_t i = key - kSparseKeyBase;
        want[i] += synthetic_sparse_value(cfg.seed, c.job, k, r, key);
        if (!in_union[i]) {
          in_union[i] = true;
          ++union_size;
        }
      }
    // A key of the result outside the union, or with a wrong sum, is a
    // mismatch; so is each key of the union the result lacks.
    uint64_t bad = 0, right = 0;
    for (size_t i = 0; i < got.keys.size(); ++i) {
      const uint64_t x = got.keys[i] - kSparseKeyBase;
      const bool ok = got.keys[i] >= kSparseKeyBase && x < want.size() && in_union[x] && got.values[i] == want[x] &&
                      (i == 0 || got.keys[i] > got.keys[i - 1]);
      if (ok) {
        ++right;
        continue;
      }
      if (bad++ == 0 && first_bad.is_null())
        first_bad = {{"iteration", k}, {"index", i}, {"key", got.keys[i]}, {"got", got.values[i]},
                     {"expected", x < want.size() && in_union[x] ? nlohmann::json(want[x]) : nlohmann::json("no such key")}};
    }
    if (right < union_size) {
      if (bad == 0 && first_bad.is_null())
        first_bad = {{"iteration", k}, {"missing_keys", union_size - right}};
      bad += union_size - right;
    }
    mismatches += bad;
    verified += right;
    iters.push_back({{"seconds", secs}, {"pairs", keys.size()}, {"union", union_size}, {"mismatches", bad}});
    if (bad && cfg.log)
      std::fprintf(stderr, "%s: sparse allreduce %u: %llu of %llu keys differ from the exact sum\n", who.c_str(), k,
                   static_cast<unsigned long long>(bad), static_cast<unsigned long long>(union_size));
  }
  write_report(cfg, comm, who,
               {{"sparse", true}, {"elements", pairs}, {"pairs_sent", sent_pairs}, {"hot_pairs_sent", hot_pairs},
                {"hot_set", hot}, {"verified", verified}, {"mismatches", mismatches}, {"first_mismatch", first_bad},
                {"allreduce_seconds", total_s}, {"allreduce_cpu_seconds", cpu_s}, {"per_iteration", iters}});
  if (cfg.log)
    std::fprintf(stderr, "%s: %s of %llu pairs (%llu of them hot), %s, %.3f s in allreduce\n", who.c_str(),
                 counted(cfg.iterations, "sparse allreduce").c_str(), static_cast<unsigned long long>(pairs),
                 static_cast<unsigned long long>(hot_pairs), mismatches ? "RESULTS DIFFER" : "all exact", total_s);
  return mismatches ? 3 : 0;
}

}  // namespace

int run_worker_app(const WorkerAppConfig& cfg) {
  if (cfg.bytes < 4) throw InputError("worker: --size must be at least 4 bytes (one float)");
  const size_t n = cfg.bytes / 4;
  const auto& c = cfg.comm;
  const std::string who = fmt::format("ina worker job {} rank {}", c.job, c.rank);
  if (cfg.sparse) {
    // (The file before joining: a bad one is this command's input, not a job's failure.)
    std::vector<uint64_t> file_keys = cfg.hot_keys_file.empty() ? std::vector<uint64_t>{} : read_hot_keys_file(cfg.hot_keys_file);
    Communicator comm(c);
    return run_sparse(cfg, comm, who, std::move(file_keys));
  }
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
  write_report(cfg, comm, who,
               {{"elements", n}, {"verified", verified}, {"mismatches", mismatches}, {"first_mismatch", first_bad},
                {"allreduce_seconds", total_s}, {"allreduce_cpu_seconds", cpu_s}, {"per_iteration", iters}});
  if (cfg.log)
    std::fprintf(stderr, "%s: %s of %zu floats, %s, %.3f s in allreduce\n", who.c_str(),
                 counted(cfg.iterations, "allreduce").c_str(),
                 n, mismatches ? "RESULTS DIFFER" : "all exact", total_s);
  return mismatches ? 3 : 0;
}

}  // namespace ina::rt
