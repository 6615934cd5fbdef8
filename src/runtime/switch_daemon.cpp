#include "runtime/switch_daemon.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/control.hpp"
#include "runtime/ring_layout.hpp"
#include "schemes/registry.hpp"
#include "wire/kv.hpp"

namespace ina::rt {

nlohmann::json to_json(const dp::SwitchStats& s) {
  return {{"data_in", s.data_in}, {"aggregated", s.aggregated}, {"completed", s.completed}, {"to_ps", s.to_ps},
          {"collisions", s.collisions}, {"preempt_won", s.preempt_won}, {"preempt_lost", s.preempt_lost},
          {"downgrades", s.downgrades}, {"resubmits", s.resubmits}, {"duplicates", s.duplicates},
          {"stale", s.stale}, {"resend_served", s.resend_served}, {"fetches", s.fetches},
          {"fetch_hits", s.fetch_hits}, {"acks_multicast", s.acks_multicast},
          {"released_by_ack", s.released_by_ack}, {"overflow", s.overflow}, {"malformed", s.malformed},
          {"forwarded", s.forwarded}, {"foreign_data", s.foreign_data}, {"foreign_ack", s.foreign_ack},
          {"foreign_fetch", s.foreign_fetch}, {"foreign_forward", s.foreign_forward},
          {"kv_in", s.kv_in}, {"kv_pairs_in", s.kv_pairs_in}, {"kv_aggregated", s.kv_aggregated},
          {"kv_to_ps", s.kv_to_ps}, {"recirculations", s.recirculations}, {"sweep_passes", s.sweep_passes},
          {"kv_results", s.kv_results}, {"kv_rejects", s.kv_rejects}, {"tree_results", s.tree_results},
          {"pinned_hits", s.pinned_hits}, {"quota_refused", s.quota_refused}, {"reclaimed", s.reclaimed},
          {"priority_clamped", s.priority_clamped}};
}

namespace {
// "LO..HI" (each 0..2^32-1, LO <= HI); `what` (the flag and its value) names it in errors.
ShareLimits::Range parse_range(const std::string& what, const std::string& v) {
  const auto dots = v.find("..");
  auto num = [&](const std::string& t) -> uint32_t {
    if (t.empty() || t.size() > 10 || t.find_first_not_of("0123456789") != std::string::npos || std::stoull(t) > UINT32_MAX)
      throw RuntimeError(fmt::format("{}: give LO..HI, each 0..{}", what, UINT32_MAX));
    return static_cast<uint32_t>(std::stoull(t));
  };
  if (dots == std::string::npos) throw RuntimeError(fmt::format("{}: give LO..HI, each 0..{}", what, UINT32_MAX));
  ShareLimits::Range r{num(v.substr(0, dots)), num(v.substr(dots + 2))};
  if (r.lo > r.hi) throw RuntimeError(fmt::format("{}: LO is above HI", what));
  return r;
}
}  // namespace

ShareLimits ShareLimits::from_flags(const std::string& quota, double reclaim_ms, const std::string& range,
                                    const std::vector<std::string>& job_ranges) {
  ShareLimits s;
  if (quota == "fair") {
    s.job_quota = kFairQuota;
  } else if (quota == "none") {
    s.job_quota = 0;
  } else {
    if (quota.empty() || quota.size() > 9 || quota.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(quota) == 0)
      throw RuntimeError(fmt::format("--job-quota {}: give fair, none, or a number of aggregators (1..999999999)", quota));
    s.job_quota = static_cast<uint32_t>(std::stoul(quota));
  }
  if (!(reclaim_ms >= 0) || reclaim_ms > 3.6e6)
    throw RuntimeError(fmt::format("--reclaim-ms {}: give 0 (never) .. 3600000", reclaim_ms));
  s.reclaim_after = from_ms(reclaim_ms);
  if (!range.empty()) s.priority = parse_range("--priority-range " + range, range);
  for (const std::string& jr : job_ranges) {
    const auto eq = jr.find('=');
    const std::string id = jr.substr(0, eq);
    if (eq == std::string::npos || id.empty() || id.size() > 5 || id.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(id) == 0 || std::stoul(id) > UINT16_MAX)
      throw RuntimeError(fmt::format("--job-priority {}: give JOB=LO..HI with JOB 1..{}", jr, UINT16_MAX));
    const auto job = static_cast<uint16_t>(std::stoul(id));
    if (s.job_priority.count(job)) throw RuntimeError(fmt::format("--job-priority {}: job {} is given twice", jr, job));
    s.job_priority[job] = parse_range("--job-priority " + jr, jr.substr(eq + 1));
  }
  return s;
}

ControlLimits ControlLimits::resolved(unsigned threads) const {
  ControlLimits r = *this;
  if (r.max_connections == 0) {
    r.max_connections = kDefaultMaxConnections;
    const rlim_t reserve = kDescriptorReserve + rlim_t{kDescriptorsPerThread} * std::max(1u, threads);
    rlimit nofile{};
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
      r.max_connections = static_cast<unsigned>(
          std::clamp<rlim_t>(nofile.rlim_cur > reserve + 16 ? nofile.rlim_cur - reserve : 16, 16, kDefaultMaxConnections));
  }
  if (r.max_per_source == 0) throw RuntimeError("switch: --max-connections-per-source must be >= 1");
  if (r.visitor_timeout <= 0) throw RuntimeError("switch: --control-timeout-ms must be > 0");
  if (r.max_visitor_line < 256 || r.max_visitor_line > LineChannel::kMaxLine)
    throw RuntimeError(fmt::format("switch: --max-control-line {}: give {}..{} bytes (a join is a few hundred)",
                                   r.max_visitor_line, 256, LineChannel::kMaxLine));
  if (r.max_visitor_output < 4096)
    throw RuntimeError(fmt::format("switch: max_visitor_output {}: at least 4096 bytes", r.max_visitor_output));
  return r;
}

std::string why_not_threaded(const schemes::Scheme& scheme, bool layout) {
  if (layout || is_ring_scheme(scheme))
    return fmt::format("scheme {} serves the one job of a static layout (--layout), which cannot be split over switch "
                       "threads by job", scheme.name);
  if (scheme.has_switch_cpu())
    return fmt::format("scheme {} has a switch CPU beside the pipeline (it keeps and retransmits the results of every "
                       "job through one internal port), which is not split over switch threads", scheme.name);
  return {};
}

namespace {

constexpr NodeId kSwitchId = 0;
constexpr NodeId kCpuId = kMulticast - 1;  // the switch CPU (sparse hot-ina schemes), behind the internal port

const schemes::Scheme& find_scheme(const std::string& name) {
  try {
    return schemes::find(name, schemes::Engine::Runtime);
  } catch (const schemes::UnknownScheme& e) {
    throw RuntimeError(e.what());
  }
}

struct Job;

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

struct Job {
  uint16_t id = 0;
  unsigned nworkers = 0;
  size_t retain_ops = 0;
  bool live = false;
  std::vector<Conn*> workers;  // by rank
  Conn* ps = nullptr;
  unsigned joined = 0, done = 0;
  int region = -1;
  Time since = 0;
  // Sparse hot-ina: the hot-set lists being received, per rank.
  struct HotList {
    uint32_t from = 0;
    uint64_t total = 0;
    std::vector<uint64_t> keys;
    bool complete() const { return keys.size() == total; }
  };
  std::vector<std::optional<HotList>> hot;
  uint32_t hot_version = 0;
  std::vector<Conn*> members() const {
    std::vector<Conn*> v;
    for (Conn* c : workers)
      if (c) v.push_back(c);
    if (ps) v.push_back(ps);
    return v;
  }
};

// One switch thread: its own switch program (1/T of the aggregator memory),
// its own engine and UDP socket (one of the reuseport group on the switch's
// port), and the jobs J with J mod T == index. Nothing here is shared with
// another shard. The control plane (on shard 0's thread) reaches a shard
// only through on_shard(); `region_used` is the control plane's own.
struct Shard {
  unsigned index = 0;
  std::unique_ptr<dp::SwitchProgram> program;
  std::unique_ptr<UdpEngine> engine;  // after the program: destroyed (and flushed) first
  std::vector<bool> region_used;      // isolated policy (control plane only)
  // Shards other than 0 run on a thread of their own (SwitchDaemon::run);
  // commands reach them through this queue and eventfd.
  UniqueFd wake;
  std::mutex mu;
  std::vector<std::function<void()>> commands;  // under mu
  bool gone = false;                            // under mu: the thread left its loop
  std::atomic<bool> stopping{false};
  std::thread thread;
  std::string error;  // why the thread stopped, if it failed (read after join)
  // CPU time of the thread serving the shard: its clock while it runs, the final reading after.
  std::atomic<bool> cpu_live{false};
  std::atomic<clockid_t> cpu_clock{};
  std::atomic<double> cpu_final{0};

