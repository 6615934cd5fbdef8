// Zebra's table-lookup float16 addition (wire/fp16.hpp, docs/zebra.md
// "Float16 values and the table adder"): conversions against the compiler's
// _Float16, exact cases, a hand-computed approximation, saturation, the
// worst-case error over all pairs of a range against the derived bound, and
// the simulator with zebra.arith = "float16-table".
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "experiment/sparse.hpp"
#include "wire/fp16.hpp"
#include "workload/sparse.hpp"

using namespace ina;

namespace {
uint16_t bits(_Float16 h) { return std::bit_cast<uint16_t>(h); }
double val(uint16_t h) { return static_cast<double>(std::bit_cast<_Float16>(h)); }  // the compiler's decoding
bool finite(uint16_t h) { return (h & 0x7FFF) < 0x7C00; }
// The bounds of docs/zebra.md for F = 11, as numbers (derived there, not by the adder's code).
constexpr double kSameSign = 9.9634e-4;      // x |a + b|
constexpr double kOppositeSign = 1.16547e-3;  // x max(|a|, |b|)
}  // namespace

// float -> float16 rounds to nearest even as GCC's _Float16 does (IEEE), on
// every float16 value, every midpoint between neighbours, and 1 M scattered floats.
TEST(Fp16, ConversionsMatchTheCompilersFloat16) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (!finite(static_cast<uint16_t>(h))) continue;
    const float f = fp16::to_float(static_cast<uint16_t>(h));
    ASSERT_EQ(static_cast<double>(f), val(static_cast<uint16_t>(h))) << std::hex << h;
    ASSERT_EQ(fp16::from_float(f), h) << std::hex << h;
    if ((h & 0x7FFF) < 0x7BFF) {  // the midpoint to the next magnitude: ties to even
      const double mid = (static_cast<double>(f) + fp16::to_float(static_cast<uint16_t>(h + 1))) / 2;
      ASSERT_EQ(fp16::from_double(mid), bits(static_cast<_Float16>(static_cast<float>(mid)))) << std::hex << h;
    }
  }
  uint32_t x = 12345;
  for (int i = 0; i < 1'000'000; ++i) {
    x = x * 1664525u + 1013904223u;
    const float f = std::bit_cast<float>(x);
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp16::from_float(f), bits(static_cast<_Float16>(f))) << f;
  }
  EXPECT_EQ(fp16::from_float(65519.0f), 0x7BFF);  // below the tie 65520
  EXPECT_EQ(fp16::from_float(65520.0f), 0x7C00);  // the tie rounds to even: inf
  EXPECT_EQ(fp16::from_float(-1e9f), 0xFC00);
  EXPECT_EQ(fp16::from_float(0x1p-25f), 0x0000);  // half the smallest subnormal: ties to even 0
  EXPECT_EQ(fp16::from_float(0x1.8p-25f), 0x0001);
}

// The reference IEEE addition is the compiler's _Float16 addition.
TEST(Fp16, IeeeReferenceIsTheCompilersFloat16Addition) {
  for (uint32_t a = 0; a < 0x10000; a += 7)
    for (uint32_t b = 0; b < 0x10000; b += 1031) {
      if (!finite(static_cast<uint16_t>(a)) || !finite(static_cast<uint16_t>(b))) continue;
      const _Float16 s = std::bit_cast<_Float16>(static_cast<uint16_t>(a)) + std::bit_cast<_Float16>(static_cast<uint16_t>(b));
      ASSERT_EQ(fp16::ieee_add(static_cast<uint16_t>(a), static_cast<uint16_t>(b)), bits(s)) << std::hex << a << " " << b;
    }
}

TEST(Fp16, TableAdderExactCases) {
  const auto& t = fp16::switch_adder();
  EXPECT_EQ(t.add(0x3C00, 0x3C00), 0x4000);  // 1 + 1 = 2
  for (uint32_t h = 1; h < 0x10000; ++h) {
    const auto x = static_cast<uint16_t>(h);
    if (!finite(x)) continue;
    ASSERT_EQ(t.add(x, 0x0000), x == 0x8000 ? 0x0000 : x) << std::hex << h;  // x + 0 = x (-0 + +0 = +0)
    ASSERT_EQ(t.add(0x8000, x), x) << std::hex << h;  // -0 + x = x
    ASSERT_EQ(t.add(x, x ^ 0x8000), 0x0000) << std::hex << h;  // x + (-x) = +0
  }
  for (uint16_t e = 1; e < 30; ++e) {  // 2^k + 2^k = 2^(k+1), both signs
    const auto p = static_cast<uint16_t>(e << 10);
    EXPECT_EQ(t.add(p, p), p + 0x400);
    EXPECT_EQ(t.add(p | 0x8000, p | 0x8000), (p + 0x400) | 0x8000);
  }
  EXPECT_EQ(t.add(0x0001, 0x0001), 0x0002);  // subnormals: 2^-24 + 2^-24
  EXPECT_EQ(t.add(0x3C00, 0x0001), 0x3C00);  // 1 + 2^-24: the smaller vanishes
  EXPECT_EQ(t.add(0x8000, 0x8000), 0x8000);  // -0 + -0
}

