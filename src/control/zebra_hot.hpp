#pragma once
// Zebra's hot-parameter identification (paper §III-C): Principle 1 (how many
// keys are hot), the sampling-based offline method, the iteration-based online
// method with its Kendall-tau update rule, and the precision metrics of §V-C.
#include <cstdint>
#include <optional>
#include <vector>

#include "dataplane/zebra_layout.hpp"
#include "workload/sparse.hpp"

namespace ina::control::zebra {

// Update frequency of every key seen, most frequent first (ties: smaller key first).
struct Ranking {
  std::vector<uint64_t> keys;
  std::vector<uint64_t> freq;  // same order
  uint64_t total = 0;          // T_n: all updates (incl. keys not listed if truncated)
};
// Counts updates over iterations [first, first + count) of the first
// `workers` workers (0: all of the source's); a sample_rate < 1 keeps that
// fraction of the (iteration, worker) batches, each kept or not by a seeded
// hash — the sampling-based offline method's "small training dataset".
Ranking count_updates(const workload::SparseSource& s, unsigned first, unsigned count,
                      double sample_rate = 1.0, uint64_t seed = 1, unsigned workers = 0);

// Principle 1: the smallest k with T_k / T_n >= p and 4 B * k <= c * m_bytes
// (c in (0, 1]: 1 when m_bytes is already the share for aggregation);
// nullopt if p cannot be reached within the memory bound.
std::optional<size_t> principle1(const Ranking& r, double p, double c, uint64_t m_bytes);

// §V-C's hot list H: from the top, add `step` keys at a time while a step
// adds at least `threshold` of T_n (the paper: 1,000 keys, 1 %).
std::vector<uint64_t> hot_by_increment(const Ranking& r, size_t step = 1000, double threshold = 0.01);

// Kendall tau (rank correlation in [-1, 1]) between two rankings (keys, best
// first) over their common keys: (concordant - discordant pairs) / all pairs,
// O(m log m) for m common keys; NaN if fewer than two keys are common.
// The normalized Kendall tau distance (discordant pairs / all pairs, 0 =
// same order) is (1 - tau) / 2.
double kendall_tau(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);
// Precision |Hg ∩ Hs| / |Hg|.
double precision(const std::vector<uint64_t>& hg, const std::vector<uint64_t>& hs);

}  // namespace ina::control::zebra
