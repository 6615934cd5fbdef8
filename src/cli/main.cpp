// The `ina` command.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/sim_mpi.hpp"
#include "experiment/estimate.hpp"
#include "experiment/results.hpp"
#include "experiment/runner.hpp"
#include "experiment/scenario.hpp"
#include "schemes/registry.hpp"
#include "cli/dsa_calibrated.hpp"

namespace ina::cli {
int run_bench(const std::string& suite, const std::vector<std::string>& extra);
int run_tour(const std::string& out, const std::vector<std::string>& only);  // cli/demo.cpp
const std::vector<std::string>& demo_parts();
int run_vs_ns3(const std::string& json_out, int rounds);
}

namespace {

// `ina demo dsa`: DSA Fig. 8 (average JCT vs number of jobs, 8 workers per job,
// all-A, every scheme at §VII-B's 306 B packets) at a size that finishes in about
// 20 s on 2 cores, run twice: with the paper's literal settings and
// with the calibrated overlay (scenarios/dsa/overlay/calibrated.toml, embedded at
// build time), and printed side by side.
constexpr const char* kDemoScenario = R"toml(
[scenario]
name = "demo"
title = "DSA Fig. 8 (reduced): average JCT vs number of jobs, DNN A, 8 workers/job"

[topology]
hosts = 64
link_gbps = 100
rtt_us = 10

[switch]
memory_mb = 5
packets = "scenario"

[workload]
model = "A"
workers_per_job = 8

[run]
schemes = ["switchml", "atp", "dsa"]
seeds = [1]

[sweep]
key = "workload.jobs"
values = [1, 2, 4, 8]
label = "number of jobs"

[output]
metrics = ["avg_jct_ms"]
y_label = "average JCT (ms)"
)toml";

// Creates `dir` and writes a probe file in it, so that an unwritable output
// directory is found before the simulation, not after it.
void check_output_dir(const std::string& dir, const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ina::exp::ScenarioError(fmt::format("{} '{}': cannot create the directory: {}", flag, dir, ec.message()));
  if (!fs::is_directory(dir, ec)) throw ina::exp::ScenarioError(fmt::format("{} '{}': not a directory", flag, dir));
  const fs::path probe = fs::path(dir) / fmt::format(".ina-write-probe-{}", ::getpid());
  bool ok = false;
  errno = 0;
  {
    std::ofstream f(probe);
    f << "probe\n";
    f.flush();
    ok = static_cast<bool>(f);
  }
  const int err = errno;
  fs::remove(probe, ec);
  if (!ok)
    throw ina::exp::ScenarioError(
        fmt::format("{} '{}': cannot write files in the directory: {}", flag, dir, err ? std::strerror(err) : "write failed"));
}

// Prints the resource estimate and refuses a run that cannot fit in memory.
// `processes`: the ranks on this machine (mpirun), each holding a run, or
// sharing each one (`split`).
void check_resources(const ina::exp::Scenario& sc, unsigned threads, bool quiet, bool force, unsigned processes,
                     bool split) {
  using namespace ina::exp;
  using ina::human_bytes;
  Estimate est = estimate_sim(sc, threads);
  est.processes = processes;
  est.split = split;
  const uint64_t avail = ina::mem_available_bytes();
  if (!quiet)
    std::fprintf(stderr, "ina sim: estimate: %s; available: %s\n", est.summary().c_str(),
                 avail ? human_bytes(avail).c_str() : "unknown");
  if (!avail || est.total_bytes() <= avail) return;
  const MemoryPart& top = est.parts.front();
  const std::string msg = fmt::format(
      "{}: estimated peak memory {} exceeds the available memory {} (MemAvailable, /proc/meminfo); largest part: "
      "{} {}, sized by {}{}; reduce these fields or pass --force to run anyway",
      sc.file, human_bytes(est.total_bytes()), human_bytes(avail), top.what, human_bytes(top.bytes),
      top.fields.empty() ? "the process" : top.fields, threads > 1 ? fmt::format(" (x{} runs at once, {})", threads, processes > 1 ? "a run per rank" : "-j") : "");
  if (!force) throw ScenarioError(msg);
  std::fprintf(stderr, "ina sim: warning (--force): %s\n", msg.c_str());
}

