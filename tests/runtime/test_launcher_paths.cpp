// The user's paths through the runtime: refused datagrams attributed to a
// job's member or to nobody (a stray datagram is noise, not a failed run),
// what a waiting worker says while it waits, and `ina run`'s progress lines.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/control.hpp"
#include "runtime/launcher.hpp"
#include "runtime/net.hpp"
#include "runtime/udp_engine.hpp"
#include "runtime/wait_notice.hpp"
#include "runtime_fixture.hpp"
#include "test_keys.hpp"

namespace fs = std::filesystem;
using namespace ina;
using namespace ina::rt;

namespace {

using ina::test::encoded;
using ina::test::plain_udp;
using ina::test::pump_until;
using ina::test::send_raw;

// Counts the packets it gets and frees them.
class CountingSink final : public Node {
 public:
  void on_packet(Packet* p, Time, Effects& fx) override {
    ++got;
    fx.free(p);
  }
  void on_timer(uint64_t, Time, Effects&) override {}
  int got = 0;
};

// Runs fn with this process's stderr (fd 2) going to a file; returns what was written.
template <typename Fn>
std::string stderr_of(Fn fn) {
  const fs::path f = fs::temp_directory_path() / ("ina_paths_err_" + std::to_string(getpid()));
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, 2);
  ::close(fd);
  fn();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(f);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(f);
  return ss.str();
}

// Runs fn with stderr to a file: what it wrote, and the message of the
// RuntimeError it threw ("" if none).
struct Said {
  std::string err, error;
};
template <typename Fn>
Said stderr_and_error_of(Fn fn) {
  Said s;
  s.err = stderr_of([&] {
    try {
      fn();
    } catch (const RuntimeError& e) {
      s.error = e.what();
    }
  });
  return s;
}

// A loopback port that is free for both UDP and TCP now (the switch of a launch binds both).
uint16_t free_port_pair() {
  for (int tries = 0; tries < 50; ++tries) {
    UniqueFd u = plain_udp();
    const uint16_t port = local_endpoint(u.get()).port();
    UniqueFd t(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const Endpoint e = Endpoint::parse("127.0.0.1:" + std::to_string(port));
    if (::bind(t.get(), reinterpret_cast<const sockaddr*>(&e.sa), sizeof e.sa) == 0) return port;
  }
  return 0;
}

}  // namespace

// A router engine attributes a refused datagram by its source address: from a
// route's or relay's address it is a member's (a protocol bug the launcher
// fails on), from anywhere else it is unattributed noise.
TEST(RefusedDatagrams, RouterAttributesThemToAMemberOrToNobody) {
  EngineConfig ec;
  ec.mode = EngineMode::Router;
  ec.payload_values = 16;
  UdpEngine eng(ec);
  CountingSink sw;
  sw.set_id(0);
  eng.add_node(sw);
  eng.start();
  UniqueFd member = plain_udp(), relay = plain_udp(), stranger = plain_udp(), former = plain_udp();
  eng.set_route(5, local_endpoint(member.get()));
  eng.add_relay(local_endpoint(relay.get()));
  eng.set_route(7, local_endpoint(former.get()));
  eng.clear_route(7);  // a finished job's member: still a member's address

  const char one = 'x';
  send_raw(member.get(), eng.local(), &one, 1);    // malformed, a member's
  send_raw(relay.get(), eng.local(), &one, 1);     // malformed, a relay's
  send_raw(former.get(), eng.local(), &one, 1);    // malformed, a former member's
  send_raw(stranger.get(), eng.local(), &one, 1);  // malformed, nobody's
  const auto good = encoded(ina::test::data_header(1, 5, 0, 4), {1, 2, 3, 4});
  send_raw(stranger.get(), eng.local(), good.data(), good.size());  // well-formed, but nobody's address
  const auto spoofed = encoded(ina::test::data_header(1, 6, 0, 4), {1, 2, 3, 4});
  send_raw(member.get(), eng.local(), spoofed.data(), spoofed.size());  // a member claiming another id
  send_raw(member.get(), eng.local(), good.data(), good.size());

  ASSERT_TRUE(pump_until(eng, [&] { return eng.stats().rx_datagrams == 7; }));
  const auto& s = eng.stats();
  EXPECT_EQ(s.rx_malformed, 4u);
  EXPECT_EQ(s.rx_foreign, 2u);
  EXPECT_EQ(s.rx_unattributed, 2u);  // the stranger's two; the member's spoof stays a member's
  EXPECT_EQ(sw.got, 1);
  EXPECT_EQ(eng.stats().to_json()["rx_unattributed"], 2);

  // A route moved to another address: the old one is nobody's from then on.
  eng.set_route(5, local_endpoint(relay.get()));
  send_raw(member.get(), eng.local(), &one, 1);
  ASSERT_TRUE(pump_until(eng, [&] { return eng.stats().rx_datagrams == 8; }));
  EXPECT_EQ(eng.stats().rx_unattributed, 3u);
}