  void start_cpu_clock() {
    clockid_t c;
    if (pthread_getcpuclockid(pthread_self(), &c) != 0) return;
    cpu_clock = c;
    cpu_live = true;
  }
  void stop_cpu_clock() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    cpu_final = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    cpu_live = false;
  }
  double cpu_seconds() const {
    if (cpu_live) {
      timespec ts{};
      if (clock_gettime(cpu_clock.load(), &ts) == 0 && cpu_live)
        return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    }
    return cpu_final;
  }

  // The commands queued so far, on the shard's thread.
  void run_commands() {
    uint64_t v;
    [[maybe_unused]] auto r = ::read(wake.get(), &v, sizeof v);
    std::vector<std::function<void()>> queued;
    {
      std::lock_guard<std::mutex> l(mu);
      queued.swap(commands);
    }
    for (auto& f : queued) f();
  }

  // The shard's thread: its loop until stopped. A failure is kept in `error`
  // and reported through `failed` (the control loop's stop descriptor).
  void serve(int failed) {
    start_cpu_clock();
    try {
      while (!stopping) engine->poll(kSec);
    } catch (const std::exception& e) {
      error = e.what();
      const uint64_t one = 1;
      [[maybe_unused]] auto r = ::write(failed, &one, sizeof one);
    }
    {
      std::lock_guard<std::mutex> l(mu);
      gone = true;
    }
    run_commands();  // any the control plane queued before it saw the failure
    stop_cpu_clock();
  }
};

// Runs f on shard s's thread and returns its result (or rethrows its
// exception): the control plane's way to act on another shard's program and
// engine. Inline when the shard has no thread of its own (shard 0, whose loop
// is the control plane's, or before / after SwitchDaemon::run).
template <typename F>
auto on_shard(Shard& s, F&& f) -> std::invoke_result_t<F&> {
  if (!s.thread.joinable()) return f();
  std::packaged_task<std::invoke_result_t<F&>()> task(std::ref(f));
  auto done = task.get_future();
  {
    std::lock_guard<std::mutex> l(s.mu);
    if (s.gone) throw RuntimeError(fmt::format("switch thread {} has stopped: {}", s.index, s.error));
    s.commands.emplace_back([&task] { task(); });
  }
  const uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(s.wake.get(), &one, sizeof one);
  return done.get();
}

// Sums the numbers of `x` into `into`, recursively by key (statistics of several shards).
void add_counts(nlohmann::json& into, const nlohmann::json& x) {
  if (into.is_null()) {
    into = x;
    return;
  }
  if (into.is_object() && x.is_object()) {
    for (const auto& [k, v] : x.items()) add_counts(into[k], v);
  } else if (into.is_number_unsigned() && x.is_number_unsigned()) {
    into = into.get<uint64_t>() + x.get<uint64_t>();
  } else if (into.is_number() && x.is_number()) {
    into = into.get<double>() + x.get<double>();
  }
}

// Where the job field sits in the INA header (wire/packet.hpp: version u8,
// type u8, flags u16, job u16, ... in network order): what the reuseport
// steering program reads (test: Threads.TheJobFieldIsWhereTheSteeringReadsIt).
constexpr uint32_t kJobOffset = 4;
// With T > 1 threads, each shard needs at least this many aggregators.
constexpr size_t kMinShardAggregators = 16;
constexpr unsigned kMaxThreads = kMaxSwitchThreads;

}  // namespace

struct SwitchDaemon::Impl {
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
  std::map<uint16_t, std::unique_ptr<Job>> jobs;
  std::vector<bool> id_used;
  NodeId next_id = 1;
  uint32_t region_size = 0;  // isolated policy: per region, every shard alike
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

  // Jobs share one pool of aggregators (ATP, DSA): the ShareLimits apply.
  bool shared_pool() const { return scheme.policy == "shared-fcfs" || scheme.policy == "preemptive"; }

  Shard& shard_of(uint16_t job) { return *shards[job % shards.size()]; }
  const Shard& shard_of(uint16_t job) const { return *shards[job % shards.size()]; }

