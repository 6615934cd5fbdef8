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

// `ina demo dsa`: the reduced Fig. 8 under the literal and
// the calibrated settings, one row per job count with both, and the line
// that says what differs. Calibrated, SwitchML's regions fall below a job's
// ~1 MB need at 8 jobs (640 KiB each) and it slows: its 8-job JCT exceeds
// its 1-job JCT there, and not under the literal settings.
TEST(Cli, DemoPrintsLiteralAndCalibratedSideBySide) {
  const fs::path d = temp_dir("demo");
  const auto r = run("demo dsa --out " + d.string());
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
// reset before a run. A run whose 393 216 tasks write every one of the
// switch's 393 216 aggregators (96 MiB of values: SwitchML's slots stay
// taken) comes first; the run after it, with 41 tasks, must not report
// the first one's peak.
TEST(Cli, RunsJsonHasEachRunsOwnPeakMemory) {
  const auto d = temp_dir("rss");
  write(d / "s.toml", "[switch]\nmemory_mb = 96\n[workload]\njobs = 1\nworkers_per_job = 2\n[run]\nschemes = [\"switchml\"]\n"
                      "[sweep]\nkey = \"workload.partition_mb\"\nvalues = [96, 0.01]\n");
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

// ---- one CLI: --set on every scenario-driven command, the same options everywhere ----

namespace {

// A sweep of 2 x 3 = 6 tiny runs (one scheme, 2 job counts, 3 seeds).
fs::path tiny_sweep(const fs::path& d) {
  write(d / "s.toml", "[workload]\nworkers_per_job = 2\npartition_mb = 0.01\n[run]\nschemes = [\"atp\"]\n"
                      "seeds = [1, 2, 3]\n[sweep]\nkey = \"workload.jobs\"\nvalues = [1, 2, 3]\n");
  return d / "s.toml";
}

// (x, seed) of every run in runs.json.
std::vector<std::pair<double, uint64_t>> runs_of(const fs::path& out) {
  std::vector<std::pair<double, uint64_t>> got;
  for (const auto& r : nlohmann::json::parse(std::ifstream(out / "runs.json")))
    got.emplace_back(r.at("x").get<double>(), r.at("seed").get<uint64_t>());
  return got;
}

// An ODCN of 4 units with 5 generated DML jobs, and a [sweep] over the job count.
fs::path tiny_aoi(const fs::path& d) {
  write(d / "a.toml", "[net]\nunits = 4\n[dml]\ncount = 5\n[sweep]\nkey = \"dml.count\"\nvalues = [5, 7, 9]\n"
                      "variants = [\"inc-tw\", \"noinc-fcfs\"]\nseeds = [1, 2]\n");
  return d / "a.toml";
}

}  // namespace

TEST(CliSet, RunSeedsShrinksASweepToOneSeedsRuns) {
  const auto d = temp_dir("set_seeds");
  const auto r = run("sim " + tiny_sweep(d).string() + " --quiet --set run.seeds=2 --out " + (d / "o").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(runs_of(d / "o"), (std::vector<std::pair<double, uint64_t>>{{1, 2}, {2, 2}, {3, 2}}));
  const auto results = nlohmann::json::parse(std::ifstream(d / "o" / "results.json"));
  ASSERT_EQ(results.size(), 3u);
  for (const auto& rec : results) EXPECT_EQ(rec.at("seeds"), 1) << rec.dump();
  fs::remove_all(d);
}

TEST(CliSet, SweepValuesRunsExactlyThosePointsAsListOrTomlArray) {
  const auto d = temp_dir("set_values");
  const std::string f = tiny_sweep(d).string();
  auto r = run("sim " + f + " --quiet --set sweep.values=1,3 --set run.seeds=1 --out " + (d / "a").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(runs_of(d / "a"), (std::vector<std::pair<double, uint64_t>>{{1, 1}, {3, 1}}));
  r = run("sim " + f + " --quiet --set 'sweep.values=[1, 3]' --set 'run.seeds=[1]' --out " + (d / "b").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(ina_test::read_file(d / "a" / "results.json"), ina_test::read_file(d / "b" / "results.json"));
  fs::remove_all(d);
}

TEST(CliSet, BadArrayValuesErrorNamingTheFieldAndValue) {
  const auto d = temp_dir("set_bad");
  const std::string f = tiny_sweep(d).string();
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"--set run.seeds=1,x", {"field 'run.seeds'", "expected non-negative integers", "(value: x)", "--set run.seeds=1,x"}},
      {"--set run.seeds=1,-4", {"field 'run.seeds'", "(value: -4)"}},
      {"--set sweep.values=1,,3", {"--set sweep.values=1,,3", "empty element"}},
      {"--set sweep.values=", {"field 'sweep.values'", "must not be empty"}},
      {"--set 'sweep.values=[1, 3'", {"sweep.values", "not a TOML array"}},
      {"--set sweep.values=1,abc", {"[sweep workload.jobs = abc]: field 'workload.jobs'", "expected an integer"}},
      {"--set run.schemes=atp,nosuch", {"field 'run.schemes'", "unknown scheme", "nosuch"}},
      {"--set workload.jobs=2", {"--set workload.jobs=2", "the sweep's key", "sweep.values"}},
      {"--set workload.bogus=1", {"field 'workload.bogus'", "unknown key"}},
      {"--set series.x=1", {"field 'series'", "expected [[series]] tables", "--set series.x=1"}},
  };
  for (const auto& [set, needles] : cases) {
    const auto r = run("sim " + f + " --quiet " + set + " --out " + (d / "o").string());
    EXPECT_EQ(r.status, 2) << set << "\n" << r.output;
    for (const auto& n : needles) EXPECT_NE(r.output.find(n), std::string::npos) << set << ": no '" << n << "' in\n" << r.output;
    EXPECT_FALSE(fs::exists(d / "o")) << set << ": nothing may run";
  }
  fs::remove_all(d);
}

TEST(CliSet, AoiSweepTakesSetAndShowsProgress) {
  const auto d = temp_dir("aoi_sweep_set");
  const std::string f = tiny_aoi(d).string();
  // The file's 3 x 2 seeds x 2 variants = 12 runs, shrunk to 2 x 1 x 1.
  auto r = run("plan aoi-sweep " + f + " --out " + (d / "a").string() +
               " --set sweep.values=5,9 --set sweep.seeds=3 --set sweep.variants=inc-tw");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[1/2] dml.count = 5, seed 3: INC-TW: CT-BTI"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[2/2] dml.count = 9, seed 3: INC-TW: CT-BTI"), std::string::npos) << r.output;
  auto runs = nlohmann::json::parse(std::ifstream(d / "a" / "runs.json"));
  ASSERT_EQ(runs.size(), 2u) << runs.dump();
  for (const auto& x : runs) {
    EXPECT_EQ(x.at("seed"), 3);
    EXPECT_EQ(x.at("jobs").get<double>(), x.at("x").get<double>());
  }
  // A scenario value at every point, and the errors.
  r = run("plan aoi-sweep " + f + " --out " + (d / "b").string() + " --quiet --set sweep.values=5 --set sweep.seeds=1 "
          "--set sweep.variants=inc-tw --set dml.workers=2");
  ASSERT_EQ(r.status, 0) << r.output;
  r = run("plan aoi-sweep " + f + " --out " + (d / "c").string() + " --set sweep.seeds=1,y");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("field 'sweep.seeds': expected non-negative integers (value: y)"), std::string::npos) << r.output;
  r = run("plan aoi-sweep " + f + " --out " + (d / "c").string() + " --set dml.count=3");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--set dml.count=3: dml.count is the sweep's x key"), std::string::npos) << r.output;
  // Strict FCFS is a variant of FCFS only, named in the runs.
  r = run("plan aoi-sweep " + f + " --out " + (d / "c").string() + " --set sweep.variants=inc-tw-strict");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("'inc-tw-strict': -strict is for fcfs"), std::string::npos) << r.output;
  r = run("plan aoi " + f + " --algo tw --strict-fcfs");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--strict-fcfs: for --algo fcfs"), std::string::npos) << r.output;
  r = run("plan aoi-sweep " + f + " --out " + (d / "d").string() +
          " --quiet --set sweep.values=5 --set sweep.seeds=1 --set sweep.variants=noinc-fcfs-strict");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(d / "d" / "runs.json")).at(0).at("variant"), "noINC-FCFS-strict");
  fs::remove_all(d);
}

