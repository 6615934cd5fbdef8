#pragma once
// `ina switch`: a software switch. Hosts the switch program of one scheme of
// the registry (schemes/registry.hpp: switchml, atp, dsa, zebra, ps-lite) in a Router UdpEngine
// and runs the control plane (control.hpp) that admits jobs
// (schemes/admission.hpp), so one process serves several jobs at once. A
// Rina ToR instead serves one ring job of a static layout
// (SwitchDaemonConfig::layout). Under the isolated policy the aggregator
// memory is split into `isolated_regions` equal regions, one per live job.
// A sparse hot-ina scheme (Zebra) also hosts the switch CPU, attached to the
// program through the engine's internal port, and installs each job's
// hot-set table once all its workers have sent the same one (control.hpp).
// The implementation: one file per concept (switch_impl.hpp lists them).
//
// Switch threads (SwitchDaemonConfig::threads = T): T shards, each a thread
// with its own UdpEngine, UDP socket and switch program built by the
// scheme's factory with memory_bytes / T; job J is served by shard J mod T
// and nothing is shared between shards on the data path. The shards' sockets
// form one SO_REUSEPORT group on the switch's port, and a classic BPF program
// (net.hpp: attach_reuseport_steering) sends each datagram to the shard of
// its header's job (one too short to hold a job field goes to shard 0, whose
// engine counts it malformed). The control plane stays on shard 0's thread
// and acts on another shard through that shard's command queue (run there,
// waited for). Consequences: DSA preempts only among the jobs of one shard;
// the isolated policy has isolated_regions regions per shard; static-layout
// jobs and schemes with a switch CPU are refused with T > 1.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataplane/switch.hpp"
#include "host/profile.hpp"
#include "runtime/auth.hpp"
#include "runtime/udp_engine.hpp"
#include "schemes/registry.hpp"

namespace ina::schemes {
struct Scheme;
}

