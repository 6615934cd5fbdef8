// GRID's plan over UDP on loopback (runtime/ring_layout.hpp, a flat tree):
// two `ina switch --scheme grid --layout` processes, the PS and four
// `ina ring-worker`s, each process as scripts/grid-netns starts it. Ranks 0,
// 1 and 3 are planned at switch A, rank 2 at switch B; every rank is paced
// at its planned rate. Timer floors of 100 ms keep a busy machine's
// scheduling delays from reminders (scripts/grid-netns scales them alike).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_util.hpp"

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kBytes = 262144, kPayload = 256, kIterations = 2;
constexpr uint64_t kTasks = kBytes / 4 / kPayload * kIterations;  // 512
constexpr double kRateGbps = 0.05;

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f, nullptr, false);
}

struct GridRun {
  ina_test::CliResult out;
  fs::path dir;
};

// Runs the job; capacity_mbit limits switch A's processing capacity C_s (0: none).
GridRun run_grid(const std::string& tag, double capacity_mbit) {
  const fs::path d = ina_test::fresh_dir("grid_" + tag);
  // 16 ports per process id: tests run at once (ctest -j) get disjoint
  // ranges, all below the kernel's ephemeral ports (32768 on: another
  // test's socket bound to port 0 may hold any of those).
  const int base = 20000 + 16 * static_cast<int>(::getpid() % 760);
  const std::string a = "127.0.0.1:" + std::to_string(base), b = "127.0.0.1:" + std::to_string(base + 1);
  nlohmann::json workers = nlohmann::json::array();
  for (int r = 0; r < 4; ++r) workers.push_back("127.0.0.1:" + std::to_string(base + 10 + r));
  const nlohmann::json layout = {
      {"job", 1}, {"scheme", "grid"}, {"payload", kPayload}, {"memory_bytes", kBytes},
      {"workers", workers},
      {"racks", nlohmann::json::array({nlohmann::json{{"ranks", {0, 1, 3}}, {"switch", a}},
                                       nlohmann::json{{"ranks", {2}}, {"switch", b}}})},
      {"ps", "127.0.0.1:" + std::to_string(base + 2)},
      {"rates_gbps", {kRateGbps, kRateGbps, kRateGbps, kRateGbps}}};
  ina_test::write_file(d / "layout.json", layout.dump());
  const std::string ina = INA_BINARY;
  auto sw = [&](int rack, const std::string& listen, double cap) {
    return ina + " switch --key-file k --listen " + listen + " --scheme grid --payload " + std::to_string(kPayload) +
           " --memory " + std::to_string(kBytes) + " --layout layout.json --rack " + std::to_string(rack) +
           " --capacity-mbit " + std::to_string(cap) + " --stats-json sw" + std::to_string(rack) + ".json --quiet & ";
  };
  auto listening = [](const std::string& port) {
    return "for i in $(seq 200); do ss -Hlun 'sport = :" + port + "' | grep -q . && break; sleep 0.05; done; ";
  };
  const std::string common = " --size " + std::to_string(kBytes) + " --barrier bar --timeout 60 --quiet";
  const std::string sh = "cd '" + d.string() + "' || exit 1\nmkdir bar\n" + ina + " key new k >/dev/null || exit 1\n" +
                         sw(0, a, capacity_mbit) + "S0=$!\n" + sw(1, b, 0) + "S1=$!\n" +
                         listening(std::to_string(base)) + "\n" + listening(std::to_string(base + 1)) + "\n" + ina +
                         " ring-worker --layout layout.json --ps --ps-min-timeout-ms 100 --report ps.json" + common +
                         " & P=$!\nW=''\nfor r in 0 1 2 3; do " + ina + " ring-worker --layout layout.json --rank $r" +
                         " --min-rto-ms 100 --iterations " + std::to_string(kIterations) + " --report rank$r.json" +
                         common + " & W=\"$W $!\"; done\n"
                         "st=0\nfor p in $W; do wait $p || st=1; done\nwait $P || st=1\n"
                         "kill $S0 $S1\nwait $S0 $S1\nexit $st\n";
  ina_test::write_file(d / "run.sh", sh);  // a file, so the shell sees it as written (no quoting)
  return {ina_test::run_command("sh '" + (d / "run.sh").string() + "'"), d};
}

