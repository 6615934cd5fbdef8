// experiment/step_records.hpp: a ring run's step records written as CSV
// (scenario key run.step_records).
#include "experiment/step_records.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "experiment/collective.hpp"
#include "read_csv.hpp"
#include "ring_settings.hpp"
#include "topo/graph.hpp"

namespace ina {
namespace {

using test::read_csv;

// RAR over 8 hosts of a k = 4 fat-tree: the file is named by the run's
// digest, has a row per endpoint and step (8 x the run's 14 steps at
// least), and each row's times are the records' own, in order.
TEST(StepRecords, ARingRunWritesJobZerosRecordsNamedByItsDigest) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("ina-steps-{}", ::getpid());
  std::filesystem::remove_all(dir);
  auto s = test::small_ring(0.0625);
  s.workers_per_job = {8};
  const auto g = *topo::generate("fat-tree:4");
  const auto plain = exp::run_collective(g, "rar", s);
  ASSERT_TRUE(plain.ok) << plain.problems;
  EXPECT_FALSE(std::filesystem::exists(dir)) << "no records unless asked";
  s.step_records = dir.string();
  const auto r = exp::run_collective(g, "rar", s);
  ASSERT_TRUE(r.ok) << r.problems;
  EXPECT_EQ(r.digest, plain.digest) << "writing records changes nothing of the run";
  const auto rows = read_csv((dir / fmt::format("steps-{:016x}.csv", r.digest)).string());
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0][0], "endpoint");
  ASSERT_EQ(r.step_log.size(), 8u);
  size_t n = 0;
  for (size_t e = 0; e < r.step_log.size(); ++e) {
    ASSERT_GE(r.step_log[e].size(), r.steps);
    for (size_t i = 0; i < r.step_log[e].size(); ++i) {
      const auto& rec = r.step_log[e][i];
      const auto& row = rows.at(1 + n++);
      ASSERT_EQ(row.size(), 11u);
      EXPECT_EQ(row[0], std::to_string(e));
      EXPECT_EQ(row[1], std::to_string(i));
      EXPECT_EQ(row[3], std::to_string(rec.send_pkts));
      EXPECT_EQ(row[6], rec.current == kNever ? "" : std::to_string(rec.current));
      EXPECT_EQ(row[10], rec.done == kNever ? "" : std::to_string(rec.done));
    }
  }
  EXPECT_EQ(rows.size(), 1 + n);
  std::filesystem::remove_all(dir);
}

TEST(StepRecords, AnUnwritableDirectoryIsAnErrorNamingTheFile) {
  const std::vector<std::vector<host::RingStepRecord>> log(1, std::vector<host::RingStepRecord>(2));
  try {
    exp::write_step_records("/proc/no-such-dir", 0xabc, log);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/no-such-dir/steps-0000000000000abc.csv"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ina
