// Nothing on the runtime's data path allocates per datagram. The
// global operator new of this test binary counts allocations while a test
// asks it to; the test drives a real switch program in a Router engine and
// two workers (WorkerTransport in Host engines) over loopback UDP, all on
// this thread, and counts the allocations of the steady state.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "dataplane/switch.hpp"
#include "host/tensor_io.hpp"
#include "host/worker.hpp"
#include "runtime/udp_engine.hpp"
#include "schemes/registry.hpp"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocs{0};

void* counted(std::size_t n, std::size_t align) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                              : std::malloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

// Replacements for the whole test binary: they count only while g_counting.
void* operator new(std::size_t n) { return counted(n, 0); }
void* operator new[](std::size_t n) { return counted(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted(n, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using namespace ina;
using namespace ina::rt;

namespace {

constexpr uint16_t kValues = 2048;  // the runtime's default payload (8 KB)

// A worker: the transport, as the communicator's host node wraps it.
class WorkerNode final : public Node {
 public:
  explicit WorkerNode(const host::WorkerConfig& c) : tx(c) {}
  void on_packet(Packet* p, Time now, Effects& fx) override { tx.on_packet(p, now, fx); }
  void on_timer(uint64_t token, Time now, Effects& fx) override { tx.on_timer(token, now, fx); }
  host::WorkerTransport tx;
};

}  // namespace

// Two workers allreduce 24 MiB (3072 packets of 8 KB each) through SwitchML
// in a Router engine; over the second half (~3000 datagrams into the switch,
// as many results out of it, and as many at the workers) at most a handful of
// allocations happen (4 measured: amortized growth of queues that reached a
// new length; the deque this replaced made 98, one per few dozen packets).
// Catches any per-datagram or per-batch allocation on the engines' receive
// or send paths, in the switch program, or in the worker transport; and the
// sums are exact.
TEST(NoAllocation, SteadyStateOfSwitchAndWorkersAllocatesNothingPerDatagram) {
  constexpr uint32_t kPackets = 3072;
  constexpr uint64_t kElems = uint64_t{kPackets} * kValues;
  EngineConfig rc;
  rc.mode = EngineMode::Router;
  rc.payload_values = kValues;
  UdpEngine sw_engine(rc);
  dp::SwitchConfig swc;
  swc.payload_values = kValues;
  swc.memory_bytes = 1 << 20;  // 128 aggregators of 8 KB
  auto program = schemes::find("switchml").make_switch(swc);
  program->set_id(1);
  sw_engine.add_node(*program);

  std::vector<std::unique_ptr<UdpEngine>> hosts;
  std::vector<std::unique_ptr<WorkerNode>> workers;
  std::vector<std::vector<int32_t>> grads(2), results(2);
  for (uint8_t r = 0; r < 2; ++r) {
    EngineConfig hc;
    hc.payload_values = kValues;
    hc.gateway = sw_engine.local();
    hosts.push_back(std::make_unique<UdpEngine>(hc));
    host::WorkerConfig wc;
    wc.job = 1;
    wc.rank = r;
    wc.nworkers = 2;
    wc.self = static_cast<NodeId>(10 + r);
    wc.aggregator = 1;
    wc.payload_values = kValues;
    // 8 packets in flight per worker: 128 KB at the switch's socket, within
    // a stock net.core.rmem_max (212 992), so nothing is dropped or resent.
    wc.init_window = 8;
    wc.max_window = 8;
    wc.window_cap = 64;
    wc.min_rto = 200 * kMs;
    workers.push_back(std::make_unique<WorkerNode>(wc));
    workers.back()->set_id(wc.self);
    hosts.back()->add_node(*workers.back());
    sw_engine.set_route(wc.self, hosts.back()->local());
    grads[r].resize(kElems);
    results[r].assign(kElems, 0);
    for (uint64_t i = 0; i < kElems; ++i) grads[r][i] = static_cast<int32_t>(i % 1000) * (r + 1) - 7;
  }
  dp::SwitchJob job;
  job.job = 1;
  job.workers = {10, 11};
  job.region_offset = 0;
  job.region_size = 64;
  program->add_job(job);
  sw_engine.start();
  for (auto& h : hosts) h->start();
  for (size_t r = 0; r < 2; ++r) {
    auto io = std::make_shared<host::SpanTensor>(grads[r], results[r]);
    hosts[r]->invoke(*workers[r], [&](Time now, Effects& fx) {
      workers[r]->tx.submit(io, kElems);
      workers[r]->tx.pump(now, fx);
    });
  }
  auto acks = [&] { return std::min(workers[0]->tx.stats().acks, workers[1]->tx.stats().acks); };
  auto run_until = [&](uint64_t n) {
    const Time end = monotonic_now() + 20 * kSec;
    while (acks() < n && monotonic_now() < end) {
      sw_engine.poll(0);
      for (auto& h : hosts) h->poll(0);
    }
    return acks() >= n;
  };
  ASSERT_TRUE(run_until(kPackets / 2)) << "first half: " << acks() << " results";
  const uint64_t in0 = sw_engine.stats().rx_datagrams;
  g_allocs = 0;
  g_counting = true;
  const bool done = run_until(kPackets);
  g_counting = false;
  ASSERT_TRUE(done) << "second half: " << acks() << " results";
  const uint64_t counted = g_allocs.load();
  const uint64_t datagrams = sw_engine.stats().rx_datagrams - in0;
  EXPECT_GE(datagrams, uint64_t{kPackets});  // both workers' second halves
  EXPECT_LE(counted, 16u) << "allocations over " << datagrams << " datagrams into the switch";
  for (uint64_t i = 0; i < kElems; i += 997) {
    ASSERT_EQ(results[0][i], grads[0][i] + grads[1][i]) << "value " << i;
    ASSERT_EQ(results[1][i], results[0][i]);
  }
  EXPECT_EQ(sw_engine.stats().rx_malformed, 0u);
  for (const auto& w : workers)  // the steady state measured: no loss, no retransmission
    EXPECT_EQ(w->tx.stats().timeouts + w->tx.stats().retransmits, 0u);
  EXPECT_EQ(workers[0]->tx.stats().malformed + workers[1]->tx.stats().malformed, 0u);
}