// Each switch aggregates every task from exactly its planned ranks, the PS
// completes each task once from the two switches' partials, every value is
// exact, and every rank paces: an iteration takes at least its frames at
// the planned rate (unpaced, loopback carries it several times faster).
TEST(GridOverUdp, PlannedSwitchesAggregateTheirRanksExactAndPaced) {
  const GridRun g = run_grid("plain", 0);
  ASSERT_EQ(g.out.status, 0) << g.out.output;
  const auto s0 = read_json(g.dir / "sw0.json").at("switch"), s1 = read_json(g.dir / "sw1.json").at("switch");
  EXPECT_EQ(s0.at("aggregated"), 3 * kTasks);
  EXPECT_EQ(s0.at("completed"), kTasks);
  EXPECT_EQ(s1.at("aggregated"), kTasks);
  EXPECT_EQ(s1.at("completed"), kTasks);
  for (const auto& s : {s0, s1}) {
    EXPECT_EQ(s.at("foreign_data"), 0);
    EXPECT_EQ(s.at("forwarded"), 0);  // every node is addressed directly: nothing passes through
  }
  const auto ps = read_json(g.dir / "ps.json");
  EXPECT_EQ(ps.at("stats").at("ps").at("completions"), kTasks);
  EXPECT_EQ(ps.at("stats").at("ps").at("data_in"), 2 * kTasks);  // one partial per switch and task
  EXPECT_TRUE(ps.at("leaks").empty()) << ps.dump();
  const double frame_bits = 8.0 * (kBytes / 4 / kPayload) * (36 + 4 * kPayload + 42);
  for (int r = 0; r < 4; ++r) {
    const auto rep = read_json(g.dir / ("rank" + std::to_string(r) + ".json"));
    EXPECT_EQ(rep.at("verified"), rep.at("expected")) << r;
    EXPECT_EQ(rep.at("mismatches"), 0) << r;
    EXPECT_EQ(rep.at("paced_gbps"), kRateGbps) << r;
    EXPECT_EQ(rep.at("first_hop"), r == 2 ? 6 : 5) << r;  // node ids: ranks 1-4, switch A 5, B 6
    for (const auto& t : rep.at("iteration_seconds"))
      EXPECT_GE(t.get<double>(), 0.95 * frame_bits / (kRateGbps * 1e9)) << r;
  }
  fs::remove_all(g.dir);
}

// Switch A's processing capacity below its planned load (three ranks at
// 50 Mbit/s, C_s 20 Mbit/s): it drops fragments with a rate-sync (GRID 5.2),
// the workers halve their windows and resend, and every value stays exact.
TEST(GridOverUdp, ASwitchOverItsCapacityRateSyncsAndStaysExact) {
  const GridRun g = run_grid("capacity", 20);
  ASSERT_EQ(g.out.status, 0) << g.out.output;
  const auto s0 = read_json(g.dir / "sw0.json").at("switch"), s1 = read_json(g.dir / "sw1.json").at("switch");
  EXPECT_GT(s0.at("capacity_drops").get<uint64_t>(), 0u);
  // Every refused fragment got its rate-sync: past the capacity, or colliding (the second iteration's
  // fragments meet the first's resent ones) without evicting.
  EXPECT_EQ(s0.at("rate_syncs").get<uint64_t>(), s0.at("capacity_drops").get<uint64_t>() +
                                                     s0.at("collisions").get<uint64_t>() -
                                                     s0.at("evictions").get<uint64_t>());
  EXPECT_EQ(s1.at("rate_syncs"), 0);
  uint64_t seen = 0;
  for (int r = 0; r < 4; ++r) {
    const auto rep = read_json(g.dir / ("rank" + std::to_string(r) + ".json"));
    EXPECT_EQ(rep.at("verified"), rep.at("expected")) << r;
    EXPECT_EQ(rep.at("mismatches"), 0) << r;
    seen += rep.at("stats").at("worker").at("rate_syncs").get<uint64_t>();
  }
  EXPECT_EQ(seen, s0.at("rate_syncs").get<uint64_t>());  // each reached its worker (loopback loses none)
  fs::remove_all(g.dir);
}

}  // namespace
