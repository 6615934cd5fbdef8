// `mpirun -np 2 ina sim`: a scenario's runs spread over two MPI ranks give
// the very files a local run gives, and a run that fails on
// a rank is reported and its siblings' results kept. With --partition each
// run is split over the two ranks and gives the local files too; what
// cannot be split is refused before any rank runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace {

using namespace ina_test;
namespace fs = std::filesystem;

bool have_mpirun() { return run_command("command -v mpirun").status == 0; }

// Two ranks on this machine: shared memory between them (vader), nothing on a network; as root
// OpenMPI wants both variables; --oversubscribe in case the machine has fewer free slots; no core
// binding, so that a rank is not stuck on a core another process keeps busy.
CliResult mpirun_ina(const std::string& args) {
  return run_command("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe --bind-to none "
                     "--mca pml ob1 --mca btl self,vader " + std::string(INA_BINARY) + " " + args);
}

// Every file of the local output but runs.json (wall times, ranks) is byte-identical in `mpi`.
void expect_same_files(const fs::path& local, const fs::path& mpi) {
  size_t compared = 0;
  for (const auto& e : fs::directory_iterator(local)) {
    const auto name = e.path().filename();
    if (name == "runs.json") continue;
    EXPECT_TRUE(fs::exists(mpi / name)) << name;
    EXPECT_EQ(read_file(e.path()), read_file(mpi / name)) << name << " differs";
    ++compared;
  }
  EXPECT_GE(compared, 3u) << "results.json, results.csv and a plot at least";
}

// runs.json under MPI: the local runs, in the same order, with the same outcome, each with the rank
// that ran it; both ranks ran some.
void expect_same_runs(const fs::path& local, const fs::path& mpi) {
  const auto a = nlohmann::json::parse(std::ifstream(local / "runs.json"));
  const auto b = nlohmann::json::parse(std::ifstream(mpi / "runs.json"));
  ASSERT_EQ(a.size(), b.size());
  std::set<int> ranks;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_FALSE(a[i].contains("mpi_rank"));
    ASSERT_TRUE(b[i].contains("mpi_rank")) << b[i].dump();
    ranks.insert(b[i]["mpi_rank"].get<int>());
    for (const char* k : {"series", "scheme", "x", "seed", "ok", "problems", "trace_digest", "metrics", "job_jct_ms"})
      EXPECT_EQ(a[i][k], b[i][k]) << "run " << i << " field " << k;
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1})) << "both ranks ran runs";
}

// The scenario `toml` run by `ina sim --out DIR/local` and by two ranks into DIR/mpi (`mpi_flags` after).
struct Sweeps {
  fs::path dir;
  CliResult local, mpi;
};
Sweeps run_local_and_mpi(const std::string& name, const std::string& toml, const std::string& mpi_flags = "") {
  Sweeps s{fresh_dir(name), {}, {}};
  write_file(s.dir / "s.toml", toml);
  s.local = run_ina("sim " + (s.dir / "s.toml").string() + " --out " + (s.dir / "local").string());
  s.mpi = mpirun_ina("sim " + (s.dir / "s.toml").string() + " --out " + (s.dir / "mpi").string() + mpi_flags);
  return s;
}

TEST(SimMpi, TwoRanksWriteTheLocalResultsFiles) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  // 2 schemes x 2 memory sizes x 2 seeds = 8 runs of ~0.2 s each (long
  // enough that rank 1 is ready before rank 0 has run them all).
  const auto [d, local, mpi] = run_local_and_mpi("sim_mpi", R"([scenario]
name = "mpi"
title = "mpi test"
[workload]
jobs = 2
workers_per_job = 4
partition_mb = 2
[run]
schemes = ["atp", "dsa"]
seeds = [1, 2]
[sweep]
key = "switch.memory_mb"
values = [0.05, 1]
[output]
metrics = ["avg_jct_ms", "utilization"]
)");
  ASSERT_EQ(local.status, 0) << local.output;
  ASSERT_EQ(mpi.status, 0) << mpi.output;
  EXPECT_NE(mpi.output.find("rank 1)"), std::string::npos) << "progress names the rank: " << mpi.output;
  // The estimate counts what the machine holds: a run per rank.
  EXPECT_NE(local.output.find("estimate: 1 process, 1 run at a time, ~"), std::string::npos) << local.output;
  EXPECT_NE(mpi.output.find("estimate: 2 processes, a run each, ~"), std::string::npos) << mpi.output;
  expect_same_files(d / "local", d / "mpi");
  expect_same_runs(d / "local", d / "mpi");
  fs::remove_all(d);
}

