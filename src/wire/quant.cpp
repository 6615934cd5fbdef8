#include "wire/quant.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace ina {

FixedPointCodec::FixedPointCodec(double scale, unsigned nworkers) : scale_(scale) {
  if (!(scale > 0) || !std::isfinite(scale)) throw std::invalid_argument("fixed-point scale must be a positive finite number");
  if (nworkers == 0 || nworkers > 64) throw std::invalid_argument("fixed-point codec: worker count must be in 1..64");
  limit_ = static_cast<int32_t>(INT32_MAX / static_cast<int64_t>(nworkers));
}

QuantStats FixedPointCodec::encode(std::span<const float> in, std::span<int32_t> out) const {
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