// Runs the scenario (`threads` runs at once, or with `execute`: then
// `threads` only sizes the memory estimate), prints the table, writes the
// results and runs.json (every run, in the records' order); 3 if a run failed.
int simulate(const ina::exp::Scenario& sc, const std::string& out_dir, bool quiet, unsigned threads, bool force = false,
             std::vector<ina::exp::Record>* averaged = nullptr, const ina::exp::RunExecutor& execute = {},
             bool all_metrics = false, unsigned processes = 1, bool split = false) {
  using namespace ina::exp;
  if (!out_dir.empty()) check_output_dir(out_dir, "--out");
  check_resources(sc, threads, quiet, force, processes, split);
  std::vector<std::string> failures;
  std::vector<nlohmann::json> runs;
  const auto per_seed = run_scenario(sc, [&](const Progress& p) {
    runs.resize(p.total);
    nlohmann::json& run = runs[p.index];
    run = {{"series", p.point->series}, {"scheme", *p.scheme}, {"x", p.point->x}, {"seed", p.seed},
           {"ok", p.out->ok}, {"problems", p.out->problems}, {"job_jct_ms", p.out->job_jct_ms},
           {"trace_digest", fmt::format("{:016x}", p.out->digest)}, {"wall_s", p.wall_s}, {"cpu_s", p.cpu_s},
           {"peak_rss_mb", static_cast<double>(p.peak_rss) / (1 << 20)}, {"metrics", p.out->metrics}};
    if (p.out->windows) run["sim_windows"] = p.out->windows;
    for (const auto& [events, busy] : p.out->partitions)
      run["sim_partitions"].push_back({{"events", events}, {"busy_s", busy}});
    for (const auto& l : p.out->marked_links)
      run["links"].push_back({{"link", l.link}, {"ecn_marks", l.ecn_marks}, {"queue_drops", l.queue_drops}});
    for (const auto& l : p.out->busiest_links)
      run["busiest_links"].push_back({{"link", l.link}, {"busy_ms", l.busy_ms}, {"bytes", l.bytes}});
    if (p.threw) run["threw"] = true;  // no metrics, no record in results.json
    if (p.rank >= 0) run["mpi_rank"] = p.rank;
    if (quiet) return;
    const auto& m = p.out->metrics;
    auto get = [&m](const char* k) { return m.contains(k) ? m.at(k) : 0.0; };
    const std::string what =
        m.contains("avg_jct_ms")        ? fmt::format("avg JCT {:.3f} ms, util {:.3f}", get("avg_jct_ms"), get("utilization"))
        : m.contains("agg_throughput_gbps") ? fmt::format("aggregation {:.2f} Gbps, sync {:.3f} ms, hot share {:.3f}",
                                                        get("agg_throughput_gbps"), get("sync_ms"), get("hot_share"))
                                        : fmt::format("{:.2f} Gbps per worker, sync {:.3f} ms", get("throughput_gbps"),
                                                      get("sync_ms"));
    const bool hops = m.contains("hops");
    const std::string where = p.rank >= 0 ? fmt::format(", rank {}", p.rank) : "";
    std::fprintf(stderr, "[%zu/%zu] %s%s x=%g %-10s seed %llu: %s, %s (%.1f s, %.1f s CPU, %.0f %s%s)\n", p.done,
                 p.total, p.point->series.c_str(), p.point->series.empty() ? "" : "", p.point->x, p.scheme->c_str(),
                 static_cast<unsigned long long>(p.seed), p.threw ? "threw" : what.c_str(), p.out->ok ? "ok" : "FAILED",
                 p.wall_s, p.cpu_s, hops ? m.at("hops") : get("events"), hops ? "hops" : "events", where.c_str());
    if (!p.out->ok) std::fprintf(stderr, "  %s\n", p.out->problems.c_str());
  }, &failures, execute ? execute : local_executor(threads));
  const auto records = average_over_seeds(per_seed);
  if (averaged) *averaged = records;
  const std::string x_name = sc.sweep_key.empty() ? "" : sc.sweep_key.substr(sc.sweep_key.find('.') + 1);
  // The scenario's metrics (output.metrics), or with --all-metrics every metric the runs have.
  std::cout << "Means over " << sc.seeds.size() << " seed" << (sc.seeds.size() == 1 ? "" : "s") << ":\n"
            << format_tables(records, all_metrics ? metric_names(records, sc.metrics) : sc.metrics, x_name);
  if (!out_dir.empty()) {
    for (const auto& f : write_results(out_dir, sc, records)) std::cout << "wrote " << f << "\n";
    const std::string runs_file = out_dir + "/runs.json";
    std::ofstream(runs_file) << nlohmann::json(runs).dump(1) << "\n";
    std::cout << "wrote " << runs_file << " (every run: seed, per-job JCT, all metrics, trace digest, wall and CPU time, peak memory)\n";
  }
  // One write per line: cerr is unbuffered, and a line written in pieces
  // interleaves with stdout's where both go to one pipe (mpirun's).
  for (const auto& f : failures) std::cerr << ("FAILED: " + f + "\n") << std::flush;
  return failures.empty() ? 0 : 3;
}

