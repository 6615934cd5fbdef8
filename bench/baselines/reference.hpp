#pragma once
// Inputs and the exact check shared by the baseline programs: small integers,
// so the float sum is exact in any order and every result can be compared
// with the exact reference bit for bit.
#include <vector>

namespace ina::baseline {

inline float input(long i, long rank, long k) { return static_cast<float>((i * 7 + rank + k) % 1024); }

inline void fill(std::vector<float>& v, long rank, long k) {
  for (long i = 0; i < static_cast<long>(v.size()); ++i) v[i] = input(i, rank, k);
}

// Number of values of allreduce `k` over `workers` ranks that differ from the exact sum.
inline long mismatches(const std::vector<float>& v, long workers, long k) {
  long bad = 0;
  for (long i = 0; i < static_cast<long>(v.size()); ++i) {
    double expect = 0;
    for (long r = 0; r < workers; ++r) expect += input(i, r, k);
    if (static_cast<double>(v[i]) != expect) ++bad;
  }
  return bad;
}

}  // namespace ina::baseline
