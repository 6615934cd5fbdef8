#pragma once
// In-process runtime fixtures for loopback tests: a switch daemon and a PS
// daemon in threads, communicator settings with bounded waits, and workers
// as threads.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>

#include "runtime/communicator.hpp"
#include "runtime/net.hpp"
#include "runtime/udp_engine.hpp"
#include "wire/packet.hpp"
#include "runtime/ps_daemon.hpp"
#include "runtime/switch_daemon.hpp"
#include "test_keys.hpp"

namespace ina::test {

using rt::Endpoint;
using rt::FaultConfig;
using rt::PsDaemon;
using rt::PsDaemonConfig;
using rt::SwitchDaemon;
using rt::SwitchDaemonConfig;

// A switch daemon in a thread.
struct LocalSwitch {
  SwitchDaemon d;
  std::thread t;
  explicit LocalSwitch(const SwitchDaemonConfig& c) : d(c), t([this] { d.run(); }) {}
  ~LocalSwitch() {
    d.request_stop();
    t.join();
  }
  std::string addr() const { return d.endpoint().str(); }
};

inline SwitchDaemonConfig switch_config(const std::string& scheme, uint16_t payload = 64, uint64_t memory = 1 << 20) {
  SwitchDaemonConfig c;
  c.listen = Endpoint::parse("127.0.0.1:0");
  c.scheme = scheme;
  c.program.payload_values = payload;
  c.program.memory_bytes = memory;
  c.log = false;
  c.key = ina::test::test_switch_key();
  c.has_key = true;
  return c;
}

// A PS daemon in a thread; it ends when its job does.
struct LocalPs {
  std::thread t;
  std::string error;
  nlohmann::json stats;  // the PS's statistics once its job is over
  LocalPs(const Endpoint& sw, uint16_t job, unsigned n, FaultConfig f = {}) {
    t = std::thread([=, this] {
      try {
        PsDaemonConfig c;
        c.sw = sw;
        c.job = job;
        c.nworkers = n;
        c.faults = f;
        c.rendezvous_timeout = 10 * kSec;
        c.log = false;
        PsDaemon d(c);
        d.run();
        stats = d.stats();
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
  }
  void wait() {
    if (t.joinable()) t.join();
  }
  ~LocalPs() { wait(); }
};

// Loss and duplication at `loss`, reordering at 5 x `loss`.
// A Data packet's header from rank 0 of a 2-worker job (count values).
inline Header data_header(uint16_t job, NodeId src, NodeId dst, uint16_t count) {
  Header h;
  h.type = PktType::Data;
  h.job = job;
  h.src = src;
  h.dst = dst;
  h.nworkers = 2;
  h.rank = 0;
  h.bitmap = 1;
  h.count = count;
  return h;
}

inline FaultConfig lossy(double loss) {
  FaultConfig f;
  f.loss = loss;
  f.duplicate = loss;
  f.reorder = loss * 5;
  return f;
}

inline CommConfig comm_config(const std::string& sw, uint16_t job, unsigned rank, unsigned n) {
  CommConfig c;
  c.switch_addr = sw;
  c.job = job;
  c.rank = rank;
  c.nworkers = n;
  c.connect_timeout = 5 * kSec;
  c.rendezvous_timeout = 10 * kSec;
  c.progress_timeout = 20 * kSec;
  c.close_timeout = 10 * kSec;
  return c;
}

// Runs body(rank) for every rank in its own thread; returns the errors.
inline std::vector<std::string> run_workers(unsigned n, const std::function<void(unsigned)>& body) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> ts;
  for (unsigned r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  return errors;
}


// Raw UDP for tests that play a peer by hand: a socket on a free loopback
// port, one datagram to `to`, a header and values encoded as the wire has them.
inline rt::UniqueFd plain_udp() { return rt::bind_udp(Endpoint::parse("127.0.0.1:0"), 1 << 20); }

inline void send_raw(int fd, const Endpoint& to, const void* data, size_t len) {
  ASSERT_EQ(::sendto(fd, data, len, 0, reinterpret_cast<const sockaddr*>(&to.sa), sizeof to.sa),
            static_cast<ssize_t>(len));
}

inline std::vector<std::byte> encoded(const Header& h, const std::vector<int32_t>& v) {
  std::vector<std::byte> b(encoded_size(h));
  encode(h, v, b);
  return b;
}

// Polls an engine until pred() or the deadline.
template <typename Pred>
bool pump_until(rt::UdpEngine& e, Pred pred, Time limit = 2 * kSec) {
  const Time end = rt::monotonic_now() + limit;
  while (!pred()) {
    if (rt::monotonic_now() > end) return false;
    e.poll(5 * kMs);
  }
  return true;
}

}  // namespace ina::test
