#include "experiment/star_line_rate.hpp"

#include "core/simd_clones.hpp"
#include "core/resources.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "dataplane/switch.hpp"
#include "host/worker_node.hpp"
#include "schemes/registry.hpp"
#include "sim/engine.hpp"
#include "cluster/star.hpp"

namespace ina::exp {
namespace {

// The two loops run for every packet (core/simd_clones.hpp).
// Both have a fixed-size body for the workload's 64-value payload (no
// vector prologue or remainder loop).
template <size_t N>
inline void fill_ones_n(int32_t* out, size_t n) {
  std::fill(out, out + (N ? N : n), 1);
}
INA_SIMD_CLONES void fill_ones(int32_t* out, size_t n) { n == 64 ? fill_ones_n<64>(out, n) : fill_ones_n<0>(out, n); }
// Values of v[0, n) other than `expected` (n: a packet's payload, below 2^16;
// 32-bit lanes vectorize best).
template <size_t N>
inline uint32_t count_other_n(const int32_t* v, size_t n, int32_t expected) {
  uint32_t bad = 0;
  for (size_t k = 0; k < (N ? N : n); ++k) bad += v[k] != expected;
  return bad;
}
INA_SIMD_CLONES uint32_t count_other(const int32_t* v, size_t n, int32_t expected) {
  return n == 64 ? count_other_n<64>(v, n, expected) : count_other_n<0>(v, n, expected);
}

// Every host's gradient is all 1s, so every value of every result must be
// the host count: each result is checked value by value (as ns-3's side does).
class ConstTensor final : public host::TensorIO {
 public:
  explicit ConstTensor(int32_t expected) : expected_(expected) {}
  void read_gradient(uint64_t, std::span<int32_t> out) override { fill_ones(out.data(), out.size()); }
  void write_result(uint64_t, std::span<const int32_t> v) override {
    bad_values += count_other(v.data(), v.size(), expected_);
    values_checked += v.size();
  }
  void read_result(uint64_t, std::span<int32_t> out) override { std::fill(out.begin(), out.end(), 0); }
  uint64_t values_checked = 0, bad_values = 0;

 private:
  int32_t expected_;
};

}  // namespace

StarLineRateResult run_star_line_rate(const StarLineRateSettings& s) {
  if (s.hosts < 1 || s.hosts > static_cast<int>(kMaxWorkers))
    throw std::invalid_argument(fmt::format("star line rate: hosts {} is outside 1..{}", s.hosts, kMaxWorkers));
  sim::Simulator sim(1, s.payload_values, s.header_bytes);
  const auto plan = cluster::plan_star({s.hosts}, false);
  dp::SwitchConfig swc;
  swc.memory_bytes = s.memory_bytes;
  auto sw = schemes::find("switchml").make_switch(swc);
  auto* swp = sw.get();
  sim.add_node(std::move(sw), true);
  StarLineRateResult r;
  r.pool_slots = cluster::register_jobs(*swp, plan, true);
  auto tensor = std::make_shared<ConstTensor>(s.hosts);
  // Enough packets that no host runs out within `duration` at line rate.
  const double pkt_bits = 8.0 * (s.header_bytes + 4.0 * s.payload_values);
  const auto packets = static_cast<uint64_t>(to_ms(s.duration) * 1e-3 * s.gbps * 1e9 / pkt_bits) + s.window + 1;
  std::vector<host::WorkerNode*> workers;
  for (int i = 0; i < s.hosts; ++i) {
    host::WorkerConfig w;
    w.job = 1;
    w.rank = static_cast<uint8_t>(i);
    w.nworkers = static_cast<uint8_t>(s.hosts);
    w.self = plan.jobs[0].workers[i];
    w.aggregator = plan.sw;
    w.payload_values = s.payload_values;
    w.init_window = s.window;
    w.aimd = false;
    w.window_cap = r.pool_slots;
    auto node = std::make_unique<host::WorkerNode>(w);
    node->submit(tensor, packets * s.payload_values);
    workers.push_back(node.get());
    sim.add_node(std::move(node), false);
  }
  sim::LinkParams lp;
  lp.gbps = s.gbps;
  lp.delay = s.delay;
  cluster::wire_star(sim, plan, lp, lp);
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = thread_cpu_seconds();
  sim.run(s.duration);
  r.cpu_s = thread_cpu_seconds() - c0;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.hops = sim.hops();
  r.events = sim.events();
  r.up_hops = swp->stats().data_in;
  r.down_hops = r.hops - r.up_hops;
  r.aggregations = swp->stats().completed;
  for (const auto* w : workers) r.retransmits += w->transport().stats().retransmits;
  r.values_checked = tensor->values_checked;
  r.bad_values = tensor->bad_values;
  return r;
}

}  // namespace ina::exp
