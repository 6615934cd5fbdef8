// Bad input that could crash or mislead: every case must end in a
// clear error naming the flag or field and the value, before anything runs.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/json_depth.hpp"
#include "core/time.hpp"
#include "experiment/estimate.hpp"
#include "experiment/scenario.hpp"
#include "runtime/launcher.hpp"

namespace fs = std::filesystem;
using ina_test::run_ina;
using ina_test::write_file;

namespace {

fs::path dir(const std::string& name) { return ina_test::fresh_dir("bad_" + name); }

bool has(const std::string& out, const std::string& what) { return out.find(what) != std::string::npos; }

// The peak resident set `ina sim -j 1` records for its runs (runs.json's
// peak_rss_mb, the process's VmHWM over each run, reset as each begins:
// its own pages alone, the baseline included). The
// rusage of a child forked from this process would not do: a forked child's
// high-water mark starts at this process's resident set and survives exec,
// so it grows with the tests run before it in one process.
uint64_t sim_peak_rss(const fs::path& scenario, const fs::path& out) {
  const auto r = run_ina(fmt::format("sim --quiet -j 1 {} --out {}", scenario.string(), out.string()));
  if (r.status != 0) throw std::runtime_error(fmt::format("ina sim {} exited {}: {}", scenario.string(), r.status, r.output));
  std::ifstream in(out / "runs.json");
  const auto runs = nlohmann::json::parse(in);
  double mb = 0;
  for (const auto& run : runs) mb = std::max(mb, run.at("peak_rss_mb").get<double>());
  return static_cast<uint64_t>(mb * (1 << 20));
}

}  // namespace

// ---- 1. serialization time / physical ranges ------------------------------

TEST(BadInput, TimeConversionsNeverTrap) {
  EXPECT_EQ(ina::serialization_time(306, 0), ina::kNever);
  EXPECT_EQ(ina::serialization_time(0, 0), 0);
  EXPECT_EQ(ina::serialization_time(UINT64_MAX, 1), ina::kNever);  // beyond the range of Time
  EXPECT_EQ(ina::serialization_time(306, 100'000'000'000ULL), 24480);
  EXPECT_EQ(ina::from_us(std::numeric_limits<double>::quiet_NaN()), ina::kNever);
  EXPECT_EQ(ina::from_us(1e300), ina::kNever);
  EXPECT_EQ(ina::from_ms(-1e300), -ina::kNever);
  EXPECT_EQ(ina::from_us(2.5), 2'500'000);
}

TEST(BadInput, SimUnknownSeriesNamesTheFileAndItsSeries) {
  const auto d = dir("series");
  write_file(d / "two.toml", "[run]\nschemes = [\"atp\"]\n[[series]]\nname = \"a b\"\n[[series]]\nname = \"c\"\n");
  const auto r = run_ina("sim " + (d / "two.toml").string() + " --series c --series 'a  b'");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, (d / "two.toml").string() + ": --series 'a  b': no such series (the file has 'a b', 'c')"))
      << r.output;
}

TEST(BadInput, SimTinyLinkRateIsAnErrorNotSigfpe) {
  const auto d = dir("gbps");
  write_file(d / "slow.toml", "[topology]\nlink_gbps = 1e-12\n");
  const auto r = run_ina("sim " + (d / "slow.toml").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, (d / "slow.toml").string() +
                                ": field 'topology.link_gbps': must be in [0.001, 100000] (Gbps: 1 Mbps to 100 Tbps) "
                                "(value: 1e-12)"))
      << r.output;
}