// A host engine's only member is its gateway.
TEST(RefusedDatagrams, HostAttributesOnlyTheGateway) {
  UniqueFd gw = plain_udp(), stranger = plain_udp();
  EngineConfig ec;
  ec.mode = EngineMode::Host;
  ec.payload_values = 16;
  ec.gateway = local_endpoint(gw.get());
  UdpEngine eng(ec);
  CountingSink n;
  n.set_id(3);
  eng.add_node(n);
  eng.start();
  const char one = 'x';
  send_raw(gw.get(), eng.local(), &one, 1);
  send_raw(stranger.get(), eng.local(), &one, 1);
  const auto good = encoded(ina::test::data_header(1, 0, 3, 4), {1, 2, 3, 4});
  send_raw(stranger.get(), eng.local(), good.data(), good.size());
  ASSERT_TRUE(pump_until(eng, [&] { return eng.stats().rx_datagrams == 3; }));
  EXPECT_EQ(eng.stats().rx_malformed, 2u);
  EXPECT_EQ(eng.stats().rx_foreign, 1u);
  EXPECT_EQ(eng.stats().rx_unattributed, 2u);
  EXPECT_EQ(n.got, 0);
}

// One-byte datagrams to the switch's port while `ina run` runs: every result
// exact, the run succeeds, and the strays are reported as noise from outside
// the job, counted.
TEST(RefusedDatagrams, StrayDatagramsToTheSwitchDoNotFailARun) {
  LaunchConfig c;
  c.binary = INA_BINARY;
  c.scheme = "dsa";
  c.workers = 2;
  c.size_bytes = 1 << 20;
  c.iterations = 3;
  c.timeout_s = 60;
  c.progress_after_s = 0;
  c.port = free_port_pair();
  ASSERT_NE(c.port, 0);
  const fs::path json = fs::temp_directory_path() / ("ina_paths_stray_" + std::to_string(getpid()) + ".json");
  c.json_out = json.string();
  const Endpoint sw = Endpoint::parse("127.0.0.1:" + std::to_string(c.port));
  std::atomic<bool> done{false};
  std::atomic<int> sent{0};
  std::thread noise([&] {
    UniqueFd s = plain_udp();
    const char one = 0x5a;
    while (!done) {
      if (::sendto(s.get(), &one, 1, 0, reinterpret_cast<const sockaddr*>(&sw.sa), sizeof sw.sa) == 1) ++sent;
      ::usleep(5000);
    }
  });
  std::ostringstream out;
  const int rc = launch(c, out);
  done = true;
  noise.join();
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  fs::remove(json);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(rc, 0) << out.str() << j.dump();
  EXPECT_TRUE(j.value("ok", false)) << j["problems"];
  const uint64_t noise_n = j.value("noise_datagrams", uint64_t{0});
  EXPECT_GE(noise_n, 1u) << "no stray reached the switch while it ran";
  EXPECT_LE(noise_n, static_cast<uint64_t>(sent.load()));
  const auto& e = j["switch"]["engine"];
  EXPECT_EQ(e["rx_unattributed"].get<uint64_t>(), noise_n);
  EXPECT_EQ(e["rx_malformed"].get<uint64_t>(), noise_n);  // every malformed datagram was a stray
  EXPECT_EQ(e["rx_foreign"].get<uint64_t>(), 0u);
  for (const auto& job : j["jobs"]) EXPECT_EQ(job["mismatches"], 0);
  EXPECT_NE(out.str().find(fmt::format("noise: {} datagram{} from addresses outside the job", noise_n,
                                       noise_n == 1 ? "" : "s")),
            std::string::npos)
      << out.str();
}

