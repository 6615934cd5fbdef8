// `ina bench fp16`: the error of Zebra's table-lookup float16 addition
// (wire/fp16.hpp; docs/zebra.md, docs/results/zebra.md).
//
// 100,000 keys; each key's N worker gradients (workload::sparse_gradient:
// normal with a heavy tail, scale sigma = 10^-arg) are summed in a random
// arrival order, the same order for every method:
//   table   float16 terms added by the switch's table adder (F = 11), register starting at 0
//   ieee16  float16 terms added by IEEE binary16 addition (round to nearest even)
//   f32     float32 sums
//   f64     float64 sums (the exact reference: 32 floats fit)
// Each benchmark compares one method with a reference; counters: relative
// error |got - ref| / |ref| (keys with ref != 0) at the median, 99th
// percentile and max, the max of |got - ref| / sum |x| (what the bound
// limits; bound_8 etc. in docs/zebra.md), and the sum vector's
// ||got - ref||_2 / ||ref||_2. The time is that of the whole computation.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "wire/fp16.hpp"
#include "workload/sparse.hpp"

namespace {

using namespace ina;

enum class Method { Table, Ieee16, F32, F64 };
constexpr unsigned kKeys = 100'000;

double sum_of(Method m, const std::vector<float>& x) {
  const auto& t = fp16::switch_adder();
  switch (m) {
    case Method::Table: {
      uint16_t r = 0;
      for (float v : x) r = t.add(r, fp16::from_float(v));
      return fp16::to_float(r);
    }
    case Method::Ieee16: {
      uint16_t r = 0;
      for (float v : x) r = fp16::ieee_add(r, fp16::from_float(v));
      return fp16::to_float(r);
    }
    case Method::F32: {
      float r = 0;
      for (float v : x) r += v;
      return r;
    }
    case Method::F64: break;
  }
  double r = 0;
  for (float v : x) r += v;
  return r;
}

void BM_Fp16Error(benchmark::State& state, Method got, Method ref) {
  const unsigned n = static_cast<unsigned>(state.range(0));
  const double sigma = std::pow(10.0, -static_cast<double>(state.range(1)));
  std::vector<double> rel;
  double max_scaled = 0, sq_err = 0, sq_ref = 0;
  for (auto _ : state) {
    rel.clear();
    max_scaled = sq_err = sq_ref = 0;
    std::vector<float> x(n);
    for (uint64_t k = 0; k < kKeys; ++k) {
      double abs = 0;
      for (unsigned w = 0; w < n; ++w) {
        x[w] = workload::sparse_gradient(1, 0, w, k, sigma);
        abs += std::fabs(x[w]);
      }
      Rng order(k + 1);  // arrival order
      for (unsigned i = n; i > 1; --i) std::swap(x[i - 1], x[order.below(i)]);
      const double g = sum_of(got, x), r = sum_of(ref, x), e = std::fabs(g - r);
      if (r != 0) rel.push_back(e / std::fabs(r));
      if (abs > 0) max_scaled = std::max(max_scaled, e / abs);
      sq_err += e * e;
      sq_ref += r * r;
    }
  }
  std::sort(rel.begin(), rel.end());
  auto pct = [&](double p) { return rel.empty() ? 0 : rel[static_cast<size_t>(p * static_cast<double>(rel.size() - 1))]; };
  state.counters["rel_p50"] = pct(0.5);
  state.counters["rel_p99"] = pct(0.99);
  state.counters["rel_max"] = rel.empty() ? 0 : rel.back();
  state.counters["scaled_max"] = max_scaled;
  state.counters["vec_rel"] = sq_ref > 0 ? std::sqrt(sq_err / sq_ref) : 0;
}

void cases(benchmark::internal::Benchmark* b) {
  for (int64_t sigma_exp : {2, 4})
    for (int64_t n : {2, 8, 32}) b->Args({n, sigma_exp});
  b->ArgNames({"workers", "sigma_exp"})->Iterations(1)->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_Fp16Error, table_vs_ieee16, Method::Table, Method::Ieee16)->Name("fp16/table_vs_ieee16")->Apply(cases);
BENCHMARK_CAPTURE(BM_Fp16Error, table_vs_f32, Method::Table, Method::F32)->Name("fp16/table_vs_f32")->Apply(cases);
BENCHMARK_CAPTURE(BM_Fp16Error, table_vs_f64, Method::Table, Method::F64)->Name("fp16/table_vs_f64")->Apply(cases);
BENCHMARK_CAPTURE(BM_Fp16Error, ieee16_vs_f64, Method::Ieee16, Method::F64)->Name("fp16/ieee16_vs_f64")->Apply(cases);
BENCHMARK_CAPTURE(BM_Fp16Error, f32_vs_f64, Method::F32, Method::F64)->Name("fp16/f32_vs_f64")->Apply(cases);

}  // namespace
