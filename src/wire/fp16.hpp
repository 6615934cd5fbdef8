#pragma once
// IEEE binary16 ("float16") values and Zebra's table-lookup float16 addition
// (paper §III-E, after NetFC [16]). Design, table sizes and the
// error bounds are in docs/zebra.md, "Float16 values and the table adder".
//
// A KV value field (32 bits, wire/kv.hpp) carries, under KvArith::Float16Table,
// a hot pair's float16 bits zero-extended (bits 15..0; 31..16 are 0) and a cold
// pair's float32 bits; under KvArith::Fixed (the default) an int32 as before.
//
// TableAdder adds two float16 numbers the way a switch pipeline can: integer
// adds, compares, masks, constant shifts (a variable shift is an exact-match
// table on the shift amount selecting an action with a constant shift) and
// four bounded lookup tables, in the logarithmic domain:
//   L(x)  = log2|x| in fixed point with F fraction bits (exponent field and a
//           1,024-entry table LOG[mantissa] = round(2^F log2(1 + m/1024)));
//   |a| >= |b|, D = L(a) - L(b) >= 0:
//   L(a+b) = L(a) + ADD[D]   (same signs,      ADD[D] = round(2^F log2(1 + 2^-D)))
//   L(a-b) = L(a) - SUB[D]   (opposite signs,  SUB[D] = round(-2^F log2(1 - 2^-D)))
//   back to float16: exponent = L >> F, mantissa = EXP[L & (2^F - 1)],
//           EXP[y] = round(1024 (2^(y / 2^F) - 1)).
// D at or beyond the first index where both ADD and SUB round to 0 leaves a
// unchanged. Exact cases: x + 0 = x, x + (-x) = +0 (D = 0), 2^k + 2^k = 2^(k+1).
// A finite sum beyond the largest float16 saturates to +-65504 (counted),
// instead of IEEE's infinity that would poison the register's later sums;
// inf and NaN operands follow IEEE (inf + -inf = NaN).
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ina {

// Value arithmetic of a sparse job's <key, value> pairs (Zebra switch, PS, workers).
enum class KvArith : uint8_t {
  Fixed,         // int32 values, exact integer sums (every scheme's default)
  Float16Table,  // float gradients: hot pairs float16 added by TableAdder, cold pairs float32 at the PS
};
const char* to_string(KvArith a);  // "fixed", "float16-table"
std::optional<KvArith> parse_kv_arith(std::string_view s);

namespace fp16 {

constexpr uint16_t kSign = 0x8000;
constexpr uint16_t kInf = 0x7C00;
constexpr uint16_t kMaxFinite = 0x7BFF;  // 65504
constexpr uint16_t kNaN = 0x7E00;        // the quiet NaN sums produce
constexpr double kHalfSubnormal = 0x1p-25;  // half the smallest subnormal: absolute rounding error floor

// IEEE conversions, round to nearest even; overflow gives +-inf, NaN a quiet NaN.
uint16_t from_float(float x);
uint16_t from_double(double x);
float to_float(uint16_t h);  // exact
// The reference: IEEE binary16 addition, round to nearest even. Computed in
// float and rounded once more, which is exact: 24 >= 2 x 11 + 2 bits.
uint16_t ieee_add(uint16_t a, uint16_t b);

// Float32 bit patterns in an int32 value field (cold pairs, PS sums).
float f32_of_bits(int32_t v);
int32_t bits_of_f32(float x);

class TableAdder {
 public:
  // frac_bits F in 8..12: the log domain's fraction bits (11 in the switch).
  explicit TableAdder(unsigned frac_bits = 11);
  uint16_t add(uint16_t a, uint16_t b, bool* saturated = nullptr) const;
  unsigned frac_bits() const { return F_; }

  struct Table {
    const char* name;
    size_t entries;
    unsigned bits;  // of each entry's data
  };
  std::vector<Table> tables() const;  // one adder lane's tables
  size_t lane_bytes() const;          // their data, entries x 2 B each (16-bit words)

  // Worst-case error of one addition (derived in docs/zebra.md), result not saturated:
  //   same signs:      |add(a,b) - (a+b)| <= same_sign_bound() x |a+b|         + 2^-25
  //   opposite signs:  |add(a,b) - (a+b)| <= opposite_sign_bound() x max(|a|,|b|) + 2^-25
  double same_sign_bound() const;
  double opposite_sign_bound() const;
  // Bound on |sum - exact| for n float32 terms of total magnitude sum_abs,
  // each rounded to float16 and added in any order starting from the first
  // (register 0 + x = x), plus n float32 roundings (a PS part, the worker's
  // merge). The simulator's check and the tests use it.
  double sum_bound(unsigned n, double sum_abs) const;

 private:
  int32_t log_of(uint16_t mag) const;  // mag: finite, non-zero magnitude bits
  uint16_t encode(int32_t L, bool* saturated) const;
  unsigned F_;
  int32_t dmax_;                // D >= dmax_: the smaller operand vanishes
  std::vector<uint16_t> log_;   // 1024
  std::vector<uint16_t> add_;   // dmax_
  std::vector<uint16_t> sub_;   // dmax_ (magnitudes; sub_[0] unused: D = 0 gives +0)
  std::vector<uint16_t> exp_;   // 2^F, values 0..1024
};

// The switch's adder (F = 11), built once.
const TableAdder& switch_adder();

}  // namespace fp16
}  // namespace ina