TEST(BadInput, EveryNumericScenarioFieldHasPhysicalBounds) {
  auto error_of = [](const std::string& key, const std::string& value) {
    ina::exp::Settings s;
    try {
      ina::exp::apply_setting(s, key, value, "--set");
    } catch (const ina::exp::ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error_of("topology.rtt_us", "1e9"),
            "--set: field 'topology.rtt_us': must be in [0.001, 1000000] (microseconds: 1 ns to 1 s) (value: 1e9)");
  EXPECT_EQ(error_of("topology.queue_kb", "1e12"),
            "--set: field 'topology.queue_kb': must be in (0, 1000000] (KB per output queue: at most 1 GB) (value: 1e12)");
  EXPECT_EQ(error_of("run.max_sim_ms", "1e300"),
            "--set: field 'run.max_sim_ms': must be in (0, 1000000000] (simulated milliseconds: at most ~11.6 days) "
            "(value: 1e300)");
  EXPECT_EQ(error_of("workload.send_jitter_us", "inf"), "--set: field 'workload.send_jitter_us': must be finite (value: inf)");
  EXPECT_EQ(error_of("workload.jobs", "100000"),
            "--set: field 'workload.jobs': must be in [1, 4096] (at most one job per host) (value: 100000)");
  EXPECT_EQ(error_of("workload.iterations", "1000000000"), "--set: field 'workload.iterations': must be in [1, 100000] (value: 1000000000)");
  EXPECT_EQ(error_of("transport.reminder_after", "0"), "--set: field 'transport.reminder_after': must be in [1, 1000] (value: 0)");

  // Cross-field: a queue that cannot hold one packet; a memory without one aggregator.
  ina::exp::Settings s;
  s.queue_kb = 0.1;
  s.ecn_kb = 0;
  try {
    ina::exp::validate(s, "t.toml");
    ADD_FAILURE() << "a 100 B queue was accepted";
  } catch (const ina::exp::ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()),
              "t.toml: field 'topology.queue_kb': a queue must hold one packet (switch.payload_bytes + "
              "switch.header_bytes = 306 B) (value: 0.1)");
  }
}

// ---- 2. a directory or an empty file as the scenario -----------------------

TEST(BadInput, ScenarioDirectoryOrEmptyFileIsAnError) {
  const auto d = dir("empty");
  auto r = run_ina("sim " + d.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "error: " + d.string() + ": is a directory, not a scenario file")) << r.output;

  write_file(d / "empty.toml", "");
  r = run_ina("sim " + (d / "empty.toml").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, (d / "empty.toml").string() + ": empty scenario file")) << r.output;

  write_file(d / "comments.toml", "# nothing here\n\n   \n");
  r = run_ina("sim " + (d / "comments.toml").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, (d / "comments.toml").string() + ": empty scenario file")) << r.output;
  EXPECT_FALSE(has(r.output, "avg_jct_ms")) << "the built-in default must not run";
}

// ---- 3. allocation sizes ----------------------------------------------------

TEST(BadInput, HugeMemoryIsBoundedNamingTheField) {
  const auto d = dir("mem");
  write_file(d / "mem.toml", "[switch]\nmemory_mb = 1e9\n");
  auto r = run_ina("sim " + (d / "mem.toml").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "field 'switch.memory_mb': must be in (0, 1024] (MiB of aggregator memory: at most 1 GiB) "
                            "(value: 1000000000)"))
      << r.output;
  write_file(d / "part.toml", "[workload]\npartition_mb = 1e6\n");
  r = run_ina("sim " + (d / "part.toml").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "field 'workload.partition_mb'") && has(r.output, "(value: 1000000)")) << r.output;
  // switchml: two aggregators per job, checked at load.
  write_file(d / "iso.toml", "[switch]\nmemory_mb = 0.0005\n[workload]\njobs = 8\n");
  r = run_ina("sim " + (d / "iso.toml").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "field 'switch.memory_mb': switchml needs 2 aggregators per job: 2 aggregators of 256 B "
                            "for 8 jobs (value: 0.0005)"))
      << r.output;
}

// ---- 4. an unwritable --out ---------------------------------------------------

TEST(BadInput, UnwritableOutIsFoundBeforeTheSimulation) {
  const auto d = dir("out");
  write_file(d / "s.toml", "[workload]\njobs = 1\nworkers_per_job = 2\npartition_mb = 0.01\n");
  write_file(d / "file", "x");
  const std::string out = (d / "file" / "results").string();  // under a regular file: even root cannot create it
  const auto r = run_ina("sim " + (d / "s.toml").string() + " --out " + out);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "error: --out '" + out + "': cannot create the directory: Not a directory")) << r.output;
  EXPECT_FALSE(has(r.output, "[1/")) << "no simulation may run";
}

// ---- 5. resource estimate -------------------------------------------------------

