// The switch's control plane under a tenant's attack, and on a busy host:
//  - port pairs: an ephemeral switch port is one free for both UDP and TCP,
//    found whenever one exists (bind_data_and_control);
//  - connection limits (ControlLimits): idle, slow and flooding connections
//    cannot keep a job out, grow the switch's memory, or make it spin;
//  - log injection: control bytes a peer sends reach the log as \xNN.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "resident_set.hpp"
#include "runtime/communicator.hpp"
#include "runtime/control.hpp"
#include "runtime/net.hpp"
#include "runtime/switch_daemon.hpp"
#include "test_keys.hpp"

namespace ina::rt {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- helpers

SwitchDaemonConfig limited_switch(const std::string& scheme = "switchml") {
  SwitchDaemonConfig c;
  c.listen = Endpoint::parse("127.0.0.1:0");
  c.scheme = scheme;
  c.program.payload_values = 64;
  c.program.memory_bytes = 1 << 20;
  c.log = false;
  c.key = ina::test::test_switch_key();
  c.has_key = true;
  return c;
}

// A switch in a thread of this process; stop() ends it (then stats() may be read).
struct InProcessSwitch {
  SwitchDaemon d;
  std::thread t;
  explicit InProcessSwitch(const SwitchDaemonConfig& c) : d(c), t([this] { d.run(); }) {}
  void stop() {
    if (!t.joinable()) return;
    d.request_stop();
    t.join();
  }
  ~InProcessSwitch() { stop(); }
};

JoinOptions worker_of(const Endpoint& sw, uint16_t job, unsigned rank, unsigned n) {
  JoinOptions o;
  o.sw = sw;
  o.job = job;
  o.rank = rank;
  o.nworkers = n;
  o.retain_ops = CommConfig{}.retain_ops;
  o.key = job_key(ina::test::test_switch_key(), job);
  o.connect_timeout = 3 * kSec;
  o.rendezvous_timeout = 5 * kSec;
  return o;
}

// Joins all n workers of a job at once (each join waits for the others);
// returns their connections, or the first error.
std::vector<Joined> join_all(const Endpoint& sw, uint16_t job, unsigned n, std::string& error) {
  std::vector<Joined> out(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> ts;
  for (unsigned r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        out[r] = join_job(worker_of(sw, job, r, n));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (const auto& e : errors)
    if (!e.empty() && error.empty()) error = e;
  return out;
}

// A plain TCP connection to the switch (optionally from `from_ip`), blocking.
UniqueFd raw_connect(const Endpoint& sw, const char* from_ip = nullptr) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (from_ip) {
    const Endpoint b = Endpoint::parse(std::string(from_ip) + ":0");
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&b.sa), sizeof b.sa), 0) << std::strerror(errno);
  }
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sw.sa), sizeof sw.sa), 0) << std::strerror(errno);
  const timeval bound{3, 0};  // a send the switch never drains fails instead of hanging the test
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
  return fd;
}

// What the switch sends on `fd` until it closes the connection or `wait`
// passes; `closed` says which.
std::string read_until_closed(int fd, Time wait, bool& closed) {
  std::string got;
  closed = false;
  const Time deadline = monotonic_now() + wait;
  for (;;) {
    const Time left = deadline - monotonic_now();
    if (left <= 0) return got;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left / kMs) + 1) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      got.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      closed = true;
      return got;
    }
  }
}

// Whether the switch greeted `fd` within `wait` (its "hello" line arrived).
bool greeted(int fd, Time wait) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait / kMs)) <= 0) return false;
  char buf[512];
  const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  return n > 0 && std::string(buf, static_cast<size_t>(n)).find("\"hello\"") != std::string::npos;
}

// `ina switch ARGS` as a child process: RLIMIT_NOFILE set to `nofile` (0:
// inherited), stderr to `log`; its port from --ready-fd.
struct SwitchProcess {
  pid_t pid = -1;
  uint16_t port = 0;
  fs::path log;