// A worker whose switch refuses connections says so after the notice delay,
// naming the switch and the reason, then fails at its timeout as before.
TEST(WaitNotices, RefusedSwitchIsRetriedAloud) {
  UniqueFd hold = plain_udp();  // a port with no TCP listener
  JoinOptions o;
  o.sw = local_endpoint(hold.get());
  o.key = job_key(ina::test::test_switch_key(), 1);
  o.connect_timeout = 700 * kMs;
  o.connect_notice_after = 200 * kMs;
  o.announce = "ina: worker rank 0 of job 1";
  const auto [err, error] = stderr_and_error_of([&] { join_job(o); });
  EXPECT_NE(error.find("timed out"), std::string::npos) << error;
  EXPECT_NE(err.find("ina: worker rank 0 of job 1: waiting for the switch at " + o.sw.str() + " (Connection refused; retrying) (0."),
            std::string::npos) << err;
  EXPECT_NE(err.find(" s of 0.7 s)\n"), std::string::npos) << err;
  // Quiet without an announce (daemons' own joins, tests).
  o.announce.clear();
  o.connect_timeout = 300 * kMs;
  EXPECT_EQ(stderr_and_error_of([&] { join_job(o); }).err, "");
}

// A DSA worker whose PS never comes says what the job is waiting for.
TEST(WaitNotices, JobWithoutItsPsSaysWhatIsMissing) {
  ina::test::LocalSwitch sw(ina::test::switch_config("dsa"));
  JoinOptions o;
  o.sw = sw.d.endpoint();
  o.key = job_key(ina::test::test_switch_key(), 1);
  o.nworkers = 1;
  o.retain_ops = 1;
  o.rendezvous_timeout = 900 * kMs;
  o.assemble_notice_after = 300 * kMs;
  o.announce = "ina: worker rank 0 of job 1";
  const auto [err, error] = stderr_and_error_of([&] { join_job(o); });
  EXPECT_NE(error.find("1 of 1 workers joined, no PS yet"), std::string::npos) << error;
  EXPECT_NE(err.find("ina: worker rank 0 of job 1: waiting at the switch at " + o.sw.str() +
                     " for job 1 to assemble: 1 of 1 workers joined, no PS yet (0."),
            std::string::npos) << err;
  EXPECT_NE(err.find(" s of 0.9 s)\n"), std::string::npos) << err;
}

// A PS whose workers never come says what the job is waiting for.
TEST(WaitNotices, PsWithoutItsWorkersSaysWhatIsMissing) {
  ina::test::LocalSwitch sw(ina::test::switch_config("dsa"));
  PsDaemonConfig c;
  c.sw = sw.d.endpoint();
  c.job = 1;
  c.nworkers = 2;
  c.key = job_key(ina::test::test_switch_key(), 1);
  c.has_key = true;
  c.rendezvous_timeout = 900 * kMs;
  c.assemble_notice_after = 300 * kMs;
  const auto [err, error] = stderr_and_error_of([&] { PsDaemon ps(c); });
  EXPECT_NE(error.find("0 of 2 workers joined"), std::string::npos) << error;
  EXPECT_NE(err.find("ina: PS of job 1: waiting at the switch at " + c.sw.str() +
                     " for job 1 to assemble: 0 of 2 workers joined"),
            std::string::npos) << err;
}

