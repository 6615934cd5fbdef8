#include "control/zebra_hot.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

namespace ina::control::zebra {
namespace {

// Whether batch (iteration, worker) is in a sample of rate `rate` (seeded, independent per batch).
bool sampled(uint64_t seed, unsigned it, unsigned w, double rate) {
  if (rate >= 1) return true;
  uint64_t x = (seed + 0x632BE59BD9B4E019ULL) * 0x9E3779B97F4A7C15ULL ^ (static_cast<uint64_t>(it) << 20) ^ w;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  return static_cast<double>(x >> 11) * 0x1.0p-53 < rate;
}

// Inversions of v (pairs i < j with v[i] > v[j]), sorting v; tmp is scratch.
uint64_t inversions(std::vector<uint32_t>& v, std::vector<uint32_t>& tmp, size_t lo, size_t hi) {
  if (hi - lo < 2) return 0;
  const size_t mid = lo + (hi - lo) / 2;
  uint64_t n = inversions(v, tmp, lo, mid) + inversions(v, tmp, mid, hi);
  size_t i = lo, j = mid, k = lo;
  while (i < mid && j < hi) {
    if (v[j] < v[i]) {
      n += mid - i;
      tmp[k++] = v[j++];
    } else {
      tmp[k++] = v[i++];
    }
  }
  while (i < mid) tmp[k++] = v[i++];
  while (j < hi) tmp[k++] = v[j++];
  std::copy(tmp.begin() + static_cast<std::ptrdiff_t>(lo), tmp.begin() + static_cast<std::ptrdiff_t>(hi),
            v.begin() + static_cast<std::ptrdiff_t>(lo));
  return n;
}

}  // namespace

Ranking count_updates(const workload::SparseSource& s, unsigned first, unsigned count, double sample_rate,
                      uint64_t seed, unsigned workers) {
  if (workers == 0) workers = s.workers();
  if (workers > s.workers())
    throw std::invalid_argument(fmt::format("{} workers asked of the source {} with {}", workers, s.name(),
                                            s.workers()));
  if (!(sample_rate > 0 && sample_rate <= 1))
    throw std::invalid_argument(fmt::format("sample rate {} is not in (0, 1]", sample_rate));
  if (first + count > s.iterations())
    throw std::invalid_argument(fmt::format("iterations {}..{} beyond the source {}'s {}", first, first + count,
                                            s.name(), s.iterations()));
  std::unordered_map<uint64_t, uint64_t> freq;
  Ranking r;
  for (unsigned it = first; it < first + count; ++it)
    for (unsigned w = 0; w < workers; ++w) {
      if (!sampled(seed, it, w, sample_rate)) continue;
      for (uint64_t k : s.keys(it, w)) ++freq[k];
    }
  std::vector<std::pair<uint64_t, uint64_t>> v(freq.begin(), freq.end());
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  r.keys.reserve(v.size());
  r.freq.reserve(v.size());
  for (const auto& [k, f] : v) {
    r.keys.push_back(k);
    r.freq.push_back(f);
    r.total += f;
  }
  return r;
}

std::optional<size_t> principle1(const Ranking& r, double p, double c, uint64_t m_bytes) {
  if (!(p > 0 && p < 1)) throw std::invalid_argument(fmt::format("Principle 1: p = {} is not in (0, 1)", p));
  if (!(c > 0 && c <= 1)) throw std::invalid_argument(fmt::format("Principle 1: c = {} is not in (0, 1]", c));
  const double cap = c * static_cast<double>(m_bytes) / 4;  // 4 B x k <= c x m
  // T_k / T_n >= p  <=>  T_k >= p * T_n, compared in integers where p * T_n is exact enough.
  uint64_t tk = 0;
  for (size_t k = 1; k <= r.freq.size() && static_cast<double>(k) <= cap; ++k) {
    tk += r.freq[k - 1];
    if (static_cast<double>(tk) >= p * static_cast<double>(r.total)) return k;
  }
  return std::nullopt;
}

std::vector<uint64_t> hot_by_increment(const Ranking& r, size_t step, double threshold) {
  if (step == 0) throw std::invalid_argument("hot_by_increment: step must be positive");
  size_t k = 0;
  while (k < r.keys.size()) {
    const size_t end = std::min(r.keys.size(), k + step);
    uint64_t add = 0;
    for (size_t i = k; i < end; ++i) add += r.freq[i];
    if (static_cast<double>(add) < threshold * static_cast<double>(r.total)) break;
    k = end;
  }
  return {r.keys.begin(), r.keys.begin() + static_cast<std::ptrdiff_t>(k)};
}

double kendall_tau(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  std::unordered_map<uint64_t, uint32_t> pos_a;
  pos_a.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) pos_a.emplace(a[i], static_cast<uint32_t>(i));
  // The common keys in b's order, as their positions in a: a discordant pair is an inversion.
  std::vector<uint32_t> v;
  for (uint64_t k : b)
    if (auto it = pos_a.find(k); it != pos_a.end()) v.push_back(it->second);
  const auto m = static_cast<double>(v.size());
  if (v.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  std::vector<uint32_t> tmp(v.size());
  const auto disc = static_cast<double>(inversions(v, tmp, 0, v.size()));
  const double pairs = m * (m - 1) / 2;
  return (pairs - 2 * disc) / pairs;
}

double precision(const std::vector<uint64_t>& hg, const std::vector<uint64_t>& hs) {
  if (hg.empty()) return 1;
  std::vector<uint64_t> g(hg), s(hs);
  std::sort(g.begin(), g.end());
  std::sort(s.begin(), s.end());
  std::vector<uint64_t> both;
  std::set_intersection(g.begin(), g.end(), s.begin(), s.end(), std::back_inserter(both));
  return static_cast<double>(both.size()) / static_cast<double>(g.size());
}

}  // namespace ina::control::zebra