  SwitchProcess(const std::vector<std::string>& args, rlim_t nofile, fs::path log_file) : log(std::move(log_file)) {
    int ready[2];
    EXPECT_EQ(::pipe(ready), 0);
    std::vector<std::string> argv = {INA_BINARY, "switch", "--listen", "127.0.0.1:0", "--ready-fd", "3"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid = ::fork();
    if (pid == 0) {
      ::dup2(ready[1], 3);
      const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(err, 2);
      for (int fd = 4; fd < 1024; ++fd) ::close(fd);
      if (nofile) {
        rlimit r{nofile, nofile};
        ::setrlimit(RLIMIT_NOFILE, &r);
      }
      std::vector<char*> a;
      for (auto& s : argv) a.push_back(s.data());
      a.push_back(nullptr);
      ::execv(a[0], a.data());
      ::_exit(127);
    }
    ::close(ready[1]);
    std::string line;
    char c;
    while (::read(ready[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(ready[0]);
    port = line.empty() ? 0 : static_cast<uint16_t>(std::stoi(line));
  }
  Endpoint endpoint() const { return Endpoint::parse(fmt::format("127.0.0.1:{}", port)); }
  // User + system CPU time of the process so far (seconds).
  double cpu_seconds() const {
    std::ifstream f(fmt::format("/proc/{}/stat", pid));
    std::string s((std::istreambuf_iterator<char>(f)), {});
    const size_t close = s.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream in(s.substr(close + 2));
    std::string field;
    unsigned long utime = 0, stime = 0;
    for (int k = 3; k <= 15 && in >> field; ++k) {
      if (k == 14) utime = std::stoul(field);
      if (k == 15) stime = std::stoul(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  // The switch's CPU time over `span` of wall time.
  double cpu_over(Time span) const {
    const double c0 = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::nanoseconds(span / kNs));
    return cpu_seconds() - c0;
  }
  std::string stop() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      int st = 0;
      ::waitpid(pid, &st, 0);
      pid = -1;
    }
    return ina_test::read_file(log);
  }
  ~SwitchProcess() { stop(); }
};

nlohmann::json operator_stats(const Endpoint& sw) {
  return query_switch_stats(sw, 3 * kSec, &ina::test::test_switch_key(), 0);
}

// ---------------------------------------------------------------- port pairs

// Runs f in a thread inside a fresh network namespace, loopback up and the
// local port range set to lo..hi. Returns "" or why it could not be set up.
std::string in_netns_with_port_range(unsigned lo, unsigned hi, const std::function<void()>& f) {
  std::string why;
  std::thread t([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      why = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
      return;
    }
    if (std::system("ip link set lo up >/dev/null 2>&1") != 0) {
      why = "ip could not bring up the namespace's loopback";
      return;
    }
    {
      std::ofstream r("/proc/sys/net/ipv4/ip_local_port_range");
      r << lo << " " << hi << "\n";
    }
    if (local_port_range() != std::pair<uint16_t, uint16_t>(static_cast<uint16_t>(lo), static_cast<uint16_t>(hi))) {
      why = "could not set the namespace's ip_local_port_range";
      return;
    }
    f();
  });
  t.join();
  return why;
}

// Holds `port` on 127.0.0.1 for TCP (bound, as a connection's local port is) or UDP.
UniqueFd hold(int type, uint16_t port) {
  UniqueFd fd(::socket(AF_INET, type | SOCK_CLOEXEC, 0));
  const Endpoint at = Endpoint::parse(fmt::format("127.0.0.1:{}", port));
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&at.sa), sizeof at.sa), 0) << port;
  return fd;
}