TEST(SimMpi, ARunThatThrowsOnARankIsReportedAndTheOthersAreWritten) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  // faults.fail_rank is simulated for ring schemes only: the run (atp, x = 5) throws when it
  // starts; (atp, -1), (rar, -1) and (rar, 5) run.
  const auto [d, local, mpi] = run_local_and_mpi("sim_mpi_fail", R"([scenario]
name = "mpi-fail"
title = "mpi failure test"
[topology]
kind = "testbed"
[switch]
ina = "all"
[workload]
jobs = 1
gradient_mb = 0.5
iterations = 2
[faults]
fail_at_ms = 0.2
[run]
schemes = ["atp", "rar"]
[sweep]
key = "faults.fail_rank"
values = [-1, 5]
[output]
metrics = ["iteration_ms"]
)");
  for (const auto* r : {&local, &mpi}) {
    EXPECT_EQ(r->status, 3) << r->output;
    EXPECT_NE(r->output.find("FAILED:  x=5 atp seed 1: error: fail_rank = 5: failures are simulated for ring schemes only"),
              std::string::npos) << r->output;
  }
  const auto results = nlohmann::json::parse(std::ifstream(d / "mpi" / "results.json"));
  ASSERT_EQ(results.size(), 3u) << results.dump();
  for (const auto& rec : results)
    EXPECT_FALSE(rec["scheme"] == "atp" && rec["x"] == 5) << "the run that threw has no record: " << rec.dump();
  expect_same_files(d / "local", d / "mpi");
  const auto runs = nlohmann::json::parse(std::ifstream(d / "mpi" / "runs.json"));
  ASSERT_EQ(runs.size(), 4u);
  // In (point, scheme) order: (-1, atp), (-1, rar), (5, atp), (5, rar).
  EXPECT_EQ(runs[2]["scheme"], "atp");
  EXPECT_EQ(runs[2]["x"], 5);
  EXPECT_EQ(runs[2]["ok"], false);
  EXPECT_EQ(runs[2]["threw"], true);
  EXPECT_TRUE(runs[2].contains("mpi_rank"));
  for (size_t i : {0, 1, 3}) EXPECT_EQ(runs[i]["ok"], true) << runs[i].dump();
  // A network run's busiest links come back from the rank that ran it as that run wrote them.
  const auto here = nlohmann::json::parse(std::ifstream(d / "local" / "runs.json"));
  for (size_t i : {0, 1, 3}) {
    ASSERT_TRUE(runs[i].contains("busiest_links") && here[i].contains("busiest_links")) << runs[i].dump();
    ASSERT_EQ(runs[i]["busiest_links"].size(), 8u) << runs[i].dump();
    EXPECT_EQ(runs[i]["busiest_links"], here[i]["busiest_links"]) << "run " << i;
  }
  fs::remove_all(d);
}

// --partition: every run on a fat-tree (2 jobs in every pod, so their
// traffic crosses the ranks; PS, INA over PSes and Rina) is split over both ranks, each holding half the
// racks: the same files, digests and metrics as one process, every run's
// events in two partitions.
TEST(SimMpi, PartitionSplitsEachRunOverTheRanksAndWritesTheLocalFiles) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  const auto [d, local, mpi] = run_local_and_mpi("sim_mpi_split", R"([scenario]
name = "split"
title = "split test"
[topology]
kind = "fat-tree"
k = 4
[switch]
ina = "tors"
[workload]
jobs = 2
workers = 8
gradient_mb = 0.25
placement = "interleaved"
[faults]
loss = 0.001
[run]
schemes = ["ps", "atp", "dsa", "rina"]
[output]
metrics = ["throughput_gbps", "hops"]
)", " --partition");
  ASSERT_EQ(local.status, 0) << local.output;
  ASSERT_EQ(mpi.status, 0) << mpi.output;
  EXPECT_NE(mpi.output.find("estimate: 2 processes sharing each run, ~"), std::string::npos) << mpi.output;
  expect_same_files(d / "local", d / "mpi");
  const auto a = nlohmann::json::parse(std::ifstream(d / "local" / "runs.json"));
  const auto b = nlohmann::json::parse(std::ifstream(d / "mpi" / "runs.json"));
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].contains("busiest_links") && b[i].contains("busiest_links")) << b[i].dump();
    for (const char* k : {"scheme", "ok", "trace_digest", "metrics", "job_jct_ms", "busiest_links"})
      EXPECT_EQ(a[i][k], b[i][k]) << "run " << i << " field " << k;
    EXPECT_EQ(a[i]["busiest_links"].size(), 8u) << "the links of both ranks' partitions";
    EXPECT_FALSE(b[i].contains("mpi_rank")) << "every rank ran it";
    ASSERT_EQ(b[i]["sim_partitions"].size(), 2u) << b[i].dump();
    EXPECT_EQ(b[i]["sim_partitions"][0]["events"].get<double>() + b[i]["sim_partitions"][1]["events"].get<double>(),
              a[i]["metrics"]["events"].get<double>());
  }
  fs::remove_all(d);
}

TEST(SimMpi, PartitionRefusesWhatRunsInOneProcessNamingTheField) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  const fs::path d = fresh_dir("sim_mpi_split_refused");
  write_file(d / "star.toml", "[run]\nschemes = [\"atp\"]\n");
  const CliResult star = mpirun_ina("sim " + (d / "star.toml").string() + " --partition");
  EXPECT_NE(star.status, 0);
  EXPECT_NE(star.output.find("star.toml: field 'topology.kind'"), std::string::npos) << star.output;
  const CliResult alone = run_ina("sim " + (d / "star.toml").string() + " --partition");
  EXPECT_NE(alone.status, 0);
  EXPECT_NE(alone.output.find("start ina with mpirun -np N"), std::string::npos) << alone.output;
  fs::remove_all(d);
}

}  // namespace
