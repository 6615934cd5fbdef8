// End-to-end tests of the `ina` command: exit codes, messages, output files.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace fs = std::filesystem;

namespace {

using ina_test::CliResult;
CliResult run(const std::string& args) { return ina_test::run_ina(args); }
fs::path temp_dir(const std::string& name) { return ina_test::fresh_dir("cli_" + name); }
void write(const fs::path& p, const std::string& text) { ina_test::write_file(p, text); }

}  // namespace

TEST(Cli, BadScenarioNamesFileFieldAndValueAndRunsNothing) {
  const auto d = temp_dir("bad");
  write(d / "neg.toml", "[topology]\nlink_gbps = -5\n");
  auto r = run("sim " + (d / "neg.toml").string() + " --out " + (d / "out").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("neg.toml"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("topology.link_gbps"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-5"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d / "out")) << "nothing may run or be written for a bad file";

  write(d / "hosts.toml", "[topology]\nhosts = 8\n[workload]\njobs = 3\nworkers_per_job = 4\n");
  r = run("sim " + (d / "hosts.toml").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("workload.jobs"), std::string::npos) << r.output;

  r = run("sim " + (d / "missing.toml").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("missing.toml"), std::string::npos) << r.output;

  r = run("sim " + (d / "neg.toml").string() + " --set workload.jobs=zero");
  EXPECT_NE(r.status, 0);
}

// `make demo` (issue 12 item 5): the reduced Fig. 8 under the literal and
// the calibrated settings, one row per job count with both, and the line
// that says what differs. Calibrated, SwitchML's regions fall below a job's
// ~1 MB need at 8 jobs (640 KiB each) and it slows: its 8-job JCT exceeds
// its 1-job JCT there, and not under the literal settings.
TEST(Cli, DemoPrintsLiteralAndCalibratedSideBySide) {
  const fs::path d = temp_dir("demo");
  const auto r = run("demo --out " + d.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("literal | calibrated (hosts add "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("What differs: "), std::string::npos) << r.output;
  std::map<int, std::vector<double>> rows;  // jobs -> SwitchML, ATP, DSA literal, SwitchML, ATP, DSA calibrated
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    int jobs;
    double v[8];
    char bar1, bar2, x1, x2;
    if (std::sscanf(line.c_str(), "%d %c %lf %lf %lf %lf%c %c %lf %lf %lf %lf%c", &jobs, &bar1, &v[0], &v[1], &v[2], &v[3],
                    &x1, &bar2, &v[4], &v[5], &v[6], &v[7], &x2) == 13 && bar1 == '|' && bar2 == '|')
      rows[jobs] = {v[0], v[1], v[2], v[4], v[5], v[6]};
  }
  ASSERT_EQ(rows.size(), 4u) << r.output;
  EXPECT_GT(rows[8][3], 1.2 * rows[1][3]) << "calibrated SwitchML does not slow at 8 jobs";
  EXPECT_LT(rows[8][0], 1.05 * rows[1][0]) << "literal SwitchML slows at 8 jobs";
  EXPECT_TRUE(fs::exists(d / "literal" / "results.json"));
  EXPECT_TRUE(fs::exists(d / "calibrated" / "results.json"));
  fs::remove_all(d);
}

TEST(Cli, SmallScenarioWritesVerifiedResults) {
  const auto d = temp_dir("ok");
  write(d / "s.toml", R"(
[scenario]
name = "cli-test"
title = "cli test"
[workload]
jobs = 2
workers_per_job = 3
partition_mb = 0.02
[run]
schemes = ["switchml", "atp", "dsa"]
seeds = [1, 2]
[sweep]
key = "switch.memory_mb"
values = [0.01, 1]
)");
  const auto out = d / "out";
  auto r = run("sim " + (d / "s.toml").string() + " --out " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[12/12]"), std::string::npos) << "one progress line per run";
  for (const char* f : {"results.json", "results.csv", "avg_jct_ms.png", "runs.json"})
    EXPECT_TRUE(fs::exists(out / f) && fs::file_size(out / f) > 0) << f;

  const auto results = nlohmann::json::parse(std::ifstream(out / "results.json"));
  ASSERT_EQ(results.size(), 6u);  // 3 schemes x 2 memory sizes, averaged over 2 seeds
  for (const auto& rec : results) {
    EXPECT_EQ(rec["seeds"], 2);
    EXPECT_GT(rec["avg_jct_ms"].get<double>(), 0);
    EXPECT_EQ(rec["verify_errors"].get<double>(), 0);
    EXPECT_EQ(rec["unfinished_workers"].get<double>(), 0);
    EXPECT_GT(rec["verified_values"].get<double>(), 0);
  }
  const auto runs = nlohmann::json::parse(std::ifstream(out / "runs.json"));
  ASSERT_EQ(runs.size(), 12u);
  for (const auto& run : runs) {
    EXPECT_TRUE(run["ok"].get<bool>()) << run.dump();
    EXPECT_EQ(run["job_jct_ms"].size(), 2u);
  }
}

TEST(Cli, ParallelRunsGiveByteIdenticalResults) {
  const auto d = temp_dir("par");
  write(d / "s.toml", "[workload]\njobs = 2\nworkers_per_job = 3\npartition_mb = 0.02\nsend_jitter_us = 50\n"
                      "[run]\nschemes = [\"atp\", \"dsa\"]\nseeds = [1, 2, 3]\n");
  ASSERT_EQ(run("sim " + (d / "s.toml").string() + " --quiet -j 1 --out " + (d / "a").string()).status, 0);
  ASSERT_EQ(run("sim " + (d / "s.toml").string() + " --quiet -j 3 --out " + (d / "b").string()).status, 0);
  EXPECT_EQ(ina_test::read_file(d / "a" / "results.json"), ina_test::read_file(d / "b" / "results.json"));
  EXPECT_EQ(ina_test::read_file(d / "a" / "results.csv"), ina_test::read_file(d / "b" / "results.csv"));
}

// runs.json's peak_rss_mb with -j 1 is each run's own peak: the peak is
// reset before a run. A run with 96 MiB of switch registers (every one
// written when the arrays are made) comes first; the run after it, with
// 1 MiB, must not report the first one's peak.
TEST(Cli, RunsJsonHasEachRunsOwnPeakMemory) {
  const auto d = temp_dir("rss");
  write(d / "s.toml", "[workload]\njobs = 1\nworkers_per_job = 2\npartition_mb = 0.01\n[run]\nschemes = [\"atp\"]\n"
                      "[sweep]\nkey = \"switch.memory_mb\"\nvalues = [96, 1]\n");
  const auto out = d / "out";
  ASSERT_EQ(run("sim " + (d / "s.toml").string() + " --quiet -j 1 --out " + out.string()).status, 0);
  const auto runs = nlohmann::json::parse(std::ifstream(out / "runs.json"));
  ASSERT_EQ(runs.size(), 2u);
  const double big = runs[0]["peak_rss_mb"].get<double>(), small = runs[1]["peak_rss_mb"].get<double>();
  EXPECT_GT(big, small + 64) << runs.dump();
  for (const auto& r : runs) EXPECT_LE(r["cpu_s"].get<double>(), r["wall_s"].get<double>() + 0.01) << r.dump();
  fs::remove_all(d);
}

TEST(Cli, MaxSimTimeFailsTheRunWithExitStatus3) {
  const auto d = temp_dir("slow");
  write(d / "s.toml", "[workload]\njobs = 1\nworkers_per_job = 2\npartition_mb = 0.05\n[run]\nschemes = [\"dsa\"]\nmax_sim_ms = 0.2\n");
  auto r = run("sim " + (d / "s.toml").string() + " --quiet");
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_NE(r.output.find("did not finish"), std::string::npos) << r.output;
}

TEST(Cli, BenchSimRunsAndReportsHopsPerSecond) {
  auto r = run("bench sim --benchmark_filter=star_line_rate_1ms/16 --benchmark_min_time=0.01");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("hops_per_s"), std::string::npos) << r.output;
  r = run("bench no-such-suite");
  EXPECT_EQ(r.status, 2) << r.output;
}

// `ina schemes` is how scripts (scripts/netns-cluster) learn the registry:
// catches a scheme registered for the wrong engine or missing its PS flag.
TEST(Cli, SchemesListsTheRegistryPerEngine) {
  const auto r = run("schemes --engine runtime --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  std::vector<std::pair<std::string, bool>> got;
  for (const auto& s : j) got.emplace_back(s.at("name").get<std::string>(), s.at("has_ps").get<bool>());
  EXPECT_EQ(got, (std::vector<std::pair<std::string, bool>>{
                     {"switchml", false}, {"atp", true}, {"dsa", true}, {"rar", false}, {"h-ar", false}, {"rina", false},
                     {"zebra", true}, {"ps-lite", true}}));
  EXPECT_EQ(j[0].at("aliases"), nlohmann::json::array({"isolated"}));
  const auto all = nlohmann::json::parse(run("schemes --json").output);
  EXPECT_EQ(all.size(), 14u);
  std::vector<std::string> network;
  for (const auto& s : nlohmann::json::parse(run("schemes --engine network --json").output))
    network.push_back(s.at("name").get<std::string>());
  EXPECT_EQ(network, (std::vector<std::string>{"atp", "dsa", "ps", "rar", "h-ar", "rina"}));
  std::vector<std::pair<std::string, std::string>> sparse;
  for (const auto& s : nlohmann::json::parse(run("schemes --engine sparse --json").output))
    sparse.emplace_back(s.at("name").get<std::string>(), s.at("sparse").get<std::string>());
  EXPECT_EQ(sparse, (std::vector<std::pair<std::string, std::string>>{
                        {"switchml", "dense"}, {"zebra", "hot-ina"}, {"ps-lite", "push"}}));
  EXPECT_NE(run("schemes --engine nowhere").status, 0);
}
