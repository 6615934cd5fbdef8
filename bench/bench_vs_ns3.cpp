// `ina bench sim --vs-ns3`: the star workload of sim/star_line_rate_1ms
// (experiment/star_line_rate.hpp), 16 and 64 hosts, in ina's simulator and
// in ns-3 (ina-ns3-star, bench/baselines/ns3_star.cc, next to `ina` in the
// build tree) in the same invocation, in rounds (ina, ns-3 at once, ina
// again: ina's rate is the mean of the two halves', so a steady drift of
// the machine's speed during the ns-3 run cancels); per round the hops/s of
// both (wall time of the simulation loop alone, and the same over its
// thread's CPU time), per workload the line
// `ina/ns-3 = N.N×`: the median of the rounds' ratios. Both must report the
// same hops (the same link deliveries), else the run fails.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "experiment/star_line_rate.hpp"

extern char** environ;

namespace ina::cli {
namespace {

namespace fs = std::filesystem;

// Runs `argv` (no shell) and returns its standard output; throws with its
// exit status if it fails.
std::string capture(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error(fmt::format("cannot run {}: {}", argv[0], std::strerror(rc)));
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error(fmt::format("{} failed (exit status {}; its errors are above): {}", argv[0],
                                         WIFEXITED(status) ? WEXITSTATUS(status) : -1, out));
  return out;
}

// The ns-3 baseline next to this `ina`; throws naming what is missing.
fs::path ns3_star_binary() {
  const fs::path exe = beside_ina("ina-ns3-star");
  if (!fs::exists(exe))
    throw std::runtime_error(fmt::format(
        "--vs-ns3 needs the ns-3 baseline {}, which is not built: ns-3 is not installed (Debian's libns3-dev; "
        "./scripts/setup installs it), or cmake ran before it was; install it, re-run cmake and build", exe.string()));
  return exe;
}

// One ns-3 run of the star `s` (pool: the switch's slots per pool, as ina's).
nlohmann::json run_ns3_star(const fs::path& exe, const exp::StarLineRateSettings& s, uint32_t pool) {
  const std::string out = capture({exe.string(), fmt::format("--hosts={}", s.hosts),
                                   fmt::format("--duration-us={}", to_us(s.duration)), fmt::format("--gbps={}", s.gbps),
                                   fmt::format("--delay-ns={}", static_cast<double>(s.delay) / kNs),
                                   fmt::format("--values={}", s.payload_values), fmt::format("--window={}", s.window),
                                   fmt::format("--pool={}", pool)});
  try {
    return nlohmann::json::parse(out);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{} printed no JSON object ({}): {}", exe.string(), e.what(), out));
  }
}

// The median of `v` (its middle value; the mean of the two middle ones).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int run_vs_ns3(const std::string& json_out, int rounds) {
  if (rounds < 1) throw std::invalid_argument(fmt::format("ina bench sim --vs-ns3: --rounds must be >= 1, got {}", rounds));
  const fs::path exe = ns3_star_binary();
  // The --json file (and its directory) before the rounds, not after them.
  std::ofstream json_file;
  if (!json_out.empty()) {
    std::error_code ec;
    if (const fs::path dir = fs::path(json_out).parent_path(); !dir.empty()) fs::create_directories(dir, ec);
    json_file.open(json_out);
    if (!json_file)
      throw std::runtime_error(fmt::format("--json '{}': cannot write the file{}", json_out, ec ? ": " + ec.message() : ""));
  }
  nlohmann::json all = nlohmann::json::array();
  for (const int hosts : {16, 64}) {
    exp::StarLineRateSettings s;
    s.hosts = hosts;
    // Rounds, each ina, ns-3 right after it, then ina again: a shared
    // machine's speed drifts over seconds to minutes, so a ratio is taken
    // within a round, ina's rate around ns-3's run, and the figure is the
    // median of the rounds' ratios.
    nlohmann::json per_round = nlohmann::json::array();
    std::vector<double> wall_ratios, cpu_ratios;
    exp::StarLineRateResult r;
    for (int round = 0; round < rounds; ++round) {
      // ina: runs until 0.5 s of wall time (Google Benchmark's default
      // minimum), before the ns-3 run and again after it.
      uint64_t hops = 0, events = 0;
      double wall = 0, cpu = 0;
      int runs = 0;
      auto measure = [&] {
        const double until = wall + 0.5;
        const uint64_t h0 = hops;
        const double w0 = wall;
        while (wall < until) {
          r = exp::run_star_line_rate(s);
          if (!r.values_ok(s))
            throw std::runtime_error(fmt::format(
                "star {} hosts: ina's results had {} wrong values of {} checked ({} expected)", hosts, r.bad_values,
                r.values_checked, r.down_hops * s.payload_values));
          hops += r.hops;
          events += r.events;
          wall += r.wall_s;
          cpu += r.cpu_s;
          ++runs;
        }
        return static_cast<double>(hops - h0) / (wall - w0);
      };
      const double before = measure();
      const nlohmann::json ns3 = run_ns3_star(exe, s, r.pool_slots);
      const double after = measure();
      const auto ns3_hops = ns3.at("hops").get<uint64_t>();
      if (ns3_hops != r.hops || ns3.at("aggregations").get<uint64_t>() != r.aggregations)
        throw std::runtime_error(fmt::format("star {} hosts: ina counted {} hops and {} aggregations, ns-3 {} and {}: "
                                             "the two runs are not the same workload",
                                             hosts, r.hops, r.aggregations, ns3_hops,
                                             ns3.at("aggregations").get<uint64_t>()));
      // The halves' mean: each half weighs the same whatever its runs' length.
      const double ina_rate = (before + after) / 2, ina_cpu_rate = static_cast<double>(hops) / cpu;
      const double ratio = ina_rate / ns3.at("hops_per_s").get<double>();
      const double cpu_ratio = ina_cpu_rate / ns3.at("hops_per_cpu_s").get<double>();
      wall_ratios.push_back(ratio);
      cpu_ratios.push_back(cpu_ratio);
      if (round == 0)
        fmt::print("star {} hosts, {} us: {} hops per run ({} up, {} down), {} aggregations\n", hosts,
                   to_us(s.duration), r.hops, r.up_hops, r.down_hops, r.aggregations);
      fmt::print("  round {}: ina {:6.2f} M hops/s ({:.2f} before ns-3, {:.2f} after; {} runs, {:.3f} s), "
                 "ns-3 {:5.2f} M hops/s ({:.3f} s): {:.1f}× (CPU time: {:.1f}×)\n",
                 round + 1, ina_rate / 1e6, before / 1e6, after / 1e6, runs, wall,
                 ns3.at("hops_per_s").get<double>() / 1e6, ns3.at("wall_s").get<double>(), ratio, cpu_ratio);
      std::fflush(stdout);
      per_round.push_back({{"ina", {{"runs", runs}, {"wall_s", wall}, {"cpu_s", cpu}, {"hops_per_s", ina_rate},
                                    {"hops_per_s_before", before}, {"hops_per_s_after", after},
                                    {"hops_per_cpu_s", ina_cpu_rate},
                                    {"events_per_s", static_cast<double>(events) / wall}}},
                           {"ns3", ns3},
                           {"ratio", ratio},
                           {"cpu_ratio", cpu_ratio}});
    }
    const double ratio = median(wall_ratios), cpu_ratio = median(cpu_ratios);
    fmt::print("  ina/ns-3 = {:.1f}× (median of {} round{}; CPU time: {:.1f}×; {})\n", ratio, rounds,
               rounds == 1 ? "" : "s", cpu_ratio, per_round[0]["ns3"].at("simulator").get<std::string>());
    std::fflush(stdout);
    all.push_back({{"workload", fmt::format("star_line_rate_{}us/{}", to_us(s.duration), hosts)},
                   {"hosts", hosts},
                   {"hops", r.hops},
                   {"aggregations", r.aggregations},
                   {"rounds", per_round},
                   {"ratio", ratio},
                   {"cpu_ratio", cpu_ratio}});
  }
  if (json_file.is_open()) {
    json_file << all.dump(2) << "\n";
    if (!json_file.flush()) throw std::runtime_error(fmt::format("--json '{}': cannot write the file", json_out));
  }
  return 0;
}

}  // namespace ina::cli
