#include "experiment/estimate.hpp"

#include "schemes/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>

#include "experiment/collective_impl.hpp"
#include "experiment/estimate_ring.hpp"
#include "experiment/estimate_sparse.hpp"
#include "experiment/network_point.hpp"
#include "experiment/runner.hpp"
#include "experiment/sparse_point.hpp"
#include "host/profile.hpp"
#include "sim/network.hpp"
#include "wire/packet.hpp"
#include "workload/model.hpp"

namespace ina::exp {
namespace {

constexpr double kMiBytes = 1 << 20;

// Sizes of structures private to other layers, mirrored here (they are
// checked against the measured peak RSS in tests/cli/test_bad_input.cpp):
//  - an aggregator's values: a slot of payload bytes while its task lives, the slots on pages
//    their first write maps (dp::SwitchProgram::values; core/zero_page_allocator.hpp). A
//    scheme whose aggregators stay taken (SwitchML's isolated regions, P4INC-AOI's segments)
//    keeps a slot for every aggregator it ever wrote;
constexpr uint64_t kPageBytes = 4096;
//  - the tasks live at a switch at once: a window's span per job (its workers send the same
//    PSNs), about twice the initial window under AIMD, four when packets wait (see kRecBytes).
constexpr uint64_t kLiveWindows = 2, kLiveWindowsWaiting = 4;
//  - host::WorkerTransport::Rec: sent, last_tx, deadline (8 each), retx 2, slot, prev, gap_mark
//    (4 each), padded to 40, and its done bit. An op's records are a ring over its packets
//    [lowest not done, next to send) (host/record_ring.hpp), doubled when full (at least
//    kMinRecs): a window's span while every packet comes back within about an RTT. A packet
//    that waits for a retransmission timeout (a loss, a preemption) leaves the ring as a
//    straggler once the ring is mostly done, so the ring stays within four windows, and the
//    ops after it open theirs: every live op's (measured: faults.loss = 0.001 on the 4 x 8 ATP
//    star, 36 MiB of rings when they spanned whole ops; without loss they stay at a window).
constexpr uint64_t kRecBytes = 40;
constexpr uint64_t kMinRecs = 8;  // host::RecordRing::kMinRecs
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
//  - dp::RinaSwitch's AllGather slot: key, member bits, freed key (8 each), ece, padded;
constexpr uint64_t kGatherSlotBytes = 32;
//  - a node object (training worker, PS) besides the state counted above;
constexpr uint64_t kNodeBytes = 4096;
//  - the simulator's event heap reservation (65536 events of 32 B);
constexpr uint64_t kHeapBytes = 65536 * 32;
//  - the `ina` process itself (code, libraries, allocator arenas), measured.
constexpr uint64_t kBaselineBytes = 16 << 20;

constexpr uint64_t kPoolSlab = 4096;  // PacketPool slab, in packets

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Packets are lost somewhere: tasks wait at the switches and records stay open longer.
bool lossy(const Settings& s) { return s.loss > 0 || s.worker_loss > 0 || s.ps_loss > 0; }

// Bytes of register state per aggregator besides the values (its Agg, its
// slot index, the scheme's own arrays): what the scheme's program, made
// with 64 aggregators, holds (dp::SwitchProgram::register_bytes).
uint64_t register_bytes(const schemes::Scheme* spec, const Settings& s) {
  if (!spec || !spec->factory) return 0;
  constexpr uint64_t kAggs = 64;
  dp::SwitchConfig c;
  c.payload_values = static_cast<uint16_t>(s.payload_bytes / 4);
  c.memory_bytes = kAggs * 4 * c.payload_values;
  c.rina.ring_memory = detail::ring_memory_of(s.ring_memory, s.pool_policy);
  return spec->make_switch(c)->register_bytes() / kAggs;
}

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
  const std::string held = split                ? fmt::format("{} processes sharing each run", processes)
                           : processes > 1        ? fmt::format("{} processes, a run each", processes)
                           : threads == 1         ? std::string("1 process, 1 run at a time")
                                                  : fmt::format("1 process, {} runs at once", threads);
  std::string s = fmt::format("{}, ~{} peak memory (", held, human_bytes(total_bytes()));
  for (size_t i = 0; i < parts.size(); ++i) s += fmt::format("{}{} {}", i ? ", " : "", parts[i].what, human_bytes(parts[i].bytes));
  return s + ")";
}

// A collective on a multi-switch topology (network_point.hpp): its tensors
// are synthetic (no storage); memory is the INA switches' aggregators, the
// packets in flight (four windows per worker in the PS family: shards out
// and in, acks, retransmissions; two in a ring; at most what the queues
// hold), the links and the nodes;
// for the PS family (PS, ATP, ...) the hosts' worker transports and PS
// deadlines (ps_hosts), and for the ring family (RAR, H-AR, Rina) the
// endpoints' buffers, sized by the gradient (estimate_ring.hpp).
namespace {

// The run's placement of its jobs (the run's own, collective.cpp).
sim::Placement placement(const NetworkRun& nr) { return detail::job_placement(nr.graph, nr.settings); }

// Each ring job's plan (by rank) on the run's graph and placement: the run's own (collective_ring.cpp).
std::vector<std::vector<std::vector<host::RingStage>>> ring_plans(const NetworkRun& nr, const schemes::Scheme& scheme) {
  return detail::ring_plans(nr.graph, scheme, placement(nr), nr.settings.gradient_mb);
}

// The PS family's hosts (collective_ps.cpp, ShardHost): per job of N
// workers, each host runs N worker transports (one per PS shard, each with
// 1/N of the host's initial window) and the PS of its own shard.
//  - A transport's records: a ring of about twice its window (at least 8
//    records, kRecBytes and a done bit each) and the RTO deadlines of a few
//    windows, as on the star (estimate_run).
//  - A PS's reminder deadlines (host::ParameterServer: one DeadlineQueue
//    entry per merged packet, dropped only when it expires, so the queue
//    holds every merge of the last timeout, at least ps_min_timeout): the
//    packets its host's link brings in one ps_min_timeout, of which about
//    half are the shard's gradients (the other half the other shards'
//    results), at most every worker's packets of the shard. Its open
//    entries (the packets the workers' windows have in flight) are small beside them.
struct PsHosts {
  uint64_t transports = 0, ps = 0;
};

PsHosts ps_hosts(const NetworkRun& nr, uint64_t wire) {
  const topo::Graph& g = nr.graph;
  const CollectiveSettings& c = nr.settings;
  const uint64_t elems = static_cast<uint64_t>(std::llround(c.gradient_mb * kMiBytes / 4));
  const uint64_t width = std::max<uint64_t>(1, c.payload_values);
  const double timeout_s = static_cast<double>(host::kPaperProfile.ps_min_timeout) / static_cast<double>(kSec);
  PsHosts out;
  for (const auto& job : placement(nr).jobs) {
    const uint64_t n = std::max<size_t>(1, job.size());
    // A transport's window: 1/n of the host's at first, then AIMD adds a
    // packet per window of results. After P results a window that never
    // halves is sqrt(w0^2 + 2P) (an upper bound: ECN halvings keep it
    // smaller), and its record ring and RTO queue hold about that many (DSA's
    // preempted packets waiting out their timeouts among them).
    const double w0 = std::max(1.0, c.init_window_kb * 1000 / static_cast<double>(wire) / static_cast<double>(n));
    const double results = static_cast<double>(ceil_div(ceil_div(elems, n), width)) * std::max(1, c.iterations);
    const double window = std::sqrt(w0 * w0 + 2 * results);
    const uint64_t ring = std::bit_ceil(std::max<uint64_t>(kMinRecs, static_cast<uint64_t>(std::ceil(2 * window))));
    out.transports += n * n * (ring * (kRecBytes * 8 + 1) / 8 + static_cast<uint64_t>(4 * window) * kDeadlineBytes);
    const uint64_t merges = n * ceil_div(ceil_div(elems, n), width);  // per op, at the PS
    for (const topo::NodeId v : job) {
      const double gbps = g.neighbors(v).empty() ? 0 : g.arc_gbps(g.neighbors(v).front().arc);
      const auto in_timeout = static_cast<uint64_t>(gbps * 1e9 / 8 / static_cast<double>(wire) * timeout_s / 2);
      out.ps += std::min(merges, in_timeout) * kDeadlineBytes;
    }
  }
  return out;
}

}  // namespace

static Estimate estimate_network_run(const Settings& s, const std::string& scheme_name) {
  const schemes::Scheme* spec = schemes::lookup(scheme_name);
  const bool ring = spec && (spec->collective == schemes::Collective::Ring ||
                             spec->collective == schemes::Collective::Hierarchical ||
                             spec->collective == schemes::Collective::RingIna);
  const bool ps_family =
      spec && (spec->collective == schemes::Collective::Ps || spec->collective == schemes::Collective::PsIna);
  std::optional<NetworkRun> nr;
  if (ring || ps_family) {
    try {
      nr.emplace(network_run(s, *spec, 1, "estimate"));
    } catch (const std::exception&) {
      // The run reports the problem itself; the estimate falls back to the generic model.
    }
  }
  const topo::Graph g = nr ? nr->graph : build_topology(s, "estimate");
  const uint64_t payload = static_cast<uint64_t>(s.payload_bytes);
  const uint64_t wire = payload + static_cast<uint64_t>(s.header_bytes);
  const uint64_t workers =
      s.workers ? static_cast<uint64_t>(s.workers) * static_cast<uint64_t>(std::max(1, s.jobs)) : g.hosts().size();
  const uint64_t window = std::max<uint64_t>(1, static_cast<uint64_t>(s.init_window_kb * 1000 / wire));
  const uint64_t links = 2 * g.links().size();
  const uint64_t queued = links * std::max<uint64_t>(1, static_cast<uint64_t>(s.queue_kb * 1000 / wire));
  // A ring's worker sends to one neighbour and acknowledges the other's
  // sends: about its window out and the acknowledgements of one coming in.
  const uint64_t windows = ring ? 2 : 4;
  const uint64_t in_flight = std::min(workers * windows * window, queued) + kPoolSlab;
  const uint64_t stride = (sizeof(Packet) + payload + alignof(Packet) - 1) / alignof(Packet) * alignof(Packet);
  const uint64_t aggs = static_cast<uint64_t>(std::floor(s.memory_mb * kMiBytes / static_cast<double>(payload)));
  // Every switch counted as INA (an upper bound), but for a scheme whose
  // run is known: its INA switches (switch.ina), none for PS, RAR and H-AR;
  // each with its own memory (switch_memory_mb).
  const uint64_t regs = register_bytes(spec, s);
  uint64_t switch_bytes = g.switches().size() * aggs * (regs + payload);
  RingBuffers ring_bytes;
  PsHosts ps_bytes;
  uint64_t gather_slots = 0;
  // Ring runs: each job's plan; the slots a Rina switch writes per job
  // (ring_slots, by switch): a send's packets are numbered from 0 in every
  // step and take slot psn mod region, so a job writes at most its largest
  // send's packets, or its region, at each INA switch of its groups.
  const bool ring_ina = nr && spec->collective == schemes::Collective::RingIna;
  std::vector<uint64_t> ring_slots(nr ? nr->graph.num_nodes() : 0, 0);
  if (nr && ring) {
    const auto plans = ring_plans(*nr, *spec);
    const uint64_t region = aggs / std::max<uint64_t>(1, plans.size());
    for (const auto& plan : plans) {
      const RingBuffers b = ring_buffers(plan, static_cast<uint64_t>(std::max(1, s.iterations)),
                                         static_cast<uint16_t>(payload / 4));
      ring_bytes.values += b.values;
      ring_bytes.records += b.records;
      // The INA switches of the job's groups (a group's top and the levels
      // its ranks enter by), each with its AllGather rows: one for its agent
      // and one per rank of the upstream group, a region wide.
      std::vector<uint64_t> rows(ring_slots.size(), 0);
      if (!plan.empty())
        for (const host::RingStage& st : plan.front())
          for (size_t i = 0; i < st.groups.size(); ++i) {
            const host::RingGroup& g = st.groups[i];
            if (!g.ina()) continue;
            const size_t G = st.groups.size();
            const uint64_t r = 1 + (G > 1 ? st.groups[(i + G - 1) % G].ranks.size() : 0);
            if (g.tor < rows.size()) rows[g.tor] = std::max(rows[g.tor], r);
            for (const NodeId e : g.entry)
              if (e < rows.size()) rows[e] = std::max(rows[e], r);
          }
      for (size_t v = 0; v < rows.size(); ++v)
        if (rows[v]) {
          ring_slots[v] += std::min(region, b.send_packets);
          gather_slots += rows[v] * region * kGatherSlotBytes;
        }
    }
  }
  if (nr && (spec->collective == schemes::Collective::PsIna || ring_ina)) {
    switch_bytes = 0;
    // A switch's values take a slot per live task (dataplane/switch.hpp):
    // a ToR's live tasks are its hosts' windows (none on an idle rack's,
    // which holds only its aggregators' metadata), any other switch's
    // every busy host's; a Rina switch's are also at most the slots its
    // jobs write (ring_slots, in pages). A scheme whose aggregators stay
    // taken holds a slot for every one.
    std::vector<bool> busy(nr->graph.num_nodes(), false);
    std::vector<uint64_t> live(nr->graph.num_nodes(), 0);
    uint64_t busy_hosts = 0;
    for (const auto& job : placement(*nr).jobs)
      for (const topo::NodeId h : job) busy_hosts += !busy[h], busy[h] = true;
    const uint64_t per_host = (lossy(s) ? kLiveWindowsWaiting : kLiveWindows) * window;
    const bool releases = !spec->isolated && !spec->segments;
    std::vector<bool> tor(nr->graph.num_nodes(), false);
    for (const sim::Rack& r : sim::racks(nr->graph)) {
      tor[r.tor] = true;
      for (const topo::NodeId h : r.hosts) live[r.tor] += busy[h] ? per_host : 0;
    }
    for (const topo::NodeId v : nr->ina) {
      const double mb = switch_memory_mb(nr->settings, nr->graph, v);
      const auto n = static_cast<uint64_t>(std::floor(mb * kMiBytes / static_cast<double>(payload)));
      const uint64_t tasks = tor[v] && live[v] == 0 ? 0  // an idle rack's ToR
                             : releases ? std::min(n, tor[v] ? live[v] : busy_hosts * per_host)
                                        : n;
      uint64_t values = ceil_div(tasks * payload, kPageBytes) * kPageBytes;
      if (ring_ina) {  // its jobs' slots (a region need not start on a page: one page more)
        const uint64_t pages = ring_slots[v] ? ceil_div(std::min(n, ring_slots[v]) * payload, kPageBytes) + 1 : 0;
        values = std::min(values, pages * kPageBytes);
      }
      switch_bytes += n * regs + values;
    }
  } else if (nr) {
    switch_bytes = 0;
  }
  if (nr && ps_family) ps_bytes = ps_hosts(*nr, wire);
  Estimate e;
  e.parts = {
      {"switch aggregators", "switch.memory_mb x INA switches", switch_bytes + gather_slots},
      {"PS reminder deadlines", "workers x topology.link_gbps", ps_bytes.ps},
      {"worker transport records", "workers x workers x transport.init_window_kb, workload.gradient_mb", ps_bytes.transports},
      {"packet pool", "workload.workers x transport.init_window_kb, topology.queue_kb",
       ceil_div(in_flight, kPoolSlab) * kPoolSlab * stride},
      {"links, nodes and events", "topology", links * kLinkBytes + g.num_nodes() * kNodeBytes + kHeapBytes},
      {"ring shard buffers", "workers (a few records per shard held, whatever its size)",
       ring_bytes.values},
      {"ring transfer records", "workers x shard / switch.payload_bytes", ring_bytes.records},
  };
  std::erase_if(e.parts, [](const MemoryPart& p) { return p.bytes == 0; });
  std::stable_sort(e.parts.begin(), e.parts.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return e;
}

// A sparse run (experiment/sparse.hpp): its workload's parts and packet
// pool (estimate_sparse.hpp) and the star's links and nodes.
static Estimate estimate_sparse_run(const Settings& s, const std::string& scheme) {
  Estimate e;
  try {
    e.parts = sparse_parts(s, scheme);
  } catch (const std::exception&) {
    // An unknown model or a bad trace: the run reports it itself.
  }
  const uint64_t hosts = static_cast<uint64_t>(std::max(1, s.workers_per_job)) + 3;  // the PS, the switch and its CPU
  e.parts.push_back({"links, nodes and events", "workload.workers_per_job", 2 * hosts * kLinkBytes + hosts * kNodeBytes + kHeapBytes});
  std::erase_if(e.parts, [](const MemoryPart& p) { return p.bytes == 0; });
  std::stable_sort(e.parts.begin(), e.parts.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return e;
}

Estimate estimate_run(const Settings& given, const std::string& scheme) {
  if (is_sparse(given)) return estimate_sparse_run(given, scheme);
  if (is_network(given)) return estimate_network_run(given, scheme);
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

  // A packet can wait for a retransmission timeout in a lossy run, and a
  // preempted task (DSA and its strawmen) for the PS's result: its op's
  // ring then holds up to four windows (see kRecBytes).
  const bool waits = lossy(s) || tracks;
  uint64_t recs = 0, rto = 0, tasks = 0, ps = 0, distinct = 0, live = 0;
  const bool stays = !spec || spec->isolated || spec->segments;
  for (uint64_t j = 1; j <= jobs; ++j) {
    const auto wpj = static_cast<uint64_t>(per_job[j - 1]);
    const char model = s.model == "mixed" ? (j % 2 ? 'A' : 'B') : s.model[0];
    const uint64_t pkts = ceil_div(partition_bytes(model, s.partition_mb), payload);  // per partition
    // Rings of the ops in flight: the op being sent and the one finishing,
    // each about twice the initial window (AIMD growth), or four windows when
    // packets wait (a ring grows while more than a quarter of it is open);
    // with loss every live op's.
    const uint64_t ring = std::bit_ceil(std::max<uint64_t>(std::min(pkts, (waits ? 4 : 2) * window), kMinRecs));
    recs += wpj * (lossy(s) ? live_ops : std::min<uint64_t>(live_ops, 2)) * ring * (kRecBytes * 8 + 1) / 8;
    // Deadlines of the packets sent within about one RTO: a few windows.
    rto += wpj * std::min(live_ops * pkts, 4 * window) * kDeadlineBytes;
    distinct += ops * pkts;  // tasks (job, PSN) over the run
    live += (waits ? kLiveWindowsWaiting : kLiveWindows) * window;
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
      {"worker transport records", "workload.jobs x workload.workers_per_job x transport.init_window_kb", recs + rto},
      // Values take a slot per task while it lives (dataplane/switch.hpp):
      // a window's span per job, or every aggregator written where they stay
      // taken. P4INC-AOI's shadow copy is a second set of values (its
      // registers are in register_bytes).
      {"switch aggregators", "switch.memory_mb, workload.partition_mb",
       aggs * register_bytes(spec, s) +
           ceil_div(std::min({aggs, distinct, stays ? aggs : live}) * payload, kPageBytes) * kPageBytes *
               (spec && spec->segments ? 2 : 1)},
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
