#include "experiment/estimate_sparse.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

#include "experiment/sparse_point.hpp"
#include "wire/kv.hpp"
#include "wire/packet.hpp"
#include "schemes/registry.hpp"

namespace ina::exp {
namespace {

// Bytes of the structures that grow with the workload, mirrored from the
// layers that own them. Measured on scenarios/zebra/diagnose/row_width.toml
// (DeepLight, 16 workers, rows of 4 values) with heaptrack, where they are
// 96 % of the 507 MB heap at the peak:
//  - experiment/sparse.cpp SparseStar::push_: every worker's keys (8 B) and
//    values (4 B) of every measured iteration (40.5 MB for 3.38 M pairs);
constexpr uint64_t kPushBytes = 12;
//  - its exact sums per key of each iteration's union, std::unordered_map
//    nodes (key, int64, next: 32 B chunks) and buckets (59.5 MB for 1.52 M
//    keys, 39 B each); float sums (sum, abs, n) take a 48 B chunk;
constexpr uint64_t kExactKeyBytes = 40, kExactFloatKeyBytes = 56;
//  - host::SparseWorker::sums_: a (key, sum) pair of 16 B per key of the
//    union the worker receives, in a vector grown by doubling and kept
//    across iterations, so a power of two of the largest union per worker
//    (268 MB of capacity for 16 workers and 0.76 M keys; 329 MB at the
//    peak, some workers mid-growth holding both buffers: the estimate
//    counts the capacity, and its other parts lean high);
constexpr uint64_t kResultBytes = 16;
//  - host::SparseWorker::pairs_: its batch as (key, value) pairs of 16 B,
//    grown by doubling and kept;
constexpr uint64_t kBatchPairBytes = 16;
//  - host::SparsePs: the sums of the iteration's union (an unordered_map of
//    32 B chunks and buckets) and the results' (key, sum) vector of 16 B;
constexpr uint64_t kPsKeyBytes = 40 + 16;
//  - control::zebra::count_updates (Zebra's hot-set profile, before the
//    run starts and freed after): a count per distinct key (40 B) and its
//    sorted copy and ranking (32 B) (36.6 MB for the map alone here);
constexpr uint64_t kProfileKeyBytes = 72;
//  - the dense scheme on a sparse model (run_dense): each worker's keys
//    (8 B per pair) twice (the op's copy) and its values (4 B, grown by
//    doubling: up to 8), the sorted exact sums per union key (16 B, grown
//    by doubling, every iteration's kept).
constexpr uint64_t kDensePairBytes = 24;
// The packet pool (wire/packet.hpp) keeps every packet it ever held at once,
// in slabs of 4096. A sparse run's windows do not bound that: the switch's
// hot results (a copy per worker), the PS's and the pushes of an iteration
// may all be in flight or queued at once (the workers' shared NICs, the
// switch CPU's 2.225 ms link). On zebra/fig11 (OA, 16 workers on 8 NICs) the
// pool peaks at 28 slabs (114 688 packets of 1528 B, 175 MB); an
// iteration's packets by the count below are 94 000.
constexpr uint64_t kPoolSlab = 4096;

constexpr unsigned kEstimateSeed = 1;

uint64_t pow2(uint64_t n) { return n ? std::bit_ceil(n) : 0; }

// The union of the workers' batches of iteration `it` (rows).
uint64_t union_of(const workload::SparseSource& src, unsigned it, unsigned workers, uint64_t* pairs,
                  uint64_t* max_batch) {
  std::vector<uint64_t> all;
  for (unsigned w = 0; w < workers; ++w) {
    const auto k = src.keys(it, w);
    if (pairs) *pairs += k.size();
    if (max_batch) *max_batch = std::max<uint64_t>(*max_batch, k.size());
    all.insert(all.end(), k.begin(), k.end());
  }
  std::sort(all.begin(), all.end());
  return static_cast<uint64_t>(std::unique(all.begin(), all.end()) - all.begin());
}

}  // namespace

SparseSizes sparse_sizes(const Settings& s) {
  using Key = std::tuple<std::string, std::string, double, int, int, int, int>;
  static std::mutex mu;
  static std::map<Key, SparseSizes> memo;  // by workload, before the row width
  // The trace as the run resolves it (against the scenario's directory).
  const std::string trace = s.sparse_trace.empty() ? "" : s.scenario_dir + "/" + s.sparse_trace;
  const Key key{s.sparse_model, trace, s.sparse_scale, s.sparse_draws,
                s.workers_per_job, s.iterations, s.profile_iterations};
  SparseSizes rows;
  bool known = false;
  {
    std::lock_guard lock(mu);
    if (auto it = memo.find(key); it != memo.end()) {
      rows = it->second;
      known = true;
    }
  }
  if (!known) {
    const auto src = sparse_rows(s, kEstimateSeed);
    const auto N = static_cast<unsigned>(s.workers_per_job);
    const auto first = static_cast<unsigned>(s.profile_iterations);
    for (unsigned i = 0; i < static_cast<unsigned>(s.iterations); ++i) {
      const uint64_t u = union_of(*src, first + i, N, &rows.pairs, &rows.max_batch);
      rows.union_keys += u;
      rows.max_union = std::max(rows.max_union, u);
    }
    // The profile: its own iterations, or the measured ones (sample_rate 1:
    // every batch; a sample counts fewer, so this is the upper end).
    if (first > 0) {
      std::vector<uint64_t> all;
      for (unsigned it = 0; it < first; ++it)
        for (unsigned w = 0; w < N; ++w) {
          const auto k = src->keys(it, w);
          all.insert(all.end(), k.begin(), k.end());
        }
      std::sort(all.begin(), all.end());
      rows.profile_union = static_cast<uint64_t>(std::unique(all.begin(), all.end()) - all.begin());
    } else {
      rows.profile_union = rows.union_keys;  // at most the sum of the unions
    }
    std::lock_guard lock(mu);
    memo.emplace(key, rows);
  }
  // A row of W keys: every count x W (k -> k W + j is one to one).
  const auto W = static_cast<uint64_t>(std::max(1, s.sparse_row_width));
  return {rows.pairs * W, rows.union_keys * W, rows.max_union * W, rows.max_batch * W, rows.profile_union * W};
}

std::vector<MemoryPart> sparse_parts(const Settings& s, const std::string& scheme) {
  const SparseSizes z = sparse_sizes(s);
  const auto N = static_cast<uint64_t>(s.workers_per_job);
  const schemes::Scheme* spec = schemes::lookup(scheme);
  const bool dense = spec && spec->sparse == schemes::Sparse::Dense;
  const bool hot = spec && spec->sparse == schemes::Sparse::HotIna;
  // The pool's packets (experiment/sparse.cpp: a dense packet's values or
  // the largest KV packet) and an iteration's packets: the pushes, and each
  // worker's results of the union: with zebra.hot_results = "via-ps" all
  // from the PS in packets of zebra.ps_pairs, after the switch's hot results
  // reach the PS in packets of zebra.pairs; with "multicast" the hot part
  // from the switch in packets of zebra.pairs, the rest from the PS.
  const auto K = static_cast<uint64_t>(std::max(1, s.pairs));
  const auto KP = static_cast<uint64_t>(s.ps_pairs > 0 ? s.ps_pairs : s.pairs);
  const uint64_t iters = static_cast<uint64_t>(std::max(1, s.iterations));
  const uint64_t per_iter = (z.pairs + iters - 1) / iters;
  uint64_t packets = 0, capacity = 0;
  if (dense) {
    capacity = static_cast<uint64_t>(s.payload_bytes / 4);
    packets = 2 * N * std::max<uint64_t>(1, static_cast<uint64_t>(s.init_window_kb * 1000 /
                                                                   static_cast<double>(s.header_bytes + s.payload_bytes)));
  } else {
    capacity = kv::words(static_cast<unsigned>(std::max(K, KP)));
    // zebra.hot_keys counts keys after the row width (scalars), x sparse_scale.
    const uint64_t hot_keys =
        hot ? std::min<uint64_t>(z.max_union, static_cast<uint64_t>(std::llround(s.hot_keys * s.sparse_scale))) : 0;
    if (hot && s.zebra_hot_results == "via-ps")
      packets = per_iter / K + (hot_keys + K - 1) / K + N * ((z.max_union + KP - 1) / KP);
    else
      packets = per_iter / (hot ? K : KP) + N * ((hot_keys + K - 1) / K + (z.max_union - hot_keys + KP - 1) / KP);
  }
  const uint64_t stride = (sizeof(Packet) + 4 * capacity + alignof(Packet) - 1) / alignof(Packet) * alignof(Packet);
  const MemoryPart pool{"packet pool", "keys of an iteration's union x workload.workers_per_job / zebra.pairs",
                        (packets + kPoolSlab) / kPoolSlab * kPoolSlab * stride};
  std::vector<MemoryPart> parts;
  if (dense) {
    parts = {
        {"sparse pushes and their copies", "workload.workers_per_job x workload.iterations x keys per batch",
         z.pairs * kDensePairBytes},
        {"exact sums", "workload.iterations x keys of an iteration's union",
         pow2(z.max_union) * kResultBytes * static_cast<uint64_t>(std::max(1, s.iterations))},
        pool,
    };
  } else {
    const bool fl = s.zebra_arith != "fixed";
    const uint64_t main = z.pairs * kPushBytes + z.union_keys * (fl ? kExactFloatKeyBytes : kExactKeyBytes) +
                          N * pow2(z.max_union) * kResultBytes + N * pow2(z.max_batch) * kBatchPairBytes +
                          z.max_union * kPsKeyBytes + pool.bytes;
    parts = {
        {"workers' received sums", "workload.workers_per_job x keys of an iteration's union",
         N * pow2(z.max_union) * kResultBytes},
        {"exact sums", "workload.iterations x keys of an iteration's union",
         z.union_keys * (fl ? kExactFloatKeyBytes : kExactKeyBytes)},
        {"sparse pushes", "workload.workers_per_job x workload.iterations x keys per batch", z.pairs * kPushBytes},
        {"workers' packet pairs", "workload.workers_per_job x keys per batch", N * pow2(z.max_batch) * kBatchPairBytes},
        {"PS sums", "keys of an iteration's union", z.max_union * kPsKeyBytes},
        pool,
    };
    // The profile runs before the rest and frees its memory, which the run
    // reuses: it adds only what it needs beyond the run's own.
    const uint64_t profile = spec && spec->sparse == schemes::Sparse::HotIna ? z.profile_union * kProfileKeyBytes : 0;
    if (profile > main) parts.push_back({"hot-set profile (beyond the run's own)", "zebra.profile_iterations", profile - main});
  }
  return parts;
}

}  // namespace ina::exp
