#pragma once
// The switch daemon's state, shared by its files (private to them):
//   switch_daemon.cpp      construction (shards, sockets, engines) and run()
//   switch_shard.cpp       switch threads and their command queue
//   switch_connections.cpp TCP control connections: accept, limits, lines, close
//   switch_jobs.cpp        control messages and the jobs' life (admission: schemes/admission.hpp)
//   switch_layout.cpp      a static ring / tree layout's job and its reconfiguration
//   switch_stats.cpp       the stats JSON
//   switch_limits.cpp      ControlLimits and ShareLimits from flags
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "runtime/control.hpp"
#include "runtime/ring_layout.hpp"
#include "runtime/switch_daemon.hpp"
#include "runtime/switch_shard.hpp"
#include "schemes/admission.hpp"
#include "schemes/registry.hpp"

namespace ina::rt {
namespace switchd {

constexpr NodeId kSwitchId = 0;
constexpr NodeId kCpuId = kMulticast - 1;  // the switch CPU (sparse hot-ina schemes), behind the internal port

struct Job;

// A TCP control connection.
struct Conn {
  LineChannel ch;
  Endpoint peer;
  std::string nonce;  // sent in "hello"; every proof on this connection covers it
  // Membership (after an accepted join).
  Job* job = nullptr;
  Role role = Role::Worker;
  unsigned rank = 0;
  NodeId id = kNoNode;
  Endpoint udp;
  bool done = false;
  // Connection limits (ControlLimits): the peer's address, when it opened,
  // when it is closed unless it is a member by then (0: a member, no
  // deadline), and since when its incomplete line has waited (0: none).
  uint32_t source = 0;
  Time opened = 0, deadline = 0, partial_since = 0;
};

// A job's connections; what it was admitted with is the admission object's
// (Impl::admission).
struct Job {
  uint16_t id = 0;
  std::vector<Conn*> workers;  // by rank
  Conn* ps = nullptr;
  unsigned done = 0;           // workers that said "done"
  std::vector<Conn*> members() const {
    std::vector<Conn*> v;
    for (Conn* c : workers)
      if (c) v.push_back(c);
    if (ps) v.push_back(ps);
    return v;
  }
};

// Sums the numbers of `x` into `into`, recursively by key (statistics of several shards).
void add_counts(nlohmann::json& into, const nlohmann::json& x);

}  // namespace switchd

struct SwitchDaemon::Impl {
  using Conn = switchd::Conn;
  using Job = switchd::Job;
  using Shard = switchd::Shard;

  // The sockets the caller bound (cfg.udp_fd, cfg.tcp_fd), owned from the
  // first step: a failure anywhere in the constructor closes them.
  DataAndControl handed;
  SwitchDaemonConfig cfg;
  const schemes::Scheme& scheme;
  // The shards; shard 0's loop also runs the control plane. Why there and not
  // on a thread of its own: with one thread the switch is exactly the
  // single-threaded daemon (no hand-over at all), and control messages
  // (joins, done, stats) are rare next to datagrams, so the shard that
  // carries them loses little; a control thread would take a core of its own
  // on machines that have few.
  std::unique_ptr<dp::SwitchCpu> cpu;  // sparse hot-ina schemes (one thread only); outlives the engine it is attached to
  std::vector<std::unique_ptr<Shard>> shards;
  // Shard 0's: with one thread, the program (static layouts and the switch
  // CPU are refused with more); always, the control plane's loop.
  dp::SwitchProgram* program = nullptr;
  UdpEngine* engine = nullptr;
  UniqueFd listener, stop_fd;
  Endpoint endpoint;
  std::atomic<bool> stopping{false};
  std::unordered_map<int, std::unique_ptr<Conn>> conns;
  // Connections closed with a reason (an error line), half-closed until the
  // peer has read it: see linger().
  struct Lingering {
    UniqueFd fd;
    uint32_t source = 0;
    Time until = 0;
    size_t discarded = 0;
  };
  std::unordered_map<int, Lingering> lingering;
  std::map<uint16_t, std::unique_ptr<Job>> jobs;
  // Regions, node ids, window caps, who may join, hot-set agreement.
  std::optional<schemes::Admission> admission;
  uint64_t jobs_finished = 0, jobs_aborted = 0, joins_rejected = 0, freed_at_teardown = 0, auth_failures = 0;
  // Connection limits (ControlLimits) and what they refused or closed.
  ControlLimits limits;
  std::unordered_map<uint32_t, unsigned> per_source;  // open connections by peer IPv4 address
  bool accepting = true;                               // the listener is watched
  UniqueFd sweep_fd;                                   // timerfd: deadlines, and accepting again after a failure
  struct LimitCounts {
    uint64_t refused_per_source = 0, evicted = 0, timed_out = 0, oversized = 0, accept_pauses = 0, accept_failures = 0;
  } limit_counts, limit_logged;
  std::string last_accept_error;
  Time next_limit_log = 0;
  uint64_t cpu_copies_freed_at_teardown = 0;
  // A static layout's job (ring_layout.hpp) and its membership epochs.
  std::optional<RingLayout> layout;
  uint8_t epoch = 0;
  uint64_t completed_at_epoch = 0, freed_at_reconfigure = 0;