  explicit Impl(const SwitchDaemonConfig& c) : cfg(c), scheme(find_scheme(c.scheme)), limits(c.control.resolved(c.threads)) {
    if (!cfg.has_key)
      throw RuntimeError("switch: no switch key: give one (ina switch --key-file FILE, or INA_SWITCH_KEY); "
                         "'ina key new FILE' creates one");
    if (!scheme.factory)
      throw RuntimeError(fmt::format("switch: scheme {} has no switch program (its workers talk to each other directly: "
                                     "run 'ina ring-worker' without a switch)", scheme.name));
    if (is_ring_scheme(scheme) && cfg.layout.empty())
      throw RuntimeError(fmt::format("switch: scheme {} serves a ring job of a static layout: give --layout FILE --rack R",
                                     scheme.name));
    if (!is_layout_scheme(scheme) && !cfg.layout.empty())
      throw RuntimeError(fmt::format("switch: --layout is for ring schemes and ATP over racks; {} jobs join through the "
                                     "control plane", scheme.name));
    const unsigned T = cfg.threads;
    if (T == 0 || T > kMaxThreads)
      throw RuntimeError(fmt::format("switch: --threads {}: give 1..{}", T, kMaxThreads));
    if (T > 1)
      if (const std::string why = why_not_threaded(scheme, !cfg.layout.empty()); !why.empty())
        throw RuntimeError(fmt::format("switch: --threads {}: {}: run it with --threads 1", T, why));
    if (scheme.isolated && cfg.isolated_regions == 0) throw RuntimeError("switch: isolated_regions must be >= 1");
    if (cfg.share.reclaim_after < 0) throw RuntimeError("switch: reclaim_after must be >= 0");
    for (const auto& [id, r] : cfg.share.job_priority)
      if (r.lo > r.hi) throw RuntimeError(fmt::format("switch: job {}'s priority range {}..{} is empty", id, r.lo, r.hi));
    if (cfg.share.priority.lo > cfg.share.priority.hi)
      throw RuntimeError(fmt::format("switch: the priority range {}..{} is empty", cfg.share.priority.lo, cfg.share.priority.hi));
    for (unsigned k = 0; k < T; ++k) {
      auto sh = std::make_unique<Shard>();
      sh->index = k;
      dp::SwitchConfig pc = cfg.program;
      pc.memory_bytes = cfg.program.memory_bytes / T;
      pc.seed = cfg.program.seed + k;
      if (shared_pool()) {  // the admission bounds of every job (ShareLimits)
        pc.fair_quota = cfg.share.job_quota == ShareLimits::kFairQuota;
        pc.job_quota = pc.fair_quota ? 0 : cfg.share.job_quota;
        pc.reclaim_after = cfg.share.reclaim_after;
      }
      sh->program = scheme.make_switch(pc);
      sh->program->set_id(kSwitchId);
      if (T > 1 && sh->program->aggregators() < kMinShardAggregators)
        throw RuntimeError(fmt::format("switch: --threads {} with --memory {}: each switch thread gets {} bytes, {} "
                                       "aggregators of {} values; a thread needs at least {}: give more memory or fewer "
                                       "threads", T, cfg.program.memory_bytes, pc.memory_bytes,
                                       sh->program->aggregators(), cfg.program.payload_values, kMinShardAggregators));
      // Isolated policy: each shard's memory in isolated_regions regions (so
      // up to isolated_regions live jobs per shard).
      if (scheme.isolated) {
        region_size = static_cast<uint32_t>(sh->program->aggregators() / cfg.isolated_regions) & ~1u;
        if (region_size < 2)
          throw RuntimeError(fmt::format("switch: {} aggregators{} cannot be split into {} isolated regions",
                                         sh->program->aggregators(), T > 1 ? " per switch thread" : "",
                                         cfg.isolated_regions));
        sh->region_used.assign(cfg.isolated_regions, false);
      }
      shards.push_back(std::move(sh));
    }
    program = shards[0]->program.get();
    // UDP data and TCP control on one port number: bound here, or handed over
    // already bound (`ina run` binds them first so the layout can name them).
    // With T > 1 threads the other shards' sockets join the UDP socket's
    // reuseport group on the same address, in shard order, and a steering
    // program sends each datagram to shard (job mod T).
    DataAndControl socks;
    if (cfg.udp_fd >= 0 || cfg.tcp_fd >= 0) {
      if (cfg.udp_fd < 0 || cfg.tcp_fd < 0) throw RuntimeError("switch: give both --udp-fd and --tcp-fd, or neither");
      socks.udp = UniqueFd(cfg.udp_fd);
      socks.tcp = UniqueFd(cfg.tcp_fd);
      if (local_endpoint(socks.udp.get()).port() != local_endpoint(socks.tcp.get()).port())
        throw RuntimeError(fmt::format("switch: --udp-fd {} and --tcp-fd {} are bound to different ports", cfg.udp_fd, cfg.tcp_fd));
      if (T > 1 && !has_reuseport(socks.udp.get()))
        throw RuntimeError(fmt::format("switch: --threads {} with --udp-fd {}: that socket was bound without "
                                       "SO_REUSEPORT, so the other switch threads cannot share its port: bind it with "
                                       "SO_REUSEPORT (before any other socket on its port) or run --threads 1",
                                       T, cfg.udp_fd));
    } else {
      socks = bind_data_and_control(cfg.listen, 8 << 20, T > 1);
    }
    endpoint = local_endpoint(socks.udp.get());
    listener = std::move(socks.tcp);
    std::vector<UniqueFd> udp;
    udp.push_back(std::move(socks.udp));
    for (unsigned k = 1; k < T; ++k) udp.push_back(bind_udp(endpoint, 8 << 20, true));
    if (T > 1) attach_reuseport_steering(udp[0].get(), kJobOffset, T);
    EngineConfig ec;
    ec.mode = EngineMode::Router;
    ec.payload_values = cfg.program.payload_values;
    if (scheme.kv()) ec.payload_values = std::max<uint16_t>(ec.payload_values, static_cast<uint16_t>(kv::words(cfg.program.kv_pairs)));
    ec.faults = cfg.faults;
    ec.ecn_backlog_bytes = cfg.ecn_backlog_bytes;
    ec.offload = cfg.offload;
    ec.socket_buffer_bytes = 8 << 20;
    // A static layout's job is tagged when its layout has a salt (ring_layout.hpp).
    std::optional<RingLayout> static_layout;
    if (!cfg.layout.empty()) {
      static_layout = RingLayout::read(cfg.layout, false);
      if (cfg.datagram_auth && !static_layout->datagram_salt)
        throw RuntimeError(fmt::format("switch: --datagram-auth with --layout {}: the layout has no field 'datagram_salt', "
                                       "so its job's datagrams are not tagged (ina run --datagram-auth writes one)",
                                       cfg.layout));
    }
    ec.datagram_tags = cfg.datagram_auth || (static_layout && static_layout->datagram_salt);
    for (unsigned k = 0; k < T; ++k) {
      ec.faults.seed = cfg.faults.seed + k;
      shards[k]->engine = std::make_unique<UdpEngine>(ec, std::move(udp[k]));
    }
    engine = shards[0]->engine.get();
    if (static_layout) static_job(std::move(*static_layout));
    for (auto& sh : shards) sh->engine->add_node(*sh->program);
    id_used.assign(kMulticast, false);
    id_used[kSwitchId] = true;
    if (scheme.has_switch_cpu()) {
      if (cfg.kv_registers == 0) throw RuntimeError("switch: kv_registers must be >= 1");
      cpu = std::make_unique<dp::SwitchCpu>(kSwitchId, cfg.cpu_rto, /*adaptive=*/true);
      cpu->set_id(kCpuId);
      id_used[kCpuId] = true;
      engine->attach(*cpu);
    }
    stop_fd = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    engine->watch(stop_fd.get(), EPOLLIN, [this](uint32_t) {
      uint64_t v;
      [[maybe_unused]] auto r = ::read(stop_fd.get(), &v, sizeof v);
      stopping = true;
    });
    engine->watch(listener.get(), EPOLLIN, [this](uint32_t) { accept_all(); });
    // The connections' deadlines are checked a few times per visitor_timeout.
    sweep_fd = UniqueFd(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!sweep_fd) throw RuntimeError(fmt::format("switch: timerfd_create: {}", errno_text(errno)));
    const Time tick = std::clamp<Time>(limits.visitor_timeout / 4, 10 * kMs, 250 * kMs);
    itimerspec its{};
    its.it_interval = {static_cast<time_t>(tick / kSec), static_cast<long>(tick % kSec / kNs)};
    its.it_value = its.it_interval;
    timerfd_settime(sweep_fd.get(), 0, &its, nullptr);
    engine->watch(sweep_fd.get(), EPOLLIN, [this](uint32_t) { sweep(); });
    for (unsigned k = 1; k < T; ++k) {
      Shard& sh = *shards[k];
      sh.wake = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
      sh.engine->watch(sh.wake.get(), EPOLLIN, [&sh](uint32_t) { sh.run_commands(); });
    }
    for (auto& sh : shards) sh->engine->start();
  }

  // The ring job of cfg.layout, registered for good (ring_layout.hpp).
  std::optional<RingLayout> layout;
  void static_job(RingLayout L) {
    if (schemes::lookup(L.scheme) != &scheme)
      throw RuntimeError(fmt::format("layout {}: field 'scheme' = \"{}\": this switch runs {}", cfg.layout, L.scheme, scheme.name));
    if (cfg.rack >= L.racks.size())
      throw RuntimeError(fmt::format("--rack {}: the layout {} has racks 0..{}", cfg.rack, cfg.layout, L.racks.size() - 1));
    if (!L.serving_tor(cfg.rack))
      throw RuntimeError(fmt::format("--rack {}: in the layout {} that rack's ToR does not aggregate (no INA, or one rank)",
                                     cfg.rack, cfg.layout));
    if (L.payload != cfg.program.payload_values)
      throw RuntimeError(fmt::format("layout {}: field 'payload' = {}: this switch carries {} values per packet", cfg.layout,
                                     L.payload, cfg.program.payload_values));
    if (L.region() > program->aggregators())
      throw RuntimeError(fmt::format("layout {}: field 'memory_bytes' = {}: more than this switch's {} bytes", cfg.layout,
                                     L.memory_bytes, cfg.program.memory_bytes));
    program->set_id(L.tor_id(cfg.rack));
    if (L.datagram_salt)  // both directions, the other ToRs' datagrams too: one key per run of the job
      for (auto& sh : shards) sh->engine->set_datagram_key(L.job, datagram_key(job_key(cfg.key, L.job), *L.datagram_salt));
    if (L.tree()) return tree_job(std::move(L));
    dp::SwitchJob sj;
    sj.job = L.job;
    for (size_t r = 0; r < L.n(); ++r) {
      sj.workers.push_back(RingLayout::worker_id(r));
      engine->set_route(RingLayout::worker_id(r), L.workers[r]);
    }
    sj.rack = L.racks[cfg.rack].ranks;
    sj.upstream = host::upstream_of(L.plan(1)[sj.rack.at(0)], sj.rack.at(0));  // who sends AllGather shards here
    sj.region_offset = 0;
    sj.region_size = L.region();
    try {
      program->add_job(sj);
    } catch (const std::invalid_argument& e) {
      throw RuntimeError(fmt::format("layout {}: {}", cfg.layout, e.what()));
    }
    for (size_t q = 0; q < L.racks.size(); ++q)
      if (q != cfg.rack && L.serving_tor(q)) {
        if (!L.racks[q].sw)
          throw RuntimeError(fmt::format("layout {}: racks[{}].switch is null: the ToR of rack {} needs the address of "
                                         "every other INA rack's ToR", cfg.layout, q, cfg.rack));
        program->add_peer(L.tor_id(q));
        // The agent's AllGather broadcast goes on to the next rack's ToR with the agent's id.
        engine->set_route(L.tor_id(q), *L.racks[q].sw);
        engine->add_relay(*L.racks[q].sw);
      }
    layout = std::move(L);
  }

