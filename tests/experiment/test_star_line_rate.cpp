// The star workload of `ina bench sim` (experiment/star_line_rate.hpp) and
// its ns-3 baseline (bench/baselines/ns3_star.cc, ina-ns3-star) count the
// same hops: both against numbers derived by hand from the workload.
//
// By hand: a packet is 50 + 4 * 64 = 306 B, s = 306 * 8 / 100 Gbps =
// 24480 ps; d = 2.5 us = 2'500'000 ps. Every host sends its window (512) at
// 0, so its uplink is never idle: its k-th packet (k = 0, 1, ...) reaches the
// switch at (k + 1) s + d, together with every other host's k-th, which
// completes aggregation k there; the switch->host link is free by then (it
// carried result k - 1 from k s + d on), so result k reaches every host at
// (k + 2) s + 2 d. Within T (a delivery at exactly T counts), per host:
//   up   = floor((T - d) / s)       data packets delivered to the switch
//   down = floor((T - 2 d) / s) - 1 results delivered to the host
// and aggregations = up. T = 10 us, 4 hosts: up = floor(7'500'000 / 24480)
// = 306, down = floor(5'000'000 / 24480) - 1 = 204 - 1 = 203: 1224 + 812 =
// 2036 hops, 306 aggregations. T = 7.448 us = 2 d + 100 s: up =
// floor(4'948'000 / 24480) = 202, down = 100 - 1 = 99 (the last lands at
// exactly T): 808 + 396 = 1204 hops, 202 aggregations.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "experiment/star_line_rate.hpp"

namespace {

using namespace ina;

struct Expected {
  Time duration;
  uint64_t up, down;  // all 4 hosts
};
const Expected kTen{10 * kUs, 4 * 306, 4 * 203};
const Expected kEdge{7448 * kNs, 4 * 202, 4 * 99};

TEST(StarLineRate, InaCountsTheHopsDerivedByHand) {
  for (const auto& e : {kTen, kEdge}) {
    exp::StarLineRateSettings s;
    s.hosts = 4;
    s.duration = e.duration;
    const auto r = exp::run_star_line_rate(s);
    SCOPED_TRACE(e.duration);
    EXPECT_EQ(r.up_hops, e.up);
    EXPECT_EQ(r.down_hops, e.down);
    EXPECT_EQ(r.hops, e.up + e.down);
    EXPECT_EQ(r.aggregations, e.up / 4);
    EXPECT_EQ(r.retransmits, 0u);
    EXPECT_EQ(r.values_checked, e.down * 64);  // every value of every result delivered
    EXPECT_EQ(r.bad_values, 0u);               // each is 4 (= 4 hosts x 1)
    EXPECT_EQ(r.pool_slots, 10240u);  // 5 MiB of 256 B aggregators, two pools
  }
}

const std::filesystem::path kNs3 = std::filesystem::path(INA_BINARY).parent_path() / "ina-ns3-star";

TEST(StarLineRate, Ns3CountsTheSameHops) {
  if (!std::filesystem::exists(kNs3)) GTEST_SKIP() << kNs3 << " is not built (ns-3, Debian's libns3-dev, not installed)";
  for (const auto& e : {kTen, kEdge}) {
    const auto run = ina_test::run_command(kNs3.string() + " --hosts=4 --pool=10240 --window=512 --duration-us=" +
                                           std::to_string(to_us(e.duration)));
    ASSERT_EQ(run.status, 0) << run.output;
    const auto j = nlohmann::json::parse(run.output);
    SCOPED_TRACE(run.output);
    EXPECT_EQ(j.at("wire_bytes").get<int>(), 306);
    EXPECT_EQ(j.at("up_hops").get<uint64_t>(), e.up);
    EXPECT_EQ(j.at("down_hops").get<uint64_t>(), e.down);
    EXPECT_EQ(j.at("hops").get<uint64_t>(), e.up + e.down);
    EXPECT_EQ(j.at("aggregations").get<uint64_t>(), e.up / 4);
    EXPECT_EQ(j.at("bad_values").get<uint64_t>(), 0u);  // every result value is 4 (= 4 hosts x 1)
  }
}

// Without ina-ns3-star next to `ina`, --vs-ns3 fails naming what is missing.
TEST(StarLineRate, VsNs3WithoutNs3SaysWhatIsMissing) {
  const auto dir = ina_test::fresh_dir("vs_ns3");
  std::error_code ec;
  std::filesystem::create_hard_link(INA_BINARY, dir / "ina", ec);
  if (ec) std::filesystem::copy_file(INA_BINARY, dir / "ina");
  const auto run = ina_test::run_command((dir / "ina").string() + " bench sim --vs-ns3");
  std::filesystem::remove_all(dir);
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.output.find((dir / "ina-ns3-star").string() + ", which is not built"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("libns3-dev"), std::string::npos) << run.output;
}

// --rounds: at least one, and only with --vs-ns3; each error names the flag and the value.
TEST(StarLineRate, VsNs3RoundsAreCheckedBeforeAnythingRuns) {
  const auto zero = ina_test::run_command(std::string(INA_BINARY) + " bench sim --vs-ns3 --rounds 0");
  EXPECT_EQ(zero.status, 2);  // a usage error
  EXPECT_NE(zero.output.find("--rounds: Value 0 not in range 1 to 1000"), std::string::npos) << zero.output;
  const auto alone = ina_test::run_command(std::string(INA_BINARY) + " bench sim --rounds 2");
  EXPECT_EQ(alone.status, 2);
  EXPECT_NE(alone.output.find("--rounds goes with --vs-ns3"), std::string::npos) << alone.output;
}

// --json is opened (its directory made) before the rounds: a file that
// cannot be written fails at once, naming the flag and the path, not after
// a minute of rounds.
TEST(StarLineRate, VsNs3JsonThatCannotBeWrittenFailsBeforeAnyRound) {
  if (!std::filesystem::exists(std::filesystem::path(INA_BINARY).parent_path() / "ina-ns3-star"))
    GTEST_SKIP() << "ina-ns3-star is not built (libns3-dev)";
  const auto run = ina_test::run_command(std::string(INA_BINARY) + " bench sim --vs-ns3 --rounds 1 --json /proc/none/x.json");
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.output.find("--json '/proc/none/x.json': cannot write the file"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("round 1"), std::string::npos) << run.output;
}

}  // namespace
