// `ina bench allreduce`: allreduce goodput (elements/s and Gbit/s of the
// allreduced tensor per worker), ina against gloo and OpenMPI in one run, on
// loopback and on the emulated cluster.
//
//  - allreduce/ina_<scheme>/workers:N/bytes:S — `ina run` in-process
//    (ina::rt::launch: a real switch, PS and N worker processes of this very
//    binary over UDP, 8192 values per packet; every value verified exact).
//    Time = the slowest worker's total time inside allreduce (the launcher's
//    goodput definition).
//  - allreduce/gloo/... — gloo's ring allreduce (the algorithm
//    c10d::ProcessGroupGloo uses), N processes of ina-gloo-allreduce over
//    loopback TCP, rendezvous through a file store.
//  - allreduce/mpi/... — OpenMPI MPI_Allreduce (MPI_FLOAT, SUM, in place),
//    `mpirun --oversubscribe -np N ina-mpi-allreduce` (shared-memory transport
//    on one host). Skipped with a message if mpirun is missing.
//  - allreduce/netns_<scheme>/... — the same jobs across network namespaces
//    with tc-limited links (scripts/netns-cluster: 100 Mbit/s worker links,
//    1 Gbit/s switch and PS links; INA_BENCH_LINKS=1 adds 1 and 10 Gbit/s
//    worker links, argument mbit), for ina dsa/atp/switchml and the gloo and
//    MPI baselines (ranks in the worker namespaces, TCP over the same links);
//    skipped with the script's reason where namespaces cannot be created.
// The baselines check every value against the exact sum, as ina does. Their
// programs are built with `ina` (bench/baselines/) and found next to it.
//
// Default sizes: 1 MB and 4 MB (the default run stays within a few minutes on
// 2 cores). INA_BENCH_LARGE=1 adds 16, 64 and 100 MB (minutes per case on a
// small machine).
#include <benchmark/benchmark.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "bench_launch.hpp"
#include "runtime/launcher.hpp"
#include "schemes/registry.hpp"