  // Jobs share one pool of aggregators (ATP, DSA): the ShareLimits apply.
  bool shared_pool() const { return schemes::shares_pool(scheme); }

  Shard& shard_of(uint16_t job) { return *shards[job % shards.size()]; }
  const Shard& shard_of(uint16_t job) const { return *shards[job % shards.size()]; }
  // The job has started (its members have their ids).
  bool live(const Job& j) const {
    const auto* s = admission->job(j.id);
    return s && s->live;
  }

  explicit Impl(const SwitchDaemonConfig& c);
  void run();

  // One line on stderr. The text may quote peers (field names, addresses,
  // reasons): every byte outside printable ASCII is written as \xNN, so no
  // peer can forge a log line or send the operator's terminal escapes.
  template <typename... A>
  void log(fmt::format_string<A...> f, A&&... a) {
    if (!cfg.log) return;
    const std::string line = printable(fmt::format(f, std::forward<A>(a)...), 4096, /*keep_backslash=*/true);
    std::fprintf(stderr, "ina switch %s: %s\n", endpoint.str().c_str(), line.c_str());
  }

  // switch_layout.cpp
  void check_static_layout(const RingLayout& L) const;
  void static_job(RingLayout L);
  void tree_job(RingLayout L);
  void reconfigure(Conn& c, const ReconfigureRequest& r);

  // switch_connections.cpp
  void refresh_role(Conn& c, Time now);
  bool evict_oldest_visitor(const uint32_t* source);
  void close_visitor(Conn& c, const std::string& why);
  void pause_accept();
  void resume_accept();
  void accept_all();
  void sweep();
  void log_limits(Time now);
  void on_conn(int fd, uint32_t ev);
  void flush(Conn& c);
  void send(Conn& c, const nlohmann::json& m);
  void reject(Conn& c, const std::string& why);
  void drop(Conn& c, const std::string& how, bool told = false);
  void linger(Conn& c);
  void on_lingering(int fd);
  void end_linger(int fd);
  bool end_oldest_linger(const uint32_t* source);
  size_t open_connections() const { return conns.size() + lingering.size(); }
  static std::string describe(const Conn& c);

  // switch_jobs.cpp
  void handle(Conn& c, const nlohmann::json& m);
  void join(Conn& c, const JoinRequest& r);
  void hot_set(Conn& c, const HotSetRequest& r);
  void leave_pending(Job& j, Conn& c);
  void go_live(Job& j, const schemes::Admission::Grant& g);
  void teardown(Job& j);
  void finish_job(Job& j);
  void abort_job(Job& j, const std::string& why, Conn* cause);

  // switch_stats.cpp
  nlohmann::json public_stats() const;
  size_t aggregators() const;
  nlohmann::json job_stats(uint16_t id) const;
  nlohmann::json shard_stats(Shard& sh) const;
  nlohmann::json stats() const;
};

}  // namespace ina::rt
