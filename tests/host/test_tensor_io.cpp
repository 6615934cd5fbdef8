// SyntheticTensor (host/tensor_io.hpp): the ranks' gradients sum to the
// closed form, and a written result is checked value by value, on any
// offset and length (the loops run vectorized with a scalar tail).
#include <gtest/gtest.h>

#include <vector>

#include "host/tensor_io.hpp"

namespace ina::host {
namespace {

constexpr uint64_t kStream = 0xfeed;
constexpr unsigned kRanks = 5;

struct Span {
  uint64_t off;
  size_t len;
};
// Lengths around the vector widths (8 and 16 lanes), at offsets that put
// the index's low bits and a large index through the hash.
const std::vector<Span> kSpans = {{0, 1}, {5, 7}, {3, 63}, {64, 64}, {1000003, 65}, {(uint64_t{1} << 40) + 9, 130}};

TEST(SyntheticTensor, TheRanksGradientsSumToTheResultOnAnySpan) {
  for (const auto [off, len] : kSpans) {
    std::vector<int64_t> sum(len, 0);
    for (unsigned r = 0; r < kRanks; ++r) {
      SyntheticTensor t(kStream, r, kRanks);
      std::vector<int32_t> g(len);
      t.read_gradient(off, g);
      for (size_t k = 0; k < len; ++k) sum[k] += g[k];
    }
    SyntheticTensor t(kStream, 0, kRanks);
    std::vector<int32_t> result(len);
    t.read_result(off, result);
    for (size_t k = 0; k < len; ++k) {
      EXPECT_EQ(result[k], static_cast<int32_t>(sum[k])) << "offset " << off << " value " << k;
      EXPECT_EQ(result[k], t.expected(off + k)) << "offset " << off << " value " << k;
    }
  }
}

TEST(SyntheticTensor, AWrittenResultCountsEachWrongValueOnce) {
  SyntheticTensor t(kStream, 2, kRanks);
  uint64_t values = 0, wrong = 0;
  for (const auto [off, len] : kSpans) {
    std::vector<int32_t> result(len);
    t.read_result(off, result);
    t.write_result(off, result);
    EXPECT_EQ(t.mismatches(), wrong) << "offset " << off;
    // One contribution missing from the last value (the scalar tail when
    // the length is not a multiple of the vector width), then a wrong first.
    result.back() -= 1;
    t.write_result(off, result);
    result.back() += 1;
    result.front() += 7;
    t.write_result(off, result);
    wrong += 2;
    values += 3 * len;
    EXPECT_EQ(t.mismatches(), wrong) << "offset " << off;
    EXPECT_EQ(t.checked(), values) << "offset " << off;
  }
}

}  // namespace
}  // namespace ina::host