// Hand-computed (docs/zebra.md): (1 + 7/1024) + 1, exactly 2 + 3.5 ulps.
// IEEE rounds the tie to even: 2 + 4/512 (0x4004). The table: L(a) =
// LOG[7] = round(2048 log2(1.0068359)) = round(20.13) = 20, L(1) = 0, D = 20,
// ADD[20] = round(2048 log2(1 + 2^(-20/2048))) = round(2038.02) = 2038,
// L = 2058 = 2048 + 10, EXP[10] = round(1024 (2^(10/2048) - 1)) = round(3.47) = 3:
// 2 + 3/512 (0x4003), one ulp (2^-9) below IEEE, half an ulp below the exact sum.
TEST(Fp16, TableAdderDiffersFromIeeeByTheHandComputedUlp) {
  const auto& t = fp16::switch_adder();
  EXPECT_EQ(fp16::ieee_add(0x3C07, 0x3C00), 0x4004);
  EXPECT_EQ(t.add(0x3C07, 0x3C00), 0x4003);
  EXPECT_EQ(t.add(0x3C00, 0x3C07), 0x4003);  // commutative: the adder orders by magnitude
  EXPECT_EQ(fp16::to_float(0x4003), 2.0f + 3.0f / 512);
}

// Saturation (our choice): a finite sum beyond 65504 is 65504, flagged; IEEE gives inf.
// Infinities and NaN follow IEEE.
TEST(Fp16, TableAdderSaturatesFiniteOverflowAndPropagatesInfNan) {
  const auto& t = fp16::switch_adder();
  bool sat = false;
  EXPECT_EQ(t.add(0x7BFF, 0x7BFF, &sat), 0x7BFF);
  EXPECT_TRUE(sat);
  EXPECT_EQ(fp16::ieee_add(0x7BFF, 0x7BFF), 0x7C00);
  sat = false;
  EXPECT_EQ(t.add(0xFBFF, 0xF800, &sat), 0xFBFF);  // -65504 - 32768
  EXPECT_TRUE(sat);
  sat = false;
  EXPECT_EQ(t.add(0x7800, 0x7400, &sat), 0x7A00);  // 32768 + 16384 = 49152: no saturation
  EXPECT_FALSE(sat);
  EXPECT_EQ(t.add(0x7C00, 0x3C00), 0x7C00);
  EXPECT_EQ(t.add(0xFC00, 0x7BFF), 0xFC00);
  EXPECT_EQ(t.add(0x7C00, 0xFC00), fp16::kNaN);
  EXPECT_EQ(t.add(0x7E01, 0x3C00), fp16::kNaN);
}

// Every pair of float16 values with exponent fields 14..15 ([0.5, 2)), both
// signs (4,096 values, 16.8 M pairs): the error against the exact sum stays
// within the bounds derived in docs/zebra.md, and is really an approximation
// (beyond IEEE's own half-ulp, 2^-11 relative).
TEST(Fp16, WorstCaseErrorOverAllPairsOfARangeIsWithinTheDerivedBound) {
  const auto& t = fp16::switch_adder();
  EXPECT_NEAR(t.same_sign_bound(), kSameSign, 1e-8);
  EXPECT_NEAR(t.opposite_sign_bound(), kOppositeSign, 1e-8);
  std::vector<uint16_t> xs;
  for (uint16_t s : {0, 0x8000})
    for (uint16_t h = 14 << 10; h < 16 << 10; ++h) xs.push_back(s | h);
  double worst_same = 0, worst_opp = 0;
  uint64_t differs = 0;
  for (uint16_t a : xs)
    for (uint16_t b : xs) {
      const uint16_t r = t.add(a, b);
      const double A = val(a), B = val(b), exact = A + B, err = std::fabs(val(r) - exact);
      differs += r != fp16::ieee_add(a, b);
      if ((A > 0) == (B > 0)) worst_same = std::max(worst_same, err / std::fabs(exact));
      else worst_opp = std::max(worst_opp, err / std::max(std::fabs(A), std::fabs(B)));
    }
  EXPECT_LE(worst_same, kSameSign);
  EXPECT_LE(worst_opp, kOppositeSign);
  EXPECT_GT(worst_same, 0x1p-11);
  EXPECT_GT(worst_opp, 0x1p-11);
  EXPECT_GT(differs, xs.size() * xs.size() / 100);  // it is not IEEE addition in disguise
}

