#include "wire/quant.hpp"

#include <cmath>
#include <stdexcept>

namespace ina {

FixedPointCodec::FixedPointCodec(double scale, unsigned nworkers) : scale_(scale) {
  if (!(scale > 0) || !std::isfinite(scale)) throw std::invalid_argument("fixed-point scale must be a positive finite number");
  if (nworkers == 0 || nworkers > 64) throw std::invalid_argument("fixed-point codec: worker count must be in 1..64");
  limit_ = static_cast<int32_t>(INT32_MAX / static_cast<int64_t>(nworkers));
}

QuantStats FixedPointCodec::encode(std::span<const float> in, std::span<int32_t> out) const {
  QuantStats st;
  const double lim = limit_;
  for (size_t i = 0; i < in.size(); ++i) {
    const float x = in[i];
    if (std::isnan(x)) { out[i] = 0; ++st.overflowed; continue; }
    if (std::isfinite(x)) st.max_abs = std::max(st.max_abs, std::fabs(x));
    const double v = std::nearbyint(static_cast<double>(x) * scale_);
    if (v > lim) { out[i] = limit_; ++st.overflowed; }
    else if (v < -lim) { out[i] = -limit_; ++st.overflowed; }
    else out[i] = static_cast<int32_t>(v);
  }
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