// `mpirun -np N ina sim ...` (cli/sim_mpi.hpp): rank 0 runs `simulate` with
// the runs spread over the ranks; the other ranks run what it hands out.
// With `split` (--partition) every rank runs every run, each split over the ranks.
int simulate_mpi(const std::function<ina::exp::Scenario()>& load, uint64_t digest, const std::string& out_dir,
                 bool quiet, unsigned threads, bool force, bool all_metrics, bool split) {
  using namespace ina::exp;
  if (threads != 1)
    throw ScenarioError(fmt::format("-j {} goes with a local run: under mpirun each rank runs one run at a time "
                                    "(start one rank per core: mpirun -np N)", threads));
  ina::cli::MpiSweep mpi(split);
  if (mpi.rank() > 0) {
    Scenario sc;
    std::vector<Point> points;
    std::vector<ScenarioRun> runs;
    std::string error;
    try {
      sc = load();
      points = expand(sc);
      runs = scenario_runs(sc, points);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (split) mpi.follow(runs, digest, error);
    else mpi.serve(runs, digest, error);
    return 0;
  }
  // The memory estimate counts the runs this machine holds at once: a run
  // per rank here, or split, one run (each rank holds its share of its
  // nodes; the links and routes each holds are small beside them).
  Scenario sc = load();
  if (split) check_split(sc);
  const unsigned here = ina::cli::mpi_local_ranks();
  return simulate(sc, out_dir, quiet, split ? 1 : here, force, nullptr,
                  split ? mpi.split_executor(digest) : mpi.executor(digest), all_metrics, here, split);
}

}  // namespace

// `ina demo dsa`: the reduced Fig. 8 under the literal settings and under the
// calibrated overlay, then one table with both and a line on what differs.
int run_demo(const std::string& out) {
  using ina::exp::Record;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const auto literal = ina::exp::parse_scenario(kDemoScenario, "<demo>");
  auto calibrated = literal;
  ina::exp::apply_overlay(calibrated, ina::cli::kDsaCalibratedOverlay, "scenarios/dsa/overlay/calibrated.toml (built in)");
  std::vector<Record> lit, cal;
  std::cout << "== " << literal.title << ": the paper's literal settings\n";
  const int rc1 = simulate(literal, out + "/literal", false, threads, false, &lit);
  std::cout << "\n== " << calibrated.title << "\n";
  const int rc2 = simulate(calibrated, out + "/calibrated", false, threads, false, &cal);
  auto jct = [](const std::vector<Record>& rs, const std::string& scheme, double x) {
    for (const auto& r : rs)
      if (r.scheme == scheme && r.x == x && r.metrics.contains("avg_jct_ms")) return r.metrics.at("avg_jct_ms");
    return std::nan("");
  };
  std::cout << fmt::format("\nAverage JCT (ms), literal | calibrated (hosts add {} us per packet each way, {} KB initial "
                           "windows):\n",
                           calibrated.base.host_delay_us, calibrated.base.init_window_kb)
            << fmt::format("{:>4} | {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>8}\n", "jobs", "SwitchML", "ATP", "DSA",
                           "SwML/DSA", "SwitchML", "ATP", "DSA", "SwML/DSA");
  double best_lit = 0;
  std::vector<double> cal_sw, cal_ratio;
  for (const auto& v : literal.sweep_values) {
    const double x = std::stod(v);
    const double a[3] = {jct(lit, "switchml", x), jct(lit, "atp", x), jct(lit, "dsa", x)};
    const double b[3] = {jct(cal, "switchml", x), jct(cal, "atp", x), jct(cal, "dsa", x)};
    best_lit = std::max(best_lit, a[0] / a[2]);
    cal_sw.push_back(b[0]);
    cal_ratio.push_back(b[0] / b[2]);
    std::cout << fmt::format("{:>4} | {:>8.3f} {:>8.3f} {:>8.3f} {:>7.2f}x | {:>8.3f} {:>8.3f} {:>8.3f} {:>7.2f}x\n", v, a[0],
                             a[1], a[2], a[0] / a[2], b[0], b[1], b[2], b[0] / b[2]);
  }
  // One line on what the difference means, each clause chosen by the numbers.
  const bool sw_slows = cal_sw.back() > 1.05 * cal_sw.front();
  const double cal_best = *std::max_element(cal_ratio.begin(), cal_ratio.end());
  std::string line = fmt::format(
      "What differs: under the literal settings a job needs little of the 5 MiB, so SwitchML's isolated regions cost "
      "it little (DSA at most {:.2f}x faster); calibrated, a job needs ~1 MB as the paper's §II-B says, ",
      best_lit);
  line += sw_slows ? fmt::format("so SwitchML slows as the jobs share the memory ({:.2f} -> {:.2f} ms)", cal_sw.front(),
                                 cal_sw.back())
                   : fmt::format("yet SwitchML does not slow ({:.2f} -> {:.2f} ms)", cal_sw.front(), cal_sw.back());
  line += fmt::format(" and DSA is at most {:.2f}x faster (the paper: 1.89x at 8 jobs)", cal_best);
  if (cal_ratio.front() < 1)
    line += fmt::format("; alone, DSA is slower ({:.2f}x), mostly from split tasks waiting for the PS's timeout "
                        "(dsa-join, ours, cuts those; docs/results/dsa.md)",
                        cal_ratio.front());
  std::cout << line << ".\n";
  return rc1 ? rc1 : rc2;
}