// The rest of the range, sampled (subnormals, tiny, huge; no saturation):
// the same bounds plus the absolute floor 2^-25 of subnormal results.
TEST(Fp16, ErrorOverTheWholeRangeSampledIsWithinTheBound) {
  const auto& t = fp16::switch_adder();
  for (uint32_t a = 0; a < 0x10000; a += 3)
    for (uint32_t b = 0; b < 0x10000; b += 1009) {
      const auto x = static_cast<uint16_t>(a), y = static_cast<uint16_t>(b);
      if (!finite(x) || !finite(y)) continue;
      bool sat = false;
      const uint16_t r = t.add(x, y, &sat);
      if (sat) continue;
      const double A = val(x), B = val(y), exact = A + B, err = std::fabs(val(r) - exact);
      const double bound = (A >= 0) == (B >= 0) || A == 0 || B == 0
                               ? kSameSign * std::fabs(exact) + 0x1p-25
                               : kOppositeSign * std::max(std::fabs(A), std::fabs(B)) + 0x1p-25;
      ASSERT_LE(err, bound) << std::hex << a << " + " << b << " = " << r;
    }
}

// Table sizes as docs/zebra.md states them (F = 11, one adder lane).
TEST(Fp16, TableSizesAsDocumented) {
  const auto& t = fp16::switch_adder();
  const auto tabs = t.tables();
  ASSERT_EQ(tabs.size(), 5u);
  EXPECT_EQ(tabs[0].entries, 1024u);
  EXPECT_EQ(tabs[2].entries, 25660u);  // ADD: D < 25,660 / 2048 = 12.53
  EXPECT_EQ(tabs[3].entries, 25660u);
  EXPECT_EQ(tabs[4].entries, 2048u);
  EXPECT_EQ(t.lane_bytes(), 110832u);
}

namespace {
exp::SparseSettings float_run(const std::string& scheme) {
  exp::SparseSettings s;
  s.scheme = scheme;
  s.workers = 8;
  s.iterations = 2;
  s.hot_keys = 1000;
  s.arith = KvArith::Float16Table;
  return s;
}
}  // namespace

// The simulator with float16 values: Zebra's hot sums go through the table
// adder and every sum is within the derived bound (run_sparse fails the run
// otherwise); the error is that of float16, far above PS-lite's float32 sums,
// and the sums are still close (vector error < 1e-3). Under 1 % loss,
// duplication and reordering nothing is added twice: the errors stay within the bound.
TEST(Fp16, SimulatorSumsFloat16OnTheSwitchWithinTheBound) {
  const auto src = workload::make_synthetic(*workload::find_sparse_model("ncf"), 8, 2, 3);
  const auto z = exp::run_sparse(float_run("zebra"), *src);
  const auto p = exp::run_sparse(float_run("ps-lite"), *src);
  EXPECT_EQ(z.sw.kv_aggregated, z.hot_pairs);
  EXPECT_GT(z.hot_pairs, z.pairs / 3);
  EXPECT_EQ(z.value_error.values, 8 * (z.iters[0].union_keys + z.iters[1].union_keys));
  EXPECT_LE(z.value_error.max_over_bound, 1.0);
  EXPECT_GT(z.value_error.max_scaled, 1e-4);  // float16: beyond float32's error
  EXPECT_LT(z.value_error.vec_rel, 1e-3);
  EXPECT_LT(p.value_error.max_scaled, 1e-6);  // PS-lite sums float32
  EXPECT_GT(z.value_error.vec_rel, 10 * p.value_error.vec_rel);
  auto f = float_run("zebra");
  f.link.loss = f.link.dup = f.link.reorder = 0.01;
  f.cpu_rto = 200 * kUs;
  f.cpu_delay = 20 * kUs;
  exp::SparseRun r;
  ASSERT_NO_THROW(r = exp::run_sparse(f, *src));
  EXPECT_GT(r.sw.duplicates + r.ps.duplicates, 0u);
  EXPECT_LE(r.value_error.max_over_bound, 1.0);
  // Typical errors are far below the worst case (8 terms: about 8.2e-3 of sum |x|).
  EXPECT_LT(r.value_error.max_scaled, 2e-3);
}

// Hot-set tables out of step: the workers send float16 bits to the switch
// for keys its table no longer holds, the switch passes them on, and the PS
// must read them as float16 (not float32 bits) to stay within the bound.
TEST(Fp16, PairsThePsGetsFromTheSwitchAreReadAsFloat16) {
  const auto src = workload::make_synthetic(*workload::find_sparse_model("ncf"), 4, 6, 3);
  auto s = float_run("zebra");
  s.workers = 4;
  s.iterations = 4;
  s.hot_keys = 300;
  s.profile_iterations = 1;
  s.updates.push_back({2, 4, 2, true, false});  // the workers take the new hot set, the switch does not
  exp::SparseRun r;
  ASSERT_NO_THROW(r = exp::run_sparse(s, *src));
  EXPECT_GT(r.sw.kv_to_ps, 0u);
  EXPECT_EQ(r.ps.forwarded_pairs, r.sw.kv_to_ps);
  EXPECT_LE(r.value_error.max_over_bound, 1.0);
  EXPECT_LT(r.value_error.vec_rel, 1e-3);
}