namespace ina::rt {

inline constexpr unsigned kMaxSwitchThreads = 64;

// What the control plane lets peers hold (docs/runtime.md, "Security"). A
// connection is a job's member once its join is accepted; until then (and
// after its job ended) it is a visitor, which is closed `visitor_timeout`
// after it opened (or its job ended): a join, a stats query or a
// reconfiguration takes one round trip. A member's incomplete line also gets
// `visitor_timeout` to complete.
//  - At most `max_connections` in all: at the limit a newcomer replaces the
//    oldest visitor; with none (every connection a member) the switch stops
//    accepting until one closes (connections wait in the listen backlog).
//  - At most `max_per_source` from one IP address: beyond it a newcomer
//    replaces that address's oldest visitor, or is refused.
//  - A visitor's line at most `max_visitor_line` bytes, a member's
//    LineChannel::kMaxLine (a hot_set chunk); a longer one closes the connection.
//  - A visitor's unsent answers at most `max_visitor_output` bytes (and one
//    message), a member's LineChannel::kMaxPendingOutput.
// Everything refused or closed here is counted (stats "control").
struct ControlLimits {
  static constexpr unsigned kDefaultMaxConnections = 4096;
  // The switch's own descriptors: 64 (listeners, files, logs) and 4 per
  // switch thread (its epoll, eventfd, UDP socket and timerfd).
  static constexpr unsigned kDescriptorReserve = 64;
  static constexpr unsigned kDescriptorsPerThread = 4;
  unsigned max_connections = 0;  // 0: kDefaultMaxConnections, lowered to RLIMIT_NOFILE less the reserve
  unsigned max_per_source = 256;
  Time visitor_timeout = 5 * kSec;
  size_t max_visitor_line = 8 << 10;
  size_t max_visitor_output = 64 << 10;
  // The limits in force (max_connections resolved); throws RuntimeError naming a bad one.
  ControlLimits resolved(unsigned threads = 1) const;
};

// Sharing the aggregator pool between jobs (the shared-pool schemes, ATP and
// DSA; docs/runtime.md, "Security"): what a job is admitted with, so that a
// tenant never holds more than its share whatever its packets say. The
// switch program applies them (dp::PoolShare: job_quota / fair_quota /
// reclaim_after, dp::SwitchJob's priority range). Protective by default,
// unlike the simulator's switch, which follows the papers.
struct ShareLimits {
  static constexpr uint32_t kFairQuota = UINT32_MAX;
  struct Range {
    uint32_t lo = 0, hi = INT32_MAX;
  };
  // Aggregators a job may hold at once: kFairQuota (its switch thread's
  // aggregators divided by the live jobs that thread serves, recomputed as
  // jobs start and end), a number, or 0 (no limit: the papers' pool).
  uint32_t job_quota = kFairQuota;
  // An aggregator whose task has not completed this long after reserving it
  // is reclaimed by the next packet addressing it for another task (its
  // partial goes to its PS). 0: never. Well above the runtime's RTOs (20 ms floor).
  Time reclaim_after = 1 * kSec;
  // The priority range a job's packets are clamped into (DSA's compare):
  // `job_priority` for the jobs it names, else `priority`. The default,
  // 0..INT32_MAX, admits every priority a worker or communicator can be given.
  Range priority;
  std::map<uint16_t, Range> job_priority;
  // From the `ina switch` flags: --job-quota ("fair", "none" or a count),
  // --reclaim-ms, --priority-range LO..HI, --job-priority J=LO..HI (each);
  // throws RuntimeError naming the flag and value.
  static ShareLimits from_flags(const std::string& quota, double reclaim_ms, const std::string& range,
                                const std::vector<std::string>& job_ranges);
  Range range_of(uint16_t job) const {
    auto it = job_priority.find(job);
    return it == job_priority.end() ? priority : it->second;
  }
};

struct SwitchDaemonConfig {
  Endpoint listen = Endpoint::parse("127.0.0.1:7700");  // UDP data and TCP control, same port (0: ephemeral)
  std::string scheme = std::string(schemes::kDefaultRuntimeScheme);  // a runtime scheme of the registry, or an alias
  dp::SwitchConfig program;       // memory, payload, seed
  unsigned isolated_regions = 4;  // isolated policy: at most this many live jobs
  FaultConfig faults;             // applied to everything the switch sends
  uint64_t ecn_backlog_bytes = 512 << 10;  // mark CE on every packet above this receive backlog (0: never; proto/ecn.hpp)
  // A ToR of a static layout: the rates of its ports to its rack's workers
  // and of its uplink (every other destination), whose emulated egress
  // queues mark CE above port_ecn_bytes (UdpEngine::set_egress_port), for
  // links that mark nothing themselves. 0: no such marking.
  double port_gbps = 0, uplink_gbps = 0;
  uint64_t port_ecn_bytes = 100 << 10;
  bool offload = true;            // UDP segmentation offload (EngineConfig::offload)
  bool log = true;                // one line per job event on stderr
  // The switch key (auth.hpp): a join for job J must prove job_key(key, J);
  // statistics of all jobs need the key itself. Required.
  Key key{};
  bool has_key = false;
  // Datagram authentication (datagram_tag.hpp): every datagram of job J, both
  // ways, carries a tag keyed by datagram_key(job_key(key, J)); one without
  // its correct tag is counted (engine.rx_bad_tag) and dropped. Announced to
  // the members in "ready", who then tag theirs. Off by default. With a
  // static ring layout the layout decides: its "datagram_salt" turns tags on
  // for its job (key derived from job_key(key, J) and that salt), and
  // datagram_auth then only requires one (a layout without it is refused).
  bool datagram_auth = false;
  // A ring job's static layout (runtime/ring_layout.hpp): this switch is the
  // ToR of rack `rack`. Its job is registered at start with the layout's node
  // ids (this switch: N + 1 + rack), its address book holds every worker, and
  // joins are refused; statistics work as always. Required for a ring scheme
  // with a switch program (Rina), refused for any other.
  std::string layout;
  unsigned rack = 0;
  // Sparse hot-ina schemes (Zebra): the register arrays the hot slots are
  // spread over (m, heat-based placement) and the switch CPU's result
  // retransmission timeout floor (Zebra_s, §III-F): the runtime's CPU adapts
  // its timeout to the measured time from a copy to every worker's ack (the
  // floor: the runtime profile's RTO floor, 20 ms), and backs off. A fixed
  // 2 ms made it resend each result ~10 times on a loaded host (8.7 M resends
  // for 0.88 M copies, ina train --model fortunes at 4 workers on 2 cores).
  uint32_t kv_registers = 16;
  // Sparse schemes: the streams between the workers and the PS as PS-lite
  // runs them over TCP (the Zebra paper's §IV): 118 pairs per packet (a
  // 1500-byte IP packet with the datagram tag) and a cumulative
  // acknowledgement per two (host::SparseConfig::ps_pairs, ack_every).
  uint16_t kv_ps_pairs = 118;
  uint16_t kv_ack_every = 2;
  Time cpu_rto = host::kRuntimeProfile.min_rto;
  // Switch threads (shards; see above), 1..kMaxSwitchThreads. With T > 1 each
  // needs at least 16 aggregators of memory_bytes / T, and `udp_fd` must have
  // SO_REUSEPORT set (the other shards' sockets join its port).
  unsigned threads = 1;
  // Sockets already bound by the caller (both or neither; `listen` is then
  // ignored): UDP data and TCP control on one port.
  int udp_fd = -1, tcp_fd = -1;
  ControlLimits control;
  ShareLimits share;  // shared-pool schemes (ATP, DSA)
};

class SwitchDaemon {
 public:
  // Binds both sockets; throws RuntimeError (e.g. "cannot bind UDP socket to
  // 127.0.0.1:7700: Address already in use").
  explicit SwitchDaemon(const SwitchDaemonConfig& cfg);
  ~SwitchDaemon();

  const Endpoint& endpoint() const;
  // Shard 0's engine: the loop of the control plane (and of the data path with one thread).
  UdpEngine& engine();
  unsigned threads() const;
  // Serves until request_stop(): shard 0 and the control plane on the calling
  // thread, every other shard on a thread of its own (joined before it returns).
  void run();
  // Thread-safe: CPU time each shard's thread has used so far (seconds), by shard.
  std::vector<double> cpu_seconds() const;
  // Thread-safe and async-signal-safe.
  void request_stop();
  // Statistics as answered to {"op":"stats"}; call from the loop's thread or after run().
  nlohmann::json stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

nlohmann::json to_json(const dp::SwitchStats& s);

// Why a switch of `scheme` cannot serve with more than one thread (`layout`:
// it would serve a static layout job); empty if it can.
std::string why_not_threaded(const schemes::Scheme& scheme, bool layout);

}  // namespace ina::rt