int main(int argc, char** argv) {
  CLI::App app{"ina: in-network aggregation toolkit (simulate, plan and run INA schemes)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ina " INA_VERSION, "print ina's version (CMake's project version) and exit");

  std::string file, out_dir;
  std::vector<std::string> sets, overlays, series;
  bool quiet = false, force = false, all_metrics = false, partition = false;
  unsigned threads = 1, sim_threads = 0, sim_partitions = 0;
  auto* sim = app.add_subcommand("sim", "Run a scenario file in the packet-level simulator");
  sim->add_option("file", file, "scenario TOML file (see scenarios/)")->required();
  sim->add_option("--out", out_dir, "write results.json, results.csv and PNG plots here");
  sim->add_option("--overlay", overlays,
                  "apply a settings overlay (TOML of settings sections) over the scenario's base settings, "
                  "e.g. --overlay scenarios/dsa/overlay/calibrated.toml; before any --set");
  sim->add_option("--set", sets,
                  "override any key of the file before it is read (repeatable): a setting for every point "
                  "(--set workload.iterations=2; series overrides still win) or the runs and the sweep, arrays as a "
                  "comma list or TOML array (--set run.seeds=1 --set sweep.values=1,4 --set run.schemes=atp,dsa)");
  sim->add_option("--series", series,
                  "run only this [[series]] of the file, by its name (repeatable; e.g. --series \"fat-tree VGG16\"); "
                  "every series is still checked first");
  sim->add_flag("--quiet", quiet, "no per-run progress lines (nor the resource estimate)");
  sim->add_flag("--all-metrics", all_metrics,
                "print a table of every metric the runs have, not only the scenario's output.metrics");
  sim->add_flag("--force", force, "run even if the estimated peak memory exceeds the available memory");
  sim->add_option("-j,--jobs", threads, "simulations to run in parallel (results do not depend on it)")
      ->check(CLI::Range(1u, 256u));
  sim->add_option("--threads", sim_threads,
                  "threads each simulation runs on, its topology split by racks (multi-switch topologies; results, "
                  "digests and traces do not depend on it): --set run.threads=T")
      ->check(CLI::Range(1u, 256u));
  sim->add_option("--partitions", sim_partitions,
                  "partitions each simulation splits into (per rank with --partition; fewer if there are fewer racks), "
                  "at least --threads: each thread runs its share one after another in every window, which keeps a "
                  "large topology's work in cache (results, digests and traces do not depend on it; by default one "
                  "per 64 of the jobs' hosts): --set run.partitions=P")
      ->check(CLI::Range(1u, 256u));
  sim->add_flag("--partition", partition,
                "under mpirun: split each simulation over the ranks, its topology by racks (multi-switch topologies, "
                "each rank on --threads threads; results and digests do not depend on it), "
                "instead of spreading the runs over them");
  sim->footer("Schemes a scenario's run.schemes may name (name|alias), on a star (topology.kind = \"star\"):" +
              ina::schemes::help(ina::schemes::Engine::SimStar) +
              "\nOn a multi-switch topology (fat-tree, dragonfly, ...):" +
              ina::schemes::help(ina::schemes::Engine::SimNetwork) +
              "\nWith sparse gradients (workload.sparse_model):" + ina::schemes::help(ina::schemes::Engine::SimSparse) +
              "\nGRID's planned routes (ina plan grid --simulate, ina plan grid-sweep):" +
              ina::schemes::help(ina::schemes::Engine::SimTopology));

  std::string demo_out = "out/demo", demo_part;
  std::vector<std::string> demo_only;
  auto* demo = app.add_subcommand(
      "demo", "One small experiment per seed paper (DSA, GRID, Rina, P4INC-AOI, Zebra), each with the paper's claim "
              "beside ours (under a minute); `ina demo dsa`: DSA Fig. 8 reduced, literal and calibrated side by side");
  demo->add_option("part", demo_part, "dsa: DSA's literal-vs-calibrated table instead of the tour")
      ->check(CLI::IsMember({"dsa"}));
  demo->add_option("--only", demo_only, "the tour's parts to run, comma-separated: dsa, grid, rina, aoi, zebra")
      ->delimiter(',')
      ->check(CLI::IsMember(ina::cli::demo_parts()));
  demo->add_option("--out", demo_out, "output directory");

  std::string suite;
  std::vector<std::string> bench_args;
  auto* bench = app.add_subcommand("bench", "Benchmarks (Google Benchmark): sim, plan, allreduce, ringstep, switch, udpio, quant, fp16");
  bench->add_option("suite", suite, "benchmark suite: sim, plan, allreduce, ringstep (a ring step's host overhead and its fluctuation, Rina Eq. 1), switch (what one ina switch serves), udpio (kernel UDP I/O methods: mmsg, gso, io_uring), quant (the communicator's float/int32 quantizer) or fp16 (float16 table-addition error)")->required();
  bench->add_option("args", bench_args,
                    "extra Google Benchmark flags, e.g. --benchmark_filter=REGEX (a \"--\" before them is optional)");
  bool vs_ns3 = false;
  std::string vs_ns3_json;
  bench->add_flag("--vs-ns3", vs_ns3, "sim only: the star workloads (16, 64 hosts) in ina and in ns-3 (ina-ns3-star, built when libns3-dev is installed), printing ina/ns-3 per workload");
  bench->add_option("--json", vs_ns3_json, "with --vs-ns3: also write the results to this JSON file");
  int vs_ns3_rounds = 3;
  bench->add_option("--rounds", vs_ns3_rounds, "with --vs-ns3: rounds of ina then ns-3 per workload; the ratio printed is the median of the rounds' (default 3)")
      ->check(CLI::Range(1, 1000));
  bench->allow_extras();

  auto* train = app.add_subcommand("train", "Data-parallel training with libtorch over ina or gloo (runs ina-train; `ina train --help` lists its options)");
  train->prefix_command();  // everything after `train` goes to ina-train ...
  train->set_help_flag();    // ... --help too: ina-train lists the training options
  // The registry, for scripts and people: which schemes an engine runs.
  std::string schemes_engine;
  bool schemes_json = false;
  auto* schemes_cmd = app.add_subcommand("schemes", "List the registered schemes (name, aliases, PS, engines)");
  schemes_cmd->add_option("--engine", schemes_engine, "only those this engine runs: sim, topology, runtime, training, network, sparse or layout")
      ->check(CLI::IsMember({"sim", "topology", "runtime", "training", "network", "sparse", "layout"}));
  schemes_cmd->add_flag("--json", schemes_json, "one JSON array (for scripts)");
  const ina::cli::Runner plan = ina::cli::register_plan(app);
  const ina::cli::Runner runtime = ina::cli::register_runtime(app);

  if (const auto rc = ina::cli::parse_command_line(app, argc, argv)) return *rc;

  try {
    if (*sim) {
      if (sim_threads) sets.push_back(fmt::format("run.threads={}", sim_threads));
      if (sim_partitions) sets.push_back(fmt::format("run.partitions={}", sim_partitions));
      auto load = [&] {
        auto sc = ina::exp::load_scenario_file(file, sets);
        for (const auto& o : overlays) sc = ina::exp::load_overlay_file(std::move(sc), o);
        if (!overlays.empty()) ina::exp::apply_setting_sets(sc, sets);  // a --set wins over an overlay
        ina::exp::keep_series(sc, series);
        return sc;
      };
      if (partition && !ina::cli::launched_by_mpirun())
        throw ina::ConfigError("--partition splits each run over MPI ranks: start ina with mpirun -np N");
      if (ina::cli::launched_by_mpirun()) {
        // What every rank must read alike: the scenario file, the overlays and the --set values.
        auto slurp = [](const std::string& path) {
          std::ifstream f(path, std::ios::binary);
          return std::string(std::istreambuf_iterator<char>(f), {});
        };
        uint64_t digest = ina::cli::digest_text(slurp(file));
        for (const auto& o : overlays) digest = ina::cli::digest_text(slurp(o), digest);
        for (const auto& kv : sets) digest = ina::cli::digest_text(kv + "\n", digest);
        for (const auto& name : series) digest = ina::cli::digest_text("series " + name + "\n", digest);
        return simulate_mpi(load, digest, out_dir, quiet, threads, force, all_metrics, partition);
      }
      return simulate(load(), out_dir, quiet, threads, force, nullptr, {}, all_metrics);
    }
    if (*demo) {
      if (!demo_part.empty() && !demo_only.empty()) throw ina::ConfigError("ina demo dsa takes no --only");
      return demo_part == "dsa" ? run_demo(demo_out) : ina::cli::run_tour(demo_out, demo_only);
    }
    if (*schemes_cmd) {
      using ina::schemes::Engine;
      const Engine engines[] = {Engine::SimStar, Engine::SimTopology, Engine::Runtime, Engine::Training,
                                Engine::SimNetwork, Engine::SimSparse, Engine::Layout};
      const char* engine_names[] = {"sim", "topology", "runtime", "training", "network", "sparse", "layout"};
      nlohmann::json out = nlohmann::json::array();
      for (const auto& sc : ina::schemes::all()) {
        nlohmann::json runs = nlohmann::json::array();
        bool wanted = schemes_engine.empty();
        for (size_t k = 0; k < std::size(engines); ++k)
          if (sc.supports(engines[k])) {
            runs.push_back(engine_names[k]);
            wanted |= schemes_engine == engine_names[k];
          }
        if (!wanted) continue;
        out.push_back({{"name", sc.name}, {"aliases", sc.aliases}, {"policy", sc.policy}, {"has_ps", sc.has_ps},
                       {"isolated", sc.isolated}, {"engines", runs},
                       {"collective", ina::schemes::to_string(sc.collective)},
                       {"sparse", ina::schemes::to_string(sc.sparse)}, {"description", sc.description}});
      }
      if (schemes_json) {
        std::cout << out.dump() << "\n";
      } else {
        for (const auto& e : out)
          std::cout << fmt::format("{:<11} {}{}; engines: {}\n", e["name"].get<std::string>(),
                                   e["description"].get<std::string>(), e["has_ps"].get<bool>() ? "; PS per job" : "",
                                   fmt::join(e["engines"].get<std::vector<std::string>>(), ", "));
      }
      return 0;
    }
    const std::string chosen = app.get_subcommands().front()->get_name();
    if (chosen == "train") {
      const auto exe = ina::cli::beside_ina("ina-train");
      std::vector<std::string> args = {exe.string()};
      for (const auto& a : train->remaining()) args.push_back(a);
      std::vector<char*> cargs;
      for (auto& a : args) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      ::execv(cargs[0], cargs.data());
      throw std::runtime_error("cannot run " + exe.string() + ": " + std::strerror(errno));
    }
    if (chosen == "plan") return plan();
    if (chosen == "switch" || chosen == "ps" || chosen == "worker" || chosen == "ring-worker" || chosen == "run" ||
        chosen == "train-py")
      return runtime();
    if (*bench) {
      auto extra = bench->remaining();
      bench_args.insert(bench_args.end(), extra.begin(), extra.end());
      if (!vs_ns3_json.empty() && !vs_ns3) throw ina::ConfigError("ina bench: --json goes with --vs-ns3");
      if (bench->count("--rounds") && !vs_ns3) throw ina::ConfigError("ina bench: --rounds goes with --vs-ns3");
      if (vs_ns3) {
        if (suite != "sim") throw ina::ConfigError("ina bench: --vs-ns3 goes with the sim suite, not '" + suite + "'");
        if (!bench_args.empty())
          throw ina::ConfigError(fmt::format("ina bench sim --vs-ns3 takes no Google Benchmark flags (got '{}')", fmt::join(bench_args, " ")));
        return ina::cli::run_vs_ns3(vs_ns3_json, vs_ns3_rounds);
      }
      return ina::cli::run_bench(suite, bench_args);
    }
  } catch (const ina::exp::ScenarioError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
