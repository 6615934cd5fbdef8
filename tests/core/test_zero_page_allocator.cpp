// core/zero_page_allocator.hpp: zeroed memory, faulted in only when touched.
#include "core/zero_page_allocator.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "resident_set.hpp"

namespace ina {
namespace {

using test::resident_mb;
using Buf = std::vector<int32_t, ZeroPageAllocator<int32_t>>;

// A std::vector<int32_t>(n) of 64 MB is resident at once (its zero-fill
// touches every page); this one only where written.
TEST(ZeroPageAllocator, ALargeBufferIsNotFaultedInUntilTouched) {
  const double before = resident_mb();
  Buf b(size_t{16} << 20);
  EXPECT_LT(resident_mb() - before, 8.0) << "MB resident after sizing a 64 MB buffer";
  for (size_t i = 0; i < b.size(); i += b.size() / 8) EXPECT_EQ(b[i], 0);
  b[b.size() - 1] = -3;
  EXPECT_EQ(b.back(), -3);
  EXPECT_LT(resident_mb() - before, 8.0) << "a few pages read or written";
}

TEST(ZeroPageAllocator, SmallAndGrownBuffersReadAsZerosAndKeepTheirValues) {
  Buf s(279);
  for (int32_t v : s) EXPECT_EQ(v, 0);
  s[5] = 9;
  s.resize(size_t{1} << 19);  // crosses kZeroPageMmapMin: a new mapping, the old values copied
  EXPECT_EQ(s[5], 9);
  EXPECT_EQ(s[278], 0);
  EXPECT_EQ(s[(size_t{1} << 19) - 1], 0);
}

}  // namespace
}  // namespace ina