TEST(BadInput, SimRefusesARunBeyondAvailableMemoryNamingTheFields) {
  const auto d = dir("huge");
  // 4096 workers with 1 GiB partitions and 1 GB windows: terabytes of
  // per-packet records.
  write_file(d / "huge.toml",
             "[topology]\nhosts = 4096\n[workload]\njobs = 512\nworkers_per_job = 8\npartition_mb = 1024\n"
             "[transport]\ninit_window_kb = 1000000\n[run]\nschemes = [\"switchml\"]\n");
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_ina("sim " + (d / "huge.toml").string());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "ina sim: estimate: 1 process, 1 run at a time, ~")) << r.output;
  EXPECT_TRUE(has(r.output, (d / "huge.toml").string() + ": estimated peak memory ")) << r.output;
  EXPECT_TRUE(has(r.output, "exceeds the available memory")) << r.output;
  EXPECT_TRUE(has(r.output, "largest part: worker transport records")) << r.output;
  EXPECT_TRUE(has(r.output, "sized by workload.jobs x workload.workers_per_job x transport.init_window_kb"))
      << r.output;
  EXPECT_TRUE(has(r.output, "or pass --force")) << r.output;
}

TEST(BadInput, SimEstimateCountsTheLargestRuns) {
  ina::exp::Scenario sc = ina::exp::parse_scenario(
      "[workload]\njobs = 2\nworkers_per_job = 4\n[run]\nschemes = [\"atp\"]\nseeds = [1, 2, 3]\n", "e.toml");
  const auto one = ina::exp::estimate_sim(sc, 1);
  const auto three = ina::exp::estimate_sim(sc, 3);
  const auto run = ina::exp::estimate_run(sc.base, "atp");
  EXPECT_EQ(one.threads, 1u);
  EXPECT_EQ(three.threads, 3u);
  // Three seeds of the same run at once: three times the run, one baseline.
  EXPECT_EQ(three.total_bytes() - one.total_bytes(), 2 * run.total_bytes());
  // Model A, 4 MiB partitions of 256 B packets = 16384 packets. Without loss:
  // 2 record rings per worker of 512 (twice the 196-packet window, 60 KB /
  // 306 B, to a power of two) 40 B records and their done bits; 16 B deadlines
  // for 4 windows.
  const auto records = [](const ina::exp::Estimate& e) {
    for (const auto& p : e.parts)
      if (p.what == "worker transport records") return p.bytes;
    return uint64_t{0};
  };
  EXPECT_EQ(records(run), 8u * 2 * 512 * 321 / 8 + 8u * 4 * 196 * 16);
  // With loss a packet waits for a retransmission timeout: each of the 4 live
  // ops' rings holds up to four windows (784 packets: 1024 records), the
  // waiting packets leaving it (host/record_ring.hpp).
  ina::exp::Settings lossy = sc.base;
  lossy.loss = 0.001;
  const auto l = ina::exp::estimate_run(lossy, "atp");
  EXPECT_EQ(records(l), 8u * 4 * 1024 * 321 / 8 + 8u * 4 * 196 * 16);
}

// The estimate against the real peak RSS of `ina sim`, within kEstimateFactor,
// for a run dominated by the switch's arrays (262 144 tasks hashed over its
// 1 M aggregators write every page of values), one without loss (the workers'
// record rings about a window), one with loss (rings of whole ops), a ring
// collective on a fat-tree (its endpoints' shard buffers), and Zebra's sparse
// star (the workers' received sums of each iteration's union of keys) and
// SwitchML streaming that sparse model (the pushes and their copies).
TEST(BadInput, SimEstimateIsWithinTheDocumentedFactorOfMeasuredPeakRss) {
  const auto d = dir("rss");
  struct Case {
    std::string name, toml;
  };
  const std::vector<Case> cases = {
      {"switch", "[switch]\nmemory_mb = 256\n[workload]\njobs = 1\nworkers_per_job = 2\npartition_mb = 64\n"
                 "[run]\nschemes = [\"dsa\"]\n"},
      {"workers", "[topology]\nhosts = 64\n[workload]\njobs = 4\nworkers_per_job = 8\npartition_mb = 2\n"
                  "[run]\nschemes = [\"atp\"]\n"},
      {"lossy", "[topology]\nhosts = 64\n[workload]\njobs = 4\nworkers_per_job = 8\npartition_mb = 8\n"
                "[faults]\nloss = 0.001\n[run]\nschemes = [\"atp\"]\n"},
      {"ring", "[topology]\nkind = \"fat-tree\"\nk = 4\n[workload]\njobs = 1\nmodel = \"ResNet50\"\n"
               "gradient_scale = 0.125\n[run]\nschemes = [\"h-ar\"]\n"},
      {"sparse", "[workload]\njobs = 1\niterations = 1\nsparse_model = \"deeplight\"\nworkers_per_job = 8\n"
                 "sparse_row_width = 4\n[zebra]\nprofile_iterations = 1\nhot_keys = 32768\n[switch]\nmemory_mb = 1\n"
                 "[run]\nschemes = [\"zebra\"]\n"},
      {"sparse-dense", "[workload]\njobs = 1\niterations = 1\nsparse_model = \"deeplight\"\nworkers_per_job = 8\n"
                       "sparse_row_width = 4\n[switch]\nmemory_mb = 1\n[run]\nschemes = [\"switchml\"]\n"},
  };
  for (const auto& c : cases) {
    const fs::path f = d / (c.name + ".toml");
    write_file(f, c.toml);
    const auto sc = ina::exp::load_scenario_file(f.string());
    const double estimate = static_cast<double>(ina::exp::estimate_sim(sc, 1).total_bytes());
    const double real = static_cast<double>(sim_peak_rss(f, d / c.name));
    EXPECT_LE(estimate, real * ina::exp::kEstimateFactor) << c.name << ": estimate " << estimate << ", peak RSS " << real;
    EXPECT_GE(estimate, real / ina::exp::kEstimateFactor) << c.name << ": estimate " << estimate << ", peak RSS " << real;
  }
}

