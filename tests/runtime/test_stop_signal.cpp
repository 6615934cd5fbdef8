// A stop signal ends the waits of the runtime's commands at once, not at
// their timeouts (runtime/net.hpp StopRequested).
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "cli_util.hpp"

namespace {

// `ina ps` waiting at a running switch for workers that never come, its
// rendezvous timeout at 20 s: SIGTERM after 0.5 s ends it within 2 s, with
// status 128 + 15 and the wait it gave up named.
TEST(StopSignal, PsWaitingForItsJobStopsOnSigterm) {
  const auto d = ina_test::fresh_dir("stop_signal");
  // 16 ports per process id, as the other runtime tests (runtime/test_runtime_grid.cpp); this one's is +14.
  const std::string port = std::to_string(20000 + 16 * static_cast<int>(::getpid() % 760) + 14);
  const std::string ina = INA_BINARY;
  const std::string sh =
      "cd '" + d.string() + "' || exit 9\n" + ina + " key new k >/dev/null || exit 9\n" + ina +
      " key job --switch-key-file k --job 1 --out j1 >/dev/null || exit 9\n" + ina + " switch --listen 127.0.0.1:" +
      port + " --key-file k --quiet & S=$!\n"
      "for i in $(seq 200); do ss -Hltn 'sport = :" + port + "' | grep -q . && break; sleep 0.05; done\n" + ina +
      " ps --switch 127.0.0.1:" + port + " --job 1 --workers 2 --key-file j1 --rendezvous-timeout-ms 20000 & P=$!\n"
      "sleep 0.5\nt0=$(date +%s%N)\nkill -TERM $P\nwait $P\nrc=$?\nt1=$(date +%s%N)\n"
      "kill $S\nwait $S\necho \"rc=$rc ms=$(( (t1 - t0) / 1000000 ))\"\n";
  ina_test::write_file(d / "run.sh", sh);
  const auto r = ina_test::run_command("sh '" + (d / "run.sh").string() + "'");
  std::filesystem::remove_all(d);
  const auto at = r.output.find("rc=");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_EQ(r.output.substr(at, 7), "rc=143 ") << r.output;
  const int ms = std::stoi(r.output.substr(r.output.find("ms=", at) + 3));
  EXPECT_LT(ms, 2000) << r.output;
  EXPECT_NE(r.output.find("ina ps job 1: stopped by signal 15 (Terminated) while waiting at the switch at 127.0.0.1:" + port +
                          " for job 1 to assemble"),
            std::string::npos)
      << r.output;
}

}  // namespace
