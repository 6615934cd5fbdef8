// Values a ring endpoint holds, stored by what they are (host/value_store.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "host/tensor_io.hpp"
#include "host/value_store.hpp"

namespace ina::host {
namespace {

constexpr uint64_t kStoreStream = 0x5eed;
constexpr uint64_t kBase = 1000;  // the store's position 0 is tensor index 1000

std::vector<int32_t> gradient(unsigned rank, unsigned n, uint64_t first, size_t len) {
  SyntheticTensor t(kStoreStream, rank, n);
  std::vector<int32_t> v(len);
  t.read_gradient(first, v);
  return v;
}

std::vector<int32_t> read_all(const ValueStore& s) {
  std::vector<int32_t> v(s.size());
  s.read(0, v);
  return v;
}

// A rank's gradient written packet by packet, in any order, is one record
// of a few dozen bytes, and reads back value for value.
TEST(ValueStore, AGradientWrittenPacketByPacketIsOneRecord) {
  const size_t len = 10000, width = 64;
  const auto g = gradient(3, 8, kBase, len);
  std::vector<size_t> order(len / width + 1);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  ValueStore s;
  s.assign(len, kBase);
  for (const size_t p : order) {
    const size_t at = p * width, n = std::min(width, len - at);
    s.write(at, std::span(g).subspan(at, n), AffineBasis{kStoreStream});
  }
  EXPECT_EQ(s.records(), 1u);
  EXPECT_LT(s.bytes(), 200u);
  EXPECT_EQ(read_all(s), g);
}

// A partial sum built by adding ranks' gradients packet by packet is the
// sum, still one record.
TEST(ValueStore, AddingGradientsKeepsTheExactSumAsOneRecord) {
  const size_t len = 4096, width = 256;
  ValueStore s;
  s.assign(len, kBase);
  std::vector<int32_t> sum(len, 0);
  for (unsigned r = 0; r < 5; ++r) {
    const auto g = gradient(r, 5, kBase, len);
    for (size_t at = 0; at < len; at += width) s.add(at, std::span(g).subspan(at, width), AffineBasis{kStoreStream});
    for (size_t i = 0; i < len; ++i) sum[i] += g[i];
  }
  EXPECT_EQ(s.records(), 1u);
  EXPECT_EQ(read_all(s), sum);
  // The complete sum is what SyntheticTensor checks a result against.
  SyntheticTensor check(kStoreStream, 0, 5);
  check.write_result(kBase, read_all(s));
  EXPECT_EQ(check.mismatches(), 0u);
}

// A wrong value (a lost or doubled contribution upstream) fits no form: it
// is kept as it is, so the result check downstream still sees it.
TEST(ValueStore, AValueThatFitsNoFormIsKeptAsItIs) {
  const size_t len = 512;
  auto g = gradient(1, 4, kBase, len);
  g[300] += 1;
  ValueStore s;
  s.assign(len, kBase);
  for (size_t at = 0; at < len; at += 64) s.write(at, std::span(g).subspan(at, 64), AffineBasis{kStoreStream});
  EXPECT_EQ(read_all(s), g);
  // The packet holding index 300 is plain; those before and after are records.
  EXPECT_EQ(s.records(), 3u);
  SyntheticTensor check(kStoreStream, 1, 4);
  std::vector<int32_t> out(len);
  s.read(0, out);
  EXPECT_EQ(out[300], gradient(1, 4, kBase + 300, 1)[0] + 1);
}

// Overwriting the middle of a record splits it; writing the old values
// back joins it again. Never-written positions read 0.
TEST(ValueStore, OverwritesSplitAndJoinRecords) {
  const size_t len = 1024;
  const auto a = gradient(0, 2, kBase, len), b = gradient(1, 2, kBase, len);
  ValueStore s;
  s.assign(len, kBase);
  s.write(0, std::span(a).subspan(0, 768), AffineBasis{kStoreStream});
  auto want = a;
  std::fill(want.begin() + 768, want.end(), 0);
  EXPECT_EQ(read_all(s), want);
  s.write(200, std::span(b).subspan(200, 100), AffineBasis{kStoreStream});
  std::copy(b.begin() + 200, b.begin() + 300, want.begin() + 200);
  EXPECT_EQ(read_all(s), want);
  EXPECT_EQ(s.records(), 3u);
  s.write(200, std::span(a).subspan(200, 100), AffineBasis{kStoreStream});
  EXPECT_EQ(s.records(), 1u);
  std::copy(a.begin() + 200, a.begin() + 300, want.begin() + 200);
  EXPECT_EQ(read_all(s), want);
}

// Random writes and adds of gradients, sums and arbitrary values at random
// places, against a plain array.
TEST(ValueStore, MatchesAPlainArrayUnderRandomWritesAndAdds) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 20; ++round) {
    const size_t len = 1 + rng() % 3000;
    ValueStore s;
    s.assign(len, kBase);
    std::vector<int32_t> ref(len, 0);
    for (int op = 0; op < 200; ++op) {
      const size_t at = rng() % len, n = 1 + rng() % std::min<size_t>(300, len - at);
      std::vector<int32_t> v;
      switch (rng() % 3) {
        case 0: v = gradient(static_cast<unsigned>(rng() % 6), 6, kBase + at, n); break;
        case 1: v.assign(n, static_cast<int32_t>(rng() % 100)); break;
        default:
          v.resize(n);
          for (auto& x : v) x = static_cast<int32_t>(rng());
      }
      if (rng() % 2) {
        s.write(at, v, AffineBasis{kStoreStream});
        std::copy(v.begin(), v.end(), ref.begin() + static_cast<std::ptrdiff_t>(at));
      } else {
        s.add(at, v, AffineBasis{kStoreStream});
        for (size_t k = 0; k < n; ++k)
          ref[at + k] = static_cast<int32_t>(static_cast<uint32_t>(ref[at + k]) + static_cast<uint32_t>(v[k]));
      }
      const size_t rat = rng() % len, rn = 1 + rng() % (len - rat);
      std::vector<int32_t> got(rn);
      s.read(rat, got);
      ASSERT_TRUE(std::equal(got.begin(), got.end(), ref.begin() + static_cast<std::ptrdiff_t>(rat)))
          << "round " << round << " op " << op;
    }
    EXPECT_EQ(read_all(s), ref);
  }
}