  // ATP over racks (ring_layout.hpp): this ToR's level of the aggregation
  // tree, every other ToR a peer, routes toward each node's rack.
  void tree_job(RingLayout L) {
    const size_t q = cfg.rack;
    for (size_t o = 0; o < L.racks.size(); ++o)
      if (o != q && !L.racks[o].sw)
        throw RuntimeError(fmt::format("layout {}: racks[{}].switch is null: the ToR of rack {} needs the address of "
                                       "every other rack's ToR", cfg.layout, o, q));
    const RingLayout::TreeJob t = L.tree_job(q);
    dp::SwitchJob sj;
    sj.job = L.job;
    for (size_t r = 0; r < L.n(); ++r) sj.workers.push_back(RingLayout::worker_id(r));
    sj.ps = L.ps_id();
    sj.parent = t.parent;
    sj.agg_mask = t.agg_mask;
    sj.direct_mask = t.direct_mask;
    sj.children = t.children;
    try {
      program->add_job(sj);
      for (size_t o = 0; o < L.racks.size(); ++o)
        if (o != q) program->add_peer(L.tor_id(o));
    } catch (const std::invalid_argument& e) {
      throw RuntimeError(fmt::format("layout {}: {}", cfg.layout, e.what()));
    }
    for (size_t r = 0; r < L.n(); ++r) engine->set_route(RingLayout::worker_id(r), L.tree_route(q, RingLayout::worker_id(r)));
    engine->set_route(L.ps_id(), L.tree_route(q, L.ps_id()));
    for (size_t o = 0; o < L.racks.size(); ++o)
      if (o != q) {
        engine->set_route(L.tor_id(o), *L.racks[o].sw);
        engine->add_relay(*L.racks[o].sw);  // it forwards its rack's packets (and the PS's) with their senders' ids
      }
    layout = std::move(L);
  }

  // One line on stderr. The text may quote peers (field names, addresses,
  // reasons): every byte outside printable ASCII is written as \xNN, so no
  // peer can forge a log line or send the operator's terminal escapes.
  template <typename... A>
  void log(fmt::format_string<A...> f, A&&... a) {
    if (!cfg.log) return;
    const std::string line = printable(fmt::format(f, std::forward<A>(a)...), 4096, /*keep_backslash=*/true);
    std::fprintf(stderr, "ina switch %s: %s\n", endpoint.str().c_str(), line.c_str());
  }

  // A visitor (not a job's member) is closed at its deadline and held to the
  // visitor limits; a member has no deadline and the member limits. Applied
  // when a connection's membership may have changed (after its messages, and
  // at each sweep: a finished job's members become visitors).
  void refresh_role(Conn& c, Time now) {
    if (c.job && c.deadline != 0) {
      c.deadline = 0;
      c.ch.set_limits(LineChannel::kMaxLine, LineChannel::kMaxPendingOutput);
    } else if (!c.job && c.deadline == 0) {
      c.deadline = now + limits.visitor_timeout;
      c.ch.set_limits(limits.max_visitor_line, limits.max_visitor_output);
    }
  }

  // Closes the oldest visitor (of `source`, or of any address): room for a
  // newcomer at a limit. False if there is none.
  bool evict_oldest_visitor(const uint32_t* source) {
    Conn* oldest = nullptr;
    for (auto& [fd, c] : conns)
      if (!c->job && (!source || c->source == *source) && (!oldest || c->opened < oldest->opened)) oldest = c.get();
    if (!oldest) return false;
    ++limit_counts.evicted;
    close_visitor(*oldest, fmt::format("closed to make room for a newer connection (at most {} {}); join or ask "
                                       "within {:.1f} s of connecting", source ? limits.max_per_source : limits.max_connections,
                                       source ? "connections from one address" : "connections in all",
                                       to_ms(limits.visitor_timeout) / 1000));
    return true;
  }

  // Tells a connection closed by a limit why (one non-blocking attempt), then
  // drops it. Not logged one by one (a flood would flood the log): counted,
  // and summed up in the log at most once a second (log_limits).
  void close_visitor(Conn& c, const std::string& why) {
    try {
      c.ch.send({{"op", "error"}, {"message", why}});
    } catch (const std::exception&) {
    }
    drop(c, "was closed by a connection limit");
  }

  void pause_accept() {
    if (!accepting) return;
    engine->unwatch(listener.get());
    accepting = false;
    ++limit_counts.accept_pauses;
  }
  void resume_accept() {
    if (accepting || conns.size() >= limits.max_connections) return;
    engine->watch(listener.get(), EPOLLIN, [this](uint32_t) { accept_all(); });
    accepting = true;
  }

