#pragma once
// Zebra's hot-parameter identification (paper §III-C): Principle 1 (how many
// keys are hot), the sampling-based offline method, the iteration-based online
// method with its Kendall-tau update rule, and the precision metrics of §V-C.
#include <cstdint>
#include <optional>
#include <vector>

#include "control/zebra_layout.hpp"
#include "workload/sparse.hpp"

namespace ina::control::zebra {

// Update frequency of every key seen, most frequent first (ties: smaller key first).
struct Ranking {
  std::vector<uint64_t> keys;
  std::vector<uint64_t> freq;  // same order
  uint64_t total = 0;          // T_n: all updates (incl. keys not listed if truncated)
};
// Counts updates over iterations [first, first + count) of every worker
// (a sample_rate < 1 keeps that fraction of the (iteration, worker) batches, seeded).
Ranking count_updates(const workload::SparseSource& s, unsigned first, unsigned count,
                      double sample_rate = 1.0, uint64_t seed = 1);

// Principle 1: the smallest k with T_k / T_n >= p and 4 B * k <= c * m_bytes;
// nullopt if p cannot be reached within the memory bound.
std::optional<size_t> principle1(const Ranking& r, double p, double c, uint64_t m_bytes);

// Kendall tau (rank correlation in [-1, 1]) between two rankings over their common keys.
double kendall_tau(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);
// Precision |Hg ∩ Hs| / |Hg|.
double precision(const std::vector<uint64_t>& hg, const std::vector<uint64_t>& hs);

}  // namespace ina::control::zebra
