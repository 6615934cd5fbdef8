// `ina switch --threads T`: T shards on one UDP port, job J
// served by shard J mod T. Over real loopback sockets: the kernel's reuseport
// steering, two jobs on two shards, DSA preemption within a shard and never
// across, the isolated policy's regions per shard, and the refusals. (The
// existing exactness, loss and preemption tests of test_runtime.cpp also run
// at T = 2.)
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <barrier>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/rng.hpp"
#include "runtime/communicator.hpp"
#include "runtime/control.hpp"
#include "runtime/switch_daemon.hpp"
#include "runtime_fixture.hpp"
#include "test_keys.hpp"
#include "wire/packet.hpp"

using namespace ina;
using namespace ina::rt;
using ina::test::LocalSwitch;
using ina::test::comm_config;
using ina::test::run_workers;
using ina::test::switch_config;

namespace {

SwitchDaemonConfig threaded(const std::string& scheme, unsigned threads, uint64_t memory = 1 << 20) {
  SwitchDaemonConfig c = switch_config(scheme, 64, memory);
  c.threads = threads;
  return c;
}

nlohmann::json operator_stats(const LocalSwitch& sw) {
  return query_switch_stats(sw.d.endpoint(), 2 * kSec, &ina::test::test_switch_key(), 0);
}

// Operator statistics once pred(stats) holds (or after 3 s: the caller's assertions then fail).
template <typename Pred>
nlohmann::json stats_when(const LocalSwitch& sw, Pred pred) {
  const Time end = monotonic_now() + 3 * kSec;
  nlohmann::json st = operator_stats(sw);
  while (!pred(st) && monotonic_now() < end) {
    usleep(2000);
    st = operator_stats(sw);
  }
  return st;
}

uint64_t rx_total(const nlohmann::json& st) { return st["engine"]["rx_datagrams"].get<uint64_t>(); }

void send_to(int fd, const Endpoint& to, const void* data, size_t len) {
  ASSERT_EQ(::sendto(fd, data, len, 0, reinterpret_cast<const sockaddr*>(&to.sa), sizeof to.sa),
            static_cast<ssize_t>(len));
}

// A Data datagram of `job` from node `src` (64 values).
std::vector<std::byte> data_datagram(uint16_t job, NodeId src, uint32_t psn, uint32_t priority) {
  Header h = ina::test::data_header(job, src, 0, 64);
  h.psn = psn;
  h.priority = priority;
  std::vector<std::byte> b(encoded_size(h));
  encode(h, std::vector<int32_t>(64, 3), b);
  return b;
}

// Members of one job joined by hand (they send only what a test sends).
struct HandJob {
  std::vector<std::optional<Joined>> workers;
  std::optional<Joined> ps;
};

HandJob join_by_hand(const Endpoint& sw, uint16_t job, unsigned n, bool with_ps) {
  HandJob hj;
  hj.workers.resize(n);
  std::vector<std::string> errors(n + 1);
  std::vector<std::thread> ts;
  auto options = [&](Role role, unsigned rank) {
    JoinOptions o;
    o.sw = sw;
    o.role = role;
    o.job = job;
    o.rank = rank;
    o.nworkers = n;
    o.retain_ops = role == Role::Worker ? CommConfig{}.retain_ops : 0;
    o.key = job_key(ina::test::test_switch_key(), job);
    o.rendezvous_timeout = 5 * kSec;
    return o;
  };
  for (unsigned r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        hj.workers[r].emplace(join_job(options(Role::Worker, r)));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  if (with_ps)
    ts.emplace_back([&] {
      try {
        hj.ps.emplace(join_job(options(Role::Ps, 0)));
      } catch (const std::exception& e) {
        errors[n] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "") << "job " << job;
  return hj;
}

// The aggregator DSA's switch gives task (job, psn) among n (dp::SwitchProgram::index_of):
// used only to choose packets that meet; the T = 1 case shows that they do.
uint64_t agg_index(uint16_t job, uint32_t psn, uint64_t n) {
  return splitmix64((static_cast<uint64_t>(job) << 32) | psn) % n;
}

// The first PSN of job b whose aggregator among n is that of (a, 0).
uint32_t colliding_psn(uint16_t a, uint16_t b, uint64_t n) {
  for (uint32_t psn = 0;; ++psn)
    if (agg_index(b, psn, n) == agg_index(a, 0, n)) return psn;
}

}  // namespace

// The steering program reads the job at this offset (switch_shard.hpp kJobOffset).
TEST(Threads, TheJobFieldIsWhereTheSteeringReadsIt) {
  Header h;
  h.type = PktType::Data;
  h.job = 0x1234;
  h.nworkers = 1;
  std::vector<std::byte> b(encoded_size(h));
  encode(h, {}, b);
  EXPECT_EQ(static_cast<int>(b[4]), 0x12);
  EXPECT_EQ(static_cast<int>(b[5]), 0x34);
}

class Steering : public ::testing::TestWithParam<unsigned> {};

// Datagrams of jobs 0..2T-1, 256 and 65535 (from an address no job has:
// each counted foreign by the engine that got it) reach engine J mod T; an
// empty one and one of 5 bytes (no whole job field) reach shard 0, which
// counts them malformed (truncated header).
TEST_P(Steering, JobJReachesThreadJModTAndShortDatagramsThreadZero) {
  const unsigned T = GetParam();
  LocalSwitch sw(threaded("dsa", T));
  UniqueFd out = bind_udp(Endpoint::parse("127.0.0.1:0"), 1 << 20);
  std::vector<uint16_t> jobs;
  for (unsigned j = 0; j < 2 * T; ++j) jobs.push_back(static_cast<uint16_t>(j));
  jobs.push_back(256);    // 0x0100: its low byte alone would say 0
  jobs.push_back(65535);
  std::vector<uint64_t> want(T, 0);
  for (uint16_t j : jobs) {
    const auto d = data_datagram(j, 77, 0, 1);
    send_to(out.get(), sw.d.endpoint(), d.data(), d.size());
    ++want[j % T];
  }
  const std::byte five[5] = {};
  send_to(out.get(), sw.d.endpoint(), five, 5);
  send_to(out.get(), sw.d.endpoint(), five, 0);
  want[0] += 2;
  const auto st = stats_when(sw, [&](const nlohmann::json& s) { return rx_total(s) >= jobs.size() + 2; });
  ASSERT_EQ(st["threads"], T);
  ASSERT_EQ(st["shards"].size(), T);
  for (unsigned k = 0; k < T; ++k) {
    const auto& e = st["shards"][k]["engine"];
    EXPECT_EQ(e["rx_datagrams"], want[k]) << "thread " << k;
    EXPECT_EQ(e["rx_foreign"], want[k] - (k == 0 ? 2 : 0)) << "thread " << k;
    EXPECT_EQ(e["rx_malformed"], k == 0 ? 2 : 0) << "thread " << k;
  }
  EXPECT_EQ(st["shards"][0]["engine"]["decode_errors"]["truncated header"], 2);
  EXPECT_EQ(st["engine"]["rx_datagrams"], jobs.size() + 2);  // the sum over the shards
}

INSTANTIATE_TEST_SUITE_P(Runtime, Steering, ::testing::Values(2u, 3u),
                         [](const auto& info) { return "threads" + std::to_string(info.param); });

// Sockets handed over are the switch's from its first step: settings it
// refuses, whether checked before or after it takes the sockets up, close them.
TEST(Threads, HandedOverSocketsAreClosedWhenTheSwitchRefusesItsSettings) {
  auto refused = [](SwitchDaemonConfig c, const std::string& says) {
    auto [u, t] = bind_data_and_control(Endpoint::parse("127.0.0.1:0"), 1 << 20);
    const int ufd = u.release(), tfd = t.release();
    c.udp_fd = ufd;
    c.tcp_fd = tfd;
    try {
      SwitchDaemon d(c);
      ADD_FAILURE() << "accepted settings it should refuse: " << says;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    EXPECT_EQ(::fcntl(ufd, F_GETFD), -1) << says << ": the UDP socket is still open";
    EXPECT_EQ(::fcntl(tfd, F_GETFD), -1) << says << ": the TCP socket is still open";
  };
  SwitchDaemonConfig unknown = threaded("dsa", 1);
  unknown.scheme = "no-such-scheme";
  refused(unknown, "no-such-scheme");
  SwitchDaemonConfig layout = threaded("dsa", 1);
  layout.layout = "/nonexistent/layout.json";
  refused(layout, "cannot read layout /nonexistent/layout.json");
}

// A socket handed over (ina run's --udp-fd) must allow SO_REUSEPORT for the
// other shards to share its port; with it, steering works as with --listen.
TEST(Threads, HandedOverSocketNeedsReuseport) {
  {
    // A port free for both (a UDP port's number may be held by a TCP socket).
    auto [u, t] = bind_data_and_control(Endpoint::parse("127.0.0.1:0"), 1 << 20);
    SwitchDaemonConfig c = threaded("dsa", 2);
    c.udp_fd = u.release();
    c.tcp_fd = t.release();
    try {
      SwitchDaemon d(c);
      ADD_FAILURE() << "adopted a socket without SO_REUSEPORT for two threads";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("bound without SO_REUSEPORT"), std::string::npos) << e.what();
    }
  }
  auto [u, t] = bind_data_and_control(Endpoint::parse("127.0.0.1:0"), 1 << 20, true);
  SwitchDaemonConfig c = threaded("dsa", 2);
  const Endpoint at = local_endpoint(u.get());
  c.udp_fd = u.release();
  c.tcp_fd = t.release();
  LocalSwitch sw(c);
  EXPECT_EQ(sw.d.endpoint(), at);
  UniqueFd out = bind_udp(Endpoint::parse("127.0.0.1:0"), 1 << 20);
  for (uint16_t j : {1, 3, 5, 2}) {
    const auto d = data_datagram(j, 77, 0, 1);
    send_to(out.get(), at, d.data(), d.size());
  }
  const auto st = stats_when(sw, [](const nlohmann::json& s) { return rx_total(s) >= 4; });
  EXPECT_EQ(st["shards"][0]["engine"]["rx_datagrams"], 1);
  EXPECT_EQ(st["shards"][1]["engine"]["rx_datagrams"], 3);
}

// Jobs 1 and 2 on a 2-thread switch: both live at once, each on its own
// shard, every result exact, and each shard completed exactly its own job's
// tasks (no loss: one completion per packet).
TEST(Threads, TwoJobsOnTwoThreadsAreExactAndServedConcurrently) {
  LocalSwitch sw(threaded("switchml", 2));
  const std::vector<size_t> values = {0, 64 * 100, 64 * 37};  // by job: 100 and 37 packets per allreduce
  std::barrier both_live(5), go_on(5);
  std::vector<std::vector<int32_t>> got(4);
  auto errors = run_workers(5, [&](unsigned t) {
    if (t == 4) {  // the operator, while both jobs are between their two allreduces
      both_live.arrive_and_wait();
      const auto st = operator_stats(sw);
      EXPECT_EQ(st["jobs"]["live"], nlohmann::json::array({1, 2}));
      EXPECT_EQ(st["shards"][0]["jobs"], nlohmann::json::array({2}));
      EXPECT_EQ(st["shards"][1]["jobs"], nlohmann::json::array({1}));
      go_on.arrive_and_wait();
      return;
    }
    const uint16_t job = static_cast<uint16_t>(1 + t / 2);
    const unsigned rank = t % 2;
    Communicator comm(comm_config(sw.addr(), job, rank, 2));
    std::vector<int32_t> v(values[job]);
    for (int it = 0; it < 2; ++it) {
      for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<int32_t>(k * (rank + 1) * job) - it;
      comm.allreduce(std::span<int32_t>(v));
      for (size_t k = 0; k < v.size(); ++k)
        ASSERT_EQ(v[k], static_cast<int32_t>(3 * k * job) - 2 * it) << "job " << job << " rank " << rank << " k " << k;
      if (it == 0) {
        both_live.arrive_and_wait();
        go_on.arrive_and_wait();
      }
    }
    comm.close();
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  const auto st = stats_when(sw, [](const nlohmann::json& s) { return s["jobs"]["finished"] == 2; });
  EXPECT_EQ(st["jobs"]["finished"], 2);
  EXPECT_EQ(st["shards"][1]["switch"]["completed"], 2 * 100);
  EXPECT_EQ(st["shards"][0]["switch"]["completed"], 2 * 37);
  EXPECT_EQ(st["switch"]["completed"], 2 * 137);
  EXPECT_EQ(st["occupied"], 0);
  EXPECT_EQ(st["aggregators"], 2 * ((1 << 19) / 256));
}

struct CollisionCase {
  unsigned threads;
  uint16_t a, b;                      // job a's packet first, then job b's (priority 100 > 1)
  std::vector<uint64_t> preempted;    // preempt_won by shard
};

class DsaThreads : public ::testing::TestWithParam<CollisionCase> {};

// Two first transmissions that DSA's hash puts on one aggregator at T = 1
// (256 aggregators of 64 KB): job b's wins the compare and evicts job a's
// partial. At T = 2 (128 aggregators per shard, the packets chosen to meet
// there too): jobs 1 and 3 share shard 1 and the same happens there; jobs 1
// and 2 are on different shards and never meet.
TEST_P(DsaThreads, PreemptionHappensWithinAThreadAndNeverAcross) {
  const CollisionCase cc = GetParam();
  LocalSwitch sw(threaded("dsa", cc.threads, 64 << 10));
  HandJob ja = join_by_hand(sw.d.endpoint(), cc.a, 2, true);
  HandJob jb = join_by_hand(sw.d.endpoint(), cc.b, 2, true);
  ASSERT_TRUE(ja.workers[0] && jb.workers[0]);
  const uint64_t n = (64u << 10) / cc.threads / 256;
  const uint32_t psn = colliding_psn(cc.a, cc.b, 256);  // meets (a, 0) among 256, hence among 128
  const auto da = data_datagram(cc.a, ja.workers[0]->job.self, 0, 1);
  send_to(ja.workers[0]->udp.get(), sw.d.endpoint(), da.data(), da.size());
  stats_when(sw, [](const nlohmann::json& s) { return s["switch"]["data_in"] == 1; });
  const auto db = data_datagram(cc.b, jb.workers[0]->job.self, psn, 100);
  send_to(jb.workers[0]->udp.get(), sw.d.endpoint(), db.data(), db.size());
  const auto st = stats_when(sw, [](const nlohmann::json& s) { return s["switch"]["data_in"] == 2; });
  ASSERT_EQ(st["switch"]["data_in"], 2);
  ASSERT_EQ(st["aggregators"], 256);
  EXPECT_EQ(agg_index(cc.a, 0, n), agg_index(cc.b, psn, n));
  uint64_t total = 0;
  for (unsigned k = 0; k < cc.threads; ++k) {
    const auto& s = st["shards"][k]["switch"];
    EXPECT_EQ(s["preempt_won"], cc.preempted[k]) << "thread " << k;
    EXPECT_EQ(s["collisions"], cc.preempted[k]) << "thread " << k;
    total += cc.preempted[k];
  }
  EXPECT_EQ(st["switch"]["preempt_won"], total);
  EXPECT_EQ(st["occupied"], 2 - total);  // a winner holds the aggregator it took; else each its own
}

INSTANTIATE_TEST_SUITE_P(Runtime, DsaThreads,
                         ::testing::Values(CollisionCase{1, 1, 2, {1}}, CollisionCase{2, 1, 3, {0, 1}},
                                           CollisionCase{2, 1, 2, {0, 0}}),
                         [](const auto& info) {
                           return "threads" + std::to_string(info.param.threads) + "_jobs" +
                                  std::to_string(info.param.a) + "and" + std::to_string(info.param.b);
                         });

// The isolated policy (SwitchML) splits each shard's memory into
// isolated_regions regions: with one region per shard, jobs 1 and 2 run at
// once, job 3 (shard 1, with job 1) is refused until job 1 has left; each
// job's window is half of its shard's region.
TEST(Threads, IsolatedRegionsArePerThread) {
  SwitchDaemonConfig c = threaded("switchml", 2);
  c.isolated_regions = 1;
  LocalSwitch sw(c);
  auto j1 = std::make_optional(join_by_hand(sw.d.endpoint(), 1, 1, false));
  HandJob j2 = join_by_hand(sw.d.endpoint(), 2, 1, false);
  ASSERT_TRUE(j1->workers[0] && j2.workers[0]);
  EXPECT_EQ(j1->workers[0]->job.window_cap, (1u << 19) / 256 / 2);
  JoinOptions o;
  o.sw = sw.d.endpoint();
  o.job = 3;
  o.retain_ops = CommConfig{}.retain_ops;
  o.key = job_key(ina::test::test_switch_key(), 3);
  try {
    join_job(o);
    ADD_FAILURE() << "job 3 joined while job 1 held shard 1's only region";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("no free aggregator region"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("served by thread 1 of 2"), std::string::npos) << e.what();
  }
  j1.reset();  // job 1 leaves: aborted, its region freed
  const auto st = stats_when(sw, [](const nlohmann::json& s) { return s["jobs"]["live"] == nlohmann::json::array({2}); });
  ASSERT_EQ(st["jobs"]["live"], nlohmann::json::array({2}));
  Joined j3 = join_job(o);
  EXPECT_EQ(j3.job.job, 3);
}

TEST(Threads, RefusalsNameTheSchemeAndTheReason) {
  auto error_of = [](SwitchDaemonConfig c) {
    try {
      SwitchDaemon d(c);
    } catch (const RuntimeError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string cpu = error_of(threaded("zebra", 2));
  EXPECT_NE(cpu.find("--threads 2: scheme zebra has a switch CPU"), std::string::npos) << cpu;
  SwitchDaemonConfig atp = threaded("atp", 2);
  atp.layout = "racks.json";  // never read: refused before
  const std::string lay = error_of(atp);
  EXPECT_NE(lay.find("--threads 2: scheme atp serves the one job of a static layout"), std::string::npos) << lay;
  SwitchDaemonConfig rina = threaded("rina", 3);
  rina.layout = "ring.json";
  const std::string ring = error_of(rina);
  EXPECT_NE(ring.find("--threads 3: scheme rina serves the one job of a static layout"), std::string::npos) << ring;
  // 4 threads of 64-value aggregators (256 B): 15 each is too few, 16 is enough.
  const std::string few = error_of(threaded("dsa", 4, 4 * 15 * 256));
  EXPECT_NE(few.find("each switch thread gets 3840 bytes, 15 aggregators of 64 values; a thread needs at least 16"),
            std::string::npos) << few;
  EXPECT_EQ(error_of(threaded("dsa", 4, 4 * 16 * 256)), "no error");
  SwitchDaemonConfig iso = threaded("switchml", 2, 2 * 16 * 256);
  iso.isolated_regions = 16;  // 16 aggregators per shard: regions of 1
  const std::string regions = error_of(iso);
  EXPECT_NE(regions.find("16 aggregators per switch thread cannot be split into 16 isolated regions"), std::string::npos)
      << regions;
  const auto run = ina_test::run_ina("run --scheme rina --workers 4 --switch-threads 2");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.output.find("--switch-threads 2: scheme rina serves the one job of a static layout"), std::string::npos)
      << run.output;
}
