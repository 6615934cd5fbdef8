// `ina worker`'s sparse workload (runtime/worker_app.hpp): the synthetic
// keys, the hot-set profile every worker computes alike, the hot keys file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "runtime/worker_app.hpp"

namespace ina::rt {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kBase = uint64_t{1} << 32;

TEST(WorkerAppSparse, KeysAreDistinctAscendingAndInTheirSpace) {
  for (const uint64_t pairs : {uint64_t{1}, uint64_t{5}, uint64_t{512}, uint64_t{20000}}) {
    const std::vector<uint64_t> k = synthetic_sparse_keys(1, 3, 0, 1, pairs);
    ASSERT_EQ(k.size(), pairs);
    EXPECT_TRUE(std::adjacent_find(k.begin(), k.end(), std::greater_equal<>()) == k.end()) << pairs;
    EXPECT_GE(k.front(), kBase);
    EXPECT_LT(k.back(), kBase + std::max<uint64_t>(64, 16 * pairs));
  }
  // A function of (seed, job, iteration, rank) only: every worker replays every rank's batch.
  EXPECT_EQ(synthetic_sparse_keys(1, 3, 2, 1, 512), synthetic_sparse_keys(1, 3, 2, 1, 512));
  EXPECT_NE(synthetic_sparse_keys(1, 3, 2, 1, 512), synthetic_sparse_keys(1, 3, 2, 0, 512));
  EXPECT_NE(synthetic_sparse_keys(1, 3, 2, 1, 512), synthetic_sparse_keys(1, 3, 3, 1, 512));
}

// The skew: u^3 over 16 x pairs keys puts P(index < x) = (x / U)^(1/3): a
// try lands in the first 1 % of the keys with probability 0.215. A batch of
// 20 000 distinct keys from 320 000 holds 200 of the first 3200 if drawn
// uniformly; here 2017 (seed 7), ten times as many: the hot rows of a sparse
// model, which a hot set catches.
TEST(WorkerAppSparse, TheHeadOfTheKeySpaceIsOverRepresented) {
  const std::vector<uint64_t> k = synthetic_sparse_keys(7, 1, 0, 0, 20000);
  const auto head = std::count_if(k.begin(), k.end(), [](uint64_t x) { return x < kBase + 3200; });
  EXPECT_EQ(head, 2017);
}

// Two ranks, one iteration: a key in both batches counts 2, in one 1; the
// ranking puts every count-2 key first, ascending, then the count-1 keys.
TEST(WorkerAppSparse, TheProfileRanksByCountThenKey) {
  const std::vector<uint64_t> a = synthetic_sparse_keys(5, 2, 0, 0, 300), b = synthetic_sparse_keys(5, 2, 0, 1, 300);
  std::vector<uint64_t> both, one;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(one));
  ASSERT_FALSE(both.empty());
  std::vector<uint64_t> want = both;
  want.insert(want.end(), one.begin(), one.end());
  EXPECT_EQ(profile_hot_keys(5, 2, 2, 300, 1, want.size()), want);
  EXPECT_EQ(profile_hot_keys(5, 2, 2, 300, 1, 10), std::vector<uint64_t>(want.begin(), want.begin() + 10));
}

TEST(WorkerAppSparse, HotKeysFileErrorsNameTheFileAndLine) {
  const fs::path p = fs::temp_directory_path() / ("ina_hot_" + std::to_string(getpid()) + ".txt");
  auto write = [&](const std::string& text) {
    std::ofstream f(p);
    f << text;
  };
  write("# hottest first\n42\n\n  7 \n4294967296\n");
  EXPECT_EQ(read_hot_keys_file(p.string()), (std::vector<uint64_t>{42, 7, 4294967296}));
  write("1\n2\n-3\n");
  try {
    read_hot_keys_file(p.string());
    ADD_FAILURE() << "a negative key was read";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(p.string() + ":3: '-3' is not a key"), std::string::npos) << e.what();
  }
  write("4294967296\n7\n4294967296\n");
  try {
    read_hot_keys_file(p.string());
    ADD_FAILURE() << "a key listed twice was read";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(p.string() + ":3: key 4294967296 is listed twice (first at line 1)"),
              std::string::npos) << e.what();
  }
  write("18446744073709551615\n");  // UINT64_MAX: reserved
  EXPECT_THROW(read_hot_keys_file(p.string()), RuntimeError);
  write("# nothing\n\n");
  try {
    read_hot_keys_file(p.string());
    ADD_FAILURE() << "an empty list was read";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("lists no key"), std::string::npos) << e.what();
  }
  fs::remove(p);
  EXPECT_THROW(read_hot_keys_file(p.string()), RuntimeError);
}

}  // namespace
}  // namespace ina::rt