// ---- 6. sizes and numeric flags of the runtime commands ---------------------

TEST(BadInput, RuntimeSizesMustBeWholeFloats) {
  auto r = run_ina("run --size 5");
  EXPECT_EQ(r.status, 2) << r.output;  // a usage error
  EXPECT_TRUE(has(r.output, "--size: must be a positive multiple of 4 bytes (whole float32 values) up to 17179869184, "
                            "got '5'"))
      << r.output;
  r = run_ina("worker --size 6");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--size: must be a positive multiple of 4 bytes") && has(r.output, "got '6'")) << r.output;
  r = run_ina("worker --size 64 --payload 70000");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--payload") && has(r.output, "70000")) << r.output;
  r = run_ina("switch --memory 100 --payload 64 --listen 127.0.0.1:0");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "error: --memory 100 holds no aggregator of --payload 64 values (256 bytes each)")) << r.output;
  r = run_ina("run --memory 2000000000");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--memory") && has(r.output, "2000000000")) << r.output;
  r = run_ina("run --priorities 5,0 --jobs 2");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--priorities")) << r.output;
}

// ---- 7. process and memory bound of `ina run` -------------------------------

TEST(BadInput, RunRefusesMoreProcessesThanTheBoundBeforeStartingAny) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_ina("run --workers 64 --jobs 64");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(r.status, 1) << r.output;
  const unsigned cpus = ina::online_cpus();
  EXPECT_TRUE(has(r.output, fmt::format("error: --workers 64 x --jobs 64: 4162 processes (4096 workers, 64 PSes, the "
                                        "switch and this launcher) exceed the bound of {} (64 per CPU, {} CPUs)",
                                        64 * cpus, cpus)))
      << r.output;

  ina::rt::LaunchConfig c;
  c.workers = 64;
  c.jobs = 64;
  const auto e = ina::rt::estimate_launch(c);
  EXPECT_EQ(e.processes, 4162u);
  EXPECT_EQ(e.threads, 2u + 64 + 2 * 4096);
  EXPECT_EQ(e.worker_bytes, ina::rt::kProcessBaseline + 7 * c.size_bytes);

  // Memory: 8 workers of 16 GiB each cannot fit anywhere this test runs.
  const auto m = run_ina("run --workers 8 --size 17179869184");
  EXPECT_EQ(m.status, 1) << m.output;
  EXPECT_TRUE(has(m.output, "error: --workers 8 x --jobs 1 --size 17179869184: estimated memory ")) << m.output;
  EXPECT_TRUE(has(m.output, "exceeds the available memory")) << m.output;
}

TEST(BadInput, RunWorkerListMustMatchJobs) {
  auto r = run_ina("run --workers 3,2 --jobs 3");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "error: --workers '3,2' gives 2 worker counts but --jobs is 3: give one count per job"))
      << r.output;
  r = run_ina("run --workers 3,x");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "error: --workers: expected N or N1,N2,... with every count in 1..64, got '3,x' (bad count 'x')"))
      << r.output;
  r = run_ina("run --workers 0");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(has(r.output, "bad count '0'")) << r.output;
}

// ---- 8. floating-point flags: negative, NaN, infinite ------------------------