// A long `ina run` says how far it is: elapsed time, workers finished and the
// switch's gradient packets against what the job sends.
TEST(WaitNotices, LongRunPrintsProgress) {
  LaunchConfig c;
  c.binary = INA_BINARY;
  c.scheme = "switchml";
  c.workers = 2;
  c.size_bytes = 1 << 20;
  c.iterations = 3;
  c.timeout_s = 60;
  // Rank 1's datagrams each 5 ms late: the run lasts some 0.2 s on any
  // machine, rank 0's packets reach the switch from the start, and a line
  // every 20 ms finds them there.
  c.delay_job = 1;
  c.delay_rank = 1;
  c.delay_us = 5000;
  c.progress_after_s = 0.02;
  c.progress_every_s = 0.02;
  std::ostringstream out;
  int rc = -1;
  const std::string err = stderr_of([&] { rc = launch(c, out); });
  EXPECT_EQ(rc, 0) << out.str() << err;
  const uint64_t needed = 2 * 3 * ((1 << 20) / 4 / c.payload);
  EXPECT_NE(err.find(" s: 0 of 2 workers finished; the switch has taken "), std::string::npos) << err;
  EXPECT_NE(err.find(fmt::format("% of the {} the jobs send without loss", needed)), std::string::npos) << err;
}

// The same for a ring job (rina, two racks): strays to every worker and to
// both ToR switches, from an address outside the job, are noise.
TEST(RefusedDatagrams, StrayDatagramsToRingWorkersAndTorsDoNotFailARun) {
  LaunchConfig c;
  c.binary = INA_BINARY;
  c.scheme = "rina";
  c.workers = 4;
  c.racks = 2;
  c.size_bytes = 1 << 20;
  c.iterations = 3;
  c.timeout_s = 60;
  c.progress_after_s = 0;
  const fs::path dir = fs::temp_directory_path() / ("ina_paths_ring_" + std::to_string(getpid()));
  fs::remove_all(dir);
  c.work_dir = dir.string();
  c.json_out = (dir / "summary.json").string();
  std::atomic<bool> done{false};
  std::atomic<int> sent{0};
  std::thread noise([&] {
    std::vector<Endpoint> to;  // from the layout, once `ina run` has written it
    while (!done && to.empty()) {
      std::ifstream in(dir / "layout.json");
      const auto l = nlohmann::json::parse(in, nullptr, false);
      if (!l.is_discarded() && l.contains("racks")) {
        for (const auto& w : l["workers"]) to.push_back(Endpoint::parse(w.get<std::string>()));
        for (const auto& r : l["racks"])
          if (r["switch"].is_string()) to.push_back(Endpoint::parse(r["switch"].get<std::string>()));
      }
      ::usleep(2000);
    }
    UniqueFd s = plain_udp();
    const char one = 0x5a;
    while (!done) {
      for (const auto& e : to)
        if (::sendto(s.get(), &one, 1, 0, reinterpret_cast<const sockaddr*>(&e.sa), sizeof e.sa) == 1) ++sent;
      ::usleep(5000);
    }
  });
  std::ostringstream out;
  const int rc = launch(c, out);
  done = true;
  noise.join();
  std::ifstream in(dir / "summary.json");
  const auto j = nlohmann::json::parse(in, nullptr, false);
  fs::remove_all(dir);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(rc, 0) << out.str() << j.dump();
  EXPECT_TRUE(j.value("ok", false)) << j["problems"];
  const uint64_t noise_n = j.value("noise_datagrams", uint64_t{0});
  EXPECT_GE(noise_n, 1u);
  EXPECT_LE(noise_n, static_cast<uint64_t>(sent.load()));
  uint64_t unattributed = 0;
  for (const auto& w : j["jobs"][0]["workers"]) {
    unattributed += w["stats"]["engine"]["rx_unattributed"].get<uint64_t>();
    EXPECT_EQ(w["stats"]["engine"]["rx_malformed"], w["stats"]["engine"]["rx_unattributed"]);
  }
  for (const auto& s : j["switches"]) unattributed += s["engine"]["rx_unattributed"].get<uint64_t>();
  EXPECT_EQ(unattributed, noise_n);
  EXPECT_EQ(j["jobs"][0]["mismatches"], 0);
  EXPECT_NE(out.str().find("noise: "), std::string::npos) << out.str();
}
