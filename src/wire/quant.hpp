#pragma once
// Float <-> int32 fixed-point codec for switch aggregation.
//
// A value x is sent as round(x * scale). The switch sums n workers' int32s, so
// each encoded value is limited to +-floor(INT32_MAX / n): the sum of n such
// values can never overflow int32. Values beyond the limit (and +-inf) are
// saturated to the limit; NaN is encoded as 0. Both are counted as overflows.
// That is the defined fallback: the caller sees `overflowed > 0` and may
// re-run the operation with `safe_scale(max_abs, n)`, which guarantees none.
#include <cstdint>
#include <span>

namespace ina {

struct QuantStats {
  uint64_t overflowed = 0;  // saturated or NaN inputs
  float max_abs = 0;        // largest finite |x| seen
};

class FixedPointCodec {
 public:
  // scale > 0; nworkers in 1..64.
  FixedPointCodec(double scale, unsigned nworkers);

  double scale() const { return scale_; }
  int32_t limit() const { return limit_; }

  // A power-of-two scale (what `safe_scale` and the agreed scale give) takes
  // a single-precision loop with the same results, built for AVX2 where the
  // CPU has it; any other scale a double-precision one.
  QuantStats encode(std::span<const float> in, std::span<int32_t> out) const;
  // The double-precision loop, for any scale (the reference of the other).
  QuantStats encode_double(std::span<const float> in, std::span<int32_t> out) const;
  // out[i] = sum[i] / scale / divisor (divisor = n gives the average).
  void decode(std::span<const int32_t> sum, std::span<float> out, double divisor = 1.0) const;

  // Largest power-of-two scale for which |x| <= max_abs never overflows.
  static double safe_scale(float max_abs, unsigned nworkers);

 private:
  double scale_;
  int32_t limit_;
  float fscale_ = 0;  // scale_ as a float when it is a power of two a float holds exactly; else 0
};

// Saturating int32 add used by switch aggregators; sets `overflow` on clamp.
inline int32_t sat_add(int32_t a, int32_t b, bool& overflow) {
  int64_t s = static_cast<int64_t>(a) + b;
  if (s > INT32_MAX) { overflow = true; return INT32_MAX; }
  if (s < INT32_MIN) { overflow = true; return INT32_MIN; }
  return static_cast<int32_t>(s);
}

}  // namespace ina
