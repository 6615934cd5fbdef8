// `ina bench quant`: the communicator's quantizer (wire/quant.hpp), float ->
// int32 fixed point, on 4 Mi floats (a 16 MiB tensor): the single-precision
// loop that power-of-two scales take (`encode`, what every agreed scale is)
// against the double-precision reference loop (`encode_double`), and the
// dequantizer (`decode`). Counter: ns per value.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <vector>

#include "wire/quant.hpp"

namespace {

constexpr size_t kValues = size_t{4} << 20;

std::vector<float> tensor() {
  std::vector<float> x(kValues);
  for (size_t i = 0; i < kValues; ++i) x[i] = static_cast<float>(std::sin(static_cast<double>(i)) * 3.0);
  return x;
}

template <typename F>
void run(benchmark::State& state, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) f();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state.counters["ns_per_value"] = s * 1e9 / (static_cast<double>(state.iterations()) * kValues);
}

void BM_Encode(benchmark::State& state, bool single) {
  const std::vector<float> x = tensor();
  std::vector<int32_t> q(kValues);
  const ina::FixedPointCodec c(std::ldexp(1.0, 28), 2);
  run(state, [&] {
    const ina::QuantStats st = single ? c.encode(x, q) : c.encode_double(x, q);
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  });
}

void BM_Decode(benchmark::State& state) {
  std::vector<int32_t> q(kValues, 123456);
  std::vector<float> out(kValues);
  const ina::FixedPointCodec c(std::ldexp(1.0, 28), 2);
  run(state, [&] {
    c.decode(q, out);
    benchmark::ClobberMemory();
  });
}

BENCHMARK_CAPTURE(BM_Encode, pow2_single, true)->Name("quant/encode_pow2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, double_reference, false)->Name("quant/encode_double")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Decode)->Name("quant/decode")->Unit(benchmark::kMillisecond);

}  // namespace
