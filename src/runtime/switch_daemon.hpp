#pragma once
// `ina switch`: a software switch. Hosts the switch program of one scheme of
// the registry (schemes/registry.hpp: switchml, atp, dsa, zebra, ps-lite) in a Router UdpEngine
// and runs the control plane (control.hpp) that admits jobs, so one process
// serves several jobs at once. A Rina ToR instead serves one ring job of a
// static layout (SwitchDaemonConfig::layout). Under the isolated policy the aggregator
// memory is split into `isolated_regions` equal regions, one per live job.
// A sparse hot-ina scheme (Zebra) also hosts the switch CPU, attached to the
// program through the engine's internal port, and installs each job's
// hot-set table once all its workers have sent the same one (control.hpp).
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
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataplane/switch.hpp"
#include "host/profile.hpp"
#include "runtime/auth.hpp"
#include "runtime/udp_engine.hpp"

namespace ina::schemes {
struct Scheme;
}

namespace ina::rt {

inline constexpr unsigned kMaxSwitchThreads = 64;

struct SwitchDaemonConfig {
  Endpoint listen = Endpoint::parse("127.0.0.1:7700");  // UDP data and TCP control, same port (0: ephemeral)
  std::string scheme = "dsa";     // a runtime scheme of the registry, or an alias (e.g. "preemptive")
  dp::SwitchConfig program;       // memory, payload, seed
  unsigned isolated_regions = 4;  // isolated policy: at most this many live jobs
  FaultConfig faults;             // applied to everything the switch sends
  uint64_t ecn_backlog_bytes = 512 << 10;  // mark CE on gradients above this receive backlog (0: never)
  bool offload = true;            // UDP segmentation offload (EngineConfig::offload)
  bool log = true;                // one line per job event on stderr
  // The switch key (auth.hpp): a join for job J must prove job_key(key, J);
  // statistics of all jobs need the key itself. Required.
  Key key{};
  bool has_key = false;
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
  Time cpu_rto = host::kRuntimeProfile.min_rto;
  // Switch threads (shards; see above), 1..kMaxSwitchThreads. With T > 1 each
  // needs at least 16 aggregators of memory_bytes / T, and `udp_fd` must have
  // SO_REUSEPORT set (the other shards' sockets join its port).
  unsigned threads = 1;
  // Sockets already bound by the caller (both or neither; `listen` is then
  // ignored): UDP data and TCP control on one port.
  int udp_fd = -1, tcp_fd = -1;
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