TEST(CliSet, AoiSweepInParallelGivesTheSameRuns) {
  const auto d = temp_dir("aoi_sweep_j");
  const std::string f = tiny_aoi(d).string();
  ASSERT_EQ(run("plan aoi-sweep " + f + " --quiet -j 1 --out " + (d / "a").string()).status, 0);
  const auto r = run("plan aoi-sweep " + f + " --quiet -j 3 --out " + (d / "b").string());
  ASSERT_EQ(r.status, 0) << r.output;
  auto strip = [](nlohmann::json runs) {  // solve_s is a wall-clock time
    for (auto& x : runs) x.erase("solve_s");
    return runs;
  };
  const auto a = strip(nlohmann::json::parse(std::ifstream(d / "a" / "runs.json")));
  EXPECT_EQ(a.size(), 12u);
  EXPECT_EQ(a, strip(nlohmann::json::parse(std::ifstream(d / "b" / "runs.json"))));
  // results.json and .csv hold no wall-clock time: a rerun leaves committed results unchanged.
  for (const char* f : {"results.json", "results.csv"}) {
    const auto text = [&](const char* dir) {
      std::ifstream in(d / dir / f);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    EXPECT_EQ(text("a"), text("b")) << f;
    EXPECT_EQ(text("a").find("solve_s"), std::string::npos) << f;
  }
  fs::remove_all(d);
}

TEST(CliConsistency, PlanAoiTakesTheFilePositionallyAndOutIsADirectory) {
  const auto d = temp_dir("aoi_pos");
  const std::string f = tiny_aoi(d).string();
  const auto pos = run("plan aoi " + f + " --json --quiet");
  ASSERT_EQ(pos.status, 0) << pos.output;
  const auto old = run("plan aoi --scenario " + f + " --json --quiet");
  ASSERT_EQ(old.status, 0) << old.output;
  auto ct = [](const std::string& out) { return nlohmann::json::parse(out).at("ct_bti_s").get<double>(); };
  EXPECT_EQ(ct(pos.output), ct(old.output));
  // Either form alone, once: help marks neither REQUIRED; none or both is a usage error.
  for (const std::string cmd : {"plan aoi", "plan aoi-sweep"}) {
    const auto help = run(cmd + " --help");
    EXPECT_EQ(help.output.find("file TEXT REQUIRED"), std::string::npos) << help.output;
    EXPECT_EQ(help.output.find("--scenario TEXT REQUIRED"), std::string::npos) << help.output;
    EXPECT_NE(help.output.find("--scenario TEXT"), std::string::npos) << help.output;
  }
  for (const std::string& args : std::vector<std::string>{"plan aoi --quiet", "plan aoi " + f + " --scenario " + f + " --quiet"}) {
    const auto r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("give the scenario file once, as FILE or as --scenario FILE"), std::string::npos) << r.output;
  }
  const auto r = run("plan aoi " + f + " --quiet --set dml.count=7 --out " + (d / "o").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + (d / "o" / "schedule.json").string()), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(std::ifstream(d / "o" / "schedule.json"));
  EXPECT_EQ(j.at("jobs").size(), 7u);
  EXPECT_TRUE(j.at("valid").get<bool>());
  write(d / "file.json", "x");
  const auto bad = run("plan aoi " + f + " --quiet --out " + (d / "file.json").string());
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("not a directory"), std::string::npos) << bad.output;
  fs::remove_all(d);
}