namespace {

namespace fs = std::filesystem;

constexpr unsigned kIterations = 3;  // allreduces per measurement

void report(benchmark::State& state, double bytes_per_allreduce, unsigned allreduces, double seconds) {
  const double elements = bytes_per_allreduce / 4 * allreduces;
  state.counters["elements_per_s"] = seconds > 0 ? elements / seconds : 0;
  state.counters["Gbit_per_s"] = seconds > 0 ? bytes_per_allreduce * allreduces * 8 / seconds / 1e9 : 0;
  state.counters["workers"] = static_cast<double>(state.range(0));
  state.counters["bytes"] = static_cast<double>(state.range(1));
}

fs::path fresh_dir(const char* tag) {
  fs::path d = fs::temp_directory_path() / (std::string("ina-bench-") + tag + "-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// Runs a shell command bounded by `timeout`; returns (exit status, output).
std::pair<int, std::string> sh(const std::string& cmd, int seconds) {
  const std::string full = "timeout --kill-after=5 " + std::to_string(seconds) + " " + cmd + " 2>&1";
  std::string out;
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string tail(const std::string& s, size_t n = 400) { return s.size() > n ? s.substr(s.size() - n) : s; }

// ---------------------------------------------------------------- ina (loopback)

void BM_Ina(benchmark::State& state, const char* scheme) {
  const unsigned workers = static_cast<unsigned>(state.range(0));
  const uint64_t bytes = static_cast<uint64_t>(state.range(1));
  const fs::path dir = fresh_dir(scheme);
  double seconds = 0;
  unsigned allreduces = 0;
  for (auto _ : state) {
    ina::rt::LaunchConfig cfg;
    cfg.scheme = scheme;
    cfg.workers = workers;
    cfg.size_bytes = bytes;
    cfg.iterations = kIterations;
    // Software-switch packets of 8192 values (32 KB datagrams; loopback's MTU
    // is 64 KB): on one host the cost is per datagram (kernel UDP path and
    // context switches), so the largest packets go fastest. The emulated
    // cluster uses 1024 values (4 KB, one 9000-byte jumbo frame).
    cfg.payload = 8192;
    cfg.timeout_s = 120;
    cfg.json_out = (dir / "run.json").string();
    const auto j = ina::bench::launch_summary(cfg, state);
    if (!j) break;
    const double s = j->at("jobs").at(0).at("allreduce_seconds").get<double>();
    state.SetIterationTime(s);
    seconds += s;
    allreduces += kIterations;
  }
  fs::remove_all(dir);
  report(state, static_cast<double>(bytes), allreduces, seconds);
}

// ---------------------------------------------------------------- baselines

// A program built next to this binary (ina-gloo-allreduce, ina-mpi-allreduce).
std::string sibling(const char* name) { return ina::cli::beside_ina(name).string(); }

// Runs `cmd` (a baseline job), reads "<marker> <seconds>" from its output.
void run_baseline(benchmark::State& state, const std::string& cmd, const char* marker, int limit_s) {
  const uint64_t bytes = static_cast<uint64_t>(state.range(1));
  double seconds = 0;
  unsigned allreduces = 0;
  for (auto _ : state) {
    const auto [rc, out] = sh(cmd, limit_s);
    const auto at = out.find(marker);
    if (rc != 0 || at == std::string::npos) {
      state.SkipWithError(("failed (status " + std::to_string(rc) + "): " + tail(out)).c_str());
      break;
    }
    const double s = std::strtod(out.c_str() + at + std::strlen(marker), nullptr);
    state.SetIterationTime(s);
    seconds += s;
    allreduces += kIterations;
  }
  report(state, static_cast<double>(bytes), allreduces, seconds);
}

bool skip_unless(benchmark::State& state, const char* what, bool ok, const std::string& why) {
  if (ok) return false;
  std::fprintf(stderr, "allreduce/%s: skipped: %s\n", what, why.c_str());
  state.SkipWithError(("skipped: " + why).c_str());
  for (auto _ : state) {}
  return true;
}

void BM_Gloo(benchmark::State& state) {
  const unsigned workers = static_cast<unsigned>(state.range(0));
  const std::string prog = sibling("ina-gloo-allreduce");
  if (skip_unless(state, "gloo", ::access(prog.c_str(), X_OK) == 0, prog + " not built")) return;
  const fs::path store = fresh_dir("gloo");
  // One process per rank; the shell waits for every rank and fails if any did.
  std::string ranks;
  for (unsigned r = 0; r < workers; ++r) ranks += fmt::format(" {}", r);
  const std::string cmd = fmt::format(
      "sh -c 'rc=0; pids=; for r in{}; do {} --rank $r --workers {} --bytes {} --iterations {} --store {} --timeout 120 "
      "& pids=\"$pids $!\"; done; for p in $pids; do wait $p || rc=$?; done; exit $rc'",
      ranks, prog, workers, state.range(1), kIterations, store.string());
  run_baseline(state, cmd, "GLOO_SECONDS ", 150);
  fs::remove_all(store);
}

void BM_Mpi(benchmark::State& state) {
  const unsigned workers = static_cast<unsigned>(state.range(0));
  const std::string prog = sibling("ina-mpi-allreduce");
  if (skip_unless(state, "mpi", ::access(prog.c_str(), X_OK) == 0, prog + " not built")) return;
  if (skip_unless(state, "mpi", sh("sh -c 'command -v mpirun'", 10).first == 0, "mpirun not found (Debian: openmpi-bin)"))
    return;
  run_baseline(state,
               "mpirun --oversubscribe --allow-run-as-root -np " + std::to_string(workers) + " " + prog + " " +
                   std::to_string(state.range(1)) + " " + std::to_string(kIterations),
               "MPI_SECONDS ", 150);
}

// ---------------------------------------------------------------- emulated cluster

// Link layouts of the emulated cluster, by the worker link's rate: the
// switch's and the PS's links are 10x faster (4x at 10 Gbit/s), and the tbf
// bucket holds at least 1 ms of the fastest link (the kernel's timer tick).
struct Links {
  std::string worker, sw, burst;
};
Links links_for(int64_t mbit) {
  if (mbit <= 100) return {"100mbit", "1gbit", "64kb"};
  if (mbit <= 1000) return {"1gbit", "10gbit", "2mb"};
  return {"10gbit", "40gbit", "8mb"};
}

void BM_Netns(benchmark::State& state, const char* scheme) {
  const unsigned workers = static_cast<unsigned>(state.range(0));
  const uint64_t bytes = static_cast<uint64_t>(state.range(1));
  const Links l = links_for(state.range(2));
  const fs::path dir = fresh_dir("netns");
  double seconds = 0;
  unsigned allreduces = 0;
  const std::string binary = ina::cli::ina_executable().string();
  for (auto _ : state) {
    const std::string json = (dir / "netns.json").string();
    const std::string cmd = std::string(INA_SOURCE_DIR) + "/scripts/netns-cluster --ina " + binary + " --scheme " +
                            scheme + " --workers " + std::to_string(workers) + " --size " + std::to_string(bytes) +
                            " --iterations " + std::to_string(kIterations) +
                            " --worker-rate " + l.worker + " --switch-rate " + l.sw + " --burst " + l.burst +
                            " --timeout 600 --json " + json;
    const auto [rc, out] = sh(cmd, 620);
    if (rc == 77) {
      std::fprintf(stderr, "allreduce/netns: skipped: %s", out.c_str());
      state.SkipWithError(("skipped: " + tail(out)).c_str());
      break;
    }
    std::ifstream in(json);
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (rc != 0 || j.is_discarded() || !j.value("ok", false)) {
      state.SkipWithError(("netns-cluster failed (status " + std::to_string(rc) + "): " + tail(out)).c_str());
      break;
    }
    const double s = j.at("allreduce_seconds").get<double>();
    state.SetIterationTime(s);
    seconds += s;
    allreduces += kIterations;
    state.counters["fraction_of_worker_link"] = j.at("fraction_of_worker_link").get<double>();
    // The machine's CPU over the job (all cores): where it nears 1, the CPU is the cap.
    if (j.contains("cpu") && j["cpu"].contains("busy")) {
      state.counters["cpu_busy"] = j["cpu"]["busy"].get<double>();
      state.counters["cpu_irq"] = j["cpu"]["irq"].get<double>();
      state.counters["cpu_kernel"] = j["cpu"]["system"].get<double>();
    }
  }
  fs::remove_all(dir);
  report(state, static_cast<double>(bytes), allreduces, seconds);
}

// ---------------------------------------------------------------- registration

std::vector<int64_t> sizes() {
  std::vector<int64_t> s = {1 << 20, 4 << 20};
  if (const char* e = std::getenv("INA_BENCH_LARGE"); e && std::string(e) == "1")
    s.insert(s.end(), {16 << 20, 64 << 20, 100'000'000});
  return s;
}

void args(benchmark::internal::Benchmark* b, std::vector<int64_t> workers) {
  b->ArgNames({"workers", "bytes"});
  for (int64_t w : workers)
    for (int64_t s : sizes()) b->Args({w, s});
  b->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
}

// The emulated cluster: 100 Mbit/s worker links for every worker count and
// size; with INA_BENCH_LINKS=1 also the 1 and 10 Gbit/s layouts for 2 and 4
// workers at 16 MiB (minutes per case on 2 cores).
void netns_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"workers", "bytes", "mbit"});
  for (int64_t w : {2, 4, 8})
    for (int64_t s : sizes()) b->Args({w, s, 100});
  if (const char* e = std::getenv("INA_BENCH_LINKS"); e && std::string(e) == "1")
    for (int64_t mbit : {1000, 10000})
      for (int64_t w : {2, 4}) b->Args({w, 16 << 20, mbit});
  b->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
}

[[maybe_unused]] const int registered = [] {
  // The runtime's schemes, from the registry (names live as long as the program).
  std::vector<const char*> ina_schemes;
  for (const ina::schemes::Scheme& s : ina::schemes::all())
    if (s.supports(ina::schemes::Engine::Runtime) && !s.kv()) ina_schemes.push_back(s.name.c_str());  // kv: bench_sparse_allreduce.cpp
  for (const char* scheme : ina_schemes) {
    benchmark::RegisterBenchmark((std::string("allreduce/ina_") + scheme).c_str(), BM_Ina, scheme)
        ->Apply([](benchmark::internal::Benchmark* b) { args(b, {2, 4, 8}); });
  }
  benchmark::RegisterBenchmark("allreduce/gloo", BM_Gloo)->Apply([](benchmark::internal::Benchmark* b) {
    args(b, {2, 4, 8});
  });
  benchmark::RegisterBenchmark("allreduce/mpi", BM_Mpi)->Apply([](benchmark::internal::Benchmark* b) {
    args(b, {2, 4, 8});
  });
  ina_schemes.insert(ina_schemes.end(), {"gloo", "mpi"});
  for (const char* scheme : ina_schemes) {
    benchmark::RegisterBenchmark((std::string("allreduce/netns_") + scheme).c_str(), BM_Netns, scheme)->Apply(netns_args);
  }
  return 0;
}();

}  // namespace
