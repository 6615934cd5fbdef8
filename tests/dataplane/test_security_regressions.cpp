// Regression tests for a security review's findings: a cross-job data leak
// through stale aggregator lanes (now zeroed beyond the count on reserve and
// swap), and a daemon crash on a control line with invalid UTF-8 (errors no
// longer quote raw bytes, and the control loop catches every exception).
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "cluster_fixture.hpp"
#include "dataplane/switch.hpp"
#include "runtime/net.hpp"
#include "runtime/switch_daemon.hpp"
#include "test_keys.hpp"

namespace ina::test {
namespace {

constexpr NodeId kRegressionSw = 0;

std::unique_ptr<dp::SwitchProgram> one_agg_switch(const std::string& scheme) {
  dp::SwitchConfig c;
  c.payload_values = 64;
  c.memory_bytes = 1 * 256;  // one aggregator: every task maps to index 0
  auto sw = schemes::find(scheme).make_switch(c);
  sw->set_id(kRegressionSw);
  return sw;
}

void add_job(dp::SwitchProgram& sw, uint16_t job, std::vector<NodeId> w, NodeId ps, uint32_t off = 0, uint32_t size = 0) {
  dp::SwitchJob j;
  j.job = job;
  j.workers = std::move(w);
  j.ps = ps;
  j.region_offset = off;
  j.region_size = size;
  j.agg_mask = full_bitmap(static_cast<unsigned>(j.workers.size()));
  sw.add_job(j);
}

Packet* data(FakeEffects& fx, uint16_t job, uint32_t psn, uint8_t rank, uint8_t n, NodeId src, std::vector<int32_t> v) {
  return make_data(fx, job, psn, rank, n, src, v);
}

// ATP (shared pool). Victim job 7 (workers 5, 6; PS 22) aggregates 64 values;
// its PS's result Ack frees the aggregator but not its values. Attacker job 4
// (workers 1, 2; PS 20; both its own, legitimately joined) then reserves the
// aggregator with count 1 and completes it with count 64 of zeros: the
// "result" its PS receives carries the victim's aggregate in lanes 1..63.
TEST(SecurityRegression, AtpStaleLanesLeakAnotherJobsAggregate) {
  FakeEffects fx;
  auto sw = one_agg_switch("atp");
  add_job(*sw, 7, {5, 6}, 22);
  add_job(*sw, 4, {1, 2}, 20);
  const auto g = ramp(64, 1000), h = ramp(64, 5000);
  sw->on_packet(data(fx, 7, 3, 0, 2, 5, g), 0, fx);
  sw->on_packet(data(fx, 7, 3, 1, 2, 6, h), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);  // the victim's aggregate to its PS
  // The victim's PS returns the result (multicast Ack): frees the aggregator.
  Packet* ack = make_data(fx, 7, 3, 0, 2, 22, add(g, h), 0, 0, kMulticast);
  ack->h.type = PktType::Ack;
  ack->h.flags = flag::kResult;
  ack->h.bitmap = 0b11;
  sw->on_packet(ack, 0, fx);
  fx.take();
  ASSERT_EQ(sw->occupied(), 0u);
  // The attacker.
  sw->on_packet(data(fx, 4, 9, 0, 2, 1, {0}), 0, fx);
  sw->on_packet(data(fx, 4, 9, 1, 2, 2, std::vector<int32_t>(64, 0)), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, 20);  // the attacker's own PS
  ASSERT_EQ(out[0].v.size(), 64u);
  const auto victim = add(g, h);
  size_t leaked = 0;
  for (size_t k = 1; k < 64; ++k) leaked += out[0].v[k] == victim[k];
  EXPECT_EQ(leaked, 0u) << "job 4 read " << leaked << " of job 7's aggregate values";
}

// SwitchML (isolated regions): the same through a region handed to a new job
// after the previous holder finished (remove_job does not clear values).
TEST(SecurityRegression, SwitchMLReusedRegionLeaksThePreviousJobsAggregate) {
  FakeEffects fx;
  auto sw = one_agg_switch("switchml");
  dp::SwitchConfig c;
  c.payload_values = 64;
  c.memory_bytes = 2 * 256;
  sw = schemes::find("switchml").make_switch(c);
  sw->set_id(kRegressionSw);
  add_job(*sw, 7, {5, 6}, kNoNode, 0, 2);
  const auto g = ramp(64, 1000), h = ramp(64, 5000);
  sw->on_packet(data(fx, 7, 0, 0, 2, 5, g), 0, fx);
  sw->on_packet(data(fx, 7, 0, 1, 2, 6, h), 0, fx);
  ASSERT_EQ(fx.take().size(), 2u);  // multicast to both workers
  sw->remove_job(7);
  add_job(*sw, 4, {1, 2}, kNoNode, 0, 2);  // the freed region, to another tenant
  sw->on_packet(data(fx, 4, 0, 0, 2, 1, {0}), 0, fx);
  sw->on_packet(data(fx, 4, 0, 1, 2, 2, std::vector<int32_t>(64, 0)), 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 2u);
  const auto victim = add(g, h);
  size_t leaked = 0;
  for (size_t k = 1; k < out[0].v.size(); ++k) leaked += out[0].v[k] == victim[k];
  EXPECT_EQ(leaked, 0u) << "job 4 read " << leaked << " of job 7's aggregate values";
}

// One unauthenticated TCP line with a non-UTF-8 byte: parse_line's error
// quotes the raw line, reject() puts it in a JSON string, dump() throws
// nlohmann::json::type_error (316), which reject() does not catch: it leaves
// the epoll handler and SwitchDaemon::run().
TEST(SecurityRegression, InvalidUtf8ControlLineDoesNotKillTheSwitch) {
  rt::SwitchDaemonConfig c;
  c.listen = rt::Endpoint::parse("127.0.0.1:0");
  c.scheme = "dsa";
  c.program.memory_bytes = 1 << 16;
  c.program.payload_values = 64;
  c.key = test_switch_key();
  c.has_key = true;
  c.log = false;
  rt::SwitchDaemon d(c);
  std::atomic<int> outcome{0};  // 1: run() returned, 2: threw
  std::string what;
  std::thread t([&] {
    try {
      d.run();
      outcome = 1;
    } catch (const std::exception& e) {
      what = e.what();
      outcome = 2;
    }
  });
  {
    rt::UniqueFd fd = rt::connect_tcp(d.endpoint(), 2 * kSec, "switch");
    const std::string bad = "\xff\n";
    ASSERT_EQ(::send(fd.get(), bad.data(), bad.size(), MSG_NOSIGNAL), 2);
    for (int i = 0; i < 100 && outcome == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (outcome == 0) d.request_stop();
  t.join();
  EXPECT_NE(outcome.load(), 2) << "the daemon's loop died: " << what;
}

}  // namespace
}  // namespace ina::test