// A store holding records that gets a write without a basis (the next op's
// tensor has none) becomes the flat array, every value kept.
TEST(ValueStore, AWriteWithoutABasisTurnsRecordsIntoTheFlatArray) {
  const size_t len = 300;
  const auto g = gradient(2, 3, kBase, len);
  ValueStore s;
  s.assign(len, kBase);
  s.write(0, g, AffineBasis{kStoreStream});
  ASSERT_EQ(s.records(), 1u);
  std::vector<int32_t> v(10, -5);
  s.write(100, v, std::nullopt);
  auto want = g;
  std::fill_n(want.begin() + 100, 10, -5);
  EXPECT_EQ(read_all(s), want);
  EXPECT_EQ(s.records(), 0u);
  EXPECT_EQ(s.bytes(), 4u * len);
}

// A long plain run overwritten packet by packet keeps every value and its
// pieces join again into one run.
TEST(ValueStore, APlainRunOverwrittenPacketByPacketStaysExact) {
  const size_t len = 4096;
  std::vector<int32_t> noise(len);
  std::mt19937 rng(3);
  for (auto& x : noise) x = static_cast<int32_t>(rng());
  ValueStore s;
  s.assign(len, kBase);
  s.write(0, noise, AffineBasis{kStoreStream});
  ASSERT_EQ(s.records(), 1u);  // one plain run
  for (auto& x : noise) x = static_cast<int32_t>(rng());
  for (size_t at = 0; at < len; at += 64) s.write(at, std::span(noise).subspan(at, 64), AffineBasis{kStoreStream});
  EXPECT_EQ(read_all(s), noise);
  EXPECT_EQ(s.records(), 1u);
}

// Without a basis (a real tensor) the store is one flat array.
TEST(ValueStore, WithoutABasisItIsAFlatArray) {
  ValueStore s;
  s.assign(1000, 0);
  EXPECT_EQ(s.bytes(), 0u);  // nothing until the first write
  std::vector<int32_t> v(100, 7);
  s.write(500, v, std::nullopt);
  EXPECT_EQ(s.records(), 0u);
  EXPECT_EQ(s.bytes(), 4000u);
  std::vector<int32_t> got(1000);
  s.read(0, got);
  EXPECT_EQ(got[499], 0);
  EXPECT_EQ(got[500], 7);
  s.clear();
  EXPECT_EQ(s.bytes(), 0u);
  EXPECT_TRUE(s.empty());
}

}  // namespace
}  // namespace ina::host