// Each command line exits 2, naming its flag and the value as given.
struct FlagCase {
  std::string args, flag, value;
};
void expect_flags_refused(const std::vector<FlagCase>& cases) {
  for (const auto& c : cases) {
    const auto r = run_ina(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, c.flag + ": ") && has(r.output, "got '" + c.value + "'")) << c.args << "\n" << r.output;
  }
}

TEST(BadInput, FloatingFlagsRejectNegativeNanAndInf) {
  expect_flags_refused({
      {"switch --ecn-kb -1", "--ecn-kb", "-1"},
      {"switch --ecn-kb nan", "--ecn-kb", "nan"},
      {"switch --ecn-kb inf", "--ecn-kb", "inf"},
      {"switch --loss nan", "--loss", "nan"},
      {"switch --reorder-us -5", "--reorder-us", "-5"},
      {"ps --job 1 --workers 2 --min-timeout-ms inf", "--min-timeout-ms", "inf"},
      {"ps --job 1 --workers 2 --connect-timeout-ms nan", "--connect-timeout-ms", "nan"},
      {"worker --size 64 --window-kb nan", "--window-kb", "nan"},
      {"worker --size 64 --delay-us -1", "--delay-us", "-1"},
      {"run --timeout nan", "--timeout", "nan"},
      {"run --timeout inf", "--timeout", "inf"},
      {"run --window-kb -3", "--window-kb", "-3"},
      {"run --window-kb 0", "--window-kb", "0"},
      {"run --delay-us nan", "--delay-us", "nan"},
      {"run --duplicate nan", "--duplicate", "nan"},
      {"plan aoi " + std::string(INA_SOURCE_DIR) + "/scenarios/aoi/table1.toml --time-limit -5", "--time-limit", "-5"},
  });
  const auto r = run_ina("switch --ecn-kb nan");
  EXPECT_TRUE(has(r.output, "--ecn-kb: must be a finite number in [0, 1000000] KiB, got 'nan'")) << r.output;
}

// An unsigned flag given a negative number: CLI11 alone would read "-1" as
// 2^64 - 1 and the command would run with it.
TEST(BadInput, UnsignedFlagsRefuseNegativeValues) {
  expect_flags_refused({
      {"run --seed -1", "--seed", "-1"},
      {"run --scheme zebra --hot-set-size -5", "--hot-set-size", "-5"},
      {"plan grid --topology fat-tree:4 --seed -1", "--seed", "-1"},
  });
  EXPECT_TRUE(has(run_ina("run --seed -1").output, "--seed: must not be negative, got '-1'"));
}

// What a runtime command refuses before it runs exits 2, as a command line
// that does not parse; a failure while running exits 1
// (RunWritesItsJsonReportOnFailureNamingTheProcess: a port in use).
TEST(BadInput, CommandsRefusingTheirInputExit2) {
  struct Case {
    std::string args, says;
  };
  const std::vector<Case> cases = {
      {"worker --switch nonsense --size 64 --job 1 --workers 1", "invalid address 'nonsense'"},
      {"switch --listen 127.0.0.1:99999 --new-key-file /nonexistent/k", "invalid address '127.0.0.1:99999'"},
      {"switch --memory 100", "--memory 100 holds no aggregator"},
      {"worker --size 64 --job 1 --rank 5 --workers 2", "rank 5 (rank, INA_RANK, --rank) is not below the worker count 2 (workers"},
      {"run --scheme rina --workers 4 --racks 2 --ina-racks x", "--ina-racks: expected rack numbers like 0,1, got 'x'"},
      {"key job --switch-key-file /nonexistent/switch.key --job 1 --out /nonexistent/job.key", "/nonexistent/switch.key"},
      {"train --workers 0", "--workers must be in 1..64"},
      {"train --scheme rar", "rar"},
      {"train-py --workers 2", "give the script to run"},
      {"bench sim --benchmark_filter=zzz_nothing", "no benchmark of suite 'sim' matches --benchmark_filter"},
      {"plan aoi " + std::string(INA_SOURCE_DIR) + "/scenarios/aoi/table1.toml --simulate-unit -1",
       "--simulate-unit: Value -1 not in range 0 to 1048576"},
      {"switch --memory=-4096", "--memory: Value -4096 not in range"},
      {"plan grid --topology fat-tree:4 --random -3", "--random: Value -3 not in range"},
      {"train --data /nonexistent", "--data /nonexistent: not a directory"},
      {"train --data /tmp", "--data /tmp: no train-images-idx3-ubyte.gz"},
      {"train-py --workers 2 /nonexistent/train.py", "no script file '/nonexistent/train.py'"},
      {"train-py --workers 2 --python /nonexistent/python3 " + std::string(INA_SOURCE_DIR) + "/README.md",
       "--python '/nonexistent/python3': not an executable file (No such file or directory)"},
      {"train-py --workers 2 --python " + std::string(INA_SOURCE_DIR) + "/README.md " + INA_SOURCE_DIR + "/README.md",
       "--python '" + std::string(INA_SOURCE_DIR) + "/README.md': not an executable file (Permission denied)"},
      {"train-py --workers 2 --python /tmp " + std::string(INA_SOURCE_DIR) + "/README.md",
       "--python '/tmp': not an executable file (a directory)"},
      {"train-py --workers 2 --python python3 " + std::string(INA_SOURCE_DIR) + "/README.md",
       "--python 'python3': the interpreter must be an absolute path"},
      {"ps --job 1 --workers 2 --switch 127.0.0.1:1 --bind-ip bogus", "'bogus' is not an IPv4 address"},
      {"key new /nonexistent/dir/switch.key", "cannot write key file '/nonexistent/dir/switch.key'"},
      {"run --work-dir /proc/nope/x", "--work-dir /proc/nope/x: cannot create it"},
  };
  for (const auto& c : cases) {
    const auto r = run_ina(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, c.says)) << c.args << "\n" << r.output;
  }
}