// A busy host: TCP holds every port of the range but `both` and `udp_busy`,
// and UDP holds `udp_busy`: the one pair free is `both`. Every ephemeral
// switch binds exactly it (UDP-first binding finds it with probability 1/63
// per try). Catches: binding UDP first and TCP on its number with a few tries
// ("cannot bind TCP control socket ... Address already in use").
TEST(PortPair, EphemeralSwitchFindsTheOnlyPortFreeForBoth) {
  constexpr unsigned lo = 40000, hi = 40063;
  constexpr uint16_t both = 40037, udp_busy = 40050;
  std::vector<uint16_t> got;
  uint16_t daemon_port = 0;
  std::string error;
  const std::string why = in_netns_with_port_range(lo, hi, [&] {
    std::vector<UniqueFd> held;
    for (unsigned p = lo; p <= hi; ++p)
      if (p != both && p != udp_busy) held.push_back(hold(SOCK_STREAM, static_cast<uint16_t>(p)));
    held.push_back(hold(SOCK_DGRAM, udp_busy));
    try {
      for (int k = 0; k < 8; ++k) {
        DataAndControl s = bind_data_and_control(Endpoint::parse("127.0.0.1:0"), 1 << 16);
        EXPECT_EQ(local_endpoint(s.tcp.get()).port(), local_endpoint(s.udp.get()).port());
        got.push_back(local_endpoint(s.udp.get()).port());
      }
      InProcessSwitch sw(limited_switch());
      daemon_port = sw.d.endpoint().port();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  if (!why.empty()) GTEST_SKIP() << why;
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, std::vector<uint16_t>(8, both));
  EXPECT_EQ(daemon_port, both);
}

// No pair free at all: the error says so and names the range (not a bare
// "Address already in use" of one port).
TEST(PortPair, NoFreePairIsReportedWithTheRange) {
  constexpr unsigned lo = 40100, hi = 40115;
  std::string error;
  const std::string why = in_netns_with_port_range(lo, hi, [&] {
    std::vector<UniqueFd> held;
    for (unsigned p = lo; p <= hi; ++p)
      held.push_back(hold(p % 2 ? SOCK_STREAM : SOCK_DGRAM, static_cast<uint16_t>(p)));
    try {
      bind_data_and_control(Endpoint::parse("127.0.0.1:0"), 1 << 16);
    } catch (const RuntimeError& e) {
      error = e.what();
    }
  });
  if (!why.empty()) GTEST_SKIP() << why;
  EXPECT_NE(error.find("no port of the local port range 40100..40115 (net.ipv4.ip_local_port_range) is free for both "
                       "UDP data and TCP control"),
            std::string::npos)
      << error;
}

// ---------------------------------------------------------------- connection limits

// Idle connections against a switch with 64 descriptors: 100 idle connections.
// The switch keeps at most 16 (its default under that limit), each newcomer
// replacing the oldest idle one; it does not spin, and a real job still joins.
// Catches: accepting until EMFILE, then a level-triggered listener whose
// accept fails spinning at 100 % CPU while new jobs "did not greet within the
// timeout".
TEST(ControlLimits, IdleConnectionsNeitherKeepAJobOutNorMakeTheSwitchSpin) {
  const fs::path dir = ina_test::fresh_dir("idle_conns");
  SwitchProcess sw({"--scheme", "switchml", "--memory", "1048576", "--payload", "64"}, 64, dir / "switch.log");
  ASSERT_NE(sw.port, 0) << ina_test::read_file(sw.log);
  std::vector<UniqueFd> idle;
  for (int k = 0; k < 100; ++k) idle.push_back(raw_connect(sw.endpoint()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double cpu = sw.cpu_over(600 * kMs);
  EXPECT_LT(cpu, 0.12) << "the switch busy-loops with its connection slots full";
  std::string error;
  auto members = join_all(sw.endpoint(), 1, 2, error);
  EXPECT_EQ(error, "");
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].job.workers.size(), 2u);
  const auto st = operator_stats(sw.endpoint());
  const auto& c = st["control"];
  EXPECT_EQ(c["limits"]["max_connections"], 16);
  // 100 idle, 2 workers and this query arrived; 16 are open (13 idle, 2 members, the query).
  EXPECT_EQ(c["evicted"], 100 - 16 + 2 + 1) << c;
  EXPECT_EQ(c["connections"], 16) << c;
  EXPECT_EQ(c["accept_failures"], 0) << c;
  members.clear();
  const std::string log = sw.stop();
  EXPECT_NE(log.find("closed for newer ones"), std::string::npos) << log;
}

// An operator limit above the descriptor limit: accept fails with EMFILE.
// The oldest visitor makes room for the newcomer (as at the connection
// limit), or without one the listener is set aside (retried at each sweep
// and whenever a connection closes); either way it is not polled in a busy
// loop, and once the idle connections are gone the switch serves again.
// Catches: the spin on a failing accept.
TEST(ControlLimits, FailingAcceptDoesNotSpinAndRecovers) {
  const fs::path dir = ina_test::fresh_dir("emfile");
  SwitchProcess sw({"--scheme", "switchml", "--memory", "1048576", "--payload", "64", "--max-connections", "1000",
                    "--control-timeout-ms", "300"},
                   40, dir / "switch.log");
  ASSERT_NE(sw.port, 0) << ina_test::read_file(sw.log);
  std::vector<UniqueFd> idle;
  for (int k = 0; k < 60; ++k) idle.push_back(raw_connect(sw.endpoint()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double cpu = sw.cpu_over(600 * kMs);
  EXPECT_LT(cpu, 0.12) << "the switch busy-loops on a failing accept";
  idle.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // the idle ones time out, the backlog drains
  const auto st = operator_stats(sw.endpoint());
  const auto& c = st["control"];
  EXPECT_GE(c["accept_failures"].get<uint64_t>(), 1u) << c;
  EXPECT_GE(c["evicted"].get<uint64_t>(), 1u) << c;
  EXPECT_GE(c["evicted"].get<uint64_t>() + c["timed_out"].get<uint64_t>(), 60u - 40u) << c;
  EXPECT_EQ(c["accepting"], true) << c;
  const std::string log = sw.stop();
  EXPECT_NE(log.find("failed accepts (Too many open files)"), std::string::npos) << log;
}

// A switch full of members stops accepting: newcomers wait in the backlog
// without a greeting, the switch thread idles, and when a member leaves the
// next newcomer is served. Catches: no total limit, or a limit enforced by
// polling the listener.
TEST(ControlLimits, AFullSwitchStopsAcceptingWithoutSpinning) {
  auto cfg = limited_switch();
  cfg.control.max_connections = 2;
  InProcessSwitch sw(cfg);
  std::string error;
  auto members = join_all(sw.d.endpoint(), 1, 2, error);
  ASSERT_EQ(error, "");
  std::vector<UniqueFd> waiting;
  for (int k = 0; k < 10; ++k) waiting.push_back(raw_connect(sw.d.endpoint()));
  EXPECT_FALSE(greeted(waiting[0].get(), 200 * kMs)) << "accepted beyond max_connections";
  const double c0 = sw.d.cpu_seconds()[0];
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_LT(sw.d.cpu_seconds()[0] - c0, 0.05) << "the switch thread spins at its connection limit";
  members[1] = Joined{};  // rank 1 leaves: the job is aborted, two slots free
  EXPECT_TRUE(greeted(waiting[0].get(), 2 * kSec));
  sw.stop();
  const auto c = sw.d.stats()["control"];
  EXPECT_GE(c["accept_pauses"].get<uint64_t>(), 1u) << c;
}

// A memory attack at a small scale: connections that each send 63 KiB
// without a newline (below a member's 64 KiB line limit: without a smaller
// limit for visitors each stays open with its bytes, and 18 000 of them take
// the switch to 1.19 GB). A connection that has not joined may send at most
// an 8 KiB line: each is closed and counted, and the process's memory does not grow with them.
TEST(ControlLimits, UnfinishedLongLinesAreClosedAndMemoryStaysBounded) {
  InProcessSwitch sw(limited_switch());
  const Endpoint at = sw.d.endpoint();
  constexpr int kConns = 200;
  const std::string junk(63 << 10, 'a');
  const size_t rss0 = ina::test::resident_bytes();
  std::vector<UniqueFd> conns;
  for (int k = 0; k < kConns; ++k) {
    conns.push_back(raw_connect(at));
    ::send(conns.back().get(), junk.data(), junk.size(), MSG_NOSIGNAL);
  }
  int closed_count = 0;
  const Time deadline = monotonic_now() + 3 * kSec;  // for all of them
  for (auto& fd : conns) {
    bool closed = false;
    const std::string got = read_until_closed(fd.get(), std::max<Time>(deadline - monotonic_now(), kMs), closed);
    closed_count += closed;
    if (closed) {
      EXPECT_NE(got.find("control message longer than 8192 bytes"), std::string::npos) << got.substr(0, 300);
    }
  }
  EXPECT_EQ(closed_count, kConns);
  const size_t rss1 = ina::test::resident_bytes();
  EXPECT_LT(rss1, rss0 + (4 << 20)) << "the process grew by " << (rss1 - rss0) / 1024 << " KiB for " << kConns
                                     << " connections of 63 KiB";
  // A sender that never stops is cut off too: its sends fail long before 64 MiB.
  UniqueFd endless = raw_connect(at);
  const std::string chunk(1 << 16, 'b');
  size_t sent = 0;
  while (sent < (64u << 20)) {
    const ssize_t n = ::send(endless.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  EXPECT_LT(sent, 64u << 20) << "the switch kept reading an endless line";
  const auto st = operator_stats(at);
  EXPECT_EQ(st["control"]["oversized_lines"], kConns + 1) << st["control"];
}

// A peer whose line was refused and that goes on sending before it reads:
// its later bytes arrive at a socket the switch has given up on. Closed
// outright, that socket answers them with a reset, and a reset discards
// whatever of the reason is still queued at either end; the switch
// half-closes and discards them instead, so the peer reads the reason and
// then an orderly end of stream. Catches: a refusal ended by a reset.
TEST(ControlLimits, ARefusedPeerStillSendingReadsTheReasonThenTheEnd) {
  InProcessSwitch sw(limited_switch());
  UniqueFd fd = raw_connect(sw.d.endpoint());
  const std::string line((9 << 10), 'a');
  ASSERT_EQ(::send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL), static_cast<ssize_t>(line.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // refused by now
  const std::string more((32 << 10), 'b');
  ASSERT_EQ(::send(fd.get(), more.data(), more.size(), MSG_NOSIGNAL), static_cast<ssize_t>(more.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the switch's answer to them has arrived
  std::string got;
  ssize_t n;
  char buf[4096];
  while ((n = ::recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT)) > 0) got.append(buf, static_cast<size_t>(n));
  const int err = n < 0 ? errno : 0;
  EXPECT_NE(got.find("control message longer than 8192 bytes"), std::string::npos) << got.substr(0, 300);
  EXPECT_EQ(n, 0) << "not an orderly end of stream: " << errno_text(err);
  int so_error = 0;
  socklen_t len = sizeof so_error;
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
  EXPECT_EQ(so_error, 0) << "the switch reset the connection: " << errno_text(so_error);
  fd.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto c = operator_stats(sw.d.endpoint())["control"];
  EXPECT_EQ(c["lingering"], 0u) << "a connection the peer closed still lingers: " << c;
  EXPECT_EQ(c["oversized_lines"], 1u) << c;
}

// Idle and slow connections time out: one that sends nothing, one that
// trickles a request without ever finishing its line, and a member whose
// line stays incomplete. Catches: connections held open for as long as the
// peer likes (no deadline).
TEST(ControlLimits, IdleAndSlowConnectionsTimeOut) {
  auto cfg = limited_switch();
  cfg.control.visitor_timeout = 300 * kMs;
  InProcessSwitch sw(cfg);
  const Endpoint at = sw.d.endpoint();
  UniqueFd idle = raw_connect(at);
  UniqueFd slow = raw_connect(at);
  std::string error;
  auto member = join_all(at, 3, 1, error);
  ASSERT_EQ(error, "");
  const Time t0 = monotonic_now();
  std::atomic<bool> trickling{true};
  std::thread trickle([&] {
    const std::string part = R"({"op":"stats")";
    for (size_t k = 0; trickling; k = (k + 1) % part.size()) {
      ::send(slow.get(), &part[k], 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
    }
  });
  const std::string partial = R"({"op":"do)";
  ::send(member[0].control.fd(), partial.data(), partial.size(), MSG_NOSIGNAL);
  bool c1 = false, c2 = false, c3 = false;
  const std::string g1 = read_until_closed(idle.get(), 3 * kSec, c1);
  const std::string g2 = read_until_closed(slow.get(), 3 * kSec, c2);
  const std::string g3 = read_until_closed(member[0].control.fd(), 3 * kSec, c3);
  const double waited = to_ms(monotonic_now() - t0);
  trickling = false;
  trickle.join();
  EXPECT_TRUE(c1 && c2 && c3);
  EXPECT_LT(waited, 2000);
  EXPECT_NE(g1.find("no job joined within 0.3 s of connecting"), std::string::npos) << g1;
  EXPECT_NE(g2.find("no job joined within 0.3 s of connecting"), std::string::npos) << g2;
  EXPECT_NE(g3.find("a control line incomplete for 0.3 s"), std::string::npos) << g3;
  sw.stop();
  const auto c = sw.d.stats()["control"];
  EXPECT_EQ(c["timed_out"], 3) << c;
  EXPECT_EQ(sw.d.stats()["jobs"]["aborted"], 1);
}

// One address holds at most max_per_source connections: with all of them
// members, a newcomer from that address is refused with the reason, while
// another address is served.
TEST(ControlLimits, PerSourceLimitRefusesOnlyThatAddress) {
  auto cfg = limited_switch();
  cfg.control.max_per_source = 3;
  InProcessSwitch sw(cfg);
  const Endpoint at = sw.d.endpoint();
  std::string error;
  auto members = join_all(at, 2, 3, error);
  ASSERT_EQ(error, "");
  UniqueFd same = raw_connect(at, "127.0.0.1");
  bool closed = false;
  const std::string got = read_until_closed(same.get(), 2 * kSec, closed);
  EXPECT_TRUE(closed);
  EXPECT_NE(got.find("too many connections from 127.0.0.1 (at most 3 from one address)"), std::string::npos) << got;
  EXPECT_EQ(got.find("hello"), std::string::npos) << got;
  UniqueFd other = raw_connect(at, "127.0.0.2");
  EXPECT_TRUE(greeted(other.get(), 2 * kSec));
  // A visitor of a full address gives way to the next one from it.
  members.clear();  // the job ends: its three connections close
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<UniqueFd> visitors;
  for (int k = 0; k < 3; ++k) {
    visitors.push_back(raw_connect(at, "127.0.0.1"));
    EXPECT_TRUE(greeted(visitors.back().get(), 2 * kSec));
  }
  UniqueFd fourth = raw_connect(at, "127.0.0.1");
  EXPECT_TRUE(greeted(fourth.get(), 2 * kSec));
  const std::string first = read_until_closed(visitors[0].get(), 2 * kSec, closed);
  EXPECT_TRUE(closed);
  EXPECT_NE(first.find("closed to make room for a newer connection (at most 3 connections from one address)"),
            std::string::npos)
      << first;
  sw.stop();
  const auto c = sw.d.stats()["control"];
  EXPECT_EQ(c["refused_per_source"], 1) << c;
  EXPECT_EQ(c["evicted"], 1) << c;
}

// ---------------------------------------------------------------- log injection

// A field name with a newline, a terminal escape (ESC [2J clears the screen)
// and a C1 CSI, and a value with an escape: the switch's log holds them as
// \xNN, one line per event, so no peer forges a log line or drives the
// operator's terminal. Catches: peer text logged raw.
TEST(LogInjection, ControlBytesFromAPeerReachTheLogEscaped) {
  const fs::path dir = ina_test::fresh_dir("log_injection");
  SwitchProcess sw({"--scheme", "switchml", "--memory", "1048576", "--payload", "64"}, 0, dir / "switch.log");
  ASSERT_NE(sw.port, 0) << ina_test::read_file(sw.log);
  const std::vector<std::string> lines = {
      "{\"op\":\"join\",\"x\\n[forged] job 9\\u001b[2J\\u009b31m\":1}\n",
      "{\"op\":\"join\",\"role\":\"\\u001b[31mre\",\"job\":1,\"nworkers\":1,\"payload\":0,\"udp\":\"x\"}\n",
  };
  std::vector<std::string> replies;
  for (const auto& l : lines) {
    UniqueFd fd = raw_connect(sw.endpoint());
    ASSERT_TRUE(greeted(fd.get(), 2 * kSec));
    ::send(fd.get(), l.data(), l.size(), MSG_NOSIGNAL);
    bool closed = false;
    replies.push_back(read_until_closed(fd.get(), 2 * kSec, closed));
  }
  EXPECT_NE(replies[0].find(R"(unknown field 'x\\x0a[forged] job 9\\x1b[2J\\xc2\\x9b31m')"),
            std::string::npos)
      << replies[0];
  const std::string log = sw.stop();
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << "a raw escape reached the log";
  EXPECT_EQ(log.find("\xc2\x9b"), std::string::npos) << "a raw C1 CSI reached the log";
  EXPECT_EQ(log.find("\n[forged]"), std::string::npos) << "a peer forged a log line:\n" << log;
  EXPECT_NE(log.find(R"(rejected 127.0.0.1:)"), std::string::npos) << log;
  EXPECT_NE(log.find(R"(join: unknown field 'x\x0a[forged] job 9\x1b[2J\xc2\x9b31m')"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(R"(join: role must be worker or ps, got '\x1b[31mre')"), std::string::npos) << log;
}

}  // namespace
}  // namespace ina::rt
