#include "experiment/estimate.hpp"

#include "schemes/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "experiment/network_point.hpp"
#include "experiment/runner.hpp"
#include "wire/packet.hpp"

namespace ina::exp {
namespace {

constexpr double kMiBytes = 1 << 20;

// Sizes of structures private to other layers, mirrored here (they are
// checked against the measured peak RSS in tests/cli/test_bad_input.cpp):
//  - dp::SwitchProgram::Agg: key 8, bitmap 16 (RankBits), ecn 1, count 2, padded to 32; plus the
//    scheme's own register per aggregator (at most 4 B: DSA's priority, GRID's collision counter);
constexpr uint64_t kAggBytes = 32 + 4;
//  - host::WorkerTransport::Rec: sent, last_tx, deadline (8 each), retx 2, done 1, padded; counted
//    per packet of the live ops, an upper bound: the transport keeps records of the packets in
//    flight only (a ring per op); the measured peak RSS is still within the factor;
constexpr uint64_t kRecBytes = 32;
//  - its DeadlineQueue entry: (deadline, psn), padded;
constexpr uint64_t kDeadlineBytes = 16;
//  - host::ParameterServer: Entry (~64 B), the psn -> slot hash node (~48 B), the free list;
constexpr uint64_t kPsEntryBytes = 120;
//  - an op's records live until it completes (WorkerTransport frees them then): the ops of an
//    iteration are submitted together, and at most two iterations overlap;
constexpr uint64_t kOpsPerIteration = 4;  // workload::dsa_model: 2 layers x 2 partitions
constexpr uint64_t kLiveIterations = 2;
//  - sim::Link with its RNG and a WireFifo of at least 64 (time, packet) pairs;
constexpr uint64_t kLinkBytes = 1536;
//  - a node object (training worker, PS) besides the state counted above;
constexpr uint64_t kNodeBytes = 4096;
//  - the simulator's event heap reservation (65536 events of 32 B);
constexpr uint64_t kHeapBytes = 65536 * 32;
//  - the `ina` process itself (code, libraries, allocator arenas), measured.
constexpr uint64_t kBaselineBytes = 16 << 20;

constexpr uint64_t kPoolSlab = 4096;  // PacketPool slab, in packets

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

uint64_t partition_bytes(char model, double partition_mb) {
  const double mb = partition_mb > 0 ? partition_mb : model == 'A' ? 4 : 2;
  return static_cast<uint64_t>(std::llround(mb * kMiBytes / 4)) * 4;
}

}  // namespace

uint64_t Estimate::total_bytes() const {
  uint64_t t = 0;
  for (const auto& p : parts) t += p.bytes;
  return t;
}

std::string Estimate::summary() const {
  std::string s = fmt::format("{} process{}, {} thread{}, ~{} peak memory (", processes, processes == 1 ? "" : "es",
                              threads, threads == 1 ? "" : "s", human_bytes(total_bytes()));
  for (size_t i = 0; i < parts.size(); ++i) s += fmt::format("{}{} {}", i ? ", " : "", parts[i].what, human_bytes(parts[i].bytes));
  return s + ")";
}

// A collective on a multi-switch topology (network_point.hpp): its tensors
// are synthetic (no storage); memory is the switches' aggregators (every
// switch counted as INA: an upper bound), the packets in flight (four windows
// per worker: shards out and in, acks, retransmissions; at most what the
// queues hold), the links and the nodes.
static Estimate estimate_network_run(const Settings& s) {
  const topo::Graph g = build_topology(s, "estimate");
  const uint64_t payload = static_cast<uint64_t>(s.payload_bytes);
  const uint64_t wire = payload + static_cast<uint64_t>(s.header_bytes);
  const uint64_t workers =
      s.workers ? static_cast<uint64_t>(s.workers) * static_cast<uint64_t>(std::max(1, s.jobs)) : g.hosts().size();
  const uint64_t window = std::max<uint64_t>(1, static_cast<uint64_t>(s.init_window_kb * 1000 / wire));
  const uint64_t links = 2 * g.links().size();
  const uint64_t queued = links * std::max<uint64_t>(1, static_cast<uint64_t>(s.queue_kb * 1000 / wire));
  const uint64_t in_flight = std::min(workers * 4 * window, queued) + kPoolSlab;
  const uint64_t stride = (sizeof(Packet) + payload + alignof(Packet) - 1) / alignof(Packet) * alignof(Packet);
  const uint64_t aggs = static_cast<uint64_t>(std::floor(s.memory_mb * kMiBytes / static_cast<double>(payload)));
  Estimate e;
  e.parts = {
      {"switch aggregators", "switch.memory_mb x switches", g.switches().size() * aggs * (kAggBytes + payload)},
      {"packet pool", "workload.workers x transport.init_window_kb, topology.queue_kb",
       ceil_div(in_flight, kPoolSlab) * kPoolSlab * stride},
      {"links, nodes and events", "topology", links * kLinkBytes + g.num_nodes() * kNodeBytes + kHeapBytes},
  };
  std::stable_sort(e.parts.begin(), e.parts.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return e;
}

Estimate estimate_run(const Settings& given, const std::string& scheme) {
  if (is_network(given)) return estimate_network_run(given);
  const schemes::Scheme* spec = schemes::lookup(scheme);  // the registry's roles, never the name
  const Settings s = spec ? packets_for(given, *spec) : given;  // the packet the run will use
  const uint64_t payload = static_cast<uint64_t>(s.payload_bytes);
  const uint64_t wire = payload + static_cast<uint64_t>(s.header_bytes);
  const std::vector<int> per_job = star_job_workers(s);  // workload.job_workers or jobs x workers_per_job
  const uint64_t jobs = static_cast<uint64_t>(s.jobs);
  uint64_t workers = 0;
  for (int w : per_job) workers += static_cast<uint64_t>(w);
  const bool with_ps = !spec || spec->has_ps;
  const bool tracks = spec && spec->track_tasks;
  const uint64_t ops = kOpsPerIteration * static_cast<uint64_t>(s.iterations);
  const uint64_t live_ops = std::min(ops, kLiveIterations * kOpsPerIteration);
  // Packets a worker has in flight: its initial window, grown by AIMD about twofold.
  const uint64_t window = std::max<uint64_t>(1, static_cast<uint64_t>(s.init_window_kb * 1000 / wire));

  uint64_t recs = 0, rto = 0, tasks = 0, ps = 0;
  for (uint64_t j = 1; j <= jobs; ++j) {
    const auto wpj = static_cast<uint64_t>(per_job[j - 1]);
    const char model = s.model == "mixed" ? (j % 2 ? 'A' : 'B') : s.model[0];
    const uint64_t pkts = ceil_div(partition_bytes(model, s.partition_mb), payload);  // per partition
    recs += wpj * live_ops * pkts * kRecBytes;
    // Deadlines of the packets sent within about one RTO: a few windows.
    rto += wpj * std::min(live_ops * pkts, 4 * window) * kDeadlineBytes;
    if (tracks) tasks += ops * pkts;  // one byte per (job, PSN)
    // Open PS entries: at most the packets of the live ops; in practice the
    // windows in flight and the tasks left waiting for a reminder (16 windows).
    // The slot and value vectors grow by doubling (x1.5 on average).
    if (with_ps) ps += std::min(live_ops * pkts, 16 * window) * (kPsEntryBytes + payload) * 3 / 2;
  }
  const uint64_t aggs = static_cast<uint64_t>(std::floor(s.memory_mb * kMiBytes / static_cast<double>(payload)));
  const uint64_t hosts = workers + (with_ps ? jobs : 0);
  const uint64_t links = 2 * hosts;
  // Packets in flight: about two windows per worker (gradients out, results back), at most what the queues hold.
  const uint64_t queued = links * std::max<uint64_t>(1, static_cast<uint64_t>(s.queue_kb * 1000 / wire));
  const uint64_t in_flight = std::min(workers * 2 * window, queued) + kPoolSlab;
  const uint64_t stride = (sizeof(Packet) + payload + alignof(Packet) - 1) / alignof(Packet) * alignof(Packet);

  Estimate e;
  e.parts = {
      {"worker transport records", "workload.jobs x workload.workers_per_job x (workload.partition_mb or model) "
                                   "/ switch.payload_bytes x min(workload.iterations, 2)",
       recs + rto},
      // P4INC-AOI's shadow copy is a second set of value registers (and its id).
      {"switch aggregators", "switch.memory_mb", aggs * (kAggBytes + payload) * (spec && spec->segments ? 2 : 1)},
      {"DSA task tracking", "workload.jobs x workload.iterations x (workload.partition_mb or model) / switch.payload_bytes",
       tasks},
      {"PS entries", "workload.jobs x switch.payload_bytes", ps},
      {"packet pool", "workload.jobs x workload.workers_per_job x transport.init_window_kb, topology.queue_kb",
       ceil_div(in_flight, kPoolSlab) * kPoolSlab * stride},
      {"links, nodes and events", "workload.jobs x workload.workers_per_job",
       links * kLinkBytes + hosts * (kNodeBytes + 4) + kHeapBytes},
  };
  std::erase_if(e.parts, [](const MemoryPart& p) { return p.bytes == 0; });
  std::stable_sort(e.parts.begin(), e.parts.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return e;
}

Estimate estimate_sim(const Scenario& sc, unsigned threads) {
  std::vector<Estimate> runs;
  for (const Point& p : expand(sc))
    for (const auto& scheme : sc.schemes) runs.push_back(estimate_run(p.settings, scheme));
  std::stable_sort(runs.begin(), runs.end(),
                   [](const Estimate& a, const Estimate& b) { return a.total_bytes() > b.total_bytes(); });
  const size_t seeds = std::max<size_t>(1, sc.seeds.size());
  // Each (point, scheme) runs once per seed; with -j N the N largest may run at once.
  const size_t parallel = std::min<size_t>(std::max(1u, threads), runs.size() * seeds);
  Estimate e;
  e.threads = std::max(1u, threads);
  e.parts.push_back({"process baseline", "", kBaselineBytes});
  if (runs.empty()) return e;
  std::vector<MemoryPart> sum = runs.front().parts;
  for (size_t k = 1; k < parallel; ++k) {
    const Estimate& r = runs[std::min(k / seeds, runs.size() - 1)];
    for (const auto& part : r.parts) {
      auto it = std::find_if(sum.begin(), sum.end(), [&](const MemoryPart& m) { return m.what == part.what; });
      if (it == sum.end()) sum.push_back(part);
      else it->bytes += part.bytes;
    }
  }
  e.parts.insert(e.parts.begin(), sum.begin(), sum.end());
  std::stable_sort(e.parts.begin(), e.parts.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return e;
}

}  // namespace ina::exp