  void accept_all() {
    // Bounded per readiness event (level-triggered: the rest comes next).
    for (int taken = 0; taken < 1024; ++taken) {
      // At the limit a newcomer replaces the oldest visitor; with only members
      // left the listener is not watched (no busy loop on a full switch)
      // until one closes.
      const bool full = conns.size() >= limits.max_connections;
      if (full && std::none_of(conns.begin(), conns.end(), [](const auto& kv) { return kv.second->job == nullptr; }))
        return pause_accept();
      sockaddr_in from{};
      socklen_t len = sizeof from;
      const int fd = ::accept4(listener.get(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        const int err = errno;
        ++limit_counts.accept_failures;
        last_accept_error = errno_text(err);
        // Out of descriptors: the oldest visitor makes room, as at the
        // connection limit. Without one (or out of memory) the pending
        // connection stays in the backlog and the listener stays readable, so
        // it is not watched until a connection closes or the next sweep.
        if ((err == EMFILE || err == ENFILE) && evict_oldest_visitor(nullptr)) continue;
        return pause_accept();
      }
      UniqueFd guard(fd);
      const uint32_t src = from.sin_addr.s_addr;
      if (per_source[src] >= limits.max_per_source && !evict_oldest_visitor(&src)) {
        ++limit_counts.refused_per_source;
        const std::string why = fmt::format("{{\"op\":\"error\",\"message\":\"too many connections from {} (at most {} "
                                            "from one address)\"}}\n", Endpoint{from}.ip(), limits.max_per_source);
        [[maybe_unused]] auto r = ::send(fd, why.data(), why.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        continue;
      }
      if (full && conns.size() >= limits.max_connections) evict_oldest_visitor(nullptr);
      auto c = std::make_unique<Conn>();
      c->ch = LineChannel(std::move(guard));
      c->peer = Endpoint{from};
      c->source = src;
      c->opened = monotonic_now();
      refresh_role(*c, c->opened);
      c->nonce = to_hex(random_key());
      engine->watch(fd, EPOLLIN, [this, fd](uint32_t ev) { on_conn(fd, ev); });
      ++per_source[src];
      Conn& ref = *c;
      conns.emplace(fd, std::move(c));
      send(ref, {{"op", "hello"}, {"version", 2}, {"nonce", ref.nonce}});
    }
  }

  // Every tick: visitors past their deadline and members whose incomplete
  // line has waited as long are closed; the listener is watched again if it
  // was paused and there is room (after a failed accept: retried here).
  void sweep() {
    uint64_t v;
    [[maybe_unused]] auto r = ::read(sweep_fd.get(), &v, sizeof v);
    const Time now = monotonic_now();
    std::vector<int> late, slow;
    for (auto& [fd, c] : conns) {
      refresh_role(*c, now);
      if (c->deadline != 0 && now >= c->deadline) late.push_back(fd);
      else if (c->deadline == 0 && c->partial_since != 0 && now - c->partial_since >= limits.visitor_timeout) slow.push_back(fd);
    }
    for (int fd : late)
      if (auto it = conns.find(fd); it != conns.end()) {
        ++limit_counts.timed_out;
        close_visitor(*it->second, fmt::format("no job joined within {:.1f} s of connecting (or of the job's end)",
                                               to_ms(limits.visitor_timeout) / 1000));
      }
    for (int fd : slow)
      if (auto it = conns.find(fd); it != conns.end()) {
        ++limit_counts.timed_out;
        reject(*it->second, fmt::format("a control line incomplete for {:.1f} s", to_ms(limits.visitor_timeout) / 1000));
      }
    resume_accept();
    log_limits(now);
  }

  // What the limits refused or closed since the last such line, at most one a second.
  void log_limits(Time now) {
    if (now < next_limit_log) return;
    const LimitCounts& a = limit_counts;
    LimitCounts& b = limit_logged;
    if (a.refused_per_source == b.refused_per_source && a.evicted == b.evicted && a.timed_out == b.timed_out &&
        a.accept_failures == b.accept_failures && a.accept_pauses == b.accept_pauses)
      return;
    log("control connections: {} refused (at most {} from one address), {} closed for newer ones, {} timed out "
        "(visitor timeout {:.1f} s), {} accept pauses (at most {} connections){}; {} open",
        a.refused_per_source - b.refused_per_source, limits.max_per_source, a.evicted - b.evicted,
        a.timed_out - b.timed_out, to_ms(limits.visitor_timeout) / 1000, a.accept_pauses - b.accept_pauses,
        limits.max_connections,
        a.accept_failures == b.accept_failures
            ? std::string()
            : fmt::format(", {} failed accepts ({})", a.accept_failures - b.accept_failures, last_accept_error),
        conns.size());
    b = a;
    next_limit_log = now + kSec;
  }

  void on_conn(int fd, uint32_t ev) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    std::vector<nlohmann::json> msgs;
    bool open = true;
    try {
      if (ev & EPOLLOUT) flush(c);
      open = c.ch.receive(msgs);
      for (const auto& m : msgs) {
        if (!conns.count(fd)) return;  // closed while handling an earlier message
        handle(c, m);
      }
    } catch (const LineTooLong& e) {
      ++limit_counts.oversized;
      if (conns.count(fd)) reject(c, e.what());
      return;
    } catch (const std::exception& e) {
      // A bad message closes this connection with the reason; the daemon and
      // every other job go on.
      if (conns.count(fd)) reject(c, e.what());
      return;
    } catch (...) {
      if (conns.count(fd)) reject(c, "internal error handling a control message");
      return;
    }
    if (!open && conns.count(fd)) return drop(c, "disconnected");
    if (!conns.count(fd)) return;
    const Time now = monotonic_now();
    refresh_role(c, now);
    if (c.ch.partial_bytes() == 0) c.partial_since = 0;
    else if (c.partial_since == 0) c.partial_since = now;
  }

  void flush(Conn& c) {
    bool all = true;
    try {
      all = c.ch.flush();
    } catch (const RuntimeError&) {
    }
    engine->rewatch(c.ch.fd(), EPOLLIN | (all ? 0u : EPOLLOUT));
  }
  // A broken connection, or one whose peer does not read its answers, is
  // shut down here and dropped by its own readiness event (end of stream).
  void send(Conn& c, const nlohmann::json& m) {
    try {
      c.ch.send(m);
    } catch (const std::exception& e) {
      log("closing {}: {}", c.peer.str(), e.what());
      ::shutdown(c.ch.fd(), SHUT_RDWR);
      return;
    }
    if (c.ch.pending_output()) engine->rewatch(c.ch.fd(), EPOLLIN | EPOLLOUT);
  }

  // Tells the peer why, then closes its connection (and leaves its job).
  void reject(Conn& c, const std::string& why) {
    ++joins_rejected;
    log("rejected {}: {}", c.peer.str(), why);
    try {
      // One non-blocking attempt: a peer that does not read loses the reason,
      // and never stalls the loop (the data plane runs on this thread).
      c.ch.send({{"op", "error"}, {"message", why}});
    } catch (const std::exception&) {
    }
    drop(c, "was rejected");
  }

  // Closes a connection; a member leaving a live job that is not finished aborts it.
  void drop(Conn& c, const std::string& how) {
    const int fd = c.ch.fd();
    if (Job* j = c.job) {
      if (j->live) {
        abort_job(*j, fmt::format("{} of job {} {}", describe(c), j->id, how), &c);
      } else {
        leave_pending(*j, c);
      }
    }
    engine->unwatch(fd);
    if (auto it = per_source.find(c.source); it != per_source.end() && --it->second == 0) per_source.erase(it);
    conns.erase(fd);
    resume_accept();
  }

  static std::string describe(const Conn& c) {
    return c.role == Role::Worker ? fmt::format("worker rank {}", c.rank) : std::string("the PS");
  }

  void handle(Conn& c, const nlohmann::json& m) {
    const ControlRequest req = parse_control_request(m);
    if (const auto* j = std::get_if<JoinRequest>(&req)) return join(c, *j);
    if (std::holds_alternative<DoneRequest>(req)) {
      if (!c.job || c.role != Role::Worker || !c.job->live)
        throw RuntimeError("'done' from a connection that is not a worker of a live job");
      if (!c.done) {
        c.done = true;
        if (++c.job->done == c.job->nworkers) finish_job(*c.job);
      }
      return;
    }
    if (const auto* h = std::get_if<HotSetRequest>(&req)) return hot_set(c, *h);
    if (const auto* rq = std::get_if<ReconfigureRequest>(&req)) return reconfigure(c, *rq);
    const auto& q = std::get<StatsRequest>(req);
    // No proof: the switch's shape only, nothing that names or counts a job.
    // A job's proof: also that job's state. The switch key's (job 0): everything.
    nlohmann::json s;
    if (!q.with_proof) {
      s = public_stats();
    } else {
      const Key k = q.job == 0 ? cfg.key : job_key(cfg.key, q.job);
      if (!proof_matches(q.proof, proof(k, stats_message(c.nonce, q.job)))) {
        ++auth_failures;
        throw RuntimeError(fmt::format("stats: the proof for {} is wrong",
                                       q.job == 0 ? std::string("the operator") : fmt::format("job {}", q.job)));
      }
      s = q.job == 0 ? stats() : job_stats(q.job);
    }
    s["op"] = "stats";
    send(c, s);
  }

  bool needs_ps() const { return scheme.has_ps; }

  // A static ring job's new membership after a failure (Rina §IV-C), from
  // the job's control node (the lowest surviving rank) with the job's key:
  // the job is registered again under the new epoch (aggregators of the old
  // one are freed; its packets are stale from now on).
  uint8_t epoch = 0;
  uint64_t completed_at_epoch = 0, freed_at_reconfigure = 0;
  void reconfigure(Conn& c, const ReconfigureRequest& r) {
    if (!layout || layout->tree())
      throw RuntimeError("reconfigure: this switch serves no static ring job (ina switch --layout FILE of a ring scheme)");
    // The proof first: a caller without the job's key learns nothing about this switch's job.
    if (!proof_matches(r.proof, proof(job_key(cfg.key, r.job),
                                      reconfigure_message(c.nonce, r.job, r.epoch, r.workers, r.rack, r.upstream)))) {
      ++auth_failures;
      throw RuntimeError("reconfigure: authentication failed");
    }
    if (r.job != layout->job)
      throw RuntimeError(fmt::format("reconfigure: field 'job' = {}: this switch serves job {}", r.job, layout->job));
    const dp::SwitchJob* old = program->job(layout->job);
    if (!old) throw RuntimeError(fmt::format("reconfigure: job {} is not registered", layout->job));
    const std::vector<NodeId> workers(r.workers.begin(), r.workers.end());
    if (r.epoch == epoch && epoch > 0) {
      // Asked again (a control node's retry, or the next control node's after
      // it failed between the ToRs and the membership file): the same job
      // definition is a success; a different one is refused by field.
      const char* differs = old->workers != workers ? "workers" : old->rack != r.rack ? "rack"
                            : old->upstream != r.upstream ? "upstream" : nullptr;
      if (differs)
        throw RuntimeError(fmt::format("reconfigure: field '{}' differs from epoch {}'s registration of job {}", differs,
                                       epoch, r.job));
      send(c, {{"op", "reconfigured"}, {"job", r.job}, {"epoch", r.epoch}, {"aggregates", !r.rack.empty()}});
      return;
    }
    if (r.epoch < epoch)
      throw RuntimeError(fmt::format("reconfigure: field 'epoch' = {}: job {} is already at epoch {}", r.epoch, r.job, epoch));
    if (r.workers.size() < 2)
      throw RuntimeError(fmt::format("reconfigure: field 'workers' has {} entries: a ring needs two", r.workers.size()));
    for (size_t k = 0; k < r.workers.size(); ++k) {
      const NodeId id = r.workers[k];
      if (id < RingLayout::worker_id(0) || id > RingLayout::worker_id(layout->n() - 1) ||
          std::find(r.workers.begin(), r.workers.begin() + static_cast<std::ptrdiff_t>(k), id) != r.workers.begin() + static_cast<std::ptrdiff_t>(k))
        throw RuntimeError(fmt::format("reconfigure: field 'workers': node {} is not a distinct worker of the layout {}", id,
                                       cfg.layout));
    }
    for (const auto* v : {&r.rack, &r.upstream})
      for (uint16_t x : *v)
        if (x >= r.workers.size())
          throw RuntimeError(fmt::format("reconfigure: field '{}': rank {} is beyond the {} workers",
                                         v == &r.rack ? "rack" : "upstream", x, r.workers.size()));
    const dp::SwitchJob sj = dp::ring_job_at_epoch(*old, workers, static_cast<uint8_t>(r.epoch), r.rack, r.upstream);
    try {
      freed_at_reconfigure += program->replace_job(sj);  // checked before the live job is touched
    } catch (const std::invalid_argument& e) {
      throw RuntimeError(fmt::format("reconfigure: field 'rack' = [{}], 'upstream' = [{}]: {}", fmt::join(r.rack, ", "),
                                     fmt::join(r.upstream, ", "), e.what()));
    }
    epoch = sj.epoch;
    completed_at_epoch = program->stats().completed;
    log("job {}: epoch {}: {} workers, {}", r.job, r.epoch, r.workers.size(),
        r.rack.empty() ? std::string("no rack here (only forwarding)") : fmt::format("rack of {} ranks", r.rack.size()));
    send(c, {{"op", "reconfigured"}, {"job", r.job}, {"epoch", r.epoch}, {"aggregates", !r.rack.empty()}});
  }

  // A worker's hot-set list (chunks in order). Once every worker's is in:
  // equal lists are installed as the job's table from `from` on; otherwise,
  // or if the program refuses it, every worker hears why and nothing changes.
  void hot_set(Conn& c, const HotSetRequest& r) {
    if (!c.job || c.role != Role::Worker || !c.job->live)
      throw RuntimeError("'hot_set' from a connection that is not a worker of a live job");
    if (scheme.sparse != schemes::Sparse::HotIna)
      throw RuntimeError(fmt::format("hot_set: this switch runs {}, which has no hot-set table", scheme.name));
    Job& j = *c.job;
    auto& slot = j.hot[c.rank];
    if (r.offset == 0) {
      if (slot)
        throw RuntimeError(fmt::format("hot_set: worker rank {} began a new list before the switch answered its "
                                       "previous one", c.rank));
      slot.emplace();
      slot->from = r.from;
      slot->total = r.total;
      slot->keys.reserve(r.total);
    } else if (!slot || slot->complete() || slot->from != r.from || slot->total != r.total ||
               slot->keys.size() != r.offset) {
      throw RuntimeError(fmt::format("hot_set: chunk at offset {} of worker rank {} does not continue its list", r.offset,
                                     c.rank));
    }
    slot->keys.insert(slot->keys.end(), r.keys.begin(), r.keys.end());
    for (const auto& h : j.hot)
      if (!h || !h->complete()) return;
    std::string error;
    const Job::HotList& first = *j.hot[0];
    for (size_t k = 1; k < j.hot.size() && error.empty(); ++k)
      if (j.hot[k]->from != first.from || j.hot[k]->keys != first.keys)
        error = fmt::format("the hot-set lists differ: worker rank {} sent {} keys from iteration {}, rank 0 {} keys "
                            "from iteration {}", k, j.hot[k]->keys.size(), j.hot[k]->from, first.keys.size(), first.from);
    uint32_t version = 0;
    if (error.empty()) {
      try {
        version = j.hot_version + 1;
        Shard& sh = shard_of(j.id);
        dp::SparseTable t = control::zebra::heat_table(first.keys, first.from, version, cfg.kv_registers);
        on_shard(sh, [&] { sh.program->set_sparse_table(j.id, std::move(t)); });
        j.hot_version = version;
      } catch (const std::invalid_argument& e) {
        error = e.what();
      }
    }
    nlohmann::json answer = {{"op", "hot_set"}, {"from", first.from}};
    if (error.empty()) answer["version"] = version;
    else answer["error"] = error;
    log("job {}: hot set of {} keys from iteration {}: {}", j.id, first.keys.size(), first.from,
        error.empty() ? fmt::format("installed (version {})", version) : error);
    for (auto& h : j.hot) h.reset();
    for (Conn* w : j.workers) send(*w, answer);
  }

  void join(Conn& c, const JoinRequest& r) {
    if (c.job) throw RuntimeError("this connection has already joined a job");
    if (layout) throw RuntimeError(fmt::format("this switch serves the static ring job {} of {}: no joins", layout->job, cfg.layout));
    const auto job_id = r.job;
    const unsigned n = r.nworkers, rank = r.rank;
    const uint64_t payload = r.payload;
    const bool worker = r.role == Role::Worker;
    const size_t retain = r.retain_ops;
    // The credential: proof of job_key(job) over this connection's nonce and every field.
    const std::string want =
        proof(job_key(cfg.key, job_id), join_message(c.nonce, to_string(r.role), job_id, rank, n, payload, retain, r.udp));
    if (!proof_matches(r.proof, want)) {
      ++auth_failures;
      throw RuntimeError(fmt::format("join: authentication failed for job {}: the proof does not match that job's "
                                     "credential (INA_JOB_KEY)", job_id));
    }
    Endpoint udp;
    try {
      udp = Endpoint::parse(r.udp);
    } catch (const RuntimeError& e) {
      throw RuntimeError(fmt::format("join: field 'udp': {}", e.what()));
    }
    if (udp.is_wildcard()) udp = c.peer.with_port(udp.port());
    // The data address must be the member's own: the control connection's
    // host, a real port, and used by no other member (else a member could make
    // the switch send another job's member, or anyone, its results).
    if (udp.port() == 0) throw RuntimeError("join: field 'udp': port 0 is not an address datagrams can reach");
    if (udp.sa.sin_addr.s_addr != c.peer.sa.sin_addr.s_addr)
      throw RuntimeError(fmt::format("join: field 'udp': {} is not on this connection's host {}", udp.str(), c.peer.ip()));
    for (const auto& [fd, other] : conns)
      if (other.get() != &c && other->job && other->udp == udp)
        throw RuntimeError(fmt::format("join: field 'udp': {} is already another member's address", udp.str()));
    if (payload != 0 && payload != cfg.program.payload_values)
      throw RuntimeError(fmt::format("payload mismatch: this switch carries {} values per packet, the member asked for {}",
                                     cfg.program.payload_values, payload));
    if (!worker && !needs_ps())
      throw RuntimeError(fmt::format("job {}: this switch runs the {} policy, whose jobs have no PS",
                                     job_id, scheme.policy));
    auto it = jobs.find(job_id);
    if (it != jobs.end() && it->second->live)
      throw RuntimeError(fmt::format("job {} is already running on this switch ({} workers, for {:.1f} s); "
                                     "a second job must use another job id", job_id, it->second->nworkers,
                                     to_ms(engine->now() - it->second->since) / 1000));
    if (it == jobs.end()) {
      auto j = std::make_unique<Job>();
      j->id = job_id;
      j->nworkers = n;
      j->workers.assign(n, nullptr);
      j->since = engine->now();
      it = jobs.emplace(job_id, std::move(j)).first;
    }
    Job& j = *it->second;
    if (n != j.nworkers)
      throw RuntimeError(fmt::format("wrong worker count: job {} has {} workers, this member says {}", job_id,
                                     j.nworkers, n));
    if (worker) {
      if (j.workers[rank]) throw RuntimeError(fmt::format("rank {} of job {} has already joined", rank, job_id));
      if (j.retain_ops && retain != j.retain_ops)
        throw RuntimeError(fmt::format("job {}: retain_ops {} differs from the other workers' {}", job_id, retain,
                                       j.retain_ops));
      j.retain_ops = retain;
      j.workers[rank] = &c;
    } else {
      if (j.ps) throw RuntimeError(fmt::format("job {} already has a PS", job_id));
      j.ps = &c;
    }
    ++j.joined;
    c.job = &j;
    c.role = worker ? Role::Worker : Role::Ps;
    c.rank = rank;
    c.udp = udp;
    const bool complete = j.joined == j.nworkers + (needs_ps() ? 1u : 0u);
    if (complete) return go_live(j);
    const unsigned wj = j.joined - (j.ps ? 1 : 0);
    for (Conn* mbr : j.members())
      send(*mbr, {{"op", "waiting"}, {"workers_joined", wj}, {"nworkers", j.nworkers}, {"ps_joined", j.ps != nullptr},
                  {"ps_needed", needs_ps()}});
  }

  void leave_pending(Job& j, Conn& c) {
    if (c.role == Role::Worker) j.workers[c.rank] = nullptr;
    else j.ps = nullptr;
    --j.joined;
    c.job = nullptr;
    if (j.joined == 0) jobs.erase(j.id);
  }

  NodeId alloc_id() {
    for (size_t k = 0; k < id_used.size(); ++k) {
      const NodeId id = next_id;
      next_id = static_cast<NodeId>(next_id + 1 >= kMulticast ? 1 : next_id + 1);
      if (!id_used[id]) {
        id_used[id] = true;
        return id;
      }
    }
    throw RuntimeError("switch: no free node id");
  }

  void go_live(Job& j) {
    dp::SwitchJob sj;
    sj.job = j.id;
    Shard& sh = shard_of(j.id);
    std::vector<bool>& region_used = sh.region_used;
    if (scheme.isolated) {
      for (size_t r = 0; r < region_used.size(); ++r)
        if (!region_used[r]) { j.region = static_cast<int>(r); break; }
      if (j.region < 0) {
        const std::string why =
            shards.size() == 1
                ? fmt::format("job {}: no free aggregator region (the isolated policy serves at most {} jobs at once on "
                              "this switch)", j.id, region_used.size())
                : fmt::format("job {}: no free aggregator region (the isolated policy serves at most {} jobs at once on "
                              "each switch thread; job {} is served by thread {} of {}, with the jobs whose id is {} "
                              "mod {})", j.id, region_used.size(), j.id, sh.index, shards.size(), sh.index, shards.size());
        for (Conn* c : j.members()) { c->job = nullptr; reject(*c, why); }
        jobs.erase(j.id);
        return;
      }
      region_used[static_cast<size_t>(j.region)] = true;
      sj.region_offset = static_cast<uint32_t>(j.region) * region_size;
      sj.region_size = region_size;
    }
    // Ids, then the switch program's job table; only when both succeeded do
    // routes go in. A failure gives back the ids and the region (no half-live job).
    const std::vector<Conn*> members = j.members();  // workers by rank, then the PS
    std::vector<NodeId> ids;
    const Key salt = cfg.datagram_auth ? random_key() : Key{};  // this run's datagram key (datagram_tag.hpp)
    try {
      for (size_t k = 0; k < members.size(); ++k) ids.push_back(alloc_id());
      sj.workers.assign(ids.begin(), ids.begin() + j.nworkers);
      sj.ps = j.ps ? ids.back() : kNoNode;
      sj.cpu = cpu ? kCpuId : kNoNode;
      if (shared_pool()) {  // its admitted priority range, whatever its packets say
        const ShareLimits::Range r = cfg.share.range_of(j.id);
        sj.priority_min = r.lo;
        sj.priority_max = r.hi;
      }
      on_shard(sh, [&] {
        sh.program->add_job(sj);
        if (cfg.datagram_auth) sh.engine->set_datagram_key(j.id, datagram_key(job_key(cfg.key, j.id), salt));
        for (size_t k = 0; k < members.size(); ++k) sh.engine->set_route(ids[k], members[k]->udp);
        sh.engine->set_group(j.id, sj.workers);  // results: one encoding for every worker
      });
    } catch (...) {
      for (NodeId id : ids) id_used[id] = false;
      if (j.region >= 0) region_used[static_cast<size_t>(j.region)] = false;
      j.region = -1;
      throw;
    }
    for (size_t k = 0; k < members.size(); ++k) members[k]->id = ids[k];
    if (cpu) cpu->add_job(j.id, sj.workers);
    j.hot.assign(j.nworkers, std::nullopt);
    j.live = true;
    j.since = engine->now();
    nlohmann::json ready = {{"op", "ready"}, {"job", j.id}, {"switch", kSwitchId},
                            {"ps", j.ps ? int{j.ps->id} : -1}, {"workers", sj.workers},
                            {"payload", cfg.program.payload_values}, {"window_cap", region_size / 2},
                            {"policy", scheme.policy}, {"scheme", scheme.name}};
    if (!scheme.isolated) ready["window_cap"] = 0;
    if (cfg.datagram_auth) {  // members tag their datagrams (datagram_tag.hpp)
      ready["datagram_auth"] = true;
      ready["datagram_salt"] = to_hex(salt);
    }
    if (scheme.kv())
      ready["kv"] = {{"pairs", cfg.program.kv_pairs}, {"registers", cfg.kv_registers},
                     {"table_entries", cfg.program.kv_table_entries}, {"value_registers", cfg.program.memory_bytes / 4}};
    for (Conn* c : j.members()) {
      ready["self"] = c->id;
      send(*c, ready);
    }
    log("job {} started: {} workers{}{}", j.id, j.nworkers, j.ps ? ", PS" : "",
        j.region >= 0 ? fmt::format(", region {} ({} aggregators)", j.region, region_size) : "");
  }

  // Frees everything the job held: aggregators, routes, node ids, region.
  void teardown(Job& j) {
    Shard& sh = shard_of(j.id);
    const std::vector<Conn*> members = j.members();
    freed_at_teardown += on_shard(sh, [&] {
      const size_t freed = sh.program->remove_job(j.id);
      sh.engine->clear_group(j.id);
      sh.engine->clear_datagram_key(j.id);
      if (cpu) sh.engine->invoke(*cpu, [&](Time, Effects& fx) { cpu_copies_freed_at_teardown += cpu->remove_job(j.id, fx); });
      for (Conn* c : members) sh.engine->clear_route(c->id);
      return freed;
    });
    for (Conn* c : members) {
      id_used[c->id] = false;
      c->job = nullptr;
    }
    if (j.region >= 0) sh.region_used[static_cast<size_t>(j.region)] = false;
    jobs.erase(j.id);
  }

  void finish_job(Job& j) {
    ++jobs_finished;
    log("job {} finished after {:.3f} s", j.id, to_ms(engine->now() - j.since) / 1000);
    for (Conn* c : j.members()) send(*c, {{"op", "finish"}});
    teardown(j);
  }

  void abort_job(Job& j, const std::string& why, Conn* cause) {
    ++jobs_aborted;
    log("job {} aborted: {}", j.id, why);
    for (Conn* c : j.members())
      if (c != cause) send(*c, {{"op", "abort"}, {"message", why}});
    teardown(j);
  }

  // What anyone may read: the switch's shape and totals; no job ids, no per-job counts.
  nlohmann::json public_stats() const {
    return {{"endpoint", endpoint.str()}, {"policy", scheme.policy},
            {"payload", cfg.program.payload_values}, {"memory_bytes", cfg.program.memory_bytes},
            {"aggregators", aggregators()}, {"threads", shards.size()}};
  }

  // Every shard's aggregators (constant after construction).
  size_t aggregators() const {
    size_t n = 0;
    for (const auto& sh : shards) n += sh->program->aggregators();
    return n;
  }

  // A job's own view: its state and how many aggregators it holds.
  nlohmann::json job_stats(uint16_t id) const {
    nlohmann::json out = public_stats();
    auto it = jobs.find(id);
    nlohmann::json j = {{"job", id}, {"known", it != jobs.end()}};
    if (it != jobs.end()) {
      const Job& job = *it->second;
      Shard& sh = *shards[id % shards.size()];
      j["live"] = job.live;
      j["nworkers"] = job.nworkers;
      j["workers_joined"] = job.joined - (job.ps ? 1 : 0);
      j["ps_joined"] = job.ps != nullptr;
      j["aggregators_held"] = on_shard(sh, [&] { return sh.program->occupied_by(id); });
      if (shared_pool() && job.live) {
        const uint32_t q = on_shard(sh, [&] { return sh.program->quota_of(id); });
        const ShareLimits::Range r = cfg.share.range_of(id);
        j["quota"] = q ? nlohmann::json(q) : nlohmann::json(nullptr);  // null: no limit
        j["priority_range"] = {r.lo, r.hi};
      }
      j["seconds"] = to_ms(engine->now() - job.since) / 1000;
      if (shards.size() > 1) j["thread"] = sh.index;
    }
    out["job"] = j;
    return out;
  }

  // One shard's counters, read on its thread.
  nlohmann::json shard_stats(Shard& sh) const {
    nlohmann::json o = on_shard(sh, [&] {
      nlohmann::json v = {{"aggregators", sh.program->aggregators()}, {"occupied", sh.program->occupied()},
                          {"packets_in_use", sh.engine->packets_in_use()}, {"switch", to_json(sh.program->stats())},
                          {"engine", sh.engine->stats().to_json()}};
      if (cfg.program.track_tasks) v["task_types"] = sh.program->task_types();
      return v;
    });
    nlohmann::json live = nlohmann::json::array();
    for (const auto& [id, j] : jobs)
      if (j->live && id % shards.size() == sh.index) live.push_back(id);
    o["thread"] = sh.index;
    o["jobs"] = live;
    o["cpu_seconds"] = sh.cpu_seconds();
    return o;
  }

  // The operator's view: totals over the shards (switch and engine counters
  // summed) and each shard's own under "shards".
  nlohmann::json stats() const {
    nlohmann::json live = nlohmann::json::array(), pending = nlohmann::json::array();
    for (const auto& [id, j] : jobs) (j->live ? live : pending).push_back(id);
    nlohmann::json per = nlohmann::json::array(), sw, eng;
    uint64_t occupied = 0, in_use = 0;
    std::array<uint64_t, 3> tasks{};
    for (const auto& sh : shards) {
      nlohmann::json o = shard_stats(*sh);
      occupied += o["occupied"].get<uint64_t>();
      in_use += o["packets_in_use"].get<uint64_t>();
      add_counts(sw, o["switch"]);
      add_counts(eng, o["engine"]);
      if (o.contains("task_types"))
        for (size_t k = 0; k < tasks.size(); ++k) tasks[k] += o["task_types"][k].get<uint64_t>();
      per.push_back(std::move(o));
    }
    nlohmann::json out = {
        {"endpoint", endpoint.str()}, {"policy", scheme.policy},
        {"payload", cfg.program.payload_values}, {"memory_bytes", cfg.program.memory_bytes},
        {"aggregators", aggregators()}, {"occupied", occupied},
        {"packets_in_use", in_use}, {"switch", sw},
        {"engine", eng}, {"faults", cfg.faults.to_json()},
        {"threads", shards.size()}, {"shards", per},
        {"jobs", {{"live", live}, {"pending", pending}, {"finished", jobs_finished}, {"aborted", jobs_aborted},
                  {"aggregators_freed_at_teardown", freed_at_teardown}}},
        {"control", {{"connections", conns.size()}, {"rejected", joins_rejected}, {"auth_failures", auth_failures},
                     {"refused_per_source", limit_counts.refused_per_source}, {"evicted", limit_counts.evicted},
                     {"timed_out", limit_counts.timed_out}, {"oversized_lines", limit_counts.oversized},
                     {"accept_pauses", limit_counts.accept_pauses}, {"accept_failures", limit_counts.accept_failures},
                     {"accepting", accepting},
                     {"limits", {{"max_connections", limits.max_connections}, {"max_per_source", limits.max_per_source},
                                 {"visitor_timeout_ms", to_ms(limits.visitor_timeout)},
                                 {"max_visitor_line", limits.max_visitor_line},
                                 {"max_visitor_output", limits.max_visitor_output}}}}}};
    if (cfg.program.track_tasks) out["task_types"] = tasks;
    if (cpu) {
      const auto& c = cpu->stats();
      out["cpu"] = {{"held", cpu->held()}, {"copies", c.copies}, {"acks", c.acks}, {"retransmits", c.retransmits},
                    {"unknown_acks", c.unknown_acks}, {"malformed", c.malformed},
                    {"freed_at_teardown", cpu_copies_freed_at_teardown}};
    }
    if (layout) out["layout"] = {{"file", cfg.layout}, {"rack", cfg.rack}, {"job", layout->job}, {"id", program->id()},
                                 {"aggregators_held", program->occupied_by(layout->job)}, {"epoch", epoch},
                                 {"completed_at_epoch", completed_at_epoch}, {"freed_at_reconfigure", freed_at_reconfigure}};
    if (layout && !layout->tree())
      if (const dp::SwitchJob* sj = program->job(layout->job)) out["layout"]["rack_ranks"] = sj->rack;  // current ranks, agent first
    return out;
  }

  // Shards 1..T-1 on threads of their own, shard 0 and the control plane on
  // the caller's, until request_stop(); then the others are stopped and joined.
  void run() {
    log("serving ({} policy, {} aggregators of {} values{})", scheme.policy, aggregators(), cfg.program.payload_values,
        shards.size() > 1 ? fmt::format(", {} switch threads", shards.size()) : std::string());
    for (size_t k = 1; k < shards.size(); ++k) {
      Shard& sh = *shards[k];
      sh.stopping = false;
      {
        std::lock_guard<std::mutex> l(sh.mu);
        sh.gone = false;
      }
      sh.thread = std::thread([this, &sh] { sh.serve(stop_fd.get()); });
    }
    Shard& s0 = *shards[0];
    s0.start_cpu_clock();
    std::exception_ptr failure;
    try {
      while (!stopping) engine->poll(kSec);
    } catch (...) {
      failure = std::current_exception();
    }
    s0.stop_cpu_clock();
    for (size_t k = 1; k < shards.size(); ++k) {
      Shard& sh = *shards[k];
      sh.stopping = true;
      const uint64_t one = 1;
      [[maybe_unused]] auto r = ::write(sh.wake.get(), &one, sizeof one);
      sh.thread.join();
    }
    if (failure) std::rethrow_exception(failure);
    for (const auto& sh : shards)
      if (!sh->error.empty()) throw RuntimeError(fmt::format("switch thread {}: {}", sh->index, sh->error));
  }
};

SwitchDaemon::SwitchDaemon(const SwitchDaemonConfig& cfg) : impl_(std::make_unique<Impl>(cfg)) {}
SwitchDaemon::~SwitchDaemon() = default;
const Endpoint& SwitchDaemon::endpoint() const { return impl_->endpoint; }
UdpEngine& SwitchDaemon::engine() { return *impl_->engine; }

unsigned SwitchDaemon::threads() const { return static_cast<unsigned>(impl_->shards.size()); }

void SwitchDaemon::run() { impl_->run(); }

std::vector<double> SwitchDaemon::cpu_seconds() const {
  std::vector<double> v;
  for (const auto& sh : impl_->shards) v.push_back(sh->cpu_seconds());
  return v;
}

void SwitchDaemon::request_stop() {
  const uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(impl_->stop_fd.get(), &one, sizeof one);
}

nlohmann::json SwitchDaemon::stats() const { return impl_->stats(); }

}  // namespace ina::rt
