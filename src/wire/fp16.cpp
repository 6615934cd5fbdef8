#include "wire/fp16.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace ina {

const char* to_string(KvArith a) { return a == KvArith::Float16Table ? "float16-table" : "fixed"; }

std::optional<KvArith> parse_kv_arith(std::string_view s) {
  if (s == "fixed") return KvArith::Fixed;
  if (s == "float16-table") return KvArith::Float16Table;
  return std::nullopt;
}

namespace fp16 {

uint16_t from_double(double x) {
  const uint16_t sign = std::signbit(x) ? kSign : 0;
  const double ax = std::fabs(x);
  if (std::isnan(x)) return sign | kNaN;
  if (ax >= 65520.0) return sign | kInf;  // 65504 + half an ulp (16): the tie rounds to even, i.e. up
  if (ax < 0x1p-14) return sign | static_cast<uint16_t>(std::nearbyint(ax * 0x1p24));  // subnormal (1024: the smallest normal)
  int e = 0;
  std::frexp(ax, &e);  // ax in [2^(e-1), 2^e)
  const int E = e - 1;
  const int q = static_cast<int>(std::nearbyint(std::ldexp(ax, 10 - E)));  // 1024..2048; 2048 carries into the exponent
  return sign | static_cast<uint16_t>(((E + 15) << 10) + q - 1024);
}

uint16_t from_float(float x) { return from_double(static_cast<double>(x)); }

float to_float(uint16_t h) {
  const unsigned e = (h >> 10) & 31u, m = h & 1023u;
  float v;
  if (e == 0) v = std::ldexp(static_cast<float>(m), -24);
  else if (e == 31) v = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else v = std::ldexp(static_cast<float>(1024u + m), static_cast<int>(e) - 25);
  return h & kSign ? -v : v;
}

uint16_t ieee_add(uint16_t a, uint16_t b) { return from_float(to_float(a) + to_float(b)); }

float f32_of_bits(int32_t v) { return std::bit_cast<float>(v); }
int32_t bits_of_f32(float x) { return std::bit_cast<int32_t>(x); }

TableAdder::TableAdder(unsigned frac_bits) : F_(frac_bits) {
  if (F_ < 8 || F_ > 12) throw std::invalid_argument("fp16 table adder: frac_bits " + std::to_string(F_) + " (8..12)");
  const double one = std::ldexp(1.0, static_cast<int>(F_));
  log_.resize(1024);
  for (unsigned m = 0; m < 1024; ++m) log_[m] = static_cast<uint16_t>(std::lround(one * std::log2(1 + m / 1024.0)));
  exp_.resize(static_cast<size_t>(one));
  for (size_t y = 0; y < exp_.size(); ++y)
    exp_[y] = static_cast<uint16_t>(std::lround(1024 * std::expm1(std::ldexp(static_cast<double>(y), -static_cast<int>(F_)) * M_LN2)));
  // ADD and SUB until both round to 0 (both shrink with D): beyond, b vanishes.
  for (int32_t d = 0;; ++d) {
    const double x = d / one;  // D in log2 units
    const long add = std::lround(one * std::log1p(std::exp2(-x)) / M_LN2);
    const long sub = d == 0 ? 0 : std::lround(-one * std::log(-std::expm1(-x * M_LN2)) / M_LN2);
    if (d > 0 && add == 0 && sub == 0) {
      dmax_ = d;
      break;
    }
    add_.push_back(static_cast<uint16_t>(add));
    sub_.push_back(static_cast<uint16_t>(sub));
  }
}

int32_t TableAdder::log_of(uint16_t mag) const {
  const int32_t one = 1 << F_;
  if (mag >= 0x400) return (static_cast<int32_t>(mag >> 10) - 15) * one + log_[mag & 1023u];
  // Subnormal m x 2^-24: normalize (a ternary match on the leading one picks
  // one of 10 constant shifts k), then it is (1 + m'/1024) x 2^(-14-k).
  const int k = std::countl_zero(mag) - 5;
  return (-14 - k) * one + log_[(static_cast<unsigned>(mag) << k) & 1023u];
}

uint16_t TableAdder::encode(int32_t L, bool* saturated) const {
  const int32_t e = L >> F_;  // floor
  const uint32_t frac = static_cast<uint32_t>(L) & ((1u << F_) - 1);
  if (e >= -14) {
    const int32_t bits = e >= 16 ? kInf : ((e + 15) << 10) + exp_[frac];  // EXP = 1024 carries into the exponent
    if (bits < kInf) return static_cast<uint16_t>(bits);
    if (saturated) *saturated = true;
    return kMaxFinite;
  }
  // Below the normal range: the significand shifted right by s = -14 - e
  // (an exact-match table on s picks one of 11 constant shifts), rounded to nearest even.
  const int s = -14 - e;
  if (s > 11) return 0;
  const uint32_t sig = 1024u + exp_[frac];
  uint32_t m = sig >> s;
  const uint32_t rem = sig & ((1u << s) - 1), half = 1u << (s - 1);
  if (rem > half || (rem == half && (m & 1))) ++m;
  return static_cast<uint16_t>(m);
}

uint16_t TableAdder::add(uint16_t a, uint16_t b, bool* saturated) const {
  uint16_t ma = a & 0x7FFF, mb = b & 0x7FFF;
  if (ma > kInf || mb > kInf) return kNaN;
  if (ma == kInf || mb == kInf) {
    if (ma == kInf && mb == kInf && ((a ^ b) & kSign)) return kNaN;
    return ma == kInf ? a : b;
  }
  if (mb == 0) return ma == 0 ? (a & b) : a;  // x + 0 = x; -0 + -0 = -0, otherwise +0
  if (ma == 0) return b;
  if (mb > ma) {  // |a| >= |b|: float16 magnitudes order as integers
    std::swap(a, b);
    std::swap(ma, mb);
  }
  const int32_t La = log_of(ma), D = La - log_of(mb);
  if (D >= dmax_) return a;
  int32_t L;
  if (!((a ^ b) & kSign)) {
    L = La + add_[static_cast<size_t>(D)];
  } else {
    if (D == 0) return 0;  // x + (-x) = +0
    L = La - sub_[static_cast<size_t>(D)];
  }
  bool sat = false;
  const uint16_t r = encode(L, &sat);
  if (sat && saturated) *saturated = true;
  return static_cast<uint16_t>(r | (a & kSign));
}

std::vector<TableAdder::Table> TableAdder::tables() const {
  return {{"LOG (register operand)", log_.size(), F_},
          {"LOG (packet operand)", log_.size(), F_},
          {"ADD", add_.size(), F_ + 1},
          {"SUB", sub_.size(), 16},
          {"EXP", exp_.size(), 11}};
}

size_t TableAdder::lane_bytes() const {
  size_t n = 0;
  for (const auto& t : tables()) n += 2 * t.entries;
  return n;
}

double TableAdder::same_sign_bound() const {
  // L(a), the table entry (each rounded: q/2) and D's error (q) through ADD's slope (<= 1/2): 1.5 q in log2;
  // then EXP rounds the significand (2^-11).
  const double q = std::ldexp(1.0, -static_cast<int>(F_));
  return (1 + 0x1p-11) * std::exp2(1.5 * q) - 1;
}

double TableAdder::opposite_sign_bound() const {
  // |a| 2^(da + dT) (1 + e) (1 - 2^-D') - |a| (1 - 2^-D) with |da + dT| <= q, |D' - D| <= q, |e| <= 2^-11.
  const double q = std::ldexp(1.0, -static_cast<int>(F_));
  return (1 + 0x1p-11) * std::exp2(q) - 1 + std::exp2(q) - 1;
}

double TableAdder::sum_bound(unsigned n, double sum_abs) const {
  if (n <= 1) return 0x1p-11 * sum_abs + kHalfSubnormal;  // one term: its rounding to float16
  const double c = std::max(same_sign_bound(), opposite_sign_bound());
  const double g = (n - 1) * c * std::pow(1 + c, n - 1);
  const double a16 = (1 + 0x1p-11) * sum_abs + n * kHalfSubnormal;  // the float16 terms' magnitude
  return g * a16 + (n - 1) * (1 + g) * kHalfSubnormal  // the n - 1 table additions
         + 0x1p-11 * sum_abs + n * kHalfSubnormal      // rounding the terms to float16
         + n * 0x1p-23 * (1 + g) * sum_abs;            // float32 roundings (PS part, the worker's merge)
}

const TableAdder& switch_adder() {
  static const TableAdder a(11);
  return a;
}

}  // namespace fp16
}  // namespace ina