// A switch checks what it needs of its layout before it binds a socket: its
// --listen port is taken here, so a check made after binding would report
// the bind, with status 1. Every other serving switch's address in a ring
// layout; in a tree layout (ATP over racks) the ToRs this one relays to, and
// none in GRID's, whose switches address each other through the network.
TEST(BadInput, SwitchChecksItsLayoutBeforeBinding) {
  const int busy = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(busy, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(busy, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(busy, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string listen = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  const fs::path d = dir("switch_layout");
  const std::string workers = R"(["127.0.0.1:40001", "127.0.0.1:40002", "127.0.0.1:40003", "127.0.0.1:40004"])";
  const std::string racks_null =
      R"([{"ranks": [0, 1], "ina": true, "switch": "127.0.0.1:7700"}, {"ranks": [2, 3], "ina": true, "switch": null}])";
  write_file(d / "rina.json",
             R"({"job": 1, "scheme": "rina", "payload": 2048, "memory_bytes": 5000000, "workers": )" + workers +
                 R"(, "racks": )" + racks_null + "}");
  write_file(d / "atp.json",
             R"({"job": 1, "scheme": "atp", "payload": 2048, "memory_bytes": 5000000, "workers": )" + workers +
                 R"(, "racks": )" + racks_null + R"(, "ps": "127.0.0.1:7900"})");
  write_file(d / "grid.json",
             R"({"job": 1, "scheme": "grid", "payload": 2048, "memory_bytes": 5000000, "workers": )" + workers +
                 R"(, "racks": )" + racks_null + R"(, "ps": "127.0.0.1:7900"})");
  struct Case {
    std::string scheme, file, rack, says;
  };
  const std::vector<Case> cases = {
      {"rina", "rina.json", "0", "racks[1].switch is null: the switch 0 needs the address of every other INA switch"},
      {"atp", "atp.json", "0",
       "racks[1].switch is null: the ToR of rack 0 needs the address of every other INA rack's ToR"},
      {"rina", "rina.json", "5", "--rack 5: the layout " + (d / "rina.json").string() + " has racks 0..1"},
      {"rina", "missing.json", "0", "cannot read layout " + (d / "missing.json").string()},
  };
  for (const auto& c : cases) {
    const std::string args = "switch --scheme " + c.scheme + " --layout " + (d / c.file).string() + " --rack " + c.rack +
                             " --listen " + listen;
    const auto r = run_ina(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << args << "\n" << r.output;
  }
  // GRID's layout is accepted with another switch's address null: the switch goes on to bind.
  const std::string args =
      "switch --scheme grid --layout " + (d / "grid.json").string() + " --rack 0 --listen " + listen;
  const auto r = run_ina(args);
  EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
  EXPECT_NE(r.output.find("cannot bind UDP socket to " + listen), std::string::npos) << args << "\n" << r.output;
  ::close(busy);
}

// ---- 9. deeply nested JSON ------------------------------------------------------

TEST(BadInput, JsonDepthScanIgnoresStrings) {
  EXPECT_EQ(ina::json_nesting_depth("{}"), 1u);
  EXPECT_EQ(ina::json_nesting_depth(R"({"a": [1, {"b": [[]]}]})"), 5u);
  EXPECT_EQ(ina::json_nesting_depth(R"({"a": "[[[[{{{{", "b": "\"[[[["})"), 1u);
  EXPECT_EQ(ina::json_nesting_depth(""), 0u);
  EXPECT_EQ(ina::json_nesting_depth(std::string(100000, '[')), 100000u);
  EXPECT_THROW(ina::check_json_depth(std::string(65, '['), ina::kMaxJsonDepth, "x.json"), ina::JsonDepthError);
  EXPECT_NO_THROW(ina::check_json_depth(std::string(64, '[') + std::string(64, ']'), ina::kMaxJsonDepth, "x.json"));
  try {
    ina::check_json_depth("[[[", 2, "ctl");
  } catch (const ina::JsonDepthError& e) {
    EXPECT_EQ(std::string(e.what()), "ctl: JSON nested 3 levels deep; the limit is 2");
  }
}

TEST(BadInput, PlanGridRefusesDeeplyNestedTopologyBeforeParsing) {
  const auto d = dir("deep");
  const fs::path f = d / "deep.json";
  write_file(f, "{\"nodes\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  const auto r = run_ina("plan grid --topology " + f.string());
  EXPECT_EQ(r.status, 2) << r.output.substr(0, 400);
  EXPECT_TRUE(has(r.output, "error: " + f.string() + ": JSON nested 100001 levels deep; the limit is 64")) << r.output.substr(0, 400);
}

// ---- 10. `ina run --json` on a failure ------------------------------------------

TEST(BadInput, RunWritesItsJsonReportOnFailureNamingTheProcess) {
  const auto d = dir("runfail");
  // Occupy a port (UDP and TCP): the switch cannot bind it and exits 1.
  const int u = socket(AF_INET, SOCK_DGRAM, 0), t = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(u, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(u, reinterpret_cast<sockaddr*>(&a), &len);
  bind(t, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const int port = ntohs(a.sin_port);
  const fs::path json = d / "report.json";
  const auto r = run_ina(fmt::format("run --port {} --json {} --timeout 20", port, json.string()));
  close(u);
  close(t);
  EXPECT_EQ(r.status, 1) << r.output;
  ASSERT_TRUE(fs::exists(json)) << r.output;
  const auto j = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(j.at("ok"), false);
  const auto& f = j.at("failure");
  EXPECT_EQ(f.at("kind"), "switch");
  EXPECT_EQ(f.at("process"), "switch");
  EXPECT_EQ(f.at("exit_code"), 1);
  EXPECT_EQ(f.at("exit_status"), 1);
  EXPECT_TRUE(has(f.at("message").get<std::string>(), "exited with status 1 before it was ready")) << f.dump();
  EXPECT_EQ(j.at("config").at("workers"), nlohmann::json::array({2}));
}

// ---- 11. jobs of different sizes; PS counters in the report -----------------

// With jobs of different sizes, DSA's eviction must hand the victim's PS
// partials with the victim's own worker count (the winner's gives 2 and 129
// malformed per run); nothing is refused.
TEST(BadInput, RunJobsOfDifferentSizesReportsPsCounters) {
  const auto d = dir("sizes");
  const fs::path json = d / "run.json";
  const auto r = run_ina("run --scheme dsa --workers 3,2 --size 262144 --iterations 2 --memory 20000 --timeout 60 --json " +
                         json.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "2 jobs x 3,2 workers")) << r.output;
  const auto j = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(j.at("ok"), true);
  EXPECT_EQ(j.at("config").at("workers"), nlohmann::json::array({3, 2}));
  ASSERT_EQ(j.at("jobs").size(), 2u);
  const uint64_t values = 262144 / 4 * 2;  // per worker: 2 iterations of 65536 floats
  EXPECT_EQ(j["jobs"][0].at("workers").size(), 3u);
  EXPECT_EQ(j["jobs"][1].at("workers").size(), 2u);
  EXPECT_EQ(j["jobs"][0].at("verified"), 3 * values);
  EXPECT_EQ(j["jobs"][1].at("verified"), 2 * values);
  EXPECT_EQ(j["jobs"][0].at("mismatches"), 0);
  EXPECT_EQ(j["jobs"][1].at("mismatches"), 0);
  EXPECT_GT(j["switch"]["switch"].at("preempt_won").get<uint64_t>(), 0u) << "the memory is meant to force preemption";
  ASSERT_EQ(j.at("ps").size(), 2u);
  for (const auto& ps : j["ps"]) {
    EXPECT_EQ(ps.at("outcome"), "finished") << ps.dump();
    const uint64_t malformed = ps.at("ps").at("malformed").get<uint64_t>();
    RecordProperty(fmt::format("ps_job{}_malformed", ps.at("job").get<int>()), std::to_string(malformed));
    EXPECT_EQ(malformed, 0u) << "PS of job " << ps.at("job");
    EXPECT_EQ(ps.at("ps").at("foreign"), 0) << "PS of job " << ps.at("job");
  }
  EXPECT_EQ(j["switch"]["switch"].at("malformed"), 0);
  for (const char* k : {"foreign_data", "foreign_ack", "foreign_fetch", "foreign_forward"})
    EXPECT_EQ(j["switch"]["switch"].at(k), 0) << k;
}

// One job of one worker, one allreduce: every count in the summary in the singular.
TEST(BadInput, RunOfOneWorkerCountsInTheSingular) {
  const auto r = run_ina("run --scheme atp --workers 1 --size 4096 --iterations 1 --timeout 60");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "1 job x 1 worker, 1 allreduce of 4.0 KiB per job")) << r.output;
  EXPECT_TRUE(has(r.output, "(all workers' results, 1 allreduce each) on 1 worker, all exact")) << r.output;
  EXPECT_TRUE(has(r.output, "aggregators held after the job ended")) << r.output;
  EXPECT_TRUE(has(r.output, "PS: 0 malformed and 0 foreign packets over 1 PS\n")) << r.output;
}

// ATP over two racks: each ToR completes one sum, the upper one from one
// gradient packet of the rack below (more if a retransmission crossed it on
// a loaded machine), and no count of 1 takes its noun's plural.
TEST(BadInput, TreeRunCountsOnePacketInTheSingular) {
  const auto r = run_ina("run --scheme atp --workers 2 --racks 2 --size 4096 --iterations 1 --timeout 60");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "switch of rack 1: ")) << r.output;
  EXPECT_TRUE(has(r.output, ", 1 sum completed, ")) << r.output;
  const std::regex one_plural(
      "(^|[^0-9.])1 (gradient packets|ring packets|sums|duplicates|stale resends|datagrams|aggregators) ");
  EXPECT_FALSE(std::regex_search(r.output, one_plural)) << r.output;
}

// ---- 12. `ina train --help` ------------------------------------------------------

TEST(BadInput, TrainHelpListsTheTrainingOptions) {
  const auto r = run_ina("train --help");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* opt : {"--backend", "--epochs", "--batch", "--lr", "--workers", "--target-acc"})
    EXPECT_TRUE(has(r.output, opt)) << opt << "\n" << r.output;
  EXPECT_TRUE(has(r.output, "Usage: ina train [OPTIONS]")) << r.output;  // not the path of ina-train
  EXPECT_TRUE(has(r.output, "--model fortunes: zebra or ps-lite")) << r.output;
}

// ---- 12b. the plot's title fits its canvas ------------------------------------------

TEST(BadInput, PlotTitleIsWrappedToTheCanvasWidth) {
  const auto d = dir("plot");
  write_file(d / "t.toml",
             "[scenario]\nname = \"t\"\ntitle = \"DSA Fig. 8 (reduced): average JCT vs number of jobs, DNN A, 8 "
             "workers/job\"\n[workload]\njobs = 1\nworkers_per_job = 2\npartition_mb = 0.01\n"
             "[run]\nschemes = [\"dsa\"]\n");
  const auto r = run_ina("sim --quiet " + (d / "t.toml").string() + " --out " + (d / "out").string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream gp(d / "out" / "avg_jct_ms.gp");
  const std::string script((std::istreambuf_iterator<char>(gp)), std::istreambuf_iterator<char>());
  // 480 px wide: at most 55 characters per line (8 px each, 40 px of margin).
  EXPECT_TRUE(has(script, "set multiplot layout 1,1 title \"DSA Fig. 8 (reduced): average JCT vs number of jobs,\\n"
                          "DNN A, 8 workers/job: average JCT (ms)\"\n"))
      << script;
  EXPECT_TRUE(fs::exists(d / "out" / "avg_jct_ms.png"));
}
