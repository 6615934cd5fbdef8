// The launchers' steps with their child processes (runtime/launch_steps.hpp),
// driven with small shell children instead of ina processes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/json_depth.hpp"
#include "runtime/launch_steps.hpp"

namespace ina::rt {
namespace {

namespace fs = std::filesystem;

std::string temp_file(const std::string& tag, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("ina-launch-steps-" + tag + "-" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << text;
  return p.string();
}

// A report nested deeper than kMaxJsonDepth is refused before the parser sees
// it, like a missing or broken one; one at the limit is read.
TEST(LaunchSteps, ReportsNestedTooDeepAreUnreadable) {
  const std::string at_limit = temp_file("limit", std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']'));
  const std::string too_deep =
      temp_file("deep", std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']'));
  const std::string report = temp_file("report", R"({"verified": 12, "stats": {"transport": {"malformed": 0}}})");
  const std::string broken = temp_file("broken", R"({"verified": )");
  EXPECT_TRUE(read_json_report(at_limit).is_array());
  EXPECT_TRUE(read_json_report(too_deep).is_discarded());
  EXPECT_EQ(read_json_report(report).at("verified"), 12);
  EXPECT_TRUE(read_json_report(broken).is_discarded());
  EXPECT_TRUE(read_json_report(report + ".missing").is_discarded());
  for (const auto& p : {at_limit, too_deep, report, broken}) fs::remove(p);
}

// The worker that failed is named, with status 3 for a result mismatch, even
// though another worker finished first.
TEST(LaunchSteps, WaitForWorkersNamesTheWorkerThatFailed) {
  Supervisor sup;
  sup.spawn(Kind::Worker, "worker rank 0", 1, 0, "/bin/sh", {"-c", "exit 0"});
  const Child& bad = sup.spawn(Kind::Worker, "worker rank 1", 1, 1, "/bin/sh", {"-c", "sleep 0.2; exit 3"});
  const auto f = wait_for_workers(sup, monotonic_now() + 20 * kSec, 20);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->status, 3);
  EXPECT_EQ(f->child, &bad);
  EXPECT_EQ(f->message, fmt::format("worker rank 1 (pid {}) exited with status 3 (results differed from the exact sum)", bad.pid));
}

// A switch never exits on its own: leaving with status 0 while a worker runs is a failure.
TEST(LaunchSteps, SwitchExitingWhileWorkersRunIsAFailure) {
  Supervisor sup;
  const Child& sw = sup.spawn(Kind::Switch, "switch", 0, 0, "/bin/sh", {"-c", "exit 0"});
  sup.spawn(Kind::Worker, "worker rank 0", 1, 0, "/bin/sh", {"-c", "sleep 10"});
  const auto f = wait_for_workers(sup, monotonic_now() + 20 * kSec, 20);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->status, 1);
  EXPECT_EQ(f->message, fmt::format("the switch (pid {}) exited while jobs were running", sw.pid));
}

// Workers that all exit 0 end the wait without a failure; the PS that
// exits 0 after them too.
TEST(LaunchSteps, WorkersAndPsExitingZeroAreNoFailure) {
  Supervisor sup;
  for (unsigned r = 0; r < 3; ++r) sup.spawn(Kind::Worker, fmt::format("worker rank {}", r), 1, r, "/bin/sh", {"-c", "exit 0"});
  sup.spawn(Kind::Ps, "PS of job 1", 1, 0, "/bin/sh", {"-c", "sleep 0.1"});
  EXPECT_FALSE(wait_for_workers(sup, monotonic_now() + 20 * kSec, 20).has_value());
  EXPECT_FALSE(wait_for_ps_exit(sup, monotonic_now() + 20 * kSec).has_value());
  EXPECT_TRUE(sup.all_reaped());
}

// The switch's port comes through the ready pipe; SIGTERM stops it with status 0.
TEST(LaunchSteps, StartSwitchReadsItsPortAndStopSwitchesEndsIt) {
  Supervisor sup;
  Child* sw = nullptr;
  uint16_t port = 0;
  // bash: `--ready-fd N` arrives as $1 $2.
  const auto f = start_switch(sup, "/bin/bash",
                              {"-c", "trap 'exit 0' TERM; echo 4242 >&$2; while :; do sleep 0.05; done", "sw"},
                              "switch", 0, 0, monotonic_now() + 20 * kSec, sw, port);
  ASSERT_FALSE(f.has_value()) << f->message;
  ASSERT_NE(sw, nullptr);
  EXPECT_EQ(port, 4242);
  EXPECT_EQ(sw->kind, Kind::Switch);
  EXPECT_FALSE(stop_switches(sup, {sw}).has_value());
  EXPECT_TRUE(sw->reaped);
  EXPECT_EQ(sw->status, 0);
}

// A switch that exits before it reports a port is named with its status.
TEST(LaunchSteps, SwitchThatDiesBeforeItIsReadyIsNamed) {
  Supervisor sup;
  Child* sw = nullptr;
  uint16_t port = 0;
  const auto f = start_switch(sup, "/bin/sh", {"-c", "exit 4", "sw"}, "switch of rack 1", 0, 1,
                              monotonic_now() + 20 * kSec, sw, port);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->status, 1);
  EXPECT_EQ(f->child, sw);
  EXPECT_EQ(f->message, fmt::format("the switch of rack 1 (pid {}) exited with status 4 before it was ready", sw->pid));
}

}  // namespace
}  // namespace ina::rt