TEST(CliConsistency, PlanGridDefaultsThePsAndWorkersOnGeneratedTopologies) {
  auto r = run("plan grid --topology fat-tree:4 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j.at("ps"), "h15");  // the last host; every other host works
  ASSERT_EQ(j.at("workers").size(), 15u);
  EXPECT_EQ(j.at("workers")[0].at("worker"), "h0");
  // A count, as in `ina plan rina --workers N`: the first N hosts besides the PS.
  r = run("plan grid --topology fat-tree:4 --ps h0 --workers 3 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  std::vector<std::string> workers;
  for (const auto& w : j.at("workers")) workers.push_back(w.at("worker").get<std::string>());
  EXPECT_EQ(workers, (std::vector<std::string>{"h1", "h2", "h3"}));
  // Named workers: the PS is the first host not among them.
  r = run("plan grid --topology fat-tree:4 --workers h0,h2 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output).at("ps"), "h1");
}

TEST(CliConsistency, GridSweepTakesSet) {
  const auto d = temp_dir("grid_sweep_set");
  write(d / "s.toml", "[topology]\nkind = \"fat-tree:4\"\n[run]\nschemes = [\"atp\", \"switchml\"]\nseeds = [1, 2]\n"
                      "[sweep]\nworkers = [2, 4, 6]\n");
  const auto r = run("plan grid-sweep " + (d / "s.toml").string() + " --set sweep.workers=4 --set run.schemes=atp "
                     "--set run.seeds=2 --out " + (d / "o").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[1/1] 4 workers, seed 2"), std::string::npos) << r.output;
  const auto res = nlohmann::json::parse(std::ifstream(d / "o" / "results.json"));
  ASSERT_EQ(res.size(), 1u) << res.dump();
  EXPECT_EQ(res[0].at("scheme"), "atp");
  const auto bad = run("plan grid-sweep " + (d / "s.toml").string() + " --set sweep.workers=4,0");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("field 'sweep.workers'"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("--set sweep.workers=4,0"), std::string::npos) << bad.output;
  fs::remove_all(d);
}

TEST(CliConsistency, RinaVsSimPrintsItsHeader) {
  const auto r = run("plan rina --topology fat-tree:4 --workers 4 --gradient-mb 0.01 --vs-sim --schemes rar,rina");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string header =
      "| topology | scheme | INA switches | BOM Gbps | sim Gbps | BOM - sim |\n|---|---|---|---|---|---|\n"
      "| fat-tree:4 | rar |";
  EXPECT_EQ(r.output.rfind(header, 0), 0u) << r.output;
}

TEST(CliConsistency, RinaEcnThresholdReachesTheModelAndTheSimulator) {
  // Rina's members mark at the fat-tree's ports at the default 100 KB: the
  // model and the simulator both give other rates without marks, and a
  // threshold no queue reaches is the same as none (0).
  auto rates = [](const std::string& ecn) {
    const auto r = run("plan rina --topology fat-tree:4 --ina-count 4 --gradient-mb 1 --vs-sim --schemes rina --json" + ecn);
    EXPECT_EQ(r.status, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
    return std::make_pair(j.at("vs_sim").at(0).at("bom_gbps").get<double>(),
                          j.at("vs_sim").at(0).at("sim_gbps").get<double>());
  };
  const auto marks = rates(""), never = rates(" --ecn-kb 0"), unreached = rates(" --ecn-kb 1000000");
  EXPECT_EQ(never, unreached);
  EXPECT_NE(marks.first, never.first);
  EXPECT_NE(marks.second, never.second);
  EXPECT_EQ(marks, rates(" --ecn-kb 100"));
  const auto bad = run("plan rina --topology fat-tree:4 --gradient-mb 1 --ecn-kb -1");
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_NE(bad.output.find("--ecn-kb"), std::string::npos) << bad.output;
}

// --rina-transport reaches the model and the simulator (aimd is the plain
// ring AIMD, paper the paced one: the rates differ), takes any case, is the
// paper's by default, and its help and refusals print the names, not the
// enum's byte values.
TEST(CliConsistency, RinaTransportByNameInHelpErrorsAndRuns) {
  auto out = [](const std::string& t) {
    const auto r = run("plan rina --topology fat-tree:4 --ina-count 2 --gradient-mb 0.25 --vs-sim --json" + t);
    EXPECT_EQ(r.status, 0) << r.output;
    return nlohmann::json::parse(r.output.substr(r.output.find('{'))).at("vs_sim").dump();
  };
  const std::string aimd = out(" --rina-transport aimd"), paper = out(" --rina-transport paper");
  EXPECT_NE(aimd, paper);
  EXPECT_EQ(out(" --rina-transport AIMD"), aimd);
  EXPECT_EQ(out(""), paper);
  const auto bad = run("plan rina --topology fat-tree:4 --rina-transport fast");
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_NE(bad.output.find("--rina-transport: fast not in {paper,aimd}"), std::string::npos) << bad.output;
  const auto help = run("plan rina --help");
  EXPECT_NE(help.output.find("--rina-transport paper|aimd"), std::string::npos) << help.output;
  for (const char c : help.output) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << int(c);
}

TEST(CliConsistency, MemoryInMiBEverywhereAndSwitchHelpListsOnlyItsSchemes) {
  // --memory-mb is MiB (as switch.memory_mb): 0.0001 MiB = 105 bytes, too small for one aggregator.
  auto r = run("run --memory-mb 0.0001");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--memory 105 holds no aggregator"), std::string::npos) << r.output;
  r = run("switch --memory-mb 2048 --listen 127.0.0.1:0");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--memory-mb"), std::string::npos) << r.output;
  r = run("run --memory 100000 --memory-mb 1");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("excludes"), std::string::npos) << r.output;
  r = run("switch --help");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--memory-mb"), std::string::npos) << r.output;
  // The first word of each scheme line of the --scheme help (the lines as indented as the first one; CLI11
  // may wrap a long description onto lines indented further).
  std::vector<std::string> listed;
  std::istringstream in(r.output);
  bool in_scheme = false;
  size_t indent = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("  -")) {
      in_scheme = line.starts_with("  --scheme,--policy");
      indent = 0;
    } else if (in_scheme && line.find("(name|alias):") == std::string::npos) {
      const size_t at = line.find_first_not_of(' ');
      if (indent == 0) indent = at;
      if (at == indent) listed.push_back(line.substr(at, line.find(' ', at) - at));
    }
  }
  // grid's line says "(with --layout only)": a plan's layout, never the control plane.
  EXPECT_EQ(listed, (std::vector<std::string>{"switchml|isolated", "atp|shared-fcfs", "dsa|preemptive", "grid|routed",
                                               "rina", "zebra", "ps-lite|pslite"}))
      << r.output;
}

// --set is read with the file, an --overlay after it: a --set setting still wins over the overlay.
TEST(CliSet, SetWinsOverAnOverlay) {
  const auto d = temp_dir("set_overlay");
  write(d / "s.toml", "[workload]\njobs = 1\nworkers_per_job = 2\npartition_mb = 0.01\n[run]\nschemes = [\"atp\"]\n");
  write(d / "o.toml", "[run]\nmax_sim_ms = 0.001\n");  // too short for the run to finish
  const std::string base = "sim " + (d / "s.toml").string() + " --quiet --overlay " + (d / "o.toml").string();
  EXPECT_EQ(run(base).status, 3);
  EXPECT_EQ(run(base + " --set run.max_sim_ms=10000").status, 0);
  const auto bad = run(base + " --set run.max_sim_ms=-1");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("field 'run.max_sim_ms'"), std::string::npos) << bad.output;
  fs::remove_all(d);
}

// Every suite `ina bench` names has its benchmarks in the binary. A suite is
// a file that only registers itself (a static initializer): linked from a
// static library without --whole-archive it is silently left out, and the
// suite runs nothing (allreduce kept only its sparse cases, ringstep none).
TEST(Cli, EveryBenchSuiteHasItsBenchmarks) {
  const std::map<std::string, std::vector<std::string>> expected = {
      {"sim", {"sim/"}},
      {"plan", {"plan/"}},
      {"allreduce", {"allreduce/ina_dsa/", "allreduce/ina_atp/", "allreduce/gloo/", "allreduce/sparse_zebra/"}},
      {"ringstep", {"ringstep/rar/workers:4/", "ringstep/rar/workers:8/"}},
      {"switch", {"switch/"}},
      {"udpio", {"udpio/"}},
      {"quant", {"quant/"}},
      {"fp16", {"fp16/"}},
  };
  for (const auto& [suite, names] : expected) {
    const CliResult r = run("bench " + suite + " -- --benchmark_list_tests=true");
    EXPECT_EQ(r.status, 0) << suite << ": " << r.output;
    for (const auto& n : names) EXPECT_NE(("\n" + r.output).find("\n" + n), std::string::npos) << suite << " lacks " << n << ":\n" << r.output;
  }
}

// A filter narrows its suite: "sparse" in allreduce lists only allreduce's
// sparse cases, not sim/sparse_* (whose names match it too); a filter that
// names the suite itself works as well, and an anchored one is taken as is.
TEST(Cli, BenchFilterStaysInItsSuite) {
  CliResult r = run("bench allreduce --benchmark_filter=sparse --benchmark_list_tests=true");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("allreduce/sparse_zebra/"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("sim/"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("allreduce/gloo/"), std::string::npos) << r.output;
  r = run("bench plan -- --benchmark_filter=plan/aoi_inc_tw --benchmark_list_tests=true");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("plan/aoi_inc_tw_64_units/1000"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("plan/aoi_inc_fcfs"), std::string::npos) << r.output;
  // Anchored: a whole-name regex, as given (the switch suite's switch_threads/ family).
  r = run("bench switch -- --benchmark_filter=^switch_threads/ --benchmark_list_tests=true");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("switch_threads/switchml"), std::string::npos) << r.output;
}
