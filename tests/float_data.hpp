#pragma once
// Float test data whose allreduce has a known exact answer, shared by the
// runtime tests (ina::Communicator) and the simulator tests of the float
// protocol (host::FloatAllreduce).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "core/rng.hpp"

namespace ina::test {

// Gradients of mixed magnitudes (about 2^-12 .. 2^12), different per seed,
// all integer multiples of 2^-grain_bits (at most 24 significant bits, so
// exact floats). Any fixed-point scale of at least 2^grain_bits carries them
// exactly, so an allreduce must return the exact real sum.
inline std::vector<float> dyadic_floats(uint64_t seed, size_t n, int grain_bits = 12) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) {
    const double mag = std::ldexp(1.0, static_cast<int>(rng.below(24)));  // 2^0 .. 2^23 grains
    const auto m = static_cast<int64_t>((rng.uniform() * 2 - 1) * mag);
    x = static_cast<float>(std::ldexp(static_cast<double>(m), -grain_bits));
  }
  return v;
}

// The expected result, independent of any codec: the exact sum (doubles add
// these dyadic values exactly), divided, rounded once to float.
inline std::vector<float> exact_sum(const std::vector<std::vector<float>>& xs, double divisor = 1.0) {
  std::vector<float> out(xs[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    double s = 0;
    for (const auto& x : xs) s += x[i];
    out[i] = static_cast<float>(s / divisor);
  }
  return out;
}

// Values whose bits differ (a length mismatch counts every missing value).
inline size_t count_differences(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  size_t d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return d;
}

}  // namespace ina::test
