#include "wire/quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace ina {

FixedPointCodec::FixedPointCodec(double scale, unsigned nworkers) : scale_(scale) {
  if (!(scale > 0) || !std::isfinite(scale)) throw std::invalid_argument("fixed-point scale must be a positive finite number");
  if (nworkers == 0 || nworkers > 64) throw std::invalid_argument("fixed-point codec: worker count must be in 1..64");
  limit_ = static_cast<int32_t>(INT32_MAX / static_cast<int64_t>(nworkers));
  int e = 0;
  if (std::frexp(scale, &e) == 0.5 && e - 1 >= -126 && e - 1 <= 127) fscale_ = static_cast<float>(scale);
}

namespace {

// The single-precision encoder, for a power-of-two scale s = 2^k. For every
// float x it gives what the double-precision one does:
//  - x * s is exact in float whenever the result is a normal float; a result
//    below 2^-126 in magnitude rounds to 0 either way, and one beyond the
//    float range is +-inf, beyond the limit either way;
//  - |v| < 2^23 is rounded to the nearest integer, ties to even, by adding
//    and subtracting 2^23 to |v| (where floats are 1 apart); from 2^23 on
//    every float is an integer already;
//  - flim is the largest float not above the limit, so for floats v > flim
//    exactly when v > limit.
// Selects, integer masks and an integer max (the bits of non-negative floats
// order as their values) only, so that it vectorizes. This file is built
// with -fno-trapping-math (CMakeLists.txt), which lets GCC compute both sides
// of a select: it changes no result, only whether FP exception flags could
// be raised, which nothing in ina reads.
#if !defined(__SANITIZE_THREAD__)  // an ifunc's resolver runs before ThreadSanitizer's runtime starts
__attribute__((target_clones("avx2", "default")))
#endif
QuantStats encode_pow2(const float* __restrict in, int32_t* __restrict out, size_t n, float s, int32_t limit) {
  constexpr float kTwo23 = 8388608.0f;
  float flim = static_cast<float>(limit);
  if (static_cast<double>(flim) > limit) flim = std::nextafter(flim, 0.0f);
  const float fmax = std::numeric_limits<float>::max();
  int32_t bad_count = 0;  // minus the overflows (masks are -1)
  int32_t max_bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float ax = std::fabs(x);
    const float finite_ax = ax <= fmax ? ax : 0.0f;  // NaN and inf: not counted in max_abs
    int32_t bits;
    std::memcpy(&bits, &finite_ax, sizeof bits);
    max_bits = bits > max_bits ? bits : max_bits;
    const float v = x * s;
    const float av = std::fabs(v);
    const float rounded = (av + kTwo23) - kTwo23;
    const float r = std::copysign(av < kTwo23 ? rounded : av, v);
    const int32_t hi = r > flim ? -1 : 0, lo = r < -flim ? -1 : 0, nan = x != x ? -1 : 0;
    const int32_t bad = hi | lo | nan;
    float rc = r > flim ? flim : r;
    rc = rc < -flim ? -flim : rc;
    rc = x == x ? rc : 0.0f;
    int32_t q = static_cast<int32_t>(rc);
    q = (q & ~bad) | (limit & hi) | (-limit & lo);
    bad_count += bad;
    out[i] = q;
  }
  QuantStats st;
  st.overflowed = static_cast<uint64_t>(-static_cast<int64_t>(bad_count));
  std::memcpy(&st.max_abs, &max_bits, sizeof max_bits);
  return st;
}

}  // namespace

QuantStats FixedPointCodec::encode(std::span<const float> in, std::span<int32_t> out) const {
  if (fscale_ == 0) return encode_double(in, out);
  // In blocks, so the 32-bit overflow count of the vector loop cannot wrap.
  QuantStats st;
  constexpr size_t kBlock = size_t{1} << 30;  // < 2^31 overflows per block
  for (size_t at = 0; at < in.size(); at += kBlock) {
    const size_t n = std::min(kBlock, in.size() - at);
    const QuantStats b = encode_pow2(in.data() + at, out.data() + at, n, fscale_, limit_);
    st.overflowed += b.overflowed;
    st.max_abs = std::max(st.max_abs, b.max_abs);
  }
  return st;
}

QuantStats FixedPointCodec::encode_double(std::span<const float> in, std::span<int32_t> out) const {
  // Branch-free so it vectorizes: adding and subtracting 1.5 * 2^52 rounds a
  // double to the nearest integer, ties to even (what nearbyint does in the
  // default rounding mode) for |v| < 2^51; larger values are clamped anyway.
  constexpr double kRound = 6755399441055744.0;
  const double lim = limit_;
  uint64_t overflowed = 0;
  float max_abs = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const float x = in[i];
    const bool nan = x != x;
    const float ax = std::fabs(x);
    max_abs = ax > max_abs && ax <= std::numeric_limits<float>::max() ? ax : max_abs;
    const double v = static_cast<double>(x) * scale_;
    double r = (v + kRound) - kRound;
    const bool over = r > lim || r < -lim;
    r = r > lim ? lim : r;
    r = r < -lim ? -lim : r;
    overflowed += over | nan;
    out[i] = nan ? 0 : static_cast<int32_t>(r);
  }
  QuantStats st;
  st.overflowed = overflowed;
  st.max_abs = max_abs;
  return st;
}

void FixedPointCodec::decode(std::span<const int32_t> sum, std::span<float> out, double divisor) const {
  const double k = 1.0 / (scale_ * divisor);
  for (size_t i = 0; i < sum.size(); ++i) out[i] = static_cast<float>(sum[i] * k);
}

double FixedPointCodec::safe_scale(float max_abs, unsigned nworkers) {
  if (nworkers == 0) nworkers = 1;
  const double lim = static_cast<double>(INT32_MAX / static_cast<int64_t>(nworkers));
  if (!(max_abs > 0) || !std::isfinite(max_abs)) return 1.0;
  // largest 2^k with max_abs * 2^k <= lim (rounding can add 0.5, keep a margin of 1)
  return std::exp2(std::floor(std::log2((lim - 1.0) / max_abs)));
}

}  // namespace ina
